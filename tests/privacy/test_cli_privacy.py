"""`tracelake privacy …` end to end: real Spark, real SQLite, real Parquet files.

The dataset has 400 rows, id 0…399: `user_id` is "u" + (id mod 40), so "u3" owns the 10 rows
3, 43, …, 363; the identity map holds "e" + id under the key `email`, so "e5" is row 5 alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.privacy import write
from tracelake.privacy.requests import dataset_slug

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
    ],
)
def test_bad_requests_get_one_clear_line(tmp_path: Path, args: list[str], message: str) -> None:
    code, _, stderr = run(*args, "--db", str(tmp_path / "lineage.db"))
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("where", "column", "message"),
    [
        ("lake", "email", "identity column 'email' is not in the data"),
        ("/no/such/lake", "user_id", "no dataset at /no/such/lake"),
    ],
)
def test_indexing_what_is_not_there_says_what(lake: Path, where: str, column: str, message: str) -> None:
    code, _, stderr = run("privacy", "index", str(lake) if where == "lake" else where, "-i", column)
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr
