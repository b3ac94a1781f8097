"""Runs of tracked Spark jobs: status and errors, a broken listener, the store, run events."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from tests.spark.conftest import Lake
from tracelake.collect import spark_listener, spark_run
from tracelake.model import LineageBatch, Run
from tracelake.spark import track
from tracelake.store import LineageStore
from tracelake.store import schema as s


def test_run_record(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")
    tracker = lake.run(lambda: people.select("id").write.parquet(out), job="daily_dating_features")
    run = tracker.run
    assert uuid.UUID(run.run_id).version == 4
    assert run.process == "spark.job/daily_dating_features"
    assert run.job_id == lake.spark.sparkContext.applicationId
    assert run.status == "COMPLETE"
    assert run.started_at is not None and run.ended_at is not None and run.ended_at >= run.started_at
    batch = tracker.batch()
    assert batch.observed_at == run.started_at
    metadata = batch.processes[0].metadata
    assert metadata["status"] == "COMPLETE"
    assert metadata["application_id"] == run.job_id
    assert metadata["duration_ms"] >= 0
    assert "error_class" not in metadata
    assert {e.process for e in batch.edges} == {run.process}
    assert {e.signal.value for e in batch.edges} == {"spark_runtime"}
    assert {e.confidence.value for e in batch.edges} == {"HIGH"}


def test_an_exception_in_the_block_fails_the_run(lake: Lake) -> None:
    people = lake.read("people")
    with (
        pytest.raises(ValueError),
        track(lake.spark, "failing", store=f"sqlite:///{lake.root / 'l.db'}") as t,
    ):
        people.count()
        raise ValueError("boom")
    assert t.run.status == "FAIL"
    metadata = t.batch().processes[0].metadata
    assert metadata["error_class"] == "ValueError"
    assert "boom" not in repr(metadata)


def test_a_failing_action_fails_the_run_with_its_error_class(lake: Lake) -> None:
    missing = str(lake.root / "missing")
    with (
        pytest.raises(AnalysisException),
        track(lake.spark, "failing_read", store=f"sqlite:///{lake.root / 'l.db'}") as t,
    ):
        lake.spark.read.parquet(missing).count()
    assert t.run.status == "FAIL"
    assert t.batch().runs[0].status == "FAIL"
    assert [(f.func_name, f.error_class) for f in t.failures] == [
        ("analyze", "org.apache.spark.sql.AnalysisException")
    ]
    metadata = t.batch().processes[0].metadata if t.batch().processes else {}
    # a run that did nothing observable is recorded as a run, but does not close the job's edges
    assert metadata == {}


def test_a_caught_failing_action_fails_the_run_though_the_job_goes_on(lake: Lake) -> None:
    people = lake.read("people")

    def job() -> None:
        with pytest.raises(Exception, match="is not true"):
            people.select(F.assert_true(F.col("id") < 0)).collect()
        assert people.count() == 3

    tracker = lake.run(job)
    assert tracker.run.status == "FAIL"
    assert tracker.batch().processes[0].metadata["error_class"] == tracker.failures[0].error_class
    assert [f.func_name for f in tracker.failures] == ["collectToPython"]
    assert tracker.failures[0].error_class.startswith("org.apache.spark.")
    failed = tracker.batch().processes[0].metadata["failed_actions"]
    assert failed == [{"action": "collectToPython", "error_class": tracker.failures[0].error_class}]


def test_a_broken_listener_does_not_break_the_job(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    people, out = lake.read("people"), lake.output("out")

    def broken(_items: object) -> None:
        raise RuntimeError("plan parser exploded on a row with amount=10.0")

    monkeypatch.setattr(spark_listener, "parse_plan", broken)
    counts: list[int] = []

    def job() -> None:
        counts.append(people.count())
        people.select("id").write.parquet(out)

    with caplog.at_level(logging.WARNING, logger="tracelake.spark"):
        tracker = lake.run(job)
    assert counts == [3]
    assert Path(out, "_SUCCESS").exists()
    assert tracker.run.status == "COMPLETE"
    assert tracker.batch().edges == []
    assert tracker._journal.errors == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "tracelake.spark"]
    assert messages and all("RuntimeError" in m for m in messages)
    # the error's text may hold record values: it is never logged
    assert not any("amount=10.0" in m for m in messages)


def test_a_broken_analysis_does_not_break_the_job(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    people = lake.read("people")

    def broken(*_args: object) -> None:
        raise KeyError("no such operator")

    monkeypatch.setattr(spark_run, "analyze_action", broken)
    counts: list[int] = []
    tracker = lake.run(lambda: counts.append(people.count()))
    assert counts == [3]
    assert tracker.analysis_errors == 1
    assert tracker.run.status == "COMPLETE"


def test_the_store_gets_each_run_and_a_dropped_write_closes_its_edges(
    lake: Lake, sqlite_store: LineageStore
) -> None:
    people = lake.read("people")
    kept, dropped = lake.output("kept"), lake.output("dropped")

    def stored(**when: object) -> set[tuple[str, str, str | None]]:
        return {
            (lake.short(e.source), lake.short(e.target), e.transformation) for e in sqlite_store.edges(**when)
        }

    with track(lake.spark, "nightly", store=sqlite_store) as first:
        people.select("id").write.parquet(kept)
        # flush() ingests what the run has seen so far, before the run ends
        assert first.flush()
        assert stored() == {("people", "kept", None), ("people#id", "kept#id", "IDENTITY")}
        people.select("name").write.parquet(dropped)
    both = {
        ("people", "kept", None),
        ("people#id", "kept#id", "IDENTITY"),
        ("people", "dropped", None),
        ("people#name", "dropped#name", "IDENTITY"),
    }
    assert stored() == both

    with track(lake.spark, "nightly", store=sqlite_store) as second:
        people.select("id").write.mode("overwrite").parquet(kept)

    assert stored() == {("people", "kept", None), ("people#id", "kept#id", "IDENTITY")}
    assert first.run.ended_at is not None and second.run.started_at is not None
    assert stored(as_of=first.run.ended_at) == both
    with sqlite_store.engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT status, job_id FROM runs")).all()
    assert [status for status, _ in runs] == ["COMPLETE", "COMPLETE"]
    assert {job for _, job in runs} == {lake.spark.sparkContext.applicationId}


def test_a_failed_run_keeps_the_edges_of_writes_it_never_reached(
    lake: Lake, sqlite_store: LineageStore
) -> None:
    people = lake.read("people")
    first, second = lake.output("first"), lake.output("second")

    def stored() -> set[tuple[str, str, str | None]]:
        return {(lake.short(e.source), lake.short(e.target), e.transformation) for e in sqlite_store.edges()}

    with track(lake.spark, "nightly", store=sqlite_store):
        people.select("id").write.parquet(first)
        people.select("name").write.parquet(second)
    both = {
        ("people", "first", None),
        ("people#id", "first#id", "IDENTITY"),
        ("people", "second", None),
        ("people#name", "second#name", "IDENTITY"),
    }
    assert stored() == both

    # the next night writes `first` with another column, then dies before writing `second`
    with pytest.raises(RuntimeError), track(lake.spark, "nightly", store=sqlite_store) as failed:
        people.select("id", "amount").write.mode("overwrite").parquet(first)
        raise RuntimeError("the driver lost its executors")
    assert failed.run.status == "FAIL"
    assert stored() == both | {("people#amount", "first#amount", "IDENTITY")}

    # a run that completes is the job's whole lineage again: `second` is no longer written
    with track(lake.spark, "nightly", store=sqlite_store):
        people.select("id").write.mode("overwrite").parquet(first)
    assert stored() == {("people", "first", None), ("people#id", "first#id", "IDENTITY")}


def test_a_running_job_reaches_the_store_once_its_ingest_interval_has_passed(
    lake: Lake, sqlite_store: LineageStore
) -> None:
    people = lake.read("people")

    def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def leases() -> list[str]:
        with sqlite_store.engine.connect() as conn:
            return [row.run_id for row in conn.execute(sa.select(s.run_leases))]

    with track(lake.spark, "hourly", store=sqlite_store, ingest_interval=3600) as slow:
        people.select("id").write.parquet(lake.output("slow"))
        assert wait_for(lambda: len(slow.actions) == 1)  # analysed…
        time.sleep(0.2)
        assert sqlite_store.edges() == []  # …but not yet stored: the hour has not passed
        assert leases() == []  # a run the store does not show RUNNING needs no lease
    assert len(sqlite_store.edges()) == 2  # the run's end stores it

    with track(lake.spark, "eager", store=sqlite_store, ingest_interval=0.0) as eager:
        people.select("name").write.parquet(lake.output("eager"))
        # no flush: the worker ingests as soon as the action is analysed
        assert wait_for(lambda: len(sqlite_store.edges()) == 4)
        assert leases() == [eager.run.run_id]  # shown RUNNING: other hosts may ask if it lives
    assert leases() == []


class _Recorder:
    """A RunEventSink that remembers what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, int, str | None]] = []

    def start(self, run: Run, batch: LineageBatch) -> None:
        self.events.append(("start", run.status, len(batch.edges), None))

    def complete(self, run: Run, batch: LineageBatch) -> None:
        self.events.append(("complete", run.status, len(batch.edges), None))

    def fail(self, run: Run, batch: LineageBatch, error_class: str) -> None:
        self.events.append(("fail", run.status, len(batch.edges), error_class))


def test_the_emitter_hears_start_and_end(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")
    store = f"sqlite:///{lake.root / 'l.db'}"
    recorder = _Recorder()
    with track(lake.spark, "emitting", store=store, emitter=recorder) as tracker:
        people.select("id").write.parquet(out)
    assert tracker.wait_stored()  # the run's end is emitted beside the job, once it is stored
    # the table-level edge and the one column's
    assert recorder.events == [("start", "RUNNING", 0, None), ("complete", "COMPLETE", 2, None)]

    failing = _Recorder()
    with (
        pytest.raises(ZeroDivisionError),
        track(lake.spark, "emitting", store=store, emitter=failing) as tracker,
    ):
        people.count()
        _ = 1 / 0
    assert tracker.wait_stored()
    assert failing.events == [("start", "RUNNING", 0, None), ("fail", "FAIL", 0, "ZeroDivisionError")]


def test_stop_detaches_the_listener(lake: Lake) -> None:
    people = lake.read("people")
    tracker = track(lake.spark, "detached", store=f"sqlite:///{lake.root / 'l.db'}")
    people.count()
    tracker.stop()
    seen = len(tracker.actions)
    people.count()
    lake.spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty()
    assert seen == 1
    assert len(tracker.actions) == seen
    tracker.stop()  # a second stop is a no-op


def test_no_store_means_the_default_store(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    database = lake.root / "default.db"
    monkeypatch.setenv("TRACELAKE_DB", str(database))
    people, out = lake.read("people"), lake.output("out")
    with track(lake.spark, "defaulted"):
        people.select("id").write.parquet(out)
    with LineageStore(f"sqlite:///{database}") as store:
        assert {(lake.short(e.source), lake.short(e.target)) for e in store.edges()} == {
            ("people", "out"),
            ("people#id", "out#id"),
        }
