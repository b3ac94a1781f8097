"""What an indexed write and an index build promise: plain Parquet, and an index that never lies.

`write` must leave data that any Spark reader sees exactly as the input (partitioned or not,
appended or overwritten), with a fresh filter for every data file and identity column; planning
must rule out the files that cannot hold an id and never a file that does, whatever its depth in
an identity column; bad input must fail before a byte is written. `build_index` must index what
plain Spark wrote, only what is not indexed yet, and notice files rewritten behind its back.
Expected rows and ids come from the people formula in `conftest.py`, not from the code under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from tests.privacy.conftest import (
    IDENTITY,
    ROWS,
    SLICES,
    Written,
    as_set,
    collected,
    frame,
    fresh_files,
    ids_of,
    people,
    person,
)
from tracelake.privacy import DatasetIndex, IdentityError, build_index, hash_ids, write
from tracelake.privacy.index import DatasetLocationError, ScanPlan, list_data_files
from tracelake.privacy.search import Dataset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def plan_for(root: Path, user_id: str, columns: list[str] = IDENTITY) -> ScanPlan:
    return DatasetIndex.load(root).plan(hash_ids([user_id]), columns=columns)


def relative(root: Path, uri: str) -> str:
    return Path(unquote(urlparse(uri).path)).relative_to(root).as_posix()


def ids_by_file(spark: SparkSession, root: Path) -> dict[str, set[str]]:
    """The truth, from a full scan: the ids each data file holds, found in Python from its rows."""
    df = spark.read.parquet(str(root)).select(F.input_file_name().alias("file"), *IDENTITY)
    found: dict[str, set[str]] = {}
    for record in collected(df):
        found.setdefault(relative(root, record["file"]), set()).update(ids_of(record))
    return found


def check_no_file_holding_an_id_is_ruled_out(spark: SparkSession, root: Path) -> tuple[int, int]:
    """Plans every id of the dataset alone; returns (files wrongly kept, files that could be skipped)."""
    truth = ids_by_file(spark, root)
    index = DatasetIndex.load(root)
    files = list_data_files(root)
    assert set(truth) == set(files)
    kept_wrongly = could_skip = 0
    for user_id in sorted(set().union(*truth.values())):
        holders = {path for path, ids in truth.items() if user_id in ids}
        plan = index.plan(hash_ids([user_id]), files=files)
        assert holders <= set(plan.candidates), f"{user_id} is in {holders - set(plan.candidates)}"
        kept_wrongly += len(set(plan.candidates) - holders)
        could_skip += len(files) - len(holders)
    return kept_wrongly, could_skip


def read_back(spark: SparkSession, root: Path) -> DataFrame:
    return spark.read.parquet(str(root))


# -- write: the data ------------------------------------------------------------------------------


def test_a_partitioned_write_reads_back_as_plain_parquet_with_the_same_rows_and_columns(
    spark: SparkSession, people_lake: Written
) -> None:
    source = frame(spark, people())
    data = read_back(spark, people_lake.root)

    assert as_set(collected(data)) == as_set(people())
    # Spark moves partition columns to the end; names and types are what the input had.
    assert {(f.name, f.dataType.simpleString()) for f in data.schema.fields} == {
        (f.name, f.dataType.simpleString()) for f in source.schema.fields
    }
    # 4 slices × days 0 and 1, plus the last slice's day 2: one file per (task, partition).
    assert sorted(path.split("/")[0] for path in list_data_files(people_lake.root)) == [
        "day=0",
        "day=0",
        "day=0",
        "day=0",
        "day=1",
        "day=1",
        "day=1",
        "day=1",
        "day=2",
    ]


@pytest.mark.parametrize("identity", [["user_id", "identities"], ["user_id"], ["identities"]])
def test_an_unpartitioned_write_reads_back_with_the_same_rows(
    spark: SparkSession, tmp_path: Path, identity: list[str]
) -> None:
    # A lone identity column reaches the sink as a bare array, not a tuple: both must work.
    records = people(range(600))
    report = write(frame(spark, records, slices=2), tmp_path / "flat", identity=identity)

    assert as_set(collected(read_back(spark, tmp_path / "flat"))) == as_set(records)
    assert (report.files, report.indexed, report.unindexed) == (2, 2, [])
    assert all("/" not in path for path in list_data_files(tmp_path / "flat"))


def test_a_dataset_named_by_a_file_uri_is_written_indexed_and_planned_as_its_local_folder(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "a lake"  # a space: escaped in a URI, not in the folder's name
    records = people(range(200))
    uri = "file://" + quote(str(root))
    report = write(frame(spark, records, slices=2), uri, identity=IDENTITY)

    assert report.path == root
    assert (report.files, report.indexed, report.unindexed) == (2, 2, [])
    assert as_set(collected(read_back(spark, root))) == as_set(records)
    holders = {path for path, ids in ids_by_file(spark, root).items() if "u3" in ids}
    for spelled in (uri, f"file:{root}", "file://localhost" + quote(str(root))):
        plan = DatasetIndex.load(spelled).plan(hash_ids(["u3"]))
        assert plan.root == root
        assert holders <= set(plan.candidates)
        assert Dataset.resolve(spelled, IDENTITY).root == root


@pytest.mark.parametrize(
    "uri",
    [
        "s3a://bucket/events",
        "gs://bucket/events",
        "abfs://lake@account.dfs.core.windows.net/events",
        "hdfs://namenode:8020/events",
        "file://otherhost/events",
    ],
)
def test_a_dataset_on_a_file_system_tracelake_cannot_write_is_refused_before_spark_runs(
    spark: SparkSession, uri: str
) -> None:
    scheme = uri.split(":", 1)[0]
    with pytest.raises(DatasetLocationError, match=f"^{uri}: .*{scheme if scheme != 'file' else 'local'}"):
        write(frame(spark, people(range(10))), uri, identity=IDENTITY)
    with pytest.raises(DatasetLocationError):
        build_index(spark, uri, identity=IDENTITY)
    with pytest.raises(DatasetLocationError):
        Dataset.resolve(uri, IDENTITY)


def test_appending_twice_adds_indexed_files_and_keeps_the_first_writes_filters(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "appended"
    first = write(frame(spark, people(range(0, 400)), slices=2), root, identity=IDENTITY)
    second = write(frame(spark, people(range(400, 800)), slices=2), root, identity=IDENTITY)

    assert (first.files, first.indexed, second.files, second.indexed) == (2, 2, 2, 2)
    assert as_set(collected(read_back(spark, root))) == as_set(people(range(800)))
    assert fresh_files(root) == set(list_data_files(root))
    # u3 (rows 60…79) came with the first write, u30 (600…619) with the second.
    assert len(plan_for(root, "u3").candidates) == 1
    assert len(plan_for(root, "u30").candidates) == 1
    assert plan_for(root, "u3").candidates != plan_for(root, "u30").candidates


def test_an_overwrite_replaces_the_data_and_every_remaining_file_is_indexed(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "overwritten"
    write(frame(spark, people(range(0, 400)), slices=2), root, identity=IDENTITY, partition_by=["day"])
    report = write(
        frame(spark, people(range(400, 600)), slices=2),
        root,
        identity=IDENTITY,
        partition_by=["day"],
        mode="overwrite",
    )

    assert as_set(collected(read_back(spark, root))) == as_set(people(range(400, 600)))
    files = list_data_files(root)
    assert report.files == report.indexed == len(files) == 4
    assert fresh_files(root) == set(files)
    # u0 went with the first write: no file left can hold it, and the plan knows.
    assert plan_for(root, "u0").candidates == []


# -- write: the index -----------------------------------------------------------------------------


def test_the_write_report_says_every_file_is_indexed_and_counts_ids_per_file(people_lake: Written) -> None:
    report = people_lake.report

    assert (report.files, report.indexed, report.unindexed) == (9, 9, [])
    # A file is one slice's rows of one day, and its filter holds the ids of all its identity
    # columns together: the people formula's ids of those rows.
    files: dict[tuple[int, int], set[str]] = {}
    for seq in range(ROWS):
        day = 2 if seq >= 1980 else seq % 2
        files.setdefault((seq // (ROWS // SLICES), day), set()).update(ids_of(person(seq)))
    assert len(files) == 9
    # By hand, the user ids alone: each of the first 3 slices has 25 users on both of its days
    # (6 × 25); the last has u75…u98 on days 0 and 1 (2 × 24) and u99 alone on day 2.
    assert sum(len({i for i in ids if i.startswith("u")}) for ids in files.values()) == 6 * 25 + 2 * 24 + 1
    assert report.distinct_ids == sum(len(ids) for ids in files.values())
    assert report.index_bytes > 0
    # 10-bit filters by default: each measured ~2^-10 on 16,384 absent keys when built
    assert report.measured_fpp is not None and 0.0 < report.measured_fpp < 0.003


def test_the_index_has_a_fresh_filter_for_every_data_file_and_identity_column(people_lake: Written) -> None:
    index = DatasetIndex.load(people_lake.root)
    files = list_data_files(people_lake.root)

    assert index.columns() == set(IDENTITY)
    for column in IDENTITY:
        assert set(index.fresh(files, [column])) == set(files), column
    assert index.problems == []


@pytest.mark.parametrize(
    ("user_id", "files"),
    [
        ("u7", ["day=0", "day=1"]),  # rows 140…159, both days of slice 0
        ("u99", ["day=2"]),  # rows 1980…1999, alone on day 2
        ("500003", ["day=0", "day=1"]),  # account of rows 120…159 (a long, asked for as text)
        ("alt5@mail.test", ["day=0", "day=1"]),  # rows 125…149, in an array
        ("ecid-14", ["day=0", "day=1"]),  # rows 140…149, in the identity map under ECID
        ("+47-3", ["day=0", "day=1"]),  # rows 154, 161…196 (every 7th), in the map under phone
    ],
)
def test_planning_for_an_id_rules_out_the_files_that_cannot_hold_it(
    people_lake: Written, user_id: str, files: list[str]
) -> None:
    plan = plan_for(people_lake.root, user_id)

    assert sorted(path.split("/")[0] for path in plan.candidates) == files
    assert (plan.files, plan.skipped, plan.unindexed, plan.full_scan) == (9, 9 - len(files), [], False)


def test_planning_never_rules_out_a_file_that_holds_an_id(spark: SparkSession, people_lake: Written) -> None:
    kept_wrongly, could_skip = check_no_file_holding_an_id_is_ruled_out(spark, people_lake.root)

    # Filters may keep a file that lacks an id now and then (about 1 in 256 for a fuse filter).
    assert kept_wrongly <= 0.01 * could_skip


def test_a_null_id_or_an_empty_map_adds_no_id(spark: SparkSession, tmp_path: Path) -> None:
    schema = (
        "user_id string, account long, emails array<string>, "
        "identities map<string, array<struct<id:string, primary:boolean>>>"
    )
    rows: list[tuple[Any, ...]] = [
        (None, None, None, None),
        (None, None, [], {}),
        (None, None, [None], {"ECID": []}),
        (None, None, [None, None], {"ECID": None, "email": [{"id": None, "primary": True}]}),
    ]
    root = tmp_path / "empty-ids"
    report = write(spark.createDataFrame(rows, schema).coalesce(1), root, identity=IDENTITY)

    assert report.files == report.indexed == 1
    assert report.distinct_ids == 0
    assert read_back(spark, root).count() == 4
    # Not even the text of a null is an id of the file.
    for text in ("null", "None", "", "[]"):
        assert plan_for(root, text).candidates == [], text


def test_partition_values_spark_escapes_or_writes_as_null_still_get_their_files_indexed(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark escapes `:`, `%` and `#` in folder names, and writes "" and null to the same folder.
    places = ["a b", "x:y", "50%", "é#1", None, ""]
    rows = [(f"u{n}", places[n % 6], n) for n in range(60)]
    df = spark.createDataFrame(rows, "user_id string, place string, n int").coalesce(1)
    written = write(df, tmp_path / "written", identity=["user_id"], partition_by=["place"])
    df.write.partitionBy("place").parquet(str(tmp_path / "plain"))
    built = build_index(spark, tmp_path / "plain", identity=["user_id"])

    for report in (written, built):
        assert (report.files, report.indexed, report.unindexed) == (5, 5, []), report.path
        # u4 has a null place and u5 an empty one: the same file, and only that one.
        nulls = plan_for(report.path, "u4", ["user_id"]).candidates
        assert [path.split("/")[0] for path in nulls] == ["place=__HIVE_DEFAULT_PARTITION__"]
        assert plan_for(report.path, "u5", ["user_id"]).candidates == nulls
        assert [path.split("/")[0] for path in plan_for(report.path, "u1", ["user_id"]).candidates] == [
            "place=x%3Ay"
        ]
    assert read_back(spark, tmp_path / "written").count() == 60


# -- write: bad input ---------------------------------------------------------------------------

BAD_SCHEMA = (
    "user_id string, score double, scores array<double>, person struct<name:string, uid:string>, day int"
)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"identity": ["nope"]}, IdentityError, "'nope' is not in the data"),
        ({"identity": []}, IdentityError, "at least one identity column"),
        ({"identity": ["score"]}, IdentityError, "strings or integers, not double"),
        ({"identity": ["scores"]}, IdentityError, "strings or integers, not double"),
        ({"identity": ["person"]}, IdentityError, "no 'id' field"),
        ({"identity": ["user_id"], "partition_by": ["USER_ID"]}, IdentityError, "both an identity and"),
        ({"identity": ["user_id"], "partition_by": ["nope"]}, IdentityError, "partition column 'nope'"),
        ({"identity": ["user_id"], "fpp": 0.0}, ValueError, "between 0 and 1"),
        ({"identity": ["user_id"], "fpp": 1.0}, ValueError, "between 0 and 1"),
        ({"identity": ["user_id"], "mode": "ignore"}, ValueError, "'append' or 'overwrite'"),
    ],
)
def test_bad_input_fails_with_a_clear_error_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    df = spark.createDataFrame([("u1", 1.0, [1.0], ("ann", "x"), 1)], BAD_SCHEMA)
    root = tmp_path / "never"

    with pytest.raises(error, match=message):
        write(df, root, **options)

    assert not root.exists()


# -- write: the user's own query ------------------------------------------------------------------


def test_a_write_of_a_filtered_frame_binds_every_file_to_exactly_the_rows_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The filters must be built from the rows that reach the files, not from the rows before the
    # user's filter: a file whose filter counted other rows could not be bound at all. A filter
    # that is itself a Python UDF is the hard case: were the sink deterministic, Spark would merge
    # both into one condition and run both UDFs on every row before filtering.
    root = tmp_path / "filtered"
    not_a_multiple_of_3 = F.udf(lambda seq: seq % 3 != 0, "boolean")
    df = frame(spark, people()).where(not_a_multiple_of_3("seq") & (F.col("user_id") != "u7"))
    report = write(df, root, identity=IDENTITY, partition_by=["day"])

    assert (report.files, report.indexed) == (9, 9)
    # 2000 rows, less 667 multiples of 3, less u7's 20 rows of which 7 are multiples of 3.
    assert read_back(spark, root).count() == 2000 - 667 - 13
    assert plan_for(root, "u7").candidates == []
    assert sorted(path.split("/")[0] for path in plan_for(root, "ecid-0").candidates) == ["day=0", "day=1"]


def test_a_write_of_a_sampled_or_pushed_down_query_still_binds_every_file(
    spark: SparkSession, people_lake: Written, tmp_path: Path
) -> None:
    # A random sample is evaluated once: the files and their filters must see the same rows.
    sampled = write(
        frame(spark, people()).sample(fraction=0.3, seed=11), tmp_path / "sampled", identity=IDENTITY
    )
    # A filter Spark pushes into the Parquet scan, and a partition it prunes.
    pushed = write(
        read_back(spark, people_lake.root).where((F.col("day") == 1) & (F.col("user_id") != "u7")),
        tmp_path / "pushed",
        identity=IDENTITY,
    )

    assert sampled.files == sampled.indexed > 0 and sampled.unindexed == []
    assert pushed.files == pushed.indexed > 0 and pushed.unindexed == []
    # Day 1 is the 990 odd rows below 1980; u7 has 10 of them.
    assert read_back(spark, tmp_path / "pushed").count() == 990 - 10
    check_no_file_holding_an_id_is_ruled_out(spark, tmp_path / "sampled")


# -- build_index ----------------------------------------------------------------------------------


def plain_write(spark: SparkSession, records: list[dict[str, Any]], root: Path) -> None:
    """Plain Spark, no index: 2 slices, partitioned by day."""
    frame(spark, records, slices=2).write.mode("append").partitionBy("day").parquet(str(root))


def test_build_index_indexes_every_file_plain_spark_wrote_and_later_only_the_new_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "plain"
    plain_write(spark, people(range(0, 600)), root)
    first = build_index(spark, root, identity=IDENTITY)

    assert (first.files, first.indexed, first.unindexed) == (4, 4, [])
    assert fresh_files(root) == set(list_data_files(root))
    assert build_index(spark, root, identity=IDENTITY).files == 0

    before = set(list_data_files(root))
    plain_write(spark, people(range(1980, 2000)), root)  # u99: day 2, one file per slice
    new = set(list_data_files(root)) - before
    third = build_index(spark, root, identity=IDENTITY)

    assert (third.files, third.indexed) == (len(new), len(new)) == (2, 2)
    assert fresh_files(root) == before | new
    assert set(plan_for(root, "u99").candidates) == new
    check_no_file_holding_an_id_is_ruled_out(spark, root)


def rewrite_behind_our_back(path: Path, change: dict[str, Any]) -> None:
    """Someone else rewrites a data file in place with pyarrow: same columns, different rows."""
    table = pq.read_table(path)
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    for name, value in change.items():
        columns[name] = [value] * table.num_rows
    pq.write_table(pa.table(columns, schema=table.schema), path)
    # Hadoop's checksum of the old bytes would make Spark refuse the new ones.
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def test_a_file_rewritten_by_someone_else_is_scanned_until_build_index_refreshes_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "plain"
    plain_write(spark, people(range(0, 600)), root)
    build_index(spark, root, identity=IDENTITY)
    # The day-0 file of the first slice (rows 0…298, even): every user_id in it becomes "intruder".
    target = sorted(path for path in list_data_files(root) if path.startswith("day=0/"))[0]
    assert target in plan_for(root, "u0").candidates
    rewrite_behind_our_back(root / target, {"user_id": "intruder"})

    stale = plan_for(root, "intruder")
    assert stale.unindexed == [target]
    assert stale.candidates == [target]  # scanned, though no filter knows "intruder"
    assert target not in fresh_files(root)

    refreshed = build_index(spark, root, identity=IDENTITY)

    assert (refreshed.files, refreshed.indexed) == (1, 1)
    assert fresh_files(root) == set(list_data_files(root))
    after = plan_for(root, "intruder")
    assert (after.candidates, after.unindexed) == ([target], [])
    # u0 (rows 0…19) now lives only in the first slice's day-1 file.
    assert [path.split("/")[0] for path in plan_for(root, "u0").candidates] == ["day=1"]
    check_no_file_holding_an_id_is_ruled_out(spark, root)
