"""Leases of runs in progress, so that a run whose driver died is not left RUNNING for ever.

A tracked Spark driver takes a lease when the store first shows its run RUNNING (`take`), renews it
(`renew`, every 30 s) and drops it when the run is stored at its end (`release`). A driver killed
outright (SIGKILL, a lost machine) leaves its lease behind: `find_dead` finds the leases whose
driver is gone — a process of this host that no longer exists, or a lease not renewed for
`STALE` — and `abort` ends their runs as ABORT (OpenLineage's state for a run stopped
abnormally), ended when last heard from. `tracelake.spark.recover` does both, after storing what
a dead driver's journal holds, when the next run is tracked and when `tracelake` opens a store.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from tracelake.model import LineageBatch, Process, Run, utcnow
from tracelake.store import schema as s
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.sqlstore import LineageStore

__all__ = [
    "ABORT",
    "STALE",
    "Lease",
    "abort",
    "find_dead",
    "holder_gone",
    "reap",
    "release",
    "renew",
    "take",
]

ABORT = "ABORT"
# A lease from another host (whose processes cannot be asked) is given up after this long unheard.
STALE = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Lease:
    run_id: str
    process_urn: str
    host: str
    pid: int
    heard_at: datetime


def take(store: LineageStore, run_id: str, process_urn: str, *, now: datetime | None = None) -> None:
    row = {
        "run_id": run_id,
        "process_urn": process_urn,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "heard_at": to_micros(now or utcnow()),
    }
    with store.engine.begin() as conn:
        conn.execute(sa.delete(s.run_leases).where(s.run_leases.c.run_id == run_id))
        conn.execute(sa.insert(s.run_leases).values(row))


def renew(store: LineageStore, run_id: str, *, now: datetime | None = None) -> None:
    heard = to_micros(now or utcnow())
    with store.engine.begin() as conn:
        conn.execute(sa.update(s.run_leases).where(s.run_leases.c.run_id == run_id).values(heard_at=heard))


def release(store: LineageStore, run_id: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(sa.delete(s.run_leases).where(s.run_leases.c.run_id == run_id))


def reap(store: LineageStore, *, now: datetime | None = None) -> list[Lease]:
    """End the runs whose drivers are gone as ABORT; the leases given up."""
    dead = find_dead(store, now=now)
    abort(store, dead)
    return dead


def find_dead(store: LineageStore, *, now: datetime | None = None) -> list[Lease]:
    """The leases whose drivers are gone."""
    now = now or utcnow()
    with store.engine.connect() as conn:
        leases = [
            Lease(row.run_id, row.process_urn, row.host, row.pid, from_micros(row.heard_at))
            for row in conn.execute(sa.select(s.run_leases))
        ]
    return [lease for lease in leases if _gone(lease, now)]


def abort(store: LineageStore, dead: list[Lease]) -> None:
    """End the leases' runs ABORT, when last heard from, and give the leases up."""
    if not dead:
        return
    batch = LineageBatch(
        runs=[Run(lease.run_id, lease.process_urn, ended_at=lease.heard_at, status=ABORT) for lease in dead],
        # the job's node says how its last run ended; its edges (as last ingested) stay as they are
        described=[
            Process(
                lease.process_urn,
                name=lease.process_urn.partition("/")[2] or lease.process_urn,
                kind="spark",
                metadata={"status": ABORT, "ended_at": lease.heard_at.isoformat(), "run_id": lease.run_id},
            )
            for lease in dead
        ],
    )
    store.ingest(batch)
    with store.engine.begin() as conn:
        conn.execute(
            sa.delete(s.run_leases).where(s.run_leases.c.run_id.in_([lease.run_id for lease in dead]))
        )


def _gone(lease: Lease, now: datetime) -> bool:
    return holder_gone(lease.host, lease.pid, lease.heard_at, now)


def holder_gone(host: str, pid: int, heard_at: datetime, now: datetime) -> bool:
    """Whether the process `pid` of `host`, last heard from at `heard_at`, is gone: a process of
    this host that no longer exists, or any holder unheard for `STALE` (a pid reused included)."""
    if host == socket.gethostname() and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, someone else's
    return now - heard_at > STALE
