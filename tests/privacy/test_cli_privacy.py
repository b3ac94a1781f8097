"""`tracelake privacy …` end to end: real Spark, real SQLite, real Parquet files.

The dataset has 400 rows, id 0…399: `user_id` is "u" + (id mod 40), so "u3" owns the 10 rows
3, 43, …, 363; the identity map holds "e" + id under the key `email`, so "e5" is row 5 alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.privacy import write
from tracelake.privacy.index import INDEX_DIR, STAGING_DIR
from tracelake.privacy.queue import RequestQueue
from tracelake.privacy.requests import dataset_slug
from tracelake.store import LineageStore

pytestmark = pytest.mark.usefixtures("spark")


@pytest.fixture
def lake(spark, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    rows = (
        spark.range(0, 400, numPartitions=2)
        .withColumn("user_id", F.concat(F.lit("u"), (F.col("id") % 40).cast("string")))
        .withColumn(
            "identity_map",
            F.create_map(
                F.lit("email"),
                F.array(
                    F.struct(
                        F.concat(F.lit("e"), F.col("id").cast("string")).alias("id"),
                        F.lit(True).alias("primary"),
                    )
                ),
            ),
        )
        .withColumn("day", (F.col("id") % 2).cast("string"))
    )
    root = tmp_path / "events"
    write(rows, root, identity=["user_id", "identity_map"], partition_by=["day"])
    return root


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def exported_ids(folder: Path) -> list[int]:
    records = [
        json.loads(line) for part in folder.glob("part-*.json") for line in part.read_text().splitlines()
    ]
    return sorted(record["id"] for record in records)


def test_access_then_delete_through_the_queue(spark, lake: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, egress = str(tmp_path / "lineage.db"), tmp_path / "egress"
    assert run("privacy", "declare", str(lake), "-i", "user_id", "-i", "identity_map", "--db", db)[0] == 0
    code, stdout, _ = run("privacy", "targets", "--db", db)
    assert code == 0 and f"file.dataset/{lake}" in stdout and "declared" in stdout

    code, stdout, stderr = run("privacy", "access", "--user", "u3", "--db", db, "--egress", str(egress))
    assert code == 0, stderr
    (request,) = [folder for folder in egress.iterdir() if folder.is_dir()]
    assert exported_ids(request / dataset_slug(lake)) == list(range(3, 400, 40))
    receipt = json.loads((request / "receipt.json").read_text())
    assert receipt["rows"] == 10 and receipt["kind"] == "access"
    assert "u3" not in json.dumps(receipt)

    users = tmp_path / "users.txt"
    users.write_text("u3\n\ne5\n")
    code, stdout, stderr = run("privacy", "delete", "--users", str(users), "--db", db)
    assert code == 0, stderr
    left = spark.read.parquet(str(lake))
    assert left.count() == 400 - 10 - 1
    assert left.where("user_id = 'u3' or id = 5").count() == 0

    code, stdout, _ = run("privacy", "requests", "--db", db)
    assert code == 0 and stdout.count(" done ") == 3
    code, stdout, _ = run("privacy", "audit", "--db", db)
    assert code == 0
    # Whole words: request ids are random hex, which can hold "e5" by chance.
    assert not re.search(r"\b(u3|e5)\b", stdout)
    assert stdout.count("submitted") == 3 and stdout.count(" done ") == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\n  \n", "holds no user id"),
        (b"u1\n\xff\xfe\n", "not UTF-8"),
        (b"u1\n" + b"x" * 2000, ":2: not a user id"),
    ],
)
def test_a_malformed_id_file_is_refused_before_anything_runs(
    tmp_path: Path, content: bytes, message: str
) -> None:
    users = tmp_path / "users.txt"
    users.write_bytes(content)
    db = str(tmp_path / "lineage.db")

    code, _, stderr = run("privacy", "delete", "--users", str(users), "--db", db)

    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr
    assert "no privacy requests" not in run("privacy", "requests", "--db", db)[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["privacy", "access"], "either --user ID or --users FILE"),
        (["privacy", "delete", "--user", "u1", "--users", "x.txt"], "either --user ID or --users FILE"),
        (["privacy", "delete", "--user", "u1", "--dataset", "/no/such/lake"], "does not exist"),
        (["privacy", "run", "erase"], "kind must be access or delete"),
        (["privacy", "declare", "/no/such/lake", "-i", "user_id"], "dataset /no/such/lake does not exist"),
    ],
)
def test_bad_requests_get_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    code, _, stderr = run(*args, "--db", str(tmp_path / "lineage.db"))
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("where", "column", "message"),
    [
        ("lake", "email", "identity column 'email' is not in the data"),
        ("/no/such/lake", "user_id", "no dataset at /no/such/lake"),
        ("s3a://bucket/events", "user_id", "datasets on s3a: are not supported yet"),
    ],
)
def test_indexing_what_is_not_there_says_what(lake: Path, where: str, column: str, message: str) -> None:
    code, _, stderr = run("privacy", "index", str(lake) if where == "lake" else where, "-i", column)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr


# -- a run killed mid-way ------------------------------------------------------------------------


def killed_mid_delete(lake: Path, db: str) -> int:
    """Run `tracelake privacy run delete` in a process of its own and SIGKILL it once it is
    rewriting files (its staging folder is there), as `kill -9` would; its pid."""
    staging = lake / INDEX_DIR / STAGING_DIR
    tracelake = str(Path(sys.executable).parent / "tracelake")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "TRACELAKE_SPARK_MASTER": "local[2]"}
    log = Path(db).with_suffix(".run.log")
    with log.open("wb") as stderr:
        runner = subprocess.Popen(
            [tracelake, "privacy", "run", "delete", "--db", db],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            start_new_session=True,  # its own process group, which its Spark JVM joins
        )
    try:
        deadline = time.monotonic() + 300
        while not any(staging.glob("delete-*")):
            assert runner.poll() is None, f"the run ended before it was killed: {log.read_text()}"
            assert time.monotonic() < deadline, "the run never began rewriting"
            time.sleep(0.01)
        runner.send_signal(signal.SIGKILL)
        runner.wait(30)
        # The JVM the run started ends when its driver's pipe closes; wait for it, so that nothing
        # of the dead run still writes while the next one starts.
        while group_runs(runner.pid):
            assert time.monotonic() < deadline, "the dead run's JVM goes on"
            time.sleep(0.05)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(30)
    return runner.pid


def group_runs(group: int) -> bool:
    """Whether a process of the process group still runs (a zombie runs nothing)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue  # gone while we looked
        if int(pgrp) == group and state != "Z":
            return True
    return False


def stored_text(db: str) -> str:
    """Every row of every table of the SQLite store, as text."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return "\n".join(conn.iterdump())


@pytest.mark.parametrize("next_run", [("delete", "--user", "u3"), ("run", "access")])
def test_a_delete_killed_mid_way_is_finished_by_the_next_run_and_its_id_leaves_the_store(
    spark, lake: Path, tmp_path: Path, next_run: tuple[str, ...]
) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "lineage.db")
    assert run("privacy", "declare", str(lake), "-i", "user_id", "-i", "identity_map", "--db", db)[0] == 0
    assert run("privacy", "delete", "--user", "u3", "--queue-only", "--db", db)[0] == 0
    with LineageStore(db) as store:
        (request,) = RequestQueue(store).list()

    pid = killed_mid_delete(lake, db)

    with LineageStore(db) as store:
        left = RequestQueue(store).get(request.id)
    assert left.status == "running" and left.ids == ("u3",)  # as the tester found it
    assert spark.read.parquet(str(lake)).where("user_id = 'u3'").count() == 10

    # Asking again for u3, or running anything: the dead run's request is finished first, and
    # no second request is made.
    egress = ["--egress", str(tmp_path / "egress")] if "access" in next_run else []
    code, stdout, stderr = run("privacy", *next_run, *egress, "--db", db)
    assert code == 0, stderr
    assert f"{request.id} " in stdout and "done (resumed" in stdout

    assert spark.read.parquet(str(lake)).where("user_id = 'u3'").count() == 0
    assert spark.read.parquet(str(lake)).count() == 390
    assert not any((lake / INDEX_DIR / STAGING_DIR).glob("*"))
    with LineageStore(db) as store:
        queue = RequestQueue(store)
        assert [(r.id, r.status) for r in queue.list()] == [(request.id, "done")]
        again = ["resubmitted"] if next_run[0] == "delete" else []
        assert [e.event for e in queue.audit(request.id)] == [
            "submitted",
            "started",
            *again,
            "resumed",
            "done",
        ]
    assert f"pid {pid}" in stored_text(db)  # the audit says whose run died
    # No raw id left anywhere in the store's tables, nor in its file: a fingerprint only.
    assert not re.search(r"\bu3\b", stored_text(db))
    for file in tmp_path.glob("lineage.db*"):  # the WAL too, if one is left
        assert b'"u3"' not in file.read_bytes(), file
    assert run("privacy", "run", "delete", "--db", db)[1].strip() == "no delete request waiting"
