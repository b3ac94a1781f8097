"""The lineage store: one transactional, idempotent ingest path and the reads the analyses need.

`LineageStore.ingest` writes any number of `LineageBatch`es in one transaction. Each batch is
one observation of its processes at `observed_at`; a process whose edges are unchanged only
has its `last_seen` moved, one whose content changed gets a new version that closes the old
edges at that time. Observations may arrive out of order: a late one splits the version that
covered its time. The same code runs on SQLite (the embedded default, in WAL mode) and on
PostgreSQL through psycopg 3, for any number of writing processes at once: the schema is created
under a lock, an ingest locks its nodes in one order, and a transaction the database gave up over
a lock is run again (docs/decisions.md, "Many writers").
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import random
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa

from tracelake.model import (
    DECLARED_COLUMNS,
    Asset,
    AssetChange,
    AssetRead,
    Confidence,
    Field,
    FlowEdge,
    Lifecycle,
    LineageBatch,
    Problem,
    Process,
    Signal,
    Transformation,
    fingerprint,
    parse_urn,
    utcnow,
)
from tracelake.model.names import openlineage_run_id
from tracelake.store import reads as asset_reads
from tracelake.store import schema as s
from tracelake.store.history import HistoryPlan, StoredVersion, plan_history
from tracelake.store.location import StoreError, store_url
from tracelake.store.reads import ReadCounts
from tracelake.store.schema import from_micros, to_micros

DEFAULT_DB_PATH = Path(".tracelake") / "lineage.db"
OPEN_END = np.iinfo(np.int64).max  # valid_to of an open version, in loaded arrays
# Keeps IN (...) lists under every backend's bound-parameter limit.
_CHUNK = 5000
# What the database gave up over a lock (an ingest, switching SQLite to WAL) is run this many
# times in all before its error is raised (`_until_won`).
_ATTEMPTS = 5
# PostgreSQL's advisory lock key for creating the schema: any constant, the same in every process.
_SCHEMA_LOCK = 0x7472616365  # "trace"
_SQLITE_BUSY = 5  # SQLite's primary result code for a lock it could not get
_T = TypeVar("_T")

SIGNAL_CODES = {signal: code for code, signal in enumerate(Signal)}
TRANSFORMATION_CODES = {t: code for code, t in enumerate(Transformation)}
NODE_TYPES = ("asset", "field", "process")


def default_url() -> str:
    """`TRACELAKE_DB` (a SQLAlchemy URL or a file path), else `.tracelake/lineage.db`."""
    return as_url(os.environ.get("TRACELAKE_DB", "").strip() or str(DEFAULT_DB_PATH))


def as_url(text: str) -> str:
    """A store given as a SQLAlchemy URL or as the path of a SQLite file, as a URL."""
    return text if "://" in text else f"sqlite:///{text}"


@dataclass(frozen=True, slots=True)
class NodeRecord:
    id: int
    urn: str
    node_type: str
    kind: str
    parent_id: int | None
    data_type: str | None
    owner: str | None
    layer: str | None
    security_level: int | None
    labels: tuple[str, ...]
    description: str | None
    properties: dict[str, Any]
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class EdgeRecord:
    id: int
    source: str
    target: str
    process: str
    signal: str
    confidence: str
    transformation: str | None
    description: str | None
    valid_from: datetime
    valid_to: datetime | None
    first_seen: datetime
    last_seen: datetime

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.source, self.target, self.process, self.signal, self.transformation or "")


@dataclass(slots=True)
class GraphDiff:
    added: list[EdgeRecord]
    removed: list[EdgeRecord]


@dataclass(slots=True)
class IngestReport:
    nodes: int = 0
    edges_added: int = 0
    edges_closed: int = 0
    versions_added: int = 0
    versions_unchanged: int = 0
    versions_replaced: int = 0
    edges_replaced: int = 0
    runs: int = 0
    problems: int = 0
    reads: int = 0  # reads of assets by runs that wrote nothing, new to the store


@dataclass(slots=True)
class GraphSnapshot:
    """Every node and edge version as columns of numpy arrays, for the in-memory index.

    Node arrays are indexed by position; `node_ids[i]` is the store id. Edge endpoints are
    store ids. Codes: signal → `list(Signal)`, transformation → `list(Transformation)` or -1,
    confidence → `Confidence.rank`. Open versions have `edge_valid_to == OPEN_END`.
    """

    version: int
    node_ids: np.ndarray
    node_urns: list[str]
    node_types: np.ndarray
    node_kinds: list[str]
    node_parents: np.ndarray
    edge_ids: np.ndarray
    edge_source: np.ndarray
    edge_target: np.ndarray
    edge_process: np.ndarray
    edge_signal: np.ndarray
    edge_confidence: np.ndarray
    edge_transformation: np.ndarray
    edge_valid_from: np.ndarray
    edge_valid_to: np.ndarray


class _EdgeSets:
    """The edges behind each content hash of a process, for the versions an ingest inserts:
    from the batches, united at one instant, or read back from a stored version."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.by_hash: dict[tuple[int, str], list[FlowEdge]] = {}
        self.ids: dict[str, int] = {}  # node ids of edges read back

    def known(self, process_id: int, edges: list[FlowEdge]) -> str:
        content = _content_hash(edges)
        self.by_hash.setdefault((process_id, content), edges)
        return content

    def unite(self, process_id: int, first: str, second: str) -> str:
        merged: dict[tuple[str, str, str, str, str], FlowEdge] = {}
        for content in (first, second):
            _unite_into(merged, {e.key: e for e in self._edges(process_id, content)})
        return self.known(process_id, list(merged.values()))

    def of(self, process_id: int, version: StoredVersion) -> list[FlowEdge]:
        return self._edges(process_id, version.content_hash)

    def _edges(self, process_id: int, content: str) -> list[FlowEdge]:
        edges = self.by_hash.get((process_id, content))
        if edges is None:
            rows = self.conn.execute(_EDGES_OF_HASH, {"_pid": process_id, "_hash": content}).all()
            edges = []
            for row in rows:
                self.ids[row.source] = row.source_id
                self.ids[row.target] = row.target_id
                edges.append(
                    FlowEdge(
                        row.source,
                        row.target,
                        row.process,
                        Signal(row.signal),
                        Confidence(row.confidence),
                        Transformation(row.transformation) if row.transformation else None,
                        row.description,
                    )
                )
            self.by_hash[(process_id, content)] = edges
        return edges


# What a batch says of nodes that goes into width-bound columns (schema.py), and what stands in
# when a value is too long. PostgreSQL holds a value to its column: a longer one is left out with
# a problem saying so, rather than the whole ingest failing.
_NODE_WORDS: dict[type, dict[str, tuple[int, str | None]]] = {
    Asset: {"owner": (s.width(s.nodes.c.owner), None), "layer": (s.width(s.nodes.c.layer), None)},
    Field: {"data_type": (s.width(s.nodes.c.data_type), None)},
    Process: {"owner": (s.width(s.nodes.c.owner), None), "kind": (s.width(s.nodes.c.kind), "unknown")},
}


def _within_columns(batch: LineageBatch) -> LineageBatch:
    """`batch`, or a copy leaving out what the node columns cannot hold, a problem for each."""
    left_out: list[Problem] = []

    def fitted(item: Asset | Field | Process) -> Any:
        replaced: dict[str, Any] = {}
        for name, (width, stand_in) in _NODE_WORDS[type(item)].items():
            value = getattr(item, name)
            if isinstance(value, str) and len(value) > width:
                replaced[name] = stand_in
                reason = (
                    f"its {name} of {len(value):,} characters is longer than the store's {width}; left out"
                )
                left_out.append(Problem(item.urn, reason))
        return dataclasses.replace(item, **replaced) if replaced else item

    assets = [fitted(asset) for asset in batch.assets]
    fields = [fitted(fld) for fld in batch.fields]
    processes = [fitted(process) for process in batch.processes]
    described = [fitted(process) for process in batch.described]
    if not left_out:
        return batch
    return dataclasses.replace(
        batch,
        assets=assets,
        fields=fields,
        processes=processes,
        described=described,
        problems=[*batch.problems, *left_out],
    )


def _fitted(text: str, width: int) -> str:
    """A problem's place, cut to its column: a message, where a shortened place still says where."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _observed_at(batch: LineageBatch, now_us: int) -> int:
    """When a batch's signal was true, in epoch µs: its `observed_at`, else the ingest's now."""
    return to_micros(batch.observed_at) if batch.observed_at else now_us


def _stored_event_type(value: Any) -> str | None:
    """The event type for the events table's column: as sent when it is one (the column holds 32
    characters, every RunState and more), else OTHER, as the collector took it (its problem says
    what was sent, and the body keeps it)."""
    if value is None or (isinstance(value, str) and len(value) <= s.width(s.openlineage_events.c.event_type)):
        return value
    return "OTHER"


def _unite_into(
    into: dict[tuple[str, str, str, str, str], FlowEdge],
    edges: dict[tuple[str, str, str, str, str], FlowEdge],
) -> None:
    """Add `edges` to `into`; an edge said twice keeps its strongest confidence (order-free)."""
    for key, edge in edges.items():
        known = into.get(key)
        if known is None or (edge.confidence.rank, edge.description or "") > (
            known.confidence.rank,
            known.description or "",
        ):
            into[key] = edge


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _content_hash(edges: Iterable[FlowEdge]) -> str:
    keys = sorted(f"{e.source}|{e.target}|{e.signal}|{e.confidence}|{e.transformation or ''}" for e in edges)
    return fingerprint(*keys)


class LineageStore:
    """The lineage graph in a SQL database (SQLite by default, PostgreSQL in production)."""

    def __init__(self, url: str | None = None, *, echo: bool = False) -> None:
        self.url = as_url(url) if url else default_url()
        sa_url = store_url(self.url)
        if sa_url.get_backend_name() == "sqlite" and sa_url.database not in (None, "", ":memory:"):
            Path(sa_url.database).parent.mkdir(parents=True, exist_ok=True)
        try:
            # hide_parameters: an error names the statement that failed, never the values it carried
            self.engine = sa.create_engine(self.url, echo=echo, hide_parameters=True)
        except (ImportError, sa.exc.NoSuchModuleError) as error:
            shown = sa_url.render_as_string(hide_password=True)
            raise StoreError(f"{shown}: its database driver is not installed ({error})") from None
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._ids: dict[str, int] = {}
        self._prepare()

    def _prepare(self) -> None:
        """Create the tables the store lacks and backfill observations, whoever else opens it now.

        Checked first without a lock, so that opening a ready store (every command) writes
        nothing and waits for no writer; then, if anything is to do, checked again and done
        under the schema lock, which makes processes opening a new store at once take turns.
        """
        with self.engine.connect() as conn:
            if not _setup_due(conn):
                return
        with self.engine.connect() as conn:
            _lock_schema(conn)
            s.metadata.create_all(conn)  # checks each table first: a turn before ours made them
            if _backfill_due(conn):
                # a store from before observations were kept: each version's start was one
                o, v = s.process_observations, s.process_versions
                conn.execute(
                    o.insert().from_select(
                        ["process_id", "at", "content_hash", "first_seen"],
                        sa.select(v.c.process_id, v.c.valid_from, v.c.content_hash, v.c.first_seen),
                    )
                )
            conn.commit()

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ ingest

    def ingest(
        self, batches: LineageBatch | Iterable[LineageBatch], *, now: datetime | None = None
    ) -> IngestReport:
        """Write batches in one transaction; the same batches twice add nothing but last_seen.

        A transaction the database gave up over a lock (a deadlock, a serialization failure,
        SQLite busy) is run again whole, up to `_ATTEMPTS` times: it wrote nothing, and the
        same batches at the same `now` make the same rows (observations are keyed by process
        and instant, not counted), so a retried ingest is the ingest it would have been.
        """
        batch_list = [
            _within_columns(b) for b in ([batches] if isinstance(batches, LineageBatch) else batches)
        ]
        now_us = to_micros(now or utcnow())
        return _until_won(lambda: self._ingest_once(batch_list, now_us))

    def _ingest_once(self, batch_list: list[LineageBatch], now_us: int) -> IngestReport:
        report = IngestReport()
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "sqlite":
                    # The write lock from the start (waiting up to busy_timeout). Left to
                    # itself the driver begins the transaction at the first write, and what the
                    # ingest read before it (which nodes exist, their labels) another writer
                    # could change in between.
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                ids = self._upsert_nodes(conn, batch_list, now_us, report)
                self._write_versions(conn, batch_list, ids, now_us, report)
                self._write_column_orders(conn, batch_list, ids, now_us)
                self._write_runs(conn, batch_list, ids, report)
                self._write_changes(conn, batch_list, ids)
                report.reads = asset_reads.write_reads(conn, batch_list, ids)
                self._write_problems(conn, batch_list, now_us, report)
                self._write_events(conn, batch_list, now_us)
                self._bump_version(conn)
        except BaseException:
            # Ids minted inside the rolled-back transaction do not exist.
            self._ids.clear()
            raise
        return report

    def _upsert_nodes(
        self, conn: sa.Connection, batches: list[LineageBatch], now_us: int, report: IngestReport
    ) -> dict[str, int]:
        assets: dict[str, Asset] = {}
        fields: dict[str, Field] = {}
        processes: dict[str, Process] = {}
        # processes only named by an edge or a run: a node, but nothing said of them to write
        unnamed: dict[str, Process] = {}
        for batch in batches:
            for asset in batch.assets:
                assets[asset.urn] = _merge_asset(assets.get(asset.urn), asset)
            for fld in batch.fields:
                fields[fld.urn] = fld
            for process in batch.processes:
                processes[process.urn] = process
            for process in batch.described:
                processes.setdefault(process.urn, process)
            # `in` tests rather than setdefault: building a default record per edge end (only to
            # throw it away) cost as much as the rest of this loop.
            for edge in batch.edges:
                for urn in (edge.source, edge.target):
                    if "#" in urn:
                        if urn not in fields:
                            fields[urn] = Field(urn)
                    elif urn not in assets:
                        assets[urn] = Asset(urn)
                if edge.process not in processes and edge.process not in unnamed:
                    unnamed[edge.process] = Process(edge.process, name=edge.process, kind="unknown")
            for run in batch.runs:
                if run.process not in processes and run.process not in unnamed:
                    unnamed[run.process] = Process(run.process, name=run.process, kind="unknown")
            for change in batch.changes:
                for named in (change.asset, change.previous):
                    if named is not None and named not in assets:
                        assets[named] = Asset(named)
                if change.process and change.process not in processes and change.process not in unnamed:
                    unnamed[change.process] = Process(change.process, name=change.process, kind="unknown")
            for read in batch.reads:
                if read.asset not in assets:
                    assets[read.asset] = Asset(read.asset)
                if read.process not in processes and read.process not in unnamed:
                    unnamed[read.process] = Process(read.process, name=read.process, kind="unknown")
        # Each field URN is parsed once (it was three times): parsing dominated column-heavy re-ingests.
        field_assets = {urn: parse_urn(urn) for urn in fields}
        for parsed in field_assets.values():
            asset_urn = parsed.asset
            if asset_urn not in assets:
                assets[asset_urn] = Asset(asset_urn)

        rows = [(urn, "asset", parse_urn(urn).asset_kind, None, now_us, now_us) for urn in assets]
        unnamed = {urn: process for urn, process in unnamed.items() if urn not in processes}
        rows += [
            (urn, "process", process.kind, None, now_us, now_us)
            for urn, process in itertools.chain(processes.items(), unnamed.items())
        ]
        self._insert_missing(conn, rows)
        ids = self._ids
        self._insert_missing(
            conn,
            [(urn, "field", p.asset_kind, ids[p.asset], now_us, now_us) for urn, p in field_assets.items()],
        )
        report.nodes = len(assets) + len(fields) + len(processes) + len(unnamed)
        if conn.dialect.name == "postgresql":
            # Every node this ingest writes (and every process whose versions it re-derives) is
            # locked here, in id order, before any is updated: concurrent ingests then wait for
            # each other in one order instead of deadlocking, and one reads a process's versions
            # only once another writing them has committed. FOR NO KEY UPDATE, as an UPDATE of
            # these columns would take: the foreign-key checks of other writers' edges and
            # fields (KEY SHARE) still pass. SQLite needs none: its writers take turns whole.
            touched = {ids[urn] for urn in itertools.chain(assets, fields, processes, unnamed)}
            conn.exec_driver_sql(_LOCK_NODES, (sorted(touched),))
        self._update_node_properties(conn, assets.values(), fields.values(), processes.values(), now_us)
        for chunk in _chunks([ids[urn] for urn in unnamed]):
            conn.execute(_NODES_SEEN, {"ids": list(chunk), "now": now_us})
        return self._ids

    def _insert_missing(self, conn: sa.Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert nodes not yet in the store and learn the ids of all of them.

        `rows` are (urn, node_type, kind, parent_id, first_seen, last_seen).
        """
        if not rows:
            return
        self._resolve_ids(conn, [r[0] for r in rows])
        missing = [r for r in rows if r[0] not in self._ids]
        if not missing:
            return
        urns = [r[0] for r in missing]
        columns: tuple[str, ...] = ("urn", "node_type", "kind", "parent_id", "first_seen", "last_seen")
        if conn.dialect.name == "postgresql":
            # Inserted in URN order: writers inserting the same new nodes then wait for each
            # other (PostgreSQL holds a new key until its transaction ends) in one order, never
            # each for the other. Their ids are drawn first, in the order the nodes were seen,
            # so that ids still follow first sight, as on SQLite (whose writers take turns).
            drawn = sorted(conn.exec_driver_sql(_DRAW_NODE_IDS, (len(missing),)).scalars())
            missing = sorted(((i, *row) for i, row in zip(drawn, missing, strict=True)), key=lambda r: r[1])
            columns = ("id", *columns)
        _driver_insert(conn, s.nodes, columns, missing, on_conflict="(urn) DO NOTHING")
        self._resolve_ids(conn, urns)

    def _resolve_ids(self, conn: sa.Connection, urns: Sequence[str]) -> None:
        unknown = [u for u in dict.fromkeys(urns) if u not in self._ids]
        for chunk in _chunks(unknown):
            query = f"SELECT id, urn FROM nodes WHERE urn IN ({_markers(conn, len(chunk))})"
            for node_id, urn in conn.exec_driver_sql(query, tuple(chunk)):
                self._ids[urn] = node_id

    def _update_node_properties(
        self,
        conn: sa.Connection,
        assets: Iterable[Asset],
        fields: Iterable[Field],
        processes: Iterable[Process],
        now_us: int,
    ) -> None:
        """Set what a batch says about a node; a property the batch leaves unset keeps its value.

        Only values that differ from the stored ones are written: every OpenLineage event
        re-sends its inputs' facets, and rewriting them unchanged was a quarter of an ingest.
        """
        ids = self._ids
        said: dict[int, dict[str, Any]] = {}
        for asset in assets:
            said[ids[asset.urn]] = {
                "owner": asset.owner,
                "layer": asset.layer,
                "security_level": asset.security_level,
                "labels": sorted(asset.labels) or None,
                "description": asset.description,
                # a declared column order is versioned in `column_orders`, not kept here as well
                "properties": {k: v for k, v in asset.metadata.items() if k != DECLARED_COLUMNS} or None,
            }
        for fld in fields:
            said[ids[fld.urn]] = {"data_type": fld.data_type, "labels": sorted(fld.labels) or None}
        for process in processes:
            said[ids[process.urn]] = {
                "owner": process.owner,
                "description": process.description,
                "properties": {"name": process.name, **process.metadata},
            }
        changes = {
            node_id: {k: v for k, v in props.items() if v is not None} for node_id, props in said.items()
        }
        with_values = [node_id for node_id, props in changes.items() if props]
        stored: dict[int, Any] = {}
        for chunk in _chunks(with_values):
            for row in conn.execute(_NODE_VALUES, {"ids": list(chunk)}):
                stored[row.id] = row
        updates: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
        for node_id in with_values:
            props, row = changes[node_id], stored[node_id]
            if "labels" in props:
                props["labels"] = sorted(set(row.labels or ()) | set(props["labels"]))
            if "properties" in props:
                props["properties"] = {**(row.properties or {}), **props["properties"]}
            differing = {k: v for k, v in props.items() if v != getattr(row, k)}
            if differing:
                updates[tuple(sorted(differing))].append({"_id": node_id, **differing})
        for columns, rows in updates.items():
            conn.execute(_node_update(columns), rows)
        # One UPDATE … WHERE id IN (…) per chunk rather than one per node: on a re-ingest
        # nearly every node only has last_seen moved, and per-row executemany dominated.
        for chunk in _chunks(list(changes)):
            conn.execute(_NODES_SEEN, {"ids": list(chunk), "now": now_us})

    def _write_versions(
        self,
        conn: sa.Connection,
        batches: list[LineageBatch],
        ids: dict[str, int],
        now_us: int,
        report: IngestReport,
    ) -> None:
        """Record each batch as an observation of its processes, and re-derive their versions."""
        incoming: dict[int, dict[int, dict[tuple[str, str, str, str, str], FlowEdge]]] = {}
        for batch in batches:
            at = _observed_at(batch, now_us)
            by_process: dict[str, dict[tuple[str, str, str, str, str], FlowEdge]] = {
                # a process listed with no edges is a version with no edges
                process.urn: {}
                for process in batch.processes
            }
            for edge in batch.edges:
                by_process.setdefault(edge.process, {})[edge.key] = edge
            for process_urn, edge_map in by_process.items():
                slots = incoming.setdefault(ids[process_urn], {})
                if at in slots:  # two observations at one instant are one: their edges united
                    _unite_into(slots[at], edge_map)
                else:
                    slots[at] = edge_map
        if not incoming:
            return
        edges = _EdgeSets(conn)
        hashes_of = {
            process_id: {
                at: edges.known(process_id, list(edge_map.values())) for at, edge_map in by_at.items()
            }
            for process_id, by_at in incoming.items()
        }
        versions = self._load_versions(conn, set(incoming))
        observations = self._load_observations(conn, {pid: min(by_at) for pid, by_at in incoming.items()})
        plans: dict[int, HistoryPlan] = {}
        for process_id, hashes in hashes_of.items():
            plan = plan_history(
                versions[process_id],
                observations.get(process_id, {}),
                hashes,
                functools.partial(edges.unite, process_id),
            )
            for version in plan.insert:  # read before any version of the process is deleted
                edges.of(process_id, version)
            plans[process_id] = plan
            report.versions_unchanged += plan.unchanged
            report.versions_replaced += plan.replaced
            report.versions_added += len(plan.insert) - plan.replaced

        def params(kind: str, **extra: Any) -> list[dict[str, Any]]:
            return [
                {"_pid": pid, "_from": v.valid_from, **{k: f(v) for k, f in extra.items()}}
                for pid, plan in plans.items()
                for v in getattr(plan, kind)
            ]

        gone = params("delete")
        if gone:
            conn.execute(_VERSION_DELETE, gone)
            result = conn.execute(_VERSION_EDGES_DELETE, gone)
            report.edges_replaced += max(result.rowcount, 0)
        moved = params("retime", _to=lambda v: v.valid_to)
        if moved:
            conn.execute(_VERSION_CLOSE, moved)
            result = conn.execute(_VERSION_EDGES_CLOSE, moved)
            report.edges_closed += max(result.rowcount, 0)
        seen = params("touch", _now=lambda v: now_us)
        if seen:
            conn.execute(_VERSION_SEEN, seen)
            conn.execute(_VERSION_EDGES_SEEN, seen)
        changed = [
            {"_pid": pid, "_at": at}
            for pid, plan in plans.items()
            for at in plan.observations
            if at in observations.get(pid, {})
        ]
        if changed:
            conn.execute(_OBSERVATION_DELETE, changed)
        observation_rows = [
            (pid, at, content, now_us)
            for pid, plan in plans.items()
            for at, content in plan.observations.items()
        ]
        if observation_rows:
            _driver_insert(conn, s.process_observations, _OBSERVATION_COLUMNS, observation_rows)
        new = [(pid, v, edges.of(pid, v)) for pid, plan in plans.items() for v in plan.insert]
        if new:
            version_rows = [
                (pid, v.valid_from, v.valid_to, v.content_hash, len(flows), now_us, now_us)
                for pid, v, flows in new
            ]
            _driver_insert(conn, s.process_versions, _VERSION_COLUMNS, version_rows)
            node_ids = {**edges.ids, **ids}
            edge_rows = [
                (
                    node_ids[e.source],
                    node_ids[e.target],
                    pid,
                    str(e.signal),
                    str(e.confidence),
                    str(e.transformation) if e.transformation else None,
                    e.description,
                    v.valid_from,
                    v.valid_to,
                    now_us,
                    now_us,
                )
                for pid, v, flows in new
                for e in flows
            ]
            _driver_insert(conn, s.edges, _EDGE_COLUMNS, edge_rows)
            report.edges_added += len(edge_rows)

    def _load_versions(self, conn: sa.Connection, process_ids: set[int]) -> dict[int, list[StoredVersion]]:
        versions: dict[int, list[StoredVersion]] = {pid: [] for pid in process_ids}
        for chunk in _chunks(sorted(process_ids)):
            for row in conn.execute(_VERSIONS_OF, {"ids": list(chunk)}):
                versions[row.process_id].append(StoredVersion(row.valid_from, row.valid_to, row.content_hash))
        return versions

    def _load_observations(self, conn: sa.Connection, since: dict[int, int]) -> dict[int, dict[int, str]]:
        """Each process's stored observations at or after its instant in `since`."""
        found: dict[int, dict[int, str]] = {}
        earliest = min(since.values())
        for chunk in _chunks(sorted(since)):
            for pid, at, content in conn.execute(_OBSERVATIONS_OF, {"ids": list(chunk), "since": earliest}):
                if at >= since[pid]:
                    found.setdefault(pid, {})[at] = content
        return found

    def _write_changes(self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int]) -> None:
        """Lifecycle changes, once each: the same change of an asset at the same instant is one."""
        rows = {
            (ids[c.asset], to_micros(c.at), str(c.change)): {
                "asset_id": ids[c.asset],
                "at": to_micros(c.at),
                "change": str(c.change),
                "signal": str(c.signal),
                "process_id": ids[c.process] if c.process else None,
                "run_id": c.run_id,
                "columns": [list(column) for column in c.columns] if c.columns is not None else None,
                "previous_id": ids[c.previous] if c.previous else None,
            }
            for batch in batches
            for c in batch.changes
        }
        if not rows:
            return
        a = s.asset_changes
        known: set[tuple[Any, ...]] = set()
        for chunk in _chunks(sorted({asset for asset, _, _ in rows})):
            query = sa.select(a.c.asset_id, a.c.at, a.c.change).where(a.c.asset_id.in_(chunk))
            known.update(tuple(row) for row in conn.execute(query))
        fresh = [row for key, row in rows.items() if key not in known]
        if fresh:
            conn.execute(sa.insert(a), fresh)

    def changes(
        self, asset: str | None = None, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[AssetChange]:
        """Lifecycle changes, oldest first: of one asset (and of the names it was renamed from,
        as a RENAME of it names them) or of all, within [since, until]."""
        a, n = s.asset_changes, s.nodes
        owner, process, previous = n.alias("owner"), n.alias("process"), n.alias("previous")
        query = (
            sa.select(owner.c.urn, a.c.change, a.c.at, a.c.signal)
            .add_columns(process.c.urn, a.c.run_id, a.c.columns, previous.c.urn)
            .join(owner, owner.c.id == a.c.asset_id)
            .outerjoin(process, process.c.id == a.c.process_id)
            .outerjoin(previous, previous.c.id == a.c.previous_id)
        )
        if asset is not None:
            query = query.where(sa.or_(owner.c.urn == asset, previous.c.urn == asset))
        if since is not None:
            query = query.where(a.c.at >= to_micros(since))
        if until is not None:
            query = query.where(a.c.at <= to_micros(until))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(a.c.at, owner.c.urn, a.c.change)).all()
        return [
            AssetChange(
                urn,
                Lifecycle(change),
                from_micros(at),
                Signal(signal),
                process_urn,
                run_id,
                tuple((str(c[0]), c[1]) for c in columns) if columns is not None else None,
                previous_urn,
            )
            for urn, change, at, signal, process_urn, run_id, columns, previous_urn in rows
        ]

    def readers(
        self,
        urn: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 100,
    ) -> list[AssetRead]:
        """Who read the asset without writing from it (`tracelake.store.reads`), newest first."""
        with self.engine.connect() as conn:
            return asset_reads.readers(conn, urn, since=since, until=until, limit=limit)

    def read_counts(
        self, *, asset: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> dict[str, ReadCounts]:
        """Per asset read: its reading runs, distinct readers and reading processes (hotness's votes)."""
        with self.engine.connect() as conn:
            return asset_reads.read_counts(conn, asset=asset, since=since, until=until)

    def ended_assets(self) -> dict[str, datetime]:
        """Assets whose life has ended — their last change a DROP, or a RENAME away from them —
        with when. Their edges that began before are over at that moment (in `edges` and in
        `snapshot`); a later change (a CREATE, a RENAME back) or a later observation of an edge
        starts them anew."""
        with self.engine.connect() as conn:
            return {urn: from_micros(at) for urn, at in _ended(conn).values()}

    def _write_column_orders(
        self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int], now_us: int
    ) -> None:
        """Keep each declared column order (an asset's `columns`) under the batch's time."""
        declared: dict[tuple[int, int], list[str]] = {}
        for batch in batches:
            at = _observed_at(batch, now_us)
            for asset in batch.assets:
                columns = asset.metadata.get(DECLARED_COLUMNS)
                if isinstance(columns, list) and all(isinstance(c, str) for c in columns):
                    key = (ids[asset.urn], at)
                    # two at one instant: a fixed choice, whatever order they came in
                    declared[key] = max(declared.get(key, []), list(columns))
        if not declared:
            return
        o = s.column_orders
        stored: dict[tuple[int, int], list[str]] = {}
        for chunk in _chunks(sorted({asset for asset, _ in declared})):
            for row in conn.execute(
                sa.select(o.c.asset_id, o.c.at, o.c.columns).where(o.c.asset_id.in_(chunk))
            ):
                stored[(row.asset_id, row.at)] = row.columns
        changed = [
            key
            for key, columns in declared.items()
            if key in stored and max(stored[key], columns) != stored[key]
        ]
        for asset_id, at in changed:
            conn.execute(
                o.update()
                .where(o.c.asset_id == asset_id, o.c.at == at)
                .values(columns=declared[(asset_id, at)])
            )
        new = [
            {"asset_id": asset_id, "at": at, "columns": columns, "first_seen": now_us}
            for (asset_id, at), columns in declared.items()
            if (asset_id, at) not in stored
        ]
        if new:
            conn.execute(o.insert(), new)

    def _write_runs(
        self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int], report: IngestReport
    ) -> None:
        # A run is reported in pieces (OpenLineage's START, then COMPLETE), possibly out of order:
        # each piece fills what it knows, and a run that has ended keeps its final status.
        rows: dict[str, dict[str, Any]] = {}
        for batch in batches:
            for run in batch.runs:
                row = {
                    "run_id": run.run_id,
                    "process_id": ids[run.process],
                    "job_id": run.job_id,
                    "user_name": run.user,
                    "started_at": to_micros(run.started_at) if run.started_at else None,
                    "ended_at": to_micros(run.ended_at) if run.ended_at else None,
                    "status": run.status,
                }
                known = rows.get(run.run_id)
                if known is not None:
                    final = known["status"] if known["ended_at"] and not row["ended_at"] else None
                    row = {k: v if v is not None else known[k] for k, v in row.items()}
                    row["status"] = final or row["status"]
                rows[run.run_id] = row
        if not rows:
            return
        _driver_insert(
            conn,
            s.runs,
            _RUN_COLUMNS,
            [tuple(row[c] for c in _RUN_COLUMNS) for row in rows.values()],
            on_conflict=_RUN_MERGE,
        )
        report.runs = len(rows)

    def _write_problems(
        self, conn: sa.Connection, batches: list[LineageBatch], now_us: int, report: IngestReport
    ) -> None:
        rows = [
            {
                "source": _fitted(p.source, s.width(s.problems.c.source)),
                "location": _fitted(p.location, s.width(s.problems.c.location)),
                "reason": p.reason,
                "excerpt": p.excerpt,
                "recorded_at": now_us,
            }
            for batch in batches
            for p in batch.problems
        ]
        if rows:
            conn.execute(s.problems.insert(), rows)
        report.problems = len(rows)

    def _write_events(self, conn: sa.Connection, batches: list[LineageBatch], now_us: int) -> None:
        """Keep the OpenLineage events the batches came from, as received, for Marquez's read API."""
        if not any(batch.events for batch in batches):
            return
        rows = []
        for batch in batches:
            for event in batch.events:
                run, job = event.get("run") or {}, event.get("job") or {}
                run_id = run.get("runId")
                if isinstance(run_id, str) and run_id:
                    run_id = openlineage_run_id(run_id)  # the runs table's form of the id
                try:
                    event_time = to_micros(datetime.fromisoformat(event["eventTime"]))
                except (KeyError, TypeError, ValueError, OverflowError):
                    event_time = now_us
                rows.append(
                    {
                        "event_time": event_time,
                        "event_type": _stored_event_type(event.get("eventType")),
                        "run_id": run_id,
                        "job_namespace": job.get("namespace"),
                        "job_name": job.get("name"),
                        "received_at": now_us,
                        "body": event,
                    }
                )
        if rows:
            conn.execute(s.openlineage_events.insert(), rows)

    def _bump_version(self, conn: sa.Connection) -> None:
        conn.exec_driver_sql(_BUMP_VERSION)

    # ------------------------------------------------------------------ reads

    def graph_version(self) -> int:
        """Grows with every ingest; an in-memory index reloads when it changes."""
        with self.engine.connect() as conn:
            return conn.execute(_GRAPH_VERSION).scalar() or 0

    def snapshot(self) -> GraphSnapshot:
        """All nodes and edge versions as arrays (one consistent read).

        Codes are computed by the database and rows are read from the driver's cursor straight
        into numpy: at a million edges, building SQLAlchemy rows and decoding values in Python
        took most of the time of an index rebuild.
        """
        e, n = s.edges, s.nodes
        edge_query = sa.select(
            e.c.id,
            e.c.source_id,
            e.c.target_id,
            e.c.process_id,
            _coded(e.c.signal, {str(k): v for k, v in SIGNAL_CODES.items()}),
            _coded(e.c.confidence, {str(c): c.rank for c in Confidence}),
            _coded(e.c.transformation, {str(k): v for k, v in TRANSFORMATION_CODES.items()}),
            e.c.valid_from,
            sa.func.coalesce(e.c.valid_to, OPEN_END),
        ).order_by(e.c.id)
        node_query = sa.select(
            n.c.id,
            _coded(n.c.node_type, {name: code for code, name in enumerate(NODE_TYPES)}),
            sa.func.coalesce(n.c.parent_id, -1),
            n.c.urn,
            n.c.kind,
        ).order_by(n.c.id)
        with self.engine.connect() as conn, conn.begin():
            version = conn.execute(_GRAPH_VERSION).scalar() or 0
            edge_rows = _fetch_raw(conn, edge_query)
            node_rows = _fetch_raw(conn, node_query)
            ended = _ended(conn)
        edge_columns = np.array(edge_rows, dtype=np.int64).reshape(-1, 9).T
        node_numbers = np.array([r[:3] for r in node_rows], dtype=np.int64).reshape(-1, 3).T
        if ended:
            _end_edges_of_ended(edge_columns, node_numbers, {i: at for i, (_, at) in ended.items()})
        return GraphSnapshot(
            version=version,
            node_ids=node_numbers[0].copy(),
            node_urns=[r[3] for r in node_rows],
            node_types=node_numbers[1].astype(np.int8),
            node_kinds=[r[4] for r in node_rows],
            node_parents=node_numbers[2].copy(),
            edge_ids=edge_columns[0].copy(),
            edge_source=edge_columns[1].copy(),
            edge_target=edge_columns[2].copy(),
            edge_process=edge_columns[3].copy(),
            edge_signal=edge_columns[4].astype(np.int8),
            edge_confidence=edge_columns[5].astype(np.int8),
            edge_transformation=edge_columns[6].astype(np.int8),
            edge_valid_from=edge_columns[7].copy(),
            edge_valid_to=edge_columns[8].copy(),
        )

    def nodes(self, urns: Iterable[str]) -> dict[str, NodeRecord]:
        found: dict[str, NodeRecord] = {}
        wanted = list(dict.fromkeys(urns))
        with self.engine.connect() as conn:
            for chunk in _chunks(wanted):
                for row in conn.execute(_NODES_BY_URN, {"urns": list(chunk)}):
                    found[row.urn] = _node_record(row)
        return found

    def node(self, urn: str) -> NodeRecord | None:
        return self.nodes([urn]).get(urn)

    def fields_of(self, asset_urn: str, declared: Sequence[str] = ()) -> list[NodeRecord]:
        """The asset's fields: the `declared` columns first, in that order, then the rest by name
        (never in the order the store happened to see them)."""
        parent = s.nodes.alias("parent")
        query = (
            sa.select(s.nodes)
            .join(parent, s.nodes.c.parent_id == parent.c.id)
            .where(parent.c.urn == asset_urn)
        )
        with self.engine.connect() as conn:
            records = [_node_record(row) for row in conn.execute(query)]
        place = {name: position for position, name in enumerate(declared)}

        def order(record: NodeRecord) -> tuple[int, str]:
            path = record.urn.partition("#")[2]
            return place.get(path.split(".", 1)[0], len(place)), path

        return sorted(records, key=order)

    def labelled(self, prefix: str) -> dict[str, tuple[str, ...]]:
        """Nodes with a label starting with `prefix` (e.g. "identity."), and those labels."""
        query = sa.select(s.nodes.c.urn, s.nodes.c.labels).where(s.nodes.c.labels.is_not(None))
        found = {}
        with self.engine.connect() as conn:
            for urn, labels in conn.execute(query):
                matching = tuple(label for label in labels or () if label.startswith(prefix))
                if matching:
                    found[urn] = matching
        return found

    def property_of(self, key: str, *, urn_prefix: str) -> dict[str, Any]:
        """The property `key` of every node whose URN starts with `urn_prefix`, by URN."""
        pattern = urn_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = sa.select(s.nodes.c.urn, s.nodes.c.properties).where(
            s.nodes.c.urn.like(pattern, escape="\\"), s.nodes.c.properties.is_not(None)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {urn: properties[key] for urn, properties in rows if properties and key in properties}

    def find_urns(self, suffix: str, *, node_type: str | None = None, limit: int = 20) -> list[str]:
        """URNs that end with `suffix` (how a plain name typed by a user is matched)."""
        query = sa.select(s.nodes.c.urn).where(s.nodes.c.urn.endswith(suffix, autoescape=True))
        if node_type:
            query = query.where(s.nodes.c.node_type == node_type)
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(s.nodes.c.urn).limit(limit)).scalars())

    def search_urns(self, text: str, *, node_type: str | None = None, limit: int = 20) -> list[str]:
        """URNs that contain `text`, ignoring case; shorter (assets before fields) first."""
        query = sa.select(s.nodes.c.urn).where(s.nodes.c.urn.icontains(text, autoescape=True))
        if node_type:
            query = query.where(s.nodes.c.node_type == node_type)
        order = (sa.func.length(s.nodes.c.urn), s.nodes.c.urn)
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(*order).limit(limit)).scalars())

    def edges(
        self,
        *,
        as_of: datetime | None = None,
        ids: Sequence[int] | None = None,
        touching: str | None = None,
        process: str | None = None,
    ) -> list[EdgeRecord]:
        """Edge versions valid at `as_of` (now if None), optionally by id, touching one node, or
        made by one process."""
        query = self._edge_query()
        e = s.edges
        if ids is not None:
            records: list[EdgeRecord] = []
            with self.engine.connect() as conn:
                for chunk in _chunks(list(ids)):
                    records.extend(_edge_record(r) for r in conn.execute(query.where(e.c.id.in_(chunk))))
            return records
        moment = to_micros(as_of) if as_of else None
        query = query.where(_valid_at(moment) if moment is not None else e.c.valid_to.is_(None))
        if touching is not None:
            node_id = sa.select(s.nodes.c.id).where(s.nodes.c.urn == touching).scalar_subquery()
            query = query.where(sa.or_(e.c.source_id == node_id, e.c.target_id == node_id))
        if process is not None:
            process_id = sa.select(s.nodes.c.id).where(s.nodes.c.urn == process).scalar_subquery()
            query = query.where(e.c.process_id == process_id)
        with self.engine.connect() as conn:
            records = [_edge_record(r) for r in conn.execute(query.order_by(e.c.id))]
            ended = _ended(conn)
        if not ended:
            return records
        ends = {urn: at for urn, at in ended.values() if moment is None or at <= moment}
        return [r for r in records if not _ended_before(r, ends)]

    def diff(self, since: datetime, until: datetime) -> GraphDiff:
        """Edges valid at `until` but not at `since` (added), and the reverse (removed)."""
        before = {e.key: e for e in self.edges(as_of=since)}
        after = {e.key: e for e in self.edges(as_of=until)}
        return GraphDiff(
            added=[e for key, e in after.items() if key not in before],
            removed=[e for key, e in before.items() if key not in after],
        )

    def known_columns(self) -> dict[str, list[str]]:
        """Columns of every asset as far as the store has seen them: a schema for `SELECT *`."""
        parent = s.nodes.alias("parent")
        query = (
            sa.select(parent.c.urn, s.nodes.c.urn)
            .join(parent, s.nodes.c.parent_id == parent.c.id)
            .where(s.nodes.c.node_type == "field")
            .order_by(s.nodes.c.id)
        )
        columns: dict[str, list[str]] = defaultdict(list)
        with self.engine.connect() as conn:
            for asset_urn, field_urn in conn.execute(query):
                path = field_urn.partition("#")[2]
                if "." not in path:  # top-level columns only; nested paths live under them
                    columns[asset_urn].append(path)
        return dict(columns)

    def declared_columns(self, urn: str | None = None) -> dict[str, list[tuple[datetime, list[str]]]]:
        """Column orders declared for assets (by DDL, a CREATE … AS SELECT, a table write), each
        with the time it was declared, oldest first; of one asset if `urn` is given."""
        o = s.column_orders
        query = sa.select(s.nodes.c.urn, o.c.at, o.c.columns).join(s.nodes, s.nodes.c.id == o.c.asset_id)
        if urn is not None:
            query = query.where(s.nodes.c.urn == urn)
        declared: dict[str, list[tuple[datetime, list[str]]]] = {}
        with self.engine.connect() as conn:
            for asset, at, columns in conn.execute(query.order_by(o.c.at)):
                declared.setdefault(asset, []).append((from_micros(at), list(columns)))
        return declared

    def problems(self, limit: int = 100) -> list[Problem]:
        query = sa.select(s.problems).order_by(s.problems.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [Problem(r.source, r.reason, r.location, r.excerpt) for r in conn.execute(query)]

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            by_type: dict[str, int] = dict(
                conn.execute(
                    sa.select(s.nodes.c.node_type, sa.func.count()).group_by(s.nodes.c.node_type)
                ).all()
            )
            open_edges = (
                conn.execute(sa.select(sa.func.count()).where(s.edges.c.valid_to.is_(None))).scalar() or 0
            )
            all_edges = conn.execute(sa.select(sa.func.count()).select_from(s.edges)).scalar() or 0
        return {**{t: by_type.get(t, 0) for t in NODE_TYPES}, "edges": open_edges, "edge_versions": all_edges}

    @staticmethod
    def _edge_query() -> sa.Select[Any]:
        e = s.edges
        src, dst, proc = s.nodes.alias("src"), s.nodes.alias("dst"), s.nodes.alias("proc")
        return (
            sa.select(
                e.c.id,
                src.c.urn.label("source"),
                dst.c.urn.label("target"),
                proc.c.urn.label("process"),
                e.c.signal,
                e.c.confidence,
                e.c.transformation,
                e.c.description,
                e.c.valid_from,
                e.c.valid_to,
                e.c.first_seen,
                e.c.last_seen,
            )
            .join(src, e.c.source_id == src.c.id)
            .join(dst, e.c.target_id == dst.c.id)
            .join(proc, e.c.process_id == proc.c.id)
        )


# The statements of the ingest path and of every query, built once: building one cost more
# than running it.
_GRAPH_VERSION = sa.select(s.store_state.c.value).where(s.store_state.c.key == "graph_version")
_NODES_BY_URN = sa.select(s.nodes).where(s.nodes.c.urn.in_(sa.bindparam("urns", expanding=True)))
_NODE_VALUES = sa.select(
    s.nodes.c.id,
    s.nodes.c.owner,
    s.nodes.c.layer,
    s.nodes.c.security_level,
    s.nodes.c.labels,
    s.nodes.c.description,
    s.nodes.c.properties,
    s.nodes.c.data_type,
).where(s.nodes.c.id.in_(sa.bindparam("ids", expanding=True)))
_DRAW_NODE_IDS = "SELECT nextval(pg_get_serial_sequence('nodes', 'id')) FROM generate_series(1, %s)"
# The ids as one array: as IN lists of 5,000 values, locking 60,000 nodes took 1.3 s, not 0.25 s.
_LOCK_NODES = "SELECT id FROM nodes WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE"
_NODES_SEEN = (
    s.nodes.update()
    .where(s.nodes.c.id.in_(sa.bindparam("ids", expanding=True)))
    .values(last_seen=sa.bindparam("now"))
)
_VERSIONS_OF = sa.select(
    s.process_versions.c.process_id,
    s.process_versions.c.valid_from,
    s.process_versions.c.valid_to,
    s.process_versions.c.content_hash,
    s.process_versions.c.edge_count,
).where(s.process_versions.c.process_id.in_(sa.bindparam("ids", expanding=True)))


def _of_version(table: sa.Table) -> sa.ColumnElement[bool]:
    """The rows of one process version, bound per executemany row as `_pid` and `_from`."""
    return sa.and_(table.c.process_id == sa.bindparam("_pid"), table.c.valid_from == sa.bindparam("_from"))


_OBSERVATIONS_OF = sa.select(
    s.process_observations.c.process_id, s.process_observations.c.at, s.process_observations.c.content_hash
).where(
    s.process_observations.c.process_id.in_(sa.bindparam("ids", expanding=True)),
    s.process_observations.c.at >= sa.bindparam("since"),
)
_OBSERVATION_DELETE = s.process_observations.delete().where(
    s.process_observations.c.process_id == sa.bindparam("_pid"),
    s.process_observations.c.at == sa.bindparam("_at"),
)
_OBSERVATION_COLUMNS = ("process_id", "at", "content_hash", "first_seen")
_EDGES_OF_HASH = (
    LineageStore._edge_query()
    .add_columns(s.edges.c.source_id, s.edges.c.target_id)
    .where(
        s.edges.c.process_id == sa.bindparam("_pid"),
        s.edges.c.valid_from
        == (
            sa.select(sa.func.min(s.process_versions.c.valid_from))
            .where(
                s.process_versions.c.process_id == sa.bindparam("_pid"),
                s.process_versions.c.content_hash == sa.bindparam("_hash"),
            )
            .scalar_subquery()
        ),
    )
)
_VERSION_DELETE = s.process_versions.delete().where(_of_version(s.process_versions))
_VERSION_EDGES_DELETE = s.edges.delete().where(_of_version(s.edges))
_VERSION_CLOSE = (
    s.process_versions.update().where(_of_version(s.process_versions)).values(valid_to=sa.bindparam("_to"))
)
_VERSION_EDGES_CLOSE = s.edges.update().where(_of_version(s.edges)).values(valid_to=sa.bindparam("_to"))
_VERSION_SEEN = (
    s.process_versions.update().where(_of_version(s.process_versions)).values(last_seen=sa.bindparam("_now"))
)
_VERSION_EDGES_SEEN = s.edges.update().where(_of_version(s.edges)).values(last_seen=sa.bindparam("_now"))


@functools.cache
def _node_update(columns: tuple[str, ...]) -> sa.Update:
    """UPDATE nodes SET <columns> WHERE id = :_id, for an executemany of rows with those keys."""
    return (
        s.nodes.update()
        .where(s.nodes.c.id == sa.bindparam("_id"))
        .values({column: sa.bindparam(column) for column in columns})
    )


# Driver SQL, the same text on SQLite and PostgreSQL; the run merge is `_write_runs`'s rule.
_RUN_COLUMNS = ("run_id", "process_id", "job_id", "user_name", "started_at", "ended_at", "status")
_RUN_MERGE = """(run_id) DO UPDATE SET
    started_at = coalesce(excluded.started_at, runs.started_at),
    ended_at = coalesce(excluded.ended_at, runs.ended_at),
    job_id = coalesce(excluded.job_id, runs.job_id),
    user_name = coalesce(excluded.user_name, runs.user_name),
    status = CASE
        WHEN excluded.ended_at IS NOT NULL OR runs.ended_at IS NULL
            THEN coalesce(excluded.status, runs.status)
        ELSE runs.status
    END"""
_BUMP_VERSION = (
    "INSERT INTO store_state (key, value) VALUES ('graph_version', 1) "
    "ON CONFLICT (key) DO UPDATE SET value = store_state.value + 1"
)
_VERSION_COLUMNS = (
    "process_id",
    "valid_from",
    "valid_to",
    "content_hash",
    "edge_count",
    "first_seen",
    "last_seen",
)
_EDGE_COLUMNS = (
    "source_id",
    "target_id",
    "process_id",
    "signal",
    "confidence",
    "transformation",
    "description",
    "valid_from",
    "valid_to",
    "first_seen",
    "last_seen",
)


def _coded(column: sa.ColumnElement[Any], codes: dict[str, int]) -> sa.ColumnElement[int]:
    """A text column as its small-integer code, computed in SQL (NULL and unknown text → -1)."""
    return sa.case(codes, value=column, else_=-1)


def _fetch_raw(conn: sa.Connection, query: sa.Select[Any]) -> list[tuple[Any, ...]]:
    """All rows of a query as the driver's own tuples, with constants inlined."""
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # a checked-out connection has its DBAPI connection
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _markers(conn: sa.Connection, count: int) -> str:
    """`count` positional placeholders in the driver's own style (sqlite3: ?, psycopg: %s)."""
    marker = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    return ", ".join([marker] * count)


def _driver_insert(
    conn: sa.Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    on_conflict: str | None = None,
) -> None:
    """An executemany of plain tuples straight to the driver.

    Bulk ingest spends more time in SQLAlchemy's per-row parameter processing than in the
    database itself; the hot inserts (nodes, edges) skip it. Values must already be in their
    stored form (no JSON, no datetimes).
    """
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({_markers(conn, len(columns))})"
    if on_conflict:
        sql += f" ON CONFLICT {on_conflict}"
    for chunk in _chunks(rows, 50_000):
        conn.exec_driver_sql(sql, list(chunk))


def _valid_at(moment_us: int) -> sa.ColumnElement[bool]:
    e = s.edges
    return sa.and_(e.c.valid_from <= moment_us, sa.or_(e.c.valid_to.is_(None), e.c.valid_to > moment_us))


def _setup_due(conn: sa.Connection) -> bool:
    """Whether the store lacks a table, or observations to backfill."""
    missing = set(s.metadata.tables) - set(sa.inspect(conn).get_table_names())
    return bool(missing) or _backfill_due(conn)


def _backfill_due(conn: sa.Connection) -> bool:
    """Versions but no observation: a store from before observations were kept."""
    o, v = s.process_observations, s.process_versions
    if conn.execute(sa.select(o.c.at).limit(1)).first() is not None:
        return False
    return conn.execute(sa.select(v.c.valid_from).limit(1)).first() is not None


def _lock_schema(conn: sa.Connection) -> None:
    """Begin `conn`'s transaction holding the store's one schema lock, until it ends.

    Two processes creating the same tables at once otherwise both find them missing: SQLite
    then refuses the second CREATE ("table nodes already exists"), PostgreSQL even with IF NOT
    EXISTS (a duplicate key in its catalog). SQLite's lock is its write lock, PostgreSQL's an
    advisory lock in the transaction that creates the tables (DDL is transactional in both).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _until_won(run: Callable[[], _T]) -> _T:
    """`run()`, run again while the database gives it up over a lock, up to `_ATTEMPTS` runs.

    Given up over a lock: PostgreSQL's deadlock_detected or serialization_failure, SQLite's
    SQLITE_BUSY (whatever its extended code). Between runs it waits 0.05–0.1 s, doubling each
    time, jittered so that writers that collided do not collide again in step.
    """
    attempt = 1
    while True:
        try:
            return run()
        except (sa.exc.DBAPIError, sqlite3.OperationalError) as error:
            cause = error.orig if isinstance(error, sa.exc.DBAPIError) else error
            lost = getattr(cause, "sqlstate", None) in ("40P01", "40001") or (
                (getattr(cause, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY
            )
            if attempt >= _ATTEMPTS or not lost:
                raise
        time.sleep(random.uniform(0.5, 1.0) * 0.1 * 2 ** (attempt - 1))
        attempt += 1


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # First, so that the statements after it wait for a lock too. A minute: writers queue for
    # SQLite's one write lock, and one behind a few large ingests waits for all of them.
    cursor.execute("PRAGMA busy_timeout=60000")
    # Of connections switching a new file to WAL at once, SQLite fails the others at once rather
    # than waiting (as it would for a write); the switch is made once, and stays.
    _until_won(lambda: cursor.execute("PRAGMA journal_mode=WAL"))
    cursor.execute("PRAGMA synchronous=NORMAL")
    # The commit that takes the WAL past this many pages copies it into the database first.
    # SQLite's default, 1,000 (4 MB), made one commit in a dozen pay for it under a steady
    # stream of small transactions (the server's): 4,000 took OpenLineage ingest over HTTP
    # from ~980 to ~1,150 events/s, the WAL staying under ~17 MB.
    cursor.execute("PRAGMA wal_autocheckpoint=4000")
    cursor.close()


def _merge_asset(old: Asset | None, new: Asset) -> Asset:
    if old is None:
        return new
    return Asset(
        new.urn,
        owner=new.owner or old.owner,
        layer=new.layer or old.layer,
        security_level=new.security_level if new.security_level is not None else old.security_level,
        labels=old.labels | new.labels,
        description=new.description or old.description,
        metadata={**old.metadata, **new.metadata},
    )


def _node_record(row: Any) -> NodeRecord:
    return NodeRecord(
        id=row.id,
        urn=row.urn,
        node_type=row.node_type,
        kind=row.kind,
        parent_id=row.parent_id,
        data_type=row.data_type,
        owner=row.owner,
        layer=row.layer,
        security_level=row.security_level,
        labels=tuple(row.labels or ()),
        description=row.description,
        properties=dict(row.properties or {}),
        first_seen=from_micros(row.first_seen),
        last_seen=from_micros(row.last_seen),
    )


def _edge_record(row: Any) -> EdgeRecord:
    return EdgeRecord(
        id=row.id,
        source=row.source,
        target=row.target,
        process=row.process,
        signal=row.signal,
        confidence=row.confidence,
        transformation=row.transformation,
        description=row.description,
        valid_from=from_micros(row.valid_from),
        valid_to=from_micros(row.valid_to) if row.valid_to is not None else None,
        first_seen=from_micros(row.first_seen),
        last_seen=from_micros(row.last_seen),
    )


def _ended(conn: sa.Connection) -> dict[int, tuple[str, int]]:
    """Assets whose last change ended them (DROP, or RENAMEd away): id → (urn, when in µs).

    Only assets ever dropped or renamed away can have ended, so only their changes (and the
    renames) are read: the many OVERWRITEs of tables that never ended are not, whatever their
    number, on every `edges` call and index load."""
    a, n = s.asset_changes, s.nodes
    owner, previous = n.alias("owner"), n.alias("previous")
    ever_ended = sa.union(
        sa.select(a.c.asset_id).where(a.c.change == str(Lifecycle.DROP)),
        sa.select(a.c.previous_id).where(a.c.previous_id.is_not(None)),
    )
    query = (
        sa.select(a.c.asset_id, owner.c.urn, a.c.at, a.c.change, a.c.previous_id, previous.c.urn)
        .join(owner, owner.c.id == a.c.asset_id)
        .outerjoin(previous, previous.c.id == a.c.previous_id)
        .where(sa.or_(a.c.asset_id.in_(ever_ended.scalar_subquery()), a.c.change == str(Lifecycle.RENAME)))
        .order_by(a.c.at, a.c.change, a.c.asset_id)
    )
    ends: dict[int, tuple[str, int]] = {}
    for asset_id, urn, at, change, previous_id, previous_urn in conn.execute(query):
        if change == Lifecycle.DROP:
            ends[asset_id] = (urn, at)
        else:
            ends.pop(asset_id, None)
        if change == Lifecycle.RENAME and previous_id is not None:
            ends[previous_id] = (previous_urn, at)
    return ends


def _ended_before(edge: EdgeRecord, ends: dict[str, int]) -> bool:
    """Whether an end of one of the edge's datasets closes it: it began before that end."""
    began = to_micros(edge.valid_from)
    for urn in (edge.source, edge.target):
        end = ends.get(urn.partition("#")[0])
        if end is not None and began < end:
            return True
    return False


def _end_edges_of_ended(edge_columns: np.ndarray, node_numbers: np.ndarray, ended: dict[int, int]) -> None:
    """Close, in the loaded arrays, the edges of ended assets (and of their fields) at the end,
    when they began before it (columns as `snapshot` reads them: source 1, target 2, valid_from 7,
    valid_to 8; nodes: id 0, parent 2)."""
    node_ids, parents = node_numbers[0], node_numbers[2]
    owners = np.where(parents >= 0, parents, node_ids)
    ended_ids = np.array(sorted(ended), dtype=np.int64)
    ended_at = np.array([ended[i] for i in ended_ids], dtype=np.int64)
    position = np.clip(np.searchsorted(ended_ids, owners), 0, len(ended_ids) - 1)
    node_end = np.where(ended_ids[position] == owners, ended_at[position], OPEN_END)
    began = edge_columns[7]
    ends = []
    for side in (edge_columns[1], edge_columns[2]):
        side_end = node_end[np.searchsorted(node_ids, side)]
        ends.append(np.where(began < side_end, side_end, OPEN_END))  # an end before it began is none
    end = np.minimum(*ends)
    closing = end < edge_columns[8]
    edge_columns[8][closing] = end[closing]
