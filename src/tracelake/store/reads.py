"""Who reads an asset: the runs that read it without writing from it, kept in `asset_reads`.

A SELECT-only query in a log, a Spark `count()` or `collect()`, an OpenLineage run that wrote
nothing: none is a flow edge, yet who reads a table is half of what privacy review and hotness
need. `LineageStore.ingest` writes them (`write_reads`) in its transaction, one row per asset and
run, so ingesting the same log twice adds nothing; a run that is reported again as it goes (a
tracked Spark run every ten seconds) adds the columns it has read since. `readers` lists them
newest first; `read_counts` sums them per asset for hotness. Plain SQLAlchemy Core, the same on
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model import AssetRead, LineageBatch, Signal
from tracelake.store import schema as s
from tracelake.store.engine import driver_execute, driver_insert, json_param, json_result, rows_where_in
from tracelake.store.schema import from_micros, to_micros

_READ_COLUMNS = ("asset_id", "run_id", "process_id", "at", "user_name", "signal", "columns")


@dataclass(frozen=True, slots=True)
class ReadCounts:
    """How much an asset is read: by how many runs, by how many readers (a run's user, or its
    process when it has none), and which processes read it (hotness's votes)."""

    runs: int
    readers: int
    processes: tuple[str, ...]


NO_READS = ReadCounts(0, 0, ())


def write_reads(conn: sa.Connection, batches: Sequence[LineageBatch], ids: dict[str, int]) -> int:
    """Store the batches' reads; returns how many rows were new. A read already stored (same
    asset and run) only gains the columns it did not have."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for batch in batches:
        for read in batch.reads:
            key = (ids[read.asset], read.run_id)
            known = rows.get(key)
            if known is not None:
                known["columns"] = sorted({*known["columns"], *read.columns})
                continue
            rows[key] = {
                "asset_id": key[0],
                "run_id": read.run_id,
                "process_id": ids[read.process],
                "at": to_micros(read.at),
                "user_name": read.user,
                "signal": str(read.signal),
                "columns": sorted(set(read.columns)),
            }
    if not rows:
        return 0
    stored: dict[tuple[int, str], list[str]] = {}
    select = "SELECT asset_id, run_id, columns FROM asset_reads"
    for asset, run_id, columns in rows_where_in(
        conn, select, "run_id", sorted({run_id for _, run_id in rows})
    ):
        stored[(asset, run_id)] = list(json_result(conn, columns))
    widened = []
    for (asset, run_id), old in stored.items():
        row = rows.get((asset, run_id))
        if row is None:
            continue
        columns = sorted({*old, *row["columns"]})
        if columns != sorted(old):
            widened.append((json_param(columns), asset, run_id))
    if widened:
        update = "UPDATE asset_reads SET columns = ? WHERE asset_id = ? AND run_id = ?"
        driver_execute(conn, update, widened, many=True)
    fresh = [
        tuple(json_param(row[c]) if c == "columns" else row[c] for c in _READ_COLUMNS)
        for key, row in rows.items()
        if key not in stored
    ]
    if fresh:
        driver_insert(conn, s.asset_reads, _READ_COLUMNS, fresh)
    return len(fresh)


def readers(
    conn: sa.Connection,
    urn: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
) -> list[AssetRead]:
    """The reads of one asset within [since, until], newest first (then by run id)."""
    r, n = s.asset_reads, s.nodes
    asset, process = n.alias("asset"), n.alias("process")
    query = (
        sa.select(r.c.run_id, process.c.urn, r.c.at, r.c.user_name, r.c.signal, r.c.columns)
        .join(asset, asset.c.id == r.c.asset_id)
        .join(process, process.c.id == r.c.process_id)
        .where(asset.c.urn == urn)
        .order_by(r.c.at.desc(), r.c.run_id)
    )
    if since is not None:
        query = query.where(r.c.at >= to_micros(since))
    if until is not None:
        query = query.where(r.c.at <= to_micros(until))
    if limit is not None:
        query = query.limit(limit)
    return [
        AssetRead(urn, run_id, process_urn, from_micros(at), user, Signal(signal), tuple(columns))
        for run_id, process_urn, at, user, signal, columns in conn.execute(query)
    ]


def read_counts(
    conn: sa.Connection,
    *,
    asset: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, ReadCounts]:
    """Per asset read (or for `asset` only), its reading runs and readers within [since, until]."""
    r, n = s.asset_reads, s.nodes
    owner, process = n.alias("asset"), n.alias("process")
    query = (
        sa.select(owner.c.urn, process.c.urn, r.c.user_name, sa.func.count())
        .join(owner, owner.c.id == r.c.asset_id)
        .join(process, process.c.id == r.c.process_id)
        .group_by(owner.c.urn, process.c.urn, r.c.user_name)
    )
    if asset is not None:
        query = query.where(owner.c.urn == asset)
    if since is not None:
        query = query.where(r.c.at >= to_micros(since))
    if until is not None:
        query = query.where(r.c.at <= to_micros(until))
    runs: dict[str, int] = {}
    who: dict[str, set[tuple[str, str]]] = {}
    processes: dict[str, set[str]] = {}
    for asset_urn, process_urn, user, count in conn.execute(query):
        runs[asset_urn] = runs.get(asset_urn, 0) + count
        # a user and a process are told apart even when they share a name
        who.setdefault(asset_urn, set()).add(("user", user) if user else ("process", process_urn))
        processes.setdefault(asset_urn, set()).add(process_urn)
    return {urn: ReadCounts(runs[urn], len(who[urn]), tuple(sorted(processes[urn]))) for urn in sorted(runs)}
