"""Spark fixtures for the privacy tests: a small "people" dataset whose every value follows a formula.

Row `seq` (0…1999) of the people data is fully determined by `seq`, so a test can say by hand
which rows hold an id: user `u{seq // 20}` (20 consecutive rows each), account
`500000 + seq // 40` (a long), e-mails `e{seq // 25}@mail.test` and `alt{seq // 25}@mail.test`
(an array), and an XDM identity map with `ecid-{seq // 10}` under `ECID`, `m{seq // 20}@xdm.test`
under `email` and, on every 7th row, `+47-{seq // 50}` under `phone`. The rows are cut into 4
contiguous Spark partitions of 500 (so a write makes one file per slice and day), and each user
lives in one slice: most files cannot hold a given id. Rows 1980…1999 (user u99) are alone on
day 2, so erasing u99 empties a whole file.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tracelake.privacy import DatasetIndex, WriteReport, write
from tracelake.privacy.index import list_data_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROWS = 2000
SLICES = 4
IDENTITY = ["user_id", "account", "emails", "identities"]
COLUMNS = ["seq", "user_id", "account", "emails", "identities", "payload", "day"]
SCHEMA = (
    "seq long, user_id string, account long, emails array<string>, "
    "identities map<string, array<struct<id:string, primary:boolean>>>, payload string, day int"
)


def person(seq: int) -> dict[str, Any]:
    """Row `seq` of the people data, as Spark hands it back (maps and structs as dicts)."""
    identities: dict[str, list[dict[str, Any]]] = {
        "ECID": [{"id": f"ecid-{seq // 10}", "primary": True}],
        "email": [{"id": f"m{seq // 20}@xdm.test", "primary": False}],
    }
    if seq % 7 == 0:
        identities["phone"] = [{"id": f"+47-{seq // 50}", "primary": False}]
    return {
        "seq": seq,
        "user_id": f"u{seq // 20}",
        "account": 500_000 + seq // 40,
        "emails": [f"e{seq // 25}@mail.test", f"alt{seq // 25}@mail.test"],
        "identities": identities,
        "payload": f"secret-{seq:05d}",
        "day": 2 if seq >= 1980 else seq % 2,
    }


def ids_of(record: dict[str, Any]) -> set[str]:
    """Every id a people row holds, worked out from the row (not by the code under test)."""
    found = {record["user_id"], str(record["account"]), *record["emails"]}
    found |= {entry["id"] for entries in record["identities"].values() for entry in entries}
    return found


def people(rows: Iterable[int] = range(ROWS)) -> list[dict[str, Any]]:
    return [person(seq) for seq in rows]


def frame(spark: SparkSession, records: list[dict[str, Any]], slices: int = SLICES) -> DataFrame:
    """The records as a DataFrame of `slices` contiguous partitions, in the people schema's order."""
    tuples = [tuple(record[name] for name in COLUMNS) for record in records]
    return spark.createDataFrame(spark.sparkContext.parallelize(tuples, slices), SCHEMA)


def canonical(record: dict[str, Any]) -> str:
    """One record as comparable text (nested dicts and lists included)."""
    return json.dumps(record, sort_keys=True)


def collected(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def as_set(records: Iterable[dict[str, Any]]) -> set[str]:
    return {canonical(record) for record in records}


def copy_dataset(source: Path, target: Path) -> Path:
    """A copy that keeps modification times, so the copied index still matches the copied files."""
    shutil.copytree(source, target)
    return target


def fresh_files(root: Path, columns: Iterable[str] = IDENTITY) -> set[str]:
    return set(DatasetIndex.load(root).fresh(list_data_files(root), list(columns)))


@dataclass(frozen=True)
class Written:
    """The people dataset as one indexed write made it (read-only: copy it before changing it)."""

    root: Path
    report: WriteReport


@pytest.fixture(scope="session")
def people_lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """The people data written once with `write(...)`, partitioned by day: 9 files."""
    root = tmp_path_factory.mktemp("lake") / "people"
    report = write(frame(spark, people()), root, identity=IDENTITY, partition_by=["day"])
    return Written(root, report)
