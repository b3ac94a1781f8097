"""`privacy verify`: an index built without an id its file holds is found, and repaired.

The broken index is made the way Tracelake made them before null lists were handled: the
identity map's filter built from Spark's `flatten` of the map's lists, which is null for a row
whose map holds a null list (`{"phone": null, "email": [...]}`), so that row's ids were left out.
The old walk is written out here to build such an index on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest
from pyspark.sql import functions as F
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.privacy import IdentityFilter, write
from tracelake.privacy.filters import as_keys
from tracelake.privacy.index import INDEX_DIR, DataFile, DatasetIndex, list_data_files
from tracelake.privacy.requests import access
from tracelake.privacy.search import Batch, Dataset, plan_scan
from tracelake.privacy.segments import SegmentWriter, new_segment_path
from tracelake.privacy.verify import verify

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IDENTITY = ["user_id", "identity_map"]
SCHEMA = "user_id string, identity_map map<string, array<struct<id:string, primary:boolean>>>, day int"
HIDDEN = "m-hidden@xdm.test"  # only in a row whose map also holds a null list


def rows() -> list[tuple[object, ...]]:
    found: list[tuple[object, ...]] = [
        (f"u{n}", {"email": [{"id": f"m{n}@xdm.test", "primary": True}]}, n % 2) for n in range(200)
    ]
    found.append(("u-hidden", {"phone": None, "email": [{"id": HIDDEN, "primary": True}]}, 1))
    return found


def old_map_keys(spark: SparkSession, path: Path) -> list[int]:
    """The identity map's filter keys of one file as the walk before the fix computed them."""
    df = spark.read.parquet(str(path))
    hashes = F.flatten(
        F.transform(F.map_values("identity_map"), lambda ids: F.transform(ids, lambda s: F.xxhash64(s["id"])))
    )
    return [value for row in df.select(F.explode(hashes)).collect() for value in row if value is not None]


class Stale(NamedTuple):
    root: Path
    holder: str  # the data file holding HIDDEN
    legacy: bool  # its short filter is marked as built before the fix


@pytest.fixture(params=["legacy", "current"])
def stale_lake(spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest) -> Stale:
    """A lake whose file holding HIDDEN has an identity-map filter without it.

    "legacy": the segment as Tracelake wrote it before the fix (no walk recorded with the
    filter); "current": the same filter marked as built by today's walk (as a future bug would).
    """
    import numpy as np
    import pyarrow.parquet as pq

    root = tmp_path / "events"
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows(), 2), SCHEMA)
    write(df, root, identity=IDENTITY, partition_by=["day"])
    holder = next(
        path for path in list_data_files(root) if HIDDEN in (root / path).read_bytes().decode("latin-1")
    )
    short = IdentityFilter.build(as_keys(np.array(old_map_keys(spark, root / holder), dtype=np.int64)))
    stamp, rows_in_file = DataFile.of(root, holder), pq.read_metadata(root / holder).num_rows
    if request.param == "current":
        # today's filter holds the file's user ids and its map's ids together: built short
        user_keys = [
            row[0] for row in spark.read.parquet(str(root / holder)).select(F.xxhash64("user_id")).collect()
        ]
        both = IdentityFilter.build(
            as_keys(np.array(old_map_keys(spark, root / holder) + user_keys, dtype=np.int64))
        )
        DatasetIndex(root).write_segment([(both, stamp, ("user_id", "identity_map"), rows_in_file)])
    else:  # every filter as Tracelake wrote it then: no walk recorded
        index = DatasetIndex.load(root)
        with SegmentWriter(new_segment_path(index.folder)) as writer:
            for segment in index.segments:
                for stored in segment.filters:
                    writer.add(stored.filter, **{k: v for k, v in stored.meta.items() if k != "walk"})
        for segment in index.segments:
            segment.path.unlink()
        with SegmentWriter(new_segment_path(root / INDEX_DIR)) as writer:
            writer.add(
                short,
                file=holder,
                size=stamp.size,
                mtime_ns=stamp.mtime_ns,
                column="identity_map",
                rows=rows_in_file,
            )
    return Stale(root, holder, request.param == "legacy")


def test_a_legacy_filter_never_rules_a_file_out_and_a_current_wrong_one_does(
    stale_lake: Stale,
) -> None:
    """Filters from before the fix are not trusted, so requests stay whole until the repair; a
    wrong filter of today's walk would answer a request short: what verify exists to catch."""
    root, holder = stale_lake.root, stale_lake.holder
    plan = plan_scan(Dataset(root, IDENTITY), Batch({"r": [HIDDEN]}))
    assert (holder in plan.candidates) is stale_lake.legacy
    assert (holder in plan.unindexed) is stale_lake.legacy


def test_verify_reports_the_file_whose_filter_lacks_an_id_it_holds(stale_lake: Stale) -> None:
    root, holder = stale_lake.root, stale_lake.holder
    report = verify(root)
    assert not report.ok
    # the legacy index had a filter per column; today's has one over both
    columns = "identity_map" if stale_lake.legacy else "user_id, identity_map"
    assert [(wrong.path, wrong.column, wrong.missing_ids) for wrong in report.wrong] == [(holder, columns, 1)]
    assert report.checked == len(list_data_files(root)) and not report.unindexed
    assert report.legacy == (sorted(list_data_files(root)) if stale_lake.legacy else [])


def test_verify_repair_rebuilds_the_wrong_filter_and_the_request_then_finds_the_row(
    spark: SparkSession, stale_lake: Stale, tmp_path: Path
) -> None:
    root, holder = stale_lake.root, stale_lake.holder
    others = {path: (root / path).stat().st_mtime_ns for path in list_data_files(root) if path != holder}

    report = verify(root, repair_with=spark)

    rebuilt = sorted(list_data_files(root)) if stale_lake.legacy else [holder]  # legacy: every filter
    assert report.ok and report.repaired == rebuilt and not report.wrong and not report.legacy
    assert verify(root).ok
    assert {path: (root / path).stat().st_mtime_ns for path in others} == others  # data untouched
    assert holder in plan_scan(Dataset(root, IDENTITY), Batch({"r": [HIDDEN]})).candidates
    receipts = access(spark, Batch({"r": [HIDDEN]}), [Dataset(root, IDENTITY)], tmp_path / "egress")
    assert receipts["r"].rows == 1 and receipts["r"].datasets[0].rows_by_file == {holder: 1}


def test_verify_repair_indexes_a_file_that_has_no_filter(spark: SparkSession, stale_lake: Stale) -> None:
    root = stale_lake.root
    extra = root / "day=5"
    spark.createDataFrame(
        [("u-new", None)],
        "user_id string, identity_map map<string, array<struct<id:string, primary:boolean>>>",
    ).write.parquet(str(extra))
    added = sorted(path for path in list_data_files(root) if path.startswith("day=5/"))
    assert verify(root).unindexed == added

    report = verify(root, repair_with=spark)

    assert report.indexed == added and not report.unindexed and report.ok


def test_verify_reports_a_data_file_it_cannot_read_in_one_line(stale_lake: Stale) -> None:
    """Same size and time as indexed (so its filters still count), but the bytes are damaged."""
    import os

    root, holder = stale_lake.root, stale_lake.holder
    stamp = DataFile.of(root, holder)
    (root / holder).write_bytes(b"x" * stamp.size)
    os.utime(root / holder, ns=(stamp.mtime_ns, stamp.mtime_ns))

    report = verify(root)

    assert [wrong.path for wrong in report.wrong] == [holder]
    assert "cannot be read" in report.wrong[0].describe() and "\n" not in report.wrong[0].describe()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def test_the_cli_says_which_file_is_wrong_exits_1_and_repairs_with_repair(
    stale_lake: Stale,
) -> None:
    root, holder = stale_lake.root, stale_lake.holder

    code, stdout, stderr = run("privacy", "verify", str(root))
    assert code == 1, stdout + stderr
    columns = "identity_map" if stale_lake.legacy else "user_id, identity_map"
    assert f"wrong filter: {holder}: the filter of {columns} lacks 1 of the file's ids" in stderr
    assert "--repair" in stderr

    code, stdout, stderr = run("privacy", "verify", str(root), "--repair")
    assert code == 0, stdout + stderr
    assert "wrong filter" not in stderr

    code, stdout, stderr = run("privacy", "verify", str(root))
    assert code == 0 and not stderr.strip(), stderr


def test_the_cli_refuses_a_dataset_without_an_index_or_columns_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    code, _, stderr = run("privacy", "verify", str(tmp_path / "plain"))
    assert code == 2
    assert stderr.strip().count("\n") == 0 and "no identity index" in stderr


def test_verify_reports_a_filter_whose_bytes_fail_their_checksum(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracelake.privacy import hash_ids

    root = tmp_path / "plain"
    root.mkdir()
    ids = {"a.parquet": [f"a{n}" for n in range(3000)], "b.parquet": [f"b{n}" for n in range(3000)]}
    for name, values in ids.items():
        pq.write_table(pa.table({"user_id": values}), root / name)
    DatasetIndex(root).write_segment(
        [
            (IdentityFilter.build(hash_ids(values)), DataFile.of(root, name), ("user_id",), len(values))
            for name, values in ids.items()
        ]
    )
    assert verify(root, ["user_id"]).ok
    stored = next(s for s in DatasetIndex.load(root).segments[0].filters if s.meta["file"] == "b.parquet")
    content = bytearray(stored.segment.path.read_bytes())
    content[stored.offset + 10] ^= 0x80
    stored.segment.path.write_bytes(bytes(content))

    report = verify(root, ["user_id"])
    assert [(wrong.path, wrong.damaged) for wrong in report.wrong] == [("b.parquet", True)]
    assert (
        report.wrong[0].describe()
        == "b.parquet: the filter of user_id is damaged (its bytes fail their checksum)"
    )


def plain_lake(root: Path, ids: dict[str, list[str]]) -> None:
    """Parquet files of one `user_id` column (pyarrow, uncompressed: equal ids of equal lengths
    make files of equal size), each indexed by hand."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracelake.privacy import hash_ids

    root.mkdir(parents=True, exist_ok=True)
    for name, values in ids.items():
        pq.write_table(pa.table({"user_id": values}), root / name, compression="none")
    DatasetIndex(root).write_segment(
        [
            (IdentityFilter.build(hash_ids(values)), DataFile.of(root, name), ("user_id",), len(values))
            for name, values in ids.items()
        ]
    )


def test_verify_catches_a_file_replaced_behind_the_index_with_its_size_and_time(tmp_path: Path) -> None:
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracelake.privacy import hash_ids

    root = tmp_path / "plain"
    plain_lake(root, {f"f{n}.parquet": [f"u{n}-{i:04d}" for i in range(500)] for n in range(4)})
    victim = root / "f2.parquet"
    before = os.stat(victim)
    # another user's rows, the same size, the modification time put back: the index cannot tell
    pq.write_table(pa.table({"user_id": [f"z2-{i:04d}" for i in range(500)]}), victim, compression="none")
    assert victim.stat().st_size == before.st_size
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))

    plan = DatasetIndex.load(root).plan(hash_ids(["z2-0007"]))
    assert "f2.parquet" not in plan.candidates  # a request would skip the file that holds the user
    report = verify(root)
    assert [(wrong.path, wrong.missing_ids) for wrong in report.wrong] == [("f2.parquet", 500)]


def test_verify_can_check_a_random_sample_of_the_files(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    plain_lake(root, {f"f{n}.parquet": [f"u{n}-{i:04d}" for i in range(100)] for n in range(6)})
    whole = verify(root)
    assert (whole.checked, whole.indexed_files, whole.sampled) == (6, 6, False)

    drawn = [verify(root, sample=2, seed=seed) for seed in range(8)]
    assert all((r.checked, r.indexed_files, r.sampled, r.ok) == (2, 6, True, True) for r in drawn)
    assert verify(root, sample=10).checked == 6  # a sample larger than the index is all of it
    with pytest.raises(ValueError, match="at least one"):
        verify(root, sample=0)


def test_the_cli_says_when_it_checked_a_sample(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    plain_lake(root, {f"f{n}.parquet": [f"u{n}-{i:04d}" for i in range(100)] for n in range(5)})
    code, stdout, stderr = run("privacy", "verify", str(root), "--sample", "3")
    assert code == 0, stdout + stderr
    assert "checked a random sample of 3 of 5 indexed files" in stdout
    code, _, stderr = run("privacy", "verify", str(root), "--sample", "0")
    assert code == 2 and "'--sample'" in stderr
