"""Run leases on a real store: a run whose driver is gone is ended ABORT when it was last heard
from; a run whose driver lives, or was heard from lately on another host, is left running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tracelake.model import LineageBatch, Run
from tracelake.store import LineageStore, leases
from tracelake.store import schema as s

NOW = datetime(2024, 3, 12, 12, 0, tzinfo=UTC)


def _running(store: LineageStore, run_id: str) -> None:
    store.ingest(
        LineageBatch(
            runs=[Run(run_id, f"spark.job/{run_id}", started_at=NOW - timedelta(hours=1), status="RUNNING")]
        )
    )


def _lease(store: LineageStore, run_id: str, host: str, pid: int, heard_at: datetime) -> None:
    row = {
        "run_id": run_id,
        "process_urn": f"spark.job/{run_id}",
        "host": host,
        "pid": pid,
        "heard_at": s.to_micros(heard_at),
    }
    with store.engine.begin() as conn:
        conn.execute(sa.insert(s.run_leases).values(row))


def _runs(store: LineageStore) -> dict[str, tuple[str, datetime | None]]:
    with store.engine.connect() as conn:
        return {
            row.run_id: (row.status, s.from_micros(row.ended_at) if row.ended_at else None)
            for row in conn.execute(sa.select(s.runs))
        }


def test_only_the_runs_whose_drivers_are_gone_are_ended(store: LineageStore) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)  # a process of this host that has ended
    here = socket.gethostname()
    for run_id in ("dead", "alive", "recent", "stale"):
        _running(store, run_id)
    _lease(store, "dead", here, dead_pid, NOW - timedelta(seconds=3))
    _lease(store, "alive", here, os.getppid(), NOW - timedelta(seconds=3))
    _lease(store, "recent", "another-host", 4242, NOW - timedelta(minutes=1))
    _lease(store, "stale", "another-host", 4242, NOW - timedelta(minutes=6))

    given_up = leases.reap(store, now=NOW)

    assert sorted(lease.run_id for lease in given_up) == ["dead", "stale"]
    assert _runs(store) == {
        "dead": ("ABORT", NOW - timedelta(seconds=3)),
        "stale": ("ABORT", NOW - timedelta(minutes=6)),
        "alive": ("RUNNING", None),
        "recent": ("RUNNING", None),
    }
    assert leases.reap(store, now=NOW) == []  # given up once
    assert store.node("spark.job/dead").properties["status"] == "ABORT"  # type: ignore[union-attr]
