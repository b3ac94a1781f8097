"""Access and delete on a generated lake, compared row for row with a plain PySpark filter.

The lake has five identity columns of every shape (a string, a long, an e-mail string, an
identity map `map<string, array<struct<id, primary>>>` and `array<struct<id, kind>>`), nulls
at every level (null maps, null lists among a map's values, null structs, null ids, null
elements), a heavy user in every file, exact duplicate rows, ids that only appear inside maps,
and ids that differ from others only by case or surrounding spaces. The reference answer is a
filter written by hand for this schema, over every original file: no index, no code under test.

Access must export exactly the reference rows of each request (as a multiset: duplicates
count), with per-file counts in its receipt; delete must leave exactly the original rows minus
the reference rows, leave files holding none of the ids byte for byte as they were, and leave an
index that `privacy verify` finds right.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyspark.sql import functions as F

from tests.privacy.conftest import copy_dataset
from tracelake.privacy import write
from tracelake.privacy.index import list_data_files
from tracelake.privacy.requests import access, dataset_slug, delete
from tracelake.privacy.search import Batch, Dataset, plan_scan
from tracelake.privacy.verify import verify

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

IDENTITY = ["user_id", "email", "identity_map", "devices", "legacy_id"]
SCHEMA = (
    "seq long, user_id string, email string, "
    "identity_map map<string, array<struct<id:string, primary:boolean>>>, "
    "devices array<struct<id:string, kind:string>>, legacy_id long, payload string, day int"
)
USERS = 300
ROWS_PER_USER = 10
SLICES = 4


def lake_rows(seed: int = 29) -> list[tuple[Any, ...]]:
    """Rows of the lake: user `u{k}` owns rows 10k…10k+9 (so lives in one slice of the write)."""
    rng = random.Random(seed)
    rows: list[tuple[Any, ...]] = []
    for seq in range(USERS * ROWS_PER_USER):
        k = seq // ROWS_PER_USER
        user = f"u{k}"
        if k % 20 == 7:  # the same person under other spellings: distinct ids by the contract
            user = rng.choice([f"u{k}", f"U{k}", f"u{k} ", f" u{k}"])
        if seq % 16 == 5:
            user = "heavy"  # in every file
        identity_map: dict[str, Any] | None = {
            "ECID": [{"id": f"ecid-{k}", "primary": True}],
            "email": [{"id": f"m{k}@xdm.test", "primary": False}],
        }
        shape = rng.randrange(8)
        if shape == 0:
            identity_map = None
        elif shape == 1:
            identity_map = {}
        elif shape == 2:
            identity_map["phone"] = None  # a null list beside the others
        elif shape == 3:
            identity_map["email"] = [
                None,
                {"id": None, "primary": None},
                {"id": f"m{k}@xdm.test", "primary": None},
            ]
        if k % 3 == 0 and seq % ROWS_PER_USER == 4:  # ids found only in maps
            identity_map = (identity_map or {}) | {"loyalty": [{"id": f"mo{k}", "primary": False}]}
        devices: list[Any] | None = [{"id": f"d{k}", "kind": "phone"}]
        if seq % 6 == 1:
            devices = None
        elif seq % 6 == 2:
            devices = [None, {"id": None, "kind": None}, {"id": f"d{k}", "kind": None}]
        elif seq % 6 == 3:
            devices = []
        email = None if seq % 4 == 0 else f"e{k}@mail.test" if seq % 4 != 3 else f"E{k}@Mail.test"
        legacy = None if seq % 9 == 0 else 10_000 + k
        row = (seq, user, email, identity_map, devices, legacy, f"payload-{seq}", seq % 3)
        rows.append(row)
        if seq % 13 == 0:
            rows.append(row)  # an exact duplicate
    return rows


def reference(ids: Sequence[str]) -> Column:
    """Whether a row holds any of `ids`: written by hand for this schema, never null."""
    wanted = list(ids)
    in_map = F.exists(
        F.map_values("identity_map"), lambda ids_of: F.exists(ids_of, lambda s: s["id"].isin(wanted))
    )
    in_devices = F.exists("devices", lambda device: device["id"].isin(wanted))
    holds = (
        F.col("user_id").isin(wanted)
        | F.col("email").isin(wanted)
        | F.col("legacy_id").cast("string").isin(wanted)
        | in_map
        | in_devices
    )
    return F.coalesce(holds, F.lit(False))


def canonical(rows: list[Any]) -> Counter[str]:
    return Counter(json.dumps(row.asDict(recursive=True), sort_keys=True) for row in rows)


def relative_file(root: Path) -> Column:
    return F.regexp_replace(F.input_file_name(), f"^.*?{root.name}/", "")


def file_digests(root: Path) -> dict[str, tuple[str, int]]:
    return {
        path: (hashlib.sha256((root / path).read_bytes()).hexdigest(), data_file.mtime_ns)
        for path, data_file in list_data_files(root).items()
    }


class Lake:
    """The written lake, read-only (tests copy it before deleting), and its reference answers."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark = spark
        self.root = root
        self.all = spark.read.parquet(str(root)).withColumn("_file", relative_file(root)).cache()

    def rows(self, df: DataFrame | None = None) -> Counter[str]:
        return canonical((self.all if df is None else df).drop("_file").collect())

    def holding(self, ids: Sequence[str]) -> DataFrame:
        return self.all.where(reference(ids))

    def per_file(self, ids: Sequence[str]) -> dict[str, int]:
        return {row["_file"]: row["count"] for row in self.holding(ids).groupBy("_file").count().collect()}


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    root = tmp_path_factory.mktemp("differential") / "events"
    df = spark.createDataFrame(spark.sparkContext.parallelize(lake_rows(), SLICES), SCHEMA)
    write(df, root, identity=IDENTITY, partition_by=["day"])
    return Lake(spark, root)


def pool_ids(lake_rows_: list[tuple[Any, ...]]) -> list[str]:
    found: set[str] = set()
    for _, user, email, identity_map, devices, legacy, _, _ in lake_rows_:
        found.update(value for value in (user, email) if value is not None)
        if legacy is not None:
            found.add(str(legacy))
        for ids in (identity_map or {}).values():
            found.update(entry["id"] for entry in ids or [] if entry and entry["id"] is not None)
        found.update(device["id"] for device in devices or [] if device and device["id"] is not None)
    return sorted(found)


def requests() -> dict[str, list[str]]:
    """The issue's request shapes; each id set checked by hand against `lake_rows`' formulas."""
    rows = lake_rows()
    pool = pool_ids(rows)
    rng = random.Random(7)
    null_list_row = next(row for row in rows if row[3] and "phone" in row[3] and row[3]["phone"] is None)
    absent = [f"absent-{n}" for n in range(50)]
    return {
        "heavy": ["heavy"],
        "one-file": ["u42"],
        "absent": ["nobody@nowhere"],
        "map-only": ["mo33"],  # k = 33: ids under "loyalty" only
        "null-list": [null_list_row[3]["ECID"][0]["id"]],
        "exact-case": ["u7", "e27@mail.test"],  # beside U7, "u7 ", E27@Mail.test
        "hundred": rng.sample(pool, 90) + absent[:10],
        "thousand": rng.sample(pool, 960) + absent[:40],
    }


def test_the_generated_lake_has_every_shape_the_requests_rely_on(lake: Lake) -> None:
    """The reference is only as good as the lake: check the shapes are there, by hand."""
    rows = lake_rows()
    loyalty = [row for row in rows if row[3] and "loyalty" in row[3] and row[3]["loyalty"][0]["id"] == "mo33"]
    assert loyalty, "mo33 must be in some map"
    assert all("mo33" not in (row[1], row[2]) for row in rows)
    spellings = {row[1] for row in rows if row[1] and row[1].strip().lower() == "u7"}
    assert len(spellings) > 1, spellings
    assert lake.per_file(["heavy"]).keys() == set(list_data_files(lake.root))
    assert len(lake.per_file(["u42"])) == 3  # one slice, three days
    assert lake.holding(["nobody@nowhere"]).count() == 0


def test_access_exports_exactly_what_a_plain_filter_finds_for_every_request(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    batch = Batch(requests())
    receipts = access(spark, batch, [Dataset(lake.root, IDENTITY)], tmp_path)
    schema = spark.read.parquet(str(lake.root)).schema
    # The ids as the batch took them: surrounding spaces dropped (" u7" asks for "u7").
    for request, ids in batch.ids_by_request.items():
        expected = lake.rows(lake.holding(ids))
        folder = tmp_path / request / dataset_slug(lake.root)
        exported = (
            canonical(spark.read.schema(schema).json(str(folder)).collect()) if folder.exists() else Counter()
        )
        assert exported == expected, request
        scan = receipts[request].datasets[0]
        assert receipts[request].rows == sum(expected.values()), request
        assert scan.rows_by_file == dict(sorted(lake.per_file(ids).items())), request
    assert receipts["absent"].rows == 0
    assert receipts["heavy"].datasets[0].read == len(list_data_files(lake.root))


@pytest.mark.parametrize("request_name", sorted(requests()))
def test_the_index_never_rules_out_a_file_a_plain_filter_finds_rows_in(lake: Lake, request_name: str) -> None:
    batch = Batch({request_name: requests()[request_name]})
    plan = plan_scan(Dataset(lake.root, IDENTITY), batch)
    assert set(lake.per_file(batch.ids)) <= set(plan.candidates)
    if request_name in ("one-file", "map-only", "absent"):
        assert plan.skipped >= len(list_data_files(lake.root)) - 4, plan.candidates


@pytest.mark.parametrize(
    "requests_deleted",
    [["heavy", "one-file", "absent", "map-only", "null-list", "exact-case"], ["hundred"], ["thousand"]],
)
def test_delete_leaves_exactly_the_rows_a_plain_filter_does_not_hold_and_touches_no_other_file(
    spark: SparkSession, lake: Lake, tmp_path: Path, requests_deleted: list[str]
) -> None:
    batch = Batch({request: ids for request, ids in requests().items() if request in requests_deleted})
    asked = batch.ids_by_request
    ids = batch.ids
    root = copy_dataset(lake.root, tmp_path / "events")
    before = file_digests(root)
    holding = lake.per_file(ids)

    receipts = delete(spark, batch, [Dataset(root, IDENTITY)])

    after = spark.read.parquet(str(root))
    assert canonical(after.collect()) == lake.rows(lake.all.where(~reference(ids)))
    digests = file_digests(root)
    for path, digest in before.items():
        if path not in holding:
            assert digests.get(path) == digest, f"{path} holds none of the ids but was changed"
        else:
            assert digests.get(path) != digest, f"{path} holds requested rows but was not rewritten"
    for request, request_ids in asked.items():
        assert receipts[request].datasets[0].rows_by_file == dict(sorted(lake.per_file(request_ids).items()))
    again = delete(spark, batch, [Dataset(root, IDENTITY)])
    assert sum(receipt.rows for receipt in again.values()) == 0
    report = verify(root)
    assert report.ok and not report.unindexed, [wrong.describe() for wrong in report.wrong]


def test_a_delete_of_an_id_keeps_the_rows_of_ids_that_differ_only_by_case_or_spaces(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    root = copy_dataset(lake.root, tmp_path / "events")
    delete(spark, Batch({"r": ["u7"]}), [Dataset(root, IDENTITY)])
    kept = {row["user_id"] for row in spark.read.parquet(str(root)).select("user_id").collect()}
    assert "u7" not in kept
    others = {row[1] for row in lake_rows() if row[1] in ("U7", "u7 ", " u7")}
    assert others and others <= kept
