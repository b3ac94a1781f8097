"""How a tracked run ends when the script never says so, on real Spark in a driver of its own (a
subprocess: these scenarios end the interpreter, which the suite's one session must outlive).

The script attaches Tracelake in one line, writes a dataset and then a second one from the first,
and ends: by `spark.stop()` alone, by an uncaught exception, by SIGTERM, or killed with SIGKILL.
Each time both writes' lineage must be in the store; the run is COMPLETE, FAIL, ABORT, and after
SIGKILL RUNNING until the next `tracelake` command finds its driver gone and ends it ABORT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.names import location_urn
from tracelake.store import LineageStore

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pyspark.sql import SparkSession
    import tracelake.spark

    root, how = sys.argv[1], sys.argv[2]
    spark = (
        SparkSession.builder.master("local[1]").appName("endings")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tracelake.spark.track(spark, job="daily_features", store=f"sqlite:///{root}/lineage.db")
    spark.createDataFrame([(1, "Ada"), (2, "Linus")], "id int, name string").write.parquet(f"{root}/people")
    spark.read.parquet(f"{root}/people").select("id").write.parquet(f"{root}/ids")
    if how == "stop":
        spark.stop()
    elif how == "raise":
        raise RuntimeError("the job gives up")
    else:  # wait to be killed
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


def test_a_driver_killed_outright_loses_nothing_past_a_second(tmp_path: Path) -> None:
    driver = _driver(tmp_path, "wait")
    _wait_written(driver)
    time.sleep(2.5)  # the tracker ingests a finished action's lineage within about a second
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=60)

    edges, runs = _stored(tmp_path)
    assert _both_writes(tmp_path) <= edges
    assert [(status, ended) for status, _, ended in runs] == [("RUNNING", False)]

    # the next command finds the driver gone and ends its run, as when it was last heard from
    result = CliRunner().invoke(app, ["problems", "--db", f"sqlite:///{tmp_path}/lineage.db"])
    assert result.exit_code == 0, result.output
    assert "ended ABORT: its driver" in result.stderr
    _, runs = _stored(tmp_path)
    assert [(status, ended) for status, _, ended in runs] == [("ABORT", True)]
