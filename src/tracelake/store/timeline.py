"""What happened to processes within a time window: the versions that began and the runs that
ran in it, and how long each process's runs took before it.

Root cause (`app.root_cause`) asks these of the processes upstream of an asset. Versions are read
through the index on their start, the window's alone; runs through the index on (process, start),
the asked processes' alone: the cost follows the window and the walk, not the store.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from tracelake.store import schema as s
from tracelake.store.engine import chunks
from tracelake.store.events import RunRecord
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.sqlstore import LineageStore


@dataclass(frozen=True, slots=True)
class VersionStart:
    """A version of a process that began in the window, and the one it replaced (None: the
    process was new then)."""

    process: str
    at: datetime
    content_hash: str
    edge_count: int
    previous_hash: str | None
    previous_edge_count: int | None


def version_starts(
    store: LineageStore, process_ids: Collection[int], since: datetime, until: datetime
) -> list[VersionStart]:
    """Versions of the processes (store ids) that began in (since, until], oldest first."""
    v = s.process_versions
    begun = (
        sa.select(v.c.process_id, v.c.valid_from, v.c.content_hash, v.c.edge_count)
        .where(v.c.valid_from > to_micros(since), v.c.valid_from <= to_micros(until))
        .order_by(v.c.valid_from)
    )
    wanted = set(process_ids)
    with store.engine.connect() as conn:
        rows = [row for row in conn.execute(begun) if row.process_id in wanted]
        ids = sorted({row.process_id for row in rows})
        every: dict[int, list[tuple[int, str, int]]] = {}
        urns: dict[int, str] = {}
        for chunk in chunks(ids):
            query = sa.select(v.c.process_id, v.c.valid_from, v.c.content_hash, v.c.edge_count).where(
                v.c.process_id.in_(chunk)
            )
            for pid, start, content, count in conn.execute(query):
                every.setdefault(pid, []).append((start, content, count))
            urns.update(_urns(conn, chunk))
    found = []
    for row in rows:
        earlier = [version for version in every[row.process_id] if version[0] < row.valid_from]
        previous = max(earlier) if earlier else None
        found.append(
            VersionStart(
                process=urns[row.process_id],
                at=from_micros(row.valid_from),
                content_hash=row.content_hash,
                edge_count=row.edge_count,
                previous_hash=previous[1] if previous else None,
                previous_edge_count=previous[2] if previous else None,
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class RunsInWindow:
    """The runs of some processes that started or ended in a window, and each process's usual
    run length before it: the median of its completed runs of the same length of time before."""

    runs: list[RunRecord]
    usual_seconds: dict[str, float]  # process → median duration of its earlier completed runs
    earlier_runs: dict[str, int]  # process → how many runs that median is of


def runs_in_window(
    store: LineageStore, process_ids: Collection[int], since: datetime, until: datetime
) -> RunsInWindow:
    """Runs of the processes (store ids) that started or ended in [since, until], latest first,
    and as baseline their completed runs that started in [since - (until - since), since).

    One range of `ix_runs_process` a process: its runs that started from the baseline's start
    to the window's end (a run that started before the baseline and ended in the window is not
    seen), and those that only said when they ended."""
    r = s.runs
    lo, hi = to_micros(since), to_micros(until)
    before = lo - (hi - lo)
    columns = (r.c.run_id, r.c.process_id, r.c.job_id, r.c.started_at, r.c.ended_at, r.c.status)
    durations: dict[int, list[float]] = {}
    urns: dict[int, str] = {}
    rows = []
    with store.engine.connect() as conn:
        for chunk in chunks(sorted(process_ids)):
            query = sa.select(*columns).where(
                r.c.process_id.in_(chunk),
                sa.or_(
                    r.c.started_at.between(before, hi),
                    sa.and_(r.c.started_at.is_(None), r.c.ended_at.between(lo, hi)),
                ),
            )
            for row in conn.execute(query):
                started, ended = row.started_at, row.ended_at
                if (started is not None and started >= lo) or (ended is not None and lo <= ended <= hi):
                    rows.append(row)
                elif ended is not None and started is not None and row.status == "COMPLETE":
                    durations.setdefault(row.process_id, []).append((ended - started) / 1e6)
        for chunk in chunks(sorted({row.process_id for row in rows})):
            urns.update(_urns(conn, chunk))
    runs = [
        RunRecord(
            run_id=row.run_id,
            process=urns[row.process_id],
            job_id=row.job_id,
            started_at=from_micros(row.started_at) if row.started_at is not None else None,
            ended_at=from_micros(row.ended_at) if row.ended_at is not None else None,
            status=row.status,
        )
        for row in rows
    ]
    runs.sort(key=lambda run: (run.moment or since, run.run_id), reverse=True)
    return RunsInWindow(
        runs,
        {urns[pid]: statistics.median(values) for pid, values in durations.items() if pid in urns},
        {urns[pid]: len(values) for pid, values in durations.items() if pid in urns},
    )


def _urns(conn: sa.Connection, ids: Sequence[int]) -> dict[int, str]:
    n = s.nodes
    return {row.id: row.urn for row in conn.execute(sa.select(n.c.id, n.c.urn).where(n.c.id.in_(ids)))}
