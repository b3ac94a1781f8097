"""What happened to processes within a time window: the versions that began and the runs that
ran in it, and how long each process's runs took before it.

Root cause (`app.root_cause`) asks these of the processes upstream of an asset, by store id; each
is read through an index that starts with the process (versions' key, `ix_runs_process`) over the
window alone: the cost follows the walk and the window, not the store's size or age.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from tracelake.store import schema as s
from tracelake.store.engine import chunks
from tracelake.store.events import RunRecord
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.sqlstore import LineageStore

# A list of ids bound at execution: SQLAlchemy then renders the values, not one coerced literal each.
_IDS: sa.BindParameter[list[int]] = sa.bindparam("ids", expanding=True)


@dataclass(frozen=True, slots=True)
class VersionStart:
    """A version of a process that began in the window, and the one it replaced (None: the
    process was new then)."""

    process_id: int
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
    columns = (v.c.process_id, v.c.valid_from, v.c.content_hash, v.c.edge_count)
    lo, hi = to_micros(since), to_micros(until)
    begun: list[tuple[int, int, str, int]] = []
    every: dict[int, list[tuple[int, int, str, int]]] = {}
    urns: dict[int, str] = {}
    with store.engine.connect() as conn:
        for chunk in chunks(sorted(process_ids)):
            in_window = sa.select(*columns).where(
                v.c.process_id.in_(_IDS), v.c.valid_from > lo, v.c.valid_from <= hi
            )
            begun += [(row[0], row[1], row[2], row[3]) for row in conn.execute(in_window, {"ids": chunk})]
        # and every version before them of the processes that have one (to say what each replaced)
        for chunk in chunks(sorted({process for process, *_ in begun})):
            known = sa.select(*columns).where(v.c.process_id.in_(_IDS), v.c.valid_from <= hi)
            for row in conn.execute(known, {"ids": chunk}):
                every.setdefault(row[0], []).append((row[0], row[1], row[2], row[3]))
            urns.update(_urns(conn, chunk))
    found = []
    for process, start, content_hash, edge_count in sorted(begun, key=lambda row: (row[1], row[0])):
        previous = max((v for v in every[process] if v[1] < start), key=lambda v: v[1], default=None)
        found.append(
            VersionStart(
                process_id=process,
                process=urns[process],
                at=from_micros(start),
                content_hash=content_hash,
                edge_count=edge_count,
                previous_hash=previous[2] if previous else None,
                previous_edge_count=previous[3] if previous else None,
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class RunsInWindow:
    """The runs of some processes (by store id) that started or ended in a window, latest first,
    and the completed runs of each before it, (start, end) in epoch µs: what is usual for it."""

    runs: dict[int, list[RunRecord]]
    earlier: dict[int, list[tuple[int, int]]]

    def usual_seconds(self, process_id: int) -> float | None:
        """The median length of the process's earlier completed runs (None: it had none)."""
        held = self.earlier.get(process_id)
        return statistics.median((end - start) / 1e6 for start, end in held) if held else None


def runs_in_window(
    store: LineageStore,
    process_ids: Collection[int],
    since: datetime,
    until: datetime,
    *,
    lookback: timedelta | None = None,
) -> RunsInWindow:
    """Runs of the processes (store ids) that started or ended in [since, until], and their
    completed runs that started in the `lookback` before it (default: as long as the window).

    One range of `ix_runs_process` a process: its runs that started from the lookback's start
    to the window's end (a run that started before the lookback and ended in the window is not
    seen), and those that only said when they ended."""
    r = s.runs
    lo, hi = to_micros(since), to_micros(until)
    before = lo - (lookback // timedelta(microseconds=1) if lookback is not None else hi - lo)
    columns = (r.c.run_id, r.c.process_id, r.c.job_id, r.c.started_at, r.c.ended_at, r.c.status)
    earlier: dict[int, list[tuple[int, int]]] = {}
    urns: dict[int, str] = {}
    rows = []
    with store.engine.connect() as conn:
        for chunk in chunks(sorted(process_ids)):
            query = sa.select(*columns).where(
                r.c.process_id.in_(_IDS),
                sa.or_(
                    r.c.started_at.between(before, hi),
                    sa.and_(r.c.started_at.is_(None), r.c.ended_at.between(lo, hi)),
                ),
            )
            for row in conn.execute(query, {"ids": chunk}):
                started, ended = row.started_at, row.ended_at
                if (started is not None and started >= lo) or (ended is not None and lo <= ended <= hi):
                    rows.append(row)
                elif ended is not None and started is not None and row.status == "COMPLETE":
                    earlier.setdefault(row.process_id, []).append((started, ended))
        for chunk in chunks(sorted({row.process_id for row in rows})):
            urns.update(_urns(conn, chunk))
    runs: dict[int, list[RunRecord]] = {}
    for row in rows:
        runs.setdefault(row.process_id, []).append(
            RunRecord(
                run_id=row.run_id,
                process=urns[row.process_id],
                job_id=row.job_id,
                started_at=from_micros(row.started_at) if row.started_at is not None else None,
                ended_at=from_micros(row.ended_at) if row.ended_at is not None else None,
                status=row.status,
            )
        )
    for held in runs.values():
        held.sort(key=lambda run: (run.moment or since, run.run_id), reverse=True)
    return RunsInWindow(runs, earlier)


def _urns(conn: sa.Connection, ids: Sequence[int]) -> dict[int, str]:
    n = s.nodes
    query = sa.select(n.c.id, n.c.urn).where(n.c.id.in_(_IDS))
    return {row.id: row.urn for row in conn.execute(query, {"ids": ids})}
