"""What Marquez's read API reads from the store besides the graph's nodes: the OpenLineage events as
they were received, the runs, and the versions of processes with their dataset-level edges.

The events (`openlineage_events`, written by `LineageStore.ingest`) are the only place run, job
and dataset facets are kept, since the graph records lineage, not what producers said about it.
Facets accumulate, as OpenLineage means them to (an event that leaves a facet out does not
remove it; one marked `_deleted` does): a run's are every facet its events gave, the later
replacing the earlier one of the same name, as Marquez keeps them; a job's are those of its
latest event's run; a dataset's those of the events that name it. The queries run on SQLite and
PostgreSQL alike.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model.names import asset_urn
from tracelake.store import schema as s
from tracelake.store.records import NodeRecord, node_record
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.sqlstore import LineageStore

# How many candidate events a dataset's facets are looked for in at a time, newest first, and
# how many of the events naming it are read at most: a bound on a request's work.
_PAGE = 50
_MENTIONS = 1000
_MOST_ROWS = 2**62


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    process: str
    job_id: str | None
    started_at: datetime | None
    ended_at: datetime | None
    status: str | None  # OpenLineage's word: RUNNING, COMPLETE, FAIL, ABORT (or None)

    @property
    def moment(self) -> datetime | None:
        """When the run last said where it stood: its end, else its start."""
        return self.ended_at or self.started_at


@dataclass(frozen=True, slots=True)
class ProcessVersion:
    """One version of a process: its asset edges, valid over [valid_from, valid_to)."""

    process: str
    valid_from: datetime
    valid_to: datetime | None
    content_hash: str
    flows: tuple[tuple[str, str], ...]  # (source, target) assets

    def holds(self, moment: datetime) -> bool:
        return self.valid_from <= moment and (self.valid_to is None or moment < self.valid_to)


# ---------------------------------------------------------------- events


def list_events(
    store: LineageStore,
    *,
    after: datetime | None = None,
    before: datetime | None = None,
    descending: bool = True,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """RunEvents with `after <= eventTime < before`, by event time (ties in the order received),
    one page of them and how many there are in all. Dataset and job events are not listed, as
    Marquez lists only RunEvents."""
    e = s.openlineage_events
    where: list[sa.ColumnElement[bool]] = [e.c.run_id.is_not(None)]
    if after is not None:
        where.append(e.c.event_time >= to_micros(after))
    if before is not None:
        where.append(e.c.event_time < to_micros(before))
    order = (e.c.event_time.desc(), e.c.id.desc()) if descending else (e.c.event_time, e.c.id)
    # past any store's size, a page is the same; past 64 bits the databases refuse the number
    limit, offset = min(limit, _MOST_ROWS), min(offset, _MOST_ROWS)
    page = sa.select(e.c.body).where(*where).order_by(*order).limit(limit).offset(offset)
    with store.engine.connect() as conn:
        events = [dict(body) for body in conn.execute(page).scalars()]
        total = conn.execute(sa.select(sa.func.count()).select_from(e).where(*where)).scalar() or 0
    return events, total


def run_facets(store: LineageStore, run_id: str) -> dict[str, Any]:
    """The run's facets, as every event of the run gave them (the later one of a name wins)."""
    return _merged(_bodies_of_run(store, run_id), "run")


def job_facets_of_run(store: LineageStore, run_id: str) -> dict[str, Any]:
    """The job facets the run's events gave (the later one of a name wins)."""
    return _merged(_bodies_of_run(store, run_id), "job")


def job_facets(store: LineageStore, namespace: str, name: str) -> dict[str, Any]:
    """The job's facets: those of its latest event's run, or of that event alone if it has none."""
    e = s.openlineage_events
    latest = (
        sa.select(e.c.run_id, e.c.body)
        .where(e.c.job_namespace == namespace, e.c.job_name == name)
        .order_by(e.c.event_time.desc(), e.c.id.desc())
        .limit(1)
    )
    with store.engine.connect() as conn:
        row = conn.execute(latest).first()
    if row is None:
        return {}
    if row.run_id is None:
        return _merged([row.body], "job")
    return job_facets_of_run(store, row.run_id)


def dataset_facets(store: LineageStore, urn: str, name: str, *, run_id: str | None = None) -> dict[str, Any]:
    """The facets of the asset `urn` (OpenLineage name `name`) that the events naming it gave (those
    of the run `run_id` if given), with its input and output facets: the latest of each name, as
    a facet an event leaves out still holds. The latest `_MENTIONS` events naming it are read."""
    e = s.openlineage_events
    # the event's text holds the name as sent, which differs from ours at most in case (or in
    # spellings the naming rules merge, such as partition folders, which keep ours as a part):
    # a cheap first cut, every candidate then checked by the naming rules themselves
    text = json.dumps(name)[1:-1]
    candidates = (
        sa.select(e.c.body)
        .where(sa.cast(e.c.body, sa.Text).icontains(text, autoescape=True))
        .order_by(e.c.event_time.desc(), e.c.id.desc())
    )
    if run_id is not None:
        candidates = candidates.where(e.c.run_id == run_id)
    decided: dict[str, Any] = {}  # newest first: the first value of a name is its value
    mentions = 0
    with store.engine.connect() as conn:
        offset = 0
        while mentions < _MENTIONS:
            bodies = list(conn.execute(candidates.limit(_PAGE).offset(offset)).scalars())
            for body in bodies:
                for entry in _datasets_of(body):
                    if _names(entry, urn):
                        mentions += 1
                        said = {**_object(entry.get("facets")), **_object(entry.get("inputFacets"))}
                        said.update(_object(entry.get("outputFacets")))
                        for key, facet in said.items():
                            decided.setdefault(key, facet)
            if len(bodies) < _PAGE:
                break
            offset += _PAGE
    return {key: facet for key, facet in decided.items() if not _deleted(facet)}


def _bodies_of_run(store: LineageStore, run_id: str) -> list[dict[str, Any]]:
    e = s.openlineage_events
    query = sa.select(e.c.body).where(e.c.run_id == run_id).order_by(e.c.event_time, e.c.id)
    with store.engine.connect() as conn:
        return [dict(body) for body in conn.execute(query).scalars()]


def _merged(bodies: list[dict[str, Any]], holder: str) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    for body in bodies:
        for key, facet in _object(_object(body.get(holder)).get("facets")).items():
            if _deleted(facet):
                facets.pop(key, None)
            else:
                facets[key] = facet
    return facets


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one: events are kept as they were received, and
    a part that is not what the spec says (`"facets": "x"`) was left out of the lineage with a
    problem, so it is left out here too."""
    return value if isinstance(value, dict) else {}


def _deleted(facet: Any) -> bool:
    return isinstance(facet, dict) and facet.get("_deleted") is True


def _datasets_of(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("outputs", "inputs"):
        entries = body.get(key)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict):
                yield entry
    if isinstance(body.get("dataset"), dict):
        yield body["dataset"]


def _names(entry: dict[str, Any], urn: str) -> bool:
    namespace, name = entry.get("namespace"), entry.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return False
    with contextlib.suppress(ValueError):
        return asset_urn(namespace, name) == urn
    return False


# ---------------------------------------------------------------- runs, versions, nodes


def runs(store: LineageStore, *, process: str | None = None, run_id: str | None = None) -> list[RunRecord]:
    """Runs of one process, or the run `run_id`: the latest started first."""
    r, n = s.runs, s.nodes
    query = sa.select(r.c.run_id, n.c.urn, r.c.job_id, r.c.started_at, r.c.ended_at, r.c.status).join(
        n, r.c.process_id == n.c.id
    )
    if process is not None:
        query = query.where(n.c.urn == process)
    if run_id is not None:
        query = query.where(r.c.run_id == run_id)
    started = sa.func.coalesce(r.c.started_at, r.c.ended_at)
    query = query.order_by(started.desc().nulls_last(), r.c.run_id)
    with store.engine.connect() as conn:
        return [
            RunRecord(
                run_id=row.run_id,
                process=row.urn,
                job_id=row.job_id,
                started_at=from_micros(row.started_at) if row.started_at is not None else None,
                ended_at=from_micros(row.ended_at) if row.ended_at is not None else None,
                status=row.status,
            )
            for row in conn.execute(query)
        ]


def process_versions(store: LineageStore, process: str) -> list[ProcessVersion]:
    """Every version of the process, the latest first, with its asset-to-asset edges."""
    v, e, n = s.process_versions, s.edges, s.nodes
    src, dst = n.alias("src"), n.alias("dst")
    process_id = sa.select(n.c.id).where(n.c.urn == process).scalar_subquery()
    versions = (
        sa.select(v.c.valid_from, v.c.valid_to, v.c.content_hash)
        .where(v.c.process_id == process_id)
        .order_by(v.c.valid_from.desc())
    )
    flows = (
        sa.select(e.c.valid_from, src.c.urn, dst.c.urn)
        .join(src, e.c.source_id == src.c.id)
        .join(dst, e.c.target_id == dst.c.id)
        .where(e.c.process_id == process_id, src.c.node_type == "asset", dst.c.node_type == "asset")
        .order_by(src.c.urn, dst.c.urn)
    )
    by_version: dict[int, list[tuple[str, str]]] = {}
    with store.engine.connect() as conn:
        version_rows = conn.execute(versions).all()
        for valid_from, source, target in conn.execute(flows):
            by_version.setdefault(valid_from, []).append((source, target))
    return [
        ProcessVersion(
            process=process,
            valid_from=from_micros(row.valid_from),
            valid_to=from_micros(row.valid_to) if row.valid_to is not None else None,
            content_hash=row.content_hash,
            flows=tuple(dict.fromkeys(by_version.get(row.valid_from, []))),
        )
        for row in version_rows
    ]


def writers_of(store: LineageStore, asset: str) -> list[tuple[str, datetime, datetime | None]]:
    """(process, valid_from, valid_to) of every process version with an asset edge into `asset`."""
    e, n = s.edges, s.nodes
    src, dst, proc = n.alias("src"), n.alias("dst"), n.alias("proc")
    query = (
        sa.select(proc.c.urn, e.c.valid_from, e.c.valid_to)
        .distinct()
        .join(src, e.c.source_id == src.c.id)
        .join(dst, e.c.target_id == dst.c.id)
        .join(proc, e.c.process_id == proc.c.id)
        .where(dst.c.urn == asset, src.c.node_type == "asset")
    )
    with store.engine.connect() as conn:
        return [
            (urn, from_micros(start), from_micros(end) if end is not None else None)
            for urn, start, end in conn.execute(query)
        ]


def nodes_of_type(store: LineageStore, node_type: str) -> list[NodeRecord]:
    """Every node of one type (asset, field, process), in the order they were first stored."""
    query = sa.select(s.nodes).where(s.nodes.c.node_type == node_type).order_by(s.nodes.c.id)
    with store.engine.connect() as conn:
        return [node_record(row) for row in conn.execute(query)]
