"""The ingest writers behind the server: group commit in a thread and in a process of its own.

What they promise: a caller is answered only once its own batches are committed; a caller whose
batches fail fails alone while the others in its group land; the process writer survives the
death of its child (callers waiting then get an error, never a false acknowledgement) and
`close` returns only when everything sent before it is written.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelake.model import (
    Asset,
    AssetChange,
    AssetRead,
    Confidence,
    EdgeVersion,
    Field,
    FlowEdge,
    Lifecycle,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    Transformation,
    UrnError,
    parse_urn,
)
from tracelake.store import LineageStore
from tracelake.store.group_commit import GroupCommit, write_group
from tracelake.store.writer_process import WriterError, WriterProcess, writer_for


def job_batch(number: int) -> LineageBatch:
    """Job `number` copies table a into its own table."""
    job = f"sql.job/copy_{number}"
    return LineageBatch(
        edges=[FlowEdge("hive.table/db.a", f"hive.table/db.copy_{number}", job, Signal.SQL_STATIC)]
    )


def broken_batch() -> LineageBatch:
    return LineageBatch(edges=[FlowEdge("not a urn", "hive.table/db.b", "sql.job/broken", Signal.SQL_STATIC)])


def copies_in(path: Path) -> set[int]:
    with LineageStore(str(path)) as store:
        urns = store.search_urns("hive.table/db.copy_", node_type="asset", limit=100_000)
    return {int(urn.rsplit("_", 1)[1]) for urn in urns}


def test_a_failing_caller_fails_alone_and_the_rest_of_its_group_lands(tmp_path: Path) -> None:
    with LineageStore(str(tmp_path / "lineage.db")) as store:
        outcomes = write_group(store, [[job_batch(1)], [broken_batch()], [job_batch(2), job_batch(3)]])

    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], UrnError)
    assert copies_in(tmp_path / "lineage.db") == {1, 2, 3}


def test_every_record_of_a_batch_crosses_to_the_writer_process_whole() -> None:
    """Batches travel pickled, and the records pickle by their fields' names listed once (not
    Python's slotted-dataclass default): every field of every kind comes back, None and empty
    values included, and the records stay frozen."""
    when = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
    batch = LineageBatch(
        assets=[
            Asset("hive.table/db.a", "ana", "ods", 3, frozenset({"pii"}), "d", {"k": [1]}),
            Asset("hive.table/db.b"),
        ],
        fields=[Field("hive.table/db.a#x", "string", frozenset({"email"}))],
        processes=[Process("sql.job/j", "j", "sql", None, "runs daily", {"schedule": "@daily"})],
        runs=[Run("r1", "sql.job/j", when, None, "RUNNING", None, "ana")],
        edges=[
            FlowEdge(
                "hive.table/db.a#x",
                "hive.table/db.b#x",
                "sql.job/j",
                Signal.SQL_STATIC,
                Confidence.LOW,
                Transformation.IDENTITY,
                "copy",
            )
        ],
        problems=[Problem("sql", "cannot parse", "q.sql:3", "SELEC")],
        described=[Process("sql.job/k", "k")],
        events=[{"eventType": "COMPLETE", "run": {"runId": "r1"}, "inputs": []}],
        changes=[
            AssetChange(
                "hive.table/db.b",
                Lifecycle.CREATE,
                when,
                Signal.SQL_STATIC,
                "sql.job/j",
                "r1",
                (("x", "string"), ("y", None)),
            )
        ],
        reads=[AssetRead("hive.table/db.a", "r1", "sql.job/j", when, None, Signal.SQL_STATIC, ("x",))],
        observed_at=when,
    )
    version = EdgeVersion("a.b/c", "a.b/d", "a.b/p", Signal.MANUAL, Confidence.HIGH, None, when, None)

    for record in (batch, version, parse_urn("hive.table/db.a#x.y")):
        back = pickle.loads(pickle.dumps(record))
        assert type(back) is type(record)
        assert dataclasses.astuple(back) == dataclasses.astuple(record)
    back = pickle.loads(pickle.dumps(batch))
    assert back.assets[0].metadata == {"k": [1]} and back.edges[0].confidence is Confidence.LOW
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.edges[0].source = "x"  # type: ignore[misc]


def test_an_in_memory_store_keeps_its_writer_in_process(tmp_path: Path) -> None:
    memory, on_disk = LineageStore("sqlite://"), LineageStore(str(tmp_path / "lineage.db"))
    try:
        assert isinstance(writer_for(memory), GroupCommit)
        assert isinstance(writer_for(on_disk), WriterProcess)
    finally:
        memory.close()
        on_disk.close()


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_every_acknowledged_batch_is_in_the_store_when_it_is_acknowledged(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "lineage.db"
    store = LineageStore(str(path))
    writer = GroupCommit(store) if kind == "thread" else WriterProcess(store.url)
    seen_when_answered: dict[int, bool] = {}

    def submit(number: int) -> None:
        batch = broken_batch() if number % 10 == 7 else job_batch(number)
        try:
            writer.submit([batch]).result(timeout=60)
        except (UrnError, WriterError):
            seen_when_answered[number] = False
            return
        seen_when_answered[number] = number in copies_in(path)

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(submit, range(60)))
    finally:
        writer.close()
        store.close()

    failed = {n for n in range(60) if n % 10 == 7}
    assert {n for n, seen in seen_when_answered.items() if seen} == set(range(60)) - failed
    assert copies_in(path) == set(range(60)) - failed
    assert 1 <= writer.stats.groups <= 60


def test_the_error_of_a_failed_write_comes_back_from_the_writer_process(tmp_path: Path) -> None:
    writer = WriterProcess(f"sqlite:///{tmp_path / 'lineage.db'}")
    try:
        with pytest.raises(WriterError, match="UrnError: 'not a urn' is not a URN"):
            writer.submit([broken_batch()]).result(timeout=60)
        writer.submit([job_batch(1)]).result(timeout=60)
    finally:
        writer.close()
    assert copies_in(tmp_path / "lineage.db") == {1}


def test_when_the_writer_process_dies_no_caller_is_told_a_lie_and_the_next_submit_restarts_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lineage.db"
    writer = WriterProcess(f"sqlite:///{path}")
    writer.submit([job_batch(0)]).result(timeout=60)  # the child is up
    futures: list[Future[None]] = [writer.submit([job_batch(n)]) for n in range(1, 200)]
    os.kill(writer._child.pid, signal.SIGKILL)  # mid-stream: some written, some not

    acknowledged, refused = set(), set()
    for number, future in enumerate(futures, start=1):
        try:
            future.result(timeout=60)
            acknowledged.add(number)
        except WriterError:
            refused.add(number)
    assert acknowledged | refused == set(range(1, 200))
    assert refused, "the child was killed before it answered everything"
    assert acknowledged <= copies_in(path)

    writer.submit([job_batch(500)]).result(timeout=60)  # a new child
    writer.close()
    assert {0, 500} | acknowledged <= copies_in(path)


def test_close_returns_once_everything_sent_before_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "lineage.db"
    writer = WriterProcess(f"sqlite:///{path}")
    futures = [writer.submit([job_batch(n)]) for n in range(100)]
    began = time.perf_counter()
    writer.close()

    assert copies_in(path) == set(range(100))
    assert all(f.done() and f.exception() is None for f in futures)
    assert time.perf_counter() - began < 30
