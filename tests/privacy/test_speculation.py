"""Speculative execution (and a retry) never binds the wrong attempt's filter to a data file.

Under `spark.speculation` two attempts of one task can both run the indexed write's sink, and
both stage a filter; only the attempt Spark lets commit wrote the data file that stays. The
scenario here makes the two attempts differ and the loser stage last, the case where "the newest
attempt wins" would bind the loser's filter:

- a standalone Spark cluster of two one-core workers on two loopback addresses (127.0.0.1 and
  127.0.0.2: Spark never runs a task's speculative copy on a host where it already runs, so one
  host cannot speculate);
- each row's id carries the attempt that wrote it (`u<n>-a<attempt>`), so the two attempts'
  files hold the same number of rows but different ids;
- attempt 0 of partition 0 sleeps at its first row, so Spark launches attempt 1 on the other
  worker; attempt 1 stages its filter and then sleeps (a fault injected into the sink through a
  `sitecustomize` on the executors' Python path, after the real staging), so attempt 0 commits.

The data file of partition 0 must then hold attempt 0's ids, and its filter must answer for
every one of them. A retry is the other way two attempts stage: attempt 0 fails after staging,
attempt 1 commits, and its filter must be the one bound. The cluster and the driver are
processes of their own: the suite's one session is `local[2]`, and a local master cannot
speculate.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.net import free_port
from tracelake.privacy import DatasetIndex, hash_ids
from tracelake.privacy.index import list_data_files

HOSTS = ("127.0.0.1", "127.0.0.2")
SLOW_START = 12  # seconds attempt 0 of partition 0 sleeps before its first row
LOSER_SLEEP = 90  # seconds attempt 1 sleeps after staging: it must lose the commit

DRIVER = textwrap.dedent(
    """
    import json, sys, time
    from pyspark import TaskContext
    from pyspark.sql import SparkSession, functions as F
    from tracelake.privacy import write

    master, root, python, hooks, slow = sys.argv[1:6]
    spark = (
        SparkSession.builder.master(master).appName("tracelake-speculation")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.cores", "1").config("spark.cores.max", "2")
        .config("spark.executor.memory", "512m")
        .config("spark.speculation", "true").config("spark.speculation.interval", "100ms")
        .config("spark.speculation.quantile", "0.5").config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.minTaskRuntime", "500ms")
        .config("spark.speculation.efficiency.enabled", "false")
        .config("spark.pyspark.python", python).config("spark.executorEnv.PYTHONPATH", hooks)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + 120
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and 2
        if time.monotonic() > deadline:
            sys.exit("the two executors never registered")
        time.sleep(0.2)

    def tagged(n):
        attempt = TaskContext.get().attemptNumber()
        if n == 0 and attempt == 0:
            time.sleep(float(slow))
        return f"u{n}-a{attempt}"

    rows = spark.range(0, 2000, 1, 2).select(F.udf(tagged)("id").alias("user_id"), "id")
    report = write(rows, root, identity=["user_id"])
    print(json.dumps({"files": report.files, "indexed": report.indexed, "unindexed": report.unindexed}))
    """
)

HOOK = textwrap.dedent(
    """
    # Test fault injection (tests/privacy/test_speculation.py): after the sink stages its filters,
    # note the attempt; then hold back any speculative copy so it loses the commit ("hold"), or
    # fail attempt 0 of partition 0 so it is retried ("fail").
    import time
    from pathlib import Path

    MARKERS, LOSER_SLEEP, MODE = {markers!r}, {sleep}, {mode!r}

    def _install():
        from pyspark import TaskContext
        from tracelake.privacy import writer

        staged = writer._TaskFilters.finish

        def finish(self):
            staged(self)
            context = TaskContext.get()
            Path(MARKERS, f"p{{context.partitionId()}}-a{{context.attemptNumber()}}").touch()
            if MODE == "hold" and context.attemptNumber() > 0:
                time.sleep(LOSER_SLEEP)
            if MODE == "fail" and context.attemptNumber() == 0 and context.partitionId() == 0:
                raise RuntimeError("injected: attempt 0 fails after staging its filters")

        writer._TaskFilters.finish = finish

    try:
        _install()
    except ImportError:  # not a Python that runs tasks
        pass
    """
)


def _spark_env() -> dict[str, str]:
    import pyspark

    return {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and two one-core workers, one per loopback address; its master URL."""
    import pyspark

    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.fail("no Java: the speculation test starts a Spark cluster")
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    tmp_path = tmp_path_factory.mktemp("cluster")
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    logs = tmp_path / "cluster-logs"
    logs.mkdir()
    commands = [
        ["org.apache.spark.deploy.master.Master", "--host", HOSTS[0], "--port", str(port),
         "--webui-port", "0"],
        *[
            [
                "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1", "--memory", "1g",
                "--webui-port", "0", "--work-dir", str(tmp_path / f"worker-{n}"), master,
            ]
            for n, host in enumerate(HOSTS)
        ],
    ]  # fmt: skip
    processes = []
    try:
        for n, command in enumerate(commands):
            with open(logs / f"{n}.log", "wb") as log:
                processes.append(
                    subprocess.Popen(
                        [spark_class, *command],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=_spark_env(),
                        start_new_session=True,  # its executors die with it
                    )
                )
            if n == 0:
                _wait_for_port(port, processes[0], logs / "0.log")
        yield master
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the Spark master exited: {log.read_text()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail("the Spark master did not listen within 60 s")


def written(cluster: str, tmp_path: Path, mode: str, slow: int) -> tuple[dict[str, Any], set[str], Path]:
    """Runs the driver on the cluster with the sink's fault `mode`: its report, the attempts that
    staged filters (`p<partition>-a<attempt>`) and the dataset's root."""
    root, hooks, markers = tmp_path / "lake", tmp_path / "hooks", tmp_path / "markers"
    hooks.mkdir()
    markers.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK.format(markers=str(markers), sleep=LOSER_SLEEP, mode=mode))
    (tmp_path / "driver.py").write_text(DRIVER)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "driver.py"), cluster, str(root), sys.executable, str(hooks),
         str(slow)],
        capture_output=True, text=True, env=_spark_env(), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report, {path.name for path in markers.iterdir()}, root


def check_every_file_is_bound_to_its_own_ids(root: Path, committed: str) -> None:
    """Each data file's filter answers for every id in it; partition 0's file is `committed`'s."""
    files = list_data_files(root)
    fresh = DatasetIndex.load(root).fresh(files)
    for relative in files:
        ids = pq.read_table(root / relative, columns=["user_id"])["user_id"].to_pylist()
        assert len(ids) == 1000
        if "u0-a0" in ids or "u0-a1" in ids:  # partition 0's file: the attempt that committed wrote it
            assert f"u0-{committed}" in ids, f"attempt {committed} was meant to commit partition 0"
        (stored,) = fresh[relative]
        answers = stored.filter.might_contain(hash_ids(ids))
        missed = [value for value, hit in zip(ids, answers, strict=True) if not hit]
        assert not missed, f"{relative}'s filter misses {len(missed)} of its ids, e.g. {missed[:3]}"


def test_a_speculative_copy_that_staged_last_but_lost_the_commit_never_gets_its_filter_bound(
    cluster: str, tmp_path: Path
) -> None:
    report, staged, root = written(cluster, tmp_path, "hold", SLOW_START)

    assert {"p0-a0", "p0-a1"} <= staged, f"no speculative copy staged a filter (staged: {sorted(staged)})"
    assert report == {"files": 2, "indexed": 2, "unindexed": []}
    check_every_file_is_bound_to_its_own_ids(root, committed="a0")


def test_a_retried_task_gets_the_filter_of_the_attempt_that_succeeded(cluster: str, tmp_path: Path) -> None:
    report, staged, root = written(cluster, tmp_path, "fail", 0)

    assert {"p0-a0", "p0-a1"} <= staged, f"attempt 0 did not stage before failing (staged: {sorted(staged)})"
    assert report == {"files": 2, "indexed": 2, "unindexed": []}
    check_every_file_is_bound_to_its_own_ids(root, committed="a1")
