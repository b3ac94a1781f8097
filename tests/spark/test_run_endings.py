"""How a tracked run ends when the script never says so, on real Spark in a driver of its own (a
subprocess: these scenarios end the interpreter, which the suite's one session must outlive).

The script attaches Tracelake in one line, writes a dataset and then a second one from the first,
and ends: by `spark.stop()` alone, by an uncaught exception, by SIGTERM, or killed with SIGKILL.
Each time both writes' lineage must be in the store; the run is COMPLETE, FAIL, ABORT, and after
SIGKILL RUNNING until the next `tracelake` command finds its driver gone and ends it ABORT.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.spark.conftest import Lake
from tracelake.cli import app
from tracelake.model.names import location_urn
from tracelake.spark import track
from tracelake.store import LineageStore
from tracelake.store.schema import from_micros

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pyspark.sql import SparkSession
    import tracelake.spark

    root, how = sys.argv[1], sys.argv[2]
    # a driver to be killed: its lineage must come from the journal, not from an ingest it made
    interval = 3600.0 if how == "wait-unstored" else 10.0
    spark = (
        SparkSession.builder.master("local[1]").appName("endings")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tracelake.spark.track(
        spark, job="daily_features", store=f"sqlite:///{root}/lineage.db", ingest_interval=interval
    )
    spark.createDataFrame([(1, "Ada"), (2, "Linus")], "id int, name string").write.parquet(f"{root}/people")
    spark.read.parquet(f"{root}/people").select("id").write.parquet(f"{root}/ids")
    if how == "stop":
        spark.stop()
    elif how == "raise":
        raise RuntimeError("the job gives up")
    else:  # wait to be killed (wait, wait-unstored)
        print("written", flush=True)
        time.sleep(120)
    """
)


def _driver(root: Path, how: str) -> subprocess.Popen[str]:
    (root / "job.py").write_text(SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen(
        [sys.executable, str(root / "job.py"), str(root), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )


def _stored(root: Path) -> tuple[set[tuple[str, str]], list[tuple[str, str | None, bool]]]:
    with LineageStore(f"sqlite:///{root}/lineage.db") as store:
        edges = {(e.source, e.target) for e in store.edges(process="spark.job/daily_features")}
        with store.engine.connect() as conn:
            runs = [
                (row.status, row.run_id, row.ended_at is not None)
                for row in conn.exec_driver_sql("SELECT status, run_id, ended_at FROM runs")
            ]
    return edges, runs


def _both_writes(root: Path) -> set[tuple[str, str]]:
    return {(location_urn(str(root / "people")), location_urn(str(root / "ids")))}


def test_the_one_line_style_with_only_spark_stop(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "stop")
    _, stderr = driver.communicate(timeout=300)
    assert driver.returncode == 0, stderr[-2000:]

    edges, runs = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    assert [(status, ended) for status, _, ended in runs] == [("COMPLETE", True)]


def test_a_script_ending_by_an_uncaught_exception_fails_its_run(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "raise")
    _, stderr = driver.communicate(timeout=300)
    assert driver.returncode == 1 and "RuntimeError: the job gives up" in stderr

    edges, runs = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    assert [(status, ended) for status, _, ended in runs] == [("FAIL", True)]
    with LineageStore(f"sqlite:///{tmp_path}/lineage.db") as store:
        process = store.node("spark.job/daily_features")
    assert process is not None and process.properties["error_class"] == "RuntimeError"


def _wait_written(driver: subprocess.Popen[str]) -> None:
    assert driver.stdout is not None
    line = driver.stdout.readline()
    if line.strip() != "written":
        driver.kill()
        pytest.fail(f"the driver ended before its writes: {driver.communicate()[1][-2000:]}")


def test_sigterm_ends_the_run_abort_with_its_lineage(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "wait")
    _wait_written(driver)
    driver.send_signal(signal.SIGTERM)
    driver.communicate(timeout=120)
    assert driver.returncode == -signal.SIGTERM  # the signal still ends the driver as it would have

    edges, runs = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    assert [(status, ended) for status, _, ended in runs] == [("ABORT", True)]


def _journals(root: Path) -> list[Path]:
    """The journals beside the store (not those of stored runs put aside for removal)."""
    return sorted(p for p in (root / "lineage.db.spark-runs").iterdir() if not p.name.startswith("."))


def _runs(database: Path) -> dict[str, tuple[str, datetime | None]]:
    """Each stored run's process: its status and end."""
    with LineageStore(f"sqlite:///{database}") as store, store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT nodes.urn, runs.status, runs.ended_at FROM runs JOIN nodes ON nodes.id = runs.process_id"
        )
        return {urn: (status, from_micros(ended) if ended else None) for urn, status, ended in rows}


def test_a_driver_killed_outright_loses_nothing_past_a_second(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "wait-unstored")
    _wait_written(driver)
    time.sleep(1.0)  # what a kill may lose: the last second
    killed_at = datetime.now(UTC)
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=60)

    # nothing was stored (the run's first ingest was an hour away): its journal, beside the store,
    # holds both writes
    edges, runs = _stored(tmp_path)
    assert (edges, runs) == (set(), [])
    (journal,) = _journals(tmp_path)
    assert (journal / "run.json").exists()
    assert journal.stat().st_mode & 0o077 == 0  # plans hold literals: the journal is private

    # the next command finds the driver gone, stores its journal and ends its run ABORT
    result = CliRunner().invoke(app, ["problems", "--db", f"sqlite:///{tmp_path}/lineage.db"])
    assert result.exit_code == 0, result.output
    assert "ended ABORT: its driver" in result.stderr
    assert "2 action(s) stored from its journal" in result.stderr
    edges, runs = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    assert [(status, ended) for status, _, ended in runs] == [("ABORT", True)]
    # ended when it was last heard from: its last action, before the kill
    ended_at = _runs(tmp_path / "lineage.db")["spark.job/daily_features"][1]
    assert ended_at is not None and ended_at < killed_at
    assert _journals(tmp_path) == []

    # and only once
    again = CliRunner().invoke(app, ["problems", "--db", f"sqlite:///{tmp_path}/lineage.db"])
    assert "ended ABORT" not in again.stderr


def test_the_next_tracked_run_stores_what_a_killed_driver_journalled(lake: Lake, tmp_path: Path) -> None:
    driver = _driver(tmp_path, "wait-unstored")
    _wait_written(driver)
    time.sleep(1.0)
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=60)

    with track(lake.spark, "next_job", store=f"sqlite:///{tmp_path}/lineage.db"):
        pass
    edges, _ = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    statuses = {urn: status for urn, (status, _) in _runs(tmp_path / "lineage.db").items()}
    assert statuses == {"spark.job/daily_features": "ABORT", "spark.job/next_job": "COMPLETE"}
    assert _journals(tmp_path) == []


def test_a_run_its_store_refused_at_the_end_keeps_its_journal_and_its_outcome(
    lake: Lake, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "lineage.db"
    LineageStore(f"sqlite:///{database}").close()
    people, out = lake.read("people"), lake.output("refused")
    # a store that takes no write (a real one: SQLite opened read-only) stands for one that is down
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    with caplog.at_level(logging.WARNING, logger="tracelake.spark"):
        with track(lake.spark, "refused", store=read_only) as tracker:
            people.select("id").write.parquet(out)
        assert tracker.wait_stored()
    assert tracker.run.status == "COMPLETE"
    (journal,) = _journals(tmp_path)
    assert any("keeps it for the next tracelake command" in r.getMessage() for r in caplog.records)

    result = CliRunner().invoke(app, ["problems", "--db", str(database)])
    assert result.exit_code == 0, result.output
    assert f"run {tracker.run.run_id} of spark.job/refused ended COMPLETE" in result.stderr
    with LineageStore(f"sqlite:///{database}") as store:
        stored = {(lake.short(e.source), lake.short(e.target)) for e in store.edges()}
    assert _runs(database) == {"spark.job/refused": ("COMPLETE", tracker.run.ended_at)}
    assert stored == {("people", "refused"), ("people#id", "refused#id")}
    assert not journal.exists()


def test_stop_leaves_the_store_write_to_the_worker_and_the_process_reads_it_made(
    lake: Lake, tmp_path: Path
) -> None:
    database = tmp_path / "lineage.db"
    url = f"sqlite:///{database}"
    LineageStore(url).close()
    people, out = lake.read("people"), lake.output("behind")
    tracker = track(lake.spark, "behind", store=url)
    people.select("id").write.parquet(out)
    # another process writing, holding the store's write lock: the run cannot be stored for now
    other_writer = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    other_writer.execute("BEGIN IMMEDIATE")
    try:
        tracker.stop()  # returns though the store is locked: the run's end is in its journal
        assert tracker.run.status == "COMPLETE"
        assert not tracker.wait_stored(timeout=0.5)
        assert _journals(tmp_path)  # stored by no one yet, it is still there to be recovered
        threading.Timer(1.0, other_writer.rollback).start()
        # read while the lock is still held: the read waits for the write this process owes
        runs = _runs(database)
    finally:
        other_writer.close()
    assert runs == {"spark.job/behind": ("COMPLETE", tracker.run.ended_at)}
    with LineageStore(url) as store:
        stored = {(lake.short(e.source), lake.short(e.target)) for e in store.edges()}
    assert stored == {("people", "behind"), ("people#id", "behind#id")}
    assert tracker.wait_stored(timeout=10)
    assert _journals(tmp_path) == []
