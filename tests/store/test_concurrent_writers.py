"""Many writers at once: eight processes ingesting into one new store all succeed, and leave it as
a sequential ingest of the same files does, edge version for edge version.

Each writer runs the real `tracelake ingest sql` (in a forked process, so that it starts at once
without importing Tracelake again) on a query log of its own. The logs write the same tables and
share jobs, at instants of their own, so writers insert the same new nodes, update the same nodes
and re-derive the versions of the same processes at the same time; and they all start on a store
that does not exist yet, so they also race to create its schema. The history does not depend on
the order logs arrive in (observations are ordered by their own time), so the sequential ingest
is one answer for any interleaving. And an ingest PostgreSQL picks as a deadlock's victim (made
here with a second transaction locking against it) is run again, and lands once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tracelake.app.service import Tracelake
from tracelake.cli import app
from tracelake.model import FlowEdge, LineageBatch, Run, Signal
from tracelake.store import LineageStore

WRITERS = 8
# fork: the writers start with Tracelake already imported (a fresh interpreter takes ~2 s to)
FORK = multiprocessing.get_context("fork")


def query_log(writer: int) -> str:
    """Writer `writer`'s log: runs of six shared jobs copying columns between eight shared tables."""
    rng = random.Random(writer)
    lines = []
    for number in range(40):
        source, target = rng.sample(range(8), 2)
        columns = sorted(rng.sample(range(24), 10))
        select = ", ".join(f"s.c{c} + 1 AS c{c}" if c % 2 else f"s.c{c}" for c in columns)
        job = f"job{rng.randrange(6)}"
        entry = {
            "query": f"INSERT INTO shared.t{target} ({', '.join(f'c{c}' for c in columns)}) "
            f"SELECT {select} FROM shared.t{source} s",
            "user": f"writer{writer}",
            "timestamp": f"2024-03-{1 + number // 24:02d}T{number % 24:02d}:{writer:02d}:00Z",
            "job_id": f"{job}.{writer}.{number}",
            "job_name": job,
        }
        lines.append(json.dumps(entry))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("writers")
    paths = [folder / f"writer{n}.jsonl" for n in range(WRITERS)]
    for number, path in enumerate(paths):
        path.write_text(query_log(number))
    return paths


@pytest.fixture(scope="module")
def sequential(logs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The store the logs make one after the other (on SQLite: the store must not care which)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('sequential') / 'lineage.db'}"
    with LineageStore(url) as store:
        for path in logs:
            Tracelake(store).ingest_sql(path)
        return contents(store)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a store nothing has opened yet: a file that does not exist, an empty database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'lineage.db'}"
    return str(request.getfixturevalue("postgres_url"))


def contents(store: LineageStore) -> dict[str, Any]:
    """What the ingests left, by content: ids and arrival times (first_seen, last_seen) left out."""
    queries = {
        "nodes": "SELECT n.urn, n.node_type, n.kind, p.urn FROM nodes n "
        "LEFT JOIN nodes p ON p.id = n.parent_id",
        "edges": "SELECT s.urn, t.urn, p.urn, e.signal, e.confidence, e.transformation, e.valid_from, "
        "e.valid_to FROM edges e JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id "
        "JOIN nodes p ON p.id = e.process_id",
        "versions": "SELECT p.urn, v.valid_from, v.valid_to, v.content_hash, v.edge_count "
        "FROM process_versions v JOIN nodes p ON p.id = v.process_id",
        "observations": "SELECT p.urn, o.at, o.content_hash FROM process_observations o "
        "JOIN nodes p ON p.id = o.process_id",
        "runs": "SELECT r.run_id, p.urn, r.user_name, r.started_at, r.ended_at, r.status FROM runs r "
        "JOIN nodes p ON p.id = r.process_id",
    }
    with store.engine.connect() as conn:
        found: dict[str, Any] = {
            name: sorted(map(tuple, conn.execute(sa.text(query))), key=repr)
            for name, query in queries.items()
        }
    found["graph_version"] = store.graph_version()  # one per ingest that committed, retried or not
    return found


def in_processes(target: Callable[..., None], args: list[tuple[Any, ...]], logs_in: Path) -> None:
    """Run `target(*args[n])` in one process each, all let go at once; fail naming any that failed."""
    start = FORK.Barrier(len(args))
    processes = [
        FORK.Process(target=_after, args=(start, logs_in / f"process{n}.log", target, *arguments))
        for n, arguments in enumerate(args)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    failed = {
        n: (process.exitcode, (logs_in / f"process{n}.log").read_text()[-2000:])
        for n, process in enumerate(processes)
        if process.exitcode != 0
    }
    assert not failed, f"{len(failed)} of {len(processes)} failed: {failed}"


def _after(start: Any, log: Path, target: Callable[..., None], *args: Any) -> None:
    # the process's own output, for the failure message (the parent's capture is no place for it)
    sys.stdout = sys.stderr = log.open("w", buffering=1)
    os.dup2(sys.stdout.fileno(), 1)
    os.dup2(sys.stdout.fileno(), 2)
    start.wait(60)
    target(*args)


def ingest_with_cli(url: str, log: Path) -> None:
    app(["ingest", "sql", str(log), "--db", url], prog_name="tracelake")


def open_store(url: str) -> None:
    with LineageStore(url) as store:
        store.counts()


def test_eight_writers_into_a_new_store_all_succeed_and_store_what_one_at_a_time_would(
    new_store: str, logs: list[Path], sequential: dict[str, Any], tmp_path: Path
) -> None:
    in_processes(ingest_with_cli, [(new_store, log) for log in logs], tmp_path)

    with LineageStore(new_store) as store:
        found = contents(store)
    assert found["graph_version"] == WRITERS
    for part in ("nodes", "edges", "versions", "observations", "runs"):
        assert found[part] == sequential[part], part


def test_eight_processes_opening_a_new_store_at_once_all_succeed(new_store: str, tmp_path: Path) -> None:
    in_processes(open_store, [(new_store,)] * WRITERS, tmp_path)

    with LineageStore(new_store) as store:
        assert set(sa.inspect(store.engine).get_table_names()) >= {"nodes", "edges", "process_observations"}
        assert store.counts()["edges"] == 0


WAITING_ON_A_LOCK = sa.text(
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
)


@pytest.mark.postgres
def test_an_ingest_chosen_as_a_deadlock_victim_is_run_again_and_lands_once(
    postgres_url: str, tmp_path: Path
) -> None:
    job, a, b, c = "sql.job/j", "hive.table/db.a", "hive.table/db.b", "hive.table/db.c"
    first = LineageBatch(
        edges=[FlowEdge(a, b, job, Signal.SQL_STATIC)], observed_at=datetime(2024, 3, 1, tzinfo=UTC)
    )
    second = LineageBatch(
        edges=[FlowEdge(a, c, job, Signal.SQL_STATIC), FlowEdge(b, c, job, Signal.SQL_STATIC)],
        observed_at=datetime(2024, 3, 2, tzinfo=UTC),
        runs=[Run("run-2", job, status="COMPLETE")],
    )
    now = datetime(2024, 3, 3, tzinfo=UTC)
    with LineageStore(postgres_url) as store:
        store.ingest(first, now=now)
        ids = {urn: record.id for urn, record in store.nodes([a, job]).items()}
        assert ids[a] < ids[job]  # so the ingest locks a's node before the job's
        other = store.engine.connect()
        watcher = store.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        lock = sa.text("SELECT id FROM nodes WHERE id = :id FOR NO KEY UPDATE")
        with ThreadPoolExecutor(1) as pool:
            # Another transaction holds the job's node; the ingest locks a's (a lower id), then
            # waits for the job's; the other then asks for a's: each waits for the other.
            other.execute(lock, {"id": ids[job]})
            ingesting = pool.submit(store.ingest, second, now=now)
            while not watcher.execute(WAITING_ON_A_LOCK).scalar():
                time.sleep(0.01)
            # PostgreSQL breaks the cycle by failing whoever has waited a deadlock_timeout first:
            # the ingest. That the other gets a's lock at all says the ingest's transaction died.
            other.execute(lock, {"id": ids[a]})
            other.commit()
            report = ingesting.result(60)
        other.close()
        watcher.close()
        found = contents(store)

    assert (report.edges_added, report.edges_closed, report.versions_added, report.runs) == (2, 1, 1, 1)
    with LineageStore(f"sqlite:///{tmp_path / 'twin.db'}") as twin:
        twin.ingest(first, now=now)
        twin.ingest(second, now=now)
        assert found == contents(twin)  # graph_version 2 included: the retry committed once
