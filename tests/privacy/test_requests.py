"""What access and delete requests promise a data subject, an auditor and whoever owns the lake.

Access must export exactly a request's records (every column, partitions included) to its own
egress folder, whether the id is a plain string, a long, an array element or deep in an XDM
identity map, once per record however many of the request's ids it holds, with a receipt that
counts and never quotes; files the index does not cover must still be read. Delete must erase
exactly the matching rows, leave every other file alone, keep the index fresh for what it
rewrote, do nothing the second time, and leave the lake consistent if it dies at any step, so a
second run finishes the job. Expected records come from the people formula in `conftest.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from tests.privacy.conftest import (
    IDENTITY,
    Written,
    as_set,
    collected,
    copy_dataset,
    frame,
    fresh_files,
    ids_of,
    people,
)
from tracelake.privacy import DatasetIndex, hash_ids, search, write
from tracelake.privacy.index import INDEX_DIR, DataFile, ScanPlan, list_data_files
from tracelake.privacy.requests import Receipt, access, dataset_slug, delete
from tracelake.privacy.search import Batch, Bounds, Dataset, PrivacyRequestError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def exported(egress: Path, request: str, root: Path) -> list[dict[str, Any]]:
    """The records an access request wrote for one dataset, parsed from its JSON lines."""
    folder = egress / request / dataset_slug(root)
    parts = sorted(folder.glob("part-*")) if folder.is_dir() else []
    return [json.loads(line) for part in parts for line in part.read_text().splitlines() if line]


def plan(root: Path, *ids: str) -> ScanPlan:
    return DatasetIndex.load(root).plan(hash_ids(ids), columns=IDENTITY)


def seqs_by_file(root: Path) -> dict[str, list[int]]:
    """Each data file's rows (their sorted `seq`), read with pyarrow: the files, not Spark's view."""
    return {
        path: sorted(pq.read_table(root / path, columns=["seq"]).column("seq").to_pylist())
        for path in list_data_files(root)
    }


def found_anywhere(spark: SparkSession, root: Path, egress: Path, *ids: str) -> list[dict[str, Any]]:
    access(spark, Batch({"check": list(ids)}), [Dataset.resolve(root)], egress)
    return exported(egress, "check", root)


# -- access -------------------------------------------------------------------------------------

# One batch of requests, one pass over the people lake. Worked out from the people formula:
EXPECTED = {
    "flat": ["u7"],
    "long": ["500003"],
    "array": ["alt5@mail.test"],
    "map": ["+47-3"],
    "two-ids": ["u7", "ecid-14"],
    "DSR#42: ann": ["u99"],
    "nobody": ["u100"],
}
EXPECTED_ROWS = {
    "flat": range(140, 160),  # u{seq // 20}
    "long": range(120, 160),  # account 500000 + seq // 40
    "array": range(125, 150),  # alt{seq // 25}@mail.test, the array's second element
    "map": [154, 161, 168, 175, 182, 189, 196],  # +47-{seq // 50} under `phone`, on rows seq % 7 == 0
    "two-ids": range(140, 160),  # ecid-14 (rows 140…149) adds no row to u7's
    "DSR#42: ann": range(1980, 2000),  # a request name Spark must escape in a folder name
    "nobody": [],
}


@dataclass(frozen=True)
class Access:
    egress: Path
    root: Path
    receipts: dict[str, Receipt]


@pytest.fixture(scope="module")
def batch_access(
    spark: SparkSession, people_lake: Written, tmp_path_factory: pytest.TempPathFactory
) -> Access:
    egress = tmp_path_factory.mktemp("egress")
    receipts = access(
        spark,
        Batch({r: list(ids) for r, ids in EXPECTED.items()}),
        [Dataset.resolve(people_lake.root)],
        egress,
    )
    return Access(egress, people_lake.root, receipts)


@pytest.mark.parametrize("request_name", sorted(EXPECTED))
def test_access_exports_exactly_the_requests_records_with_their_partition_columns(
    batch_access: Access, request_name: str
) -> None:
    records = exported(batch_access.egress, request_name, batch_access.root)

    assert as_set(records) == as_set(people(EXPECTED_ROWS[request_name]))
    assert len(records) == len(EXPECTED_ROWS[request_name])  # a record matching two ids is there once
    assert batch_access.receipts[request_name].rows == len(records)


def receipt_tokens(value: object) -> tuple[list[str], set[str]]:
    """Every key and string of a parsed receipt, and its integers as text."""
    texts: list[str] = []
    integers: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            texts.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            texts.append(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            integers.add(str(item))
    return texts, integers


def test_access_writes_a_receipt_per_request_with_counts_and_no_record_values(batch_access: Access) -> None:
    for request_name in EXPECTED:
        text = (batch_access.egress / request_name / "receipt.json").read_text()
        receipt = json.loads(text)

        assert receipt["request"] == request_name and receipt["kind"] == "access"
        [scan] = receipt["datasets"]
        # The batch's ids sit in the first slice's two files and the day-2 file: 6 of 9 skipped.
        assert (scan["files"], scan["skipped"], scan["read"], scan["unindexed"]) == (9, 6, 3, 0)
        assert scan["rows"] == receipt["rows"] == len(EXPECTED_ROWS[request_name])
        # Neither what was asked for nor what was found: no id, no payload, no e-mail.
        every_id = {user_id for values in EXPECTED.values() for user_id in values}
        found = people(EXPECTED_ROWS[request_name])
        texts, integers = receipt_tokens(receipt)
        for value in every_id | {r["payload"] for r in found} | {e for r in found for e in r["emails"]}:
            # inside any key or string, or as a whole integer (timings are floats whose digits may
            # spell an id by chance: 0.7364392500003305 holds "500003")
            assert not any(value in token for token in texts) and value not in integers, (request_name, value)
        assert "secret-" not in text and "@" not in text


def test_access_reads_a_file_the_index_does_not_cover_and_finds_its_rows(
    spark: SparkSession, people_lake: Written, tmp_path: Path
) -> None:
    root = copy_dataset(people_lake.root, tmp_path / "people")
    # Someone appends u100's rows (2000…2019, day 2) with plain Spark: no filter for that file.
    frame(spark, people(range(2000, 2020)), slices=1).write.mode("append").partitionBy("day").parquet(
        str(root)
    )
    [new] = set(list_data_files(root)) - set(list_data_files(people_lake.root))

    receipts = access(spark, Batch({"r": ["u100"]}), [Dataset.resolve(root)], tmp_path / "egress")

    assert as_set(exported(tmp_path / "egress", "r", root)) == as_set(people(range(2000, 2020)))
    scan = receipts["r"].datasets[0]
    # Only the new file is read: every indexed file is ruled out.
    assert (scan.files, scan.read, scan.unindexed, scan.rows) == (10, 1, 1, 20)
    assert plan(root, "u100").unindexed == [new]


def test_access_reads_every_file_when_the_index_is_gone_and_finds_the_same_records(
    spark: SparkSession, people_lake: Written, tmp_path: Path
) -> None:
    root = copy_dataset(people_lake.root, tmp_path / "people")
    for segment in (root / INDEX_DIR).glob("*.tli"):
        segment.unlink()

    receipts = access(spark, Batch({"r": ["u7", "+47-3"]}), [Dataset(root, IDENTITY)], tmp_path / "egress")

    expected = people(sorted({*range(140, 160), 154, 161, 168, 175, 182, 189, 196}))
    assert as_set(exported(tmp_path / "egress", "r", root)) == as_set(expected)
    scan = receipts["r"].datasets[0]
    assert (scan.files, scan.skipped, scan.unindexed, scan.full_scan) == (9, 0, 9, True)


# -- bad requests -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids_by_request", "message"),
    [({}, "no request"), ({"r": []}, "r has no user id"), ({"r": ["  "]}, "r has no user id")],
)
def test_a_batch_without_ids_is_refused(ids_by_request: dict[str, list[str]], message: str) -> None:
    with pytest.raises(PrivacyRequestError, match=message):
        Batch(ids_by_request)


def test_a_batch_cleans_its_own_copy_of_the_ids() -> None:
    asked = {"r1": [" u1 ", "u2", ""], "r2": ["u2"]}

    batch = Batch(asked)

    assert batch.ids == ["u1", "u2"] and batch.requests_by_id["u2"] == ["r1", "r2"]
    assert asked == {"r1": [" u1 ", "u2", ""], "r2": ["u2"]}  # the caller's lists are untouched


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "", "x" * 200])
def test_a_request_name_that_cannot_name_its_egress_folder_is_refused(name: str) -> None:
    with pytest.raises(PrivacyRequestError, match="request name"):
        Batch({name: ["u1"]})


def test_a_missing_dataset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PrivacyRequestError, match="does not exist"):
        Dataset.resolve(tmp_path / "nowhere")


def test_a_dataset_without_an_index_or_identity_columns_is_refused_with_what_to_do(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame(spark, people(range(10)), slices=1).write.parquet(str(tmp_path / "plain"))

    with pytest.raises(PrivacyRequestError, match=r"index it .* or name its identity columns"):
        Dataset.resolve(tmp_path / "plain")
    assert Dataset.resolve(tmp_path / "plain", ["user_id"]).identity == ["user_id"]


def test_a_dataset_with_an_index_takes_its_identity_columns_from_it(people_lake: Written) -> None:
    assert Dataset.resolve(people_lake.root).identity == sorted(IDENTITY)


# -- delete -------------------------------------------------------------------------------------

ERASE = {"erase-1": ["u7"], "erase-2": ["u99", "ecid-30"]}
# u7 is rows 140…159, ecid-30 rows 300…309 (both days of the first slice), u99 rows 1980…1999 (day 2).
ERASED = {*range(140, 160), *range(300, 310), *range(1980, 2000)}


def erase() -> Batch:
    return Batch({request: list(ids) for request, ids in ERASE.items()})


class Crash(Exception):
    """What the step hook throws to kill a delete where a test wants."""


@dataclass(frozen=True)
class Before:
    """A lake's files as they were before a delete: their stamps and rows."""

    stamps: dict[str, DataFile]
    seqs: dict[str, list[int]]

    @classmethod
    def of(cls, root: Path) -> Before:
        return cls(list_data_files(root), seqs_by_file(root))

    def touched(self) -> set[str]:
        return {path for path, seqs in self.seqs.items() if ERASED & set(seqs)}


@dataclass(frozen=True)
class Erased:
    root: Path
    before: Before
    receipts: dict[str, Receipt]


@pytest.fixture(scope="module")
def erased(spark: SparkSession, people_lake: Written, tmp_path_factory: pytest.TempPathFactory) -> Erased:
    """A copy of the people lake after one clean delete of ERASE (read-only for the tests)."""
    root = copy_dataset(people_lake.root, tmp_path_factory.mktemp("erased") / "people")
    before = Before.of(root)
    receipts = delete(spark, erase(), [Dataset.resolve(root)])
    return Erased(root, before, receipts)


def test_after_a_delete_a_fresh_access_finds_nothing(
    spark: SparkSession, erased: Erased, tmp_path: Path
) -> None:
    assert found_anywhere(spark, erased.root, tmp_path, "u7", "u99", "ecid-30") == []


def test_a_delete_leaves_every_other_row_intact(spark: SparkSession, erased: Erased) -> None:
    left = collected(spark.read.parquet(str(erased.root)))

    assert len(left) == 2000 - 50
    assert as_set(left) == as_set(people(seq for seq in range(2000) if seq not in ERASED))


def test_a_delete_does_not_touch_files_without_matching_rows(erased: Erased) -> None:
    now = list_data_files(erased.root)
    untouched = set(erased.before.stamps) - erased.before.touched()

    assert len(untouched) == 6
    assert {path: now[path] for path in untouched} == {path: erased.before.stamps[path] for path in untouched}


def test_a_delete_rewrites_files_in_place_and_removes_a_file_whose_every_row_matched(erased: Erased) -> None:
    now = seqs_by_file(erased.root)
    touched = erased.before.touched()
    [emptied] = [path for path in touched if path.startswith("day=2/")]

    assert emptied not in now
    assert set(now) == set(erased.before.seqs) - {emptied}
    for path in touched - {emptied}:
        assert now[path] == sorted(set(erased.before.seqs[path]) - ERASED), path
        assert len(now[path]) == len(erased.before.seqs[path]) - 15  # 10 of u7's rows, 5 of ecid-30's


def test_a_delete_keeps_the_index_fresh_for_the_files_it_rewrote(erased: Erased) -> None:
    assert fresh_files(erased.root) == set(list_data_files(erased.root))
    gone = plan(erased.root, "u7", "u99", "ecid-30")
    assert (gone.candidates, gone.unindexed) == ([], [])
    # u8 (rows 160…179) stayed in the two rewritten files: their new filters must still hold it.
    rewritten = sorted(
        erased.before.touched() - {p for p in erased.before.touched() if p.startswith("day=2/")}
    )
    assert plan(erased.root, "u8").candidates == rewritten


def test_a_delete_receipt_counts_rows_and_files_per_request(erased: Erased) -> None:
    first, second = erased.receipts["erase-1"], erased.receipts["erase-2"]

    assert (first.kind, first.rows, second.rows) == ("delete", 20, 30)
    assert (first.files_rewritten, first.files_removed) == (2, 1)
    [scan] = first.datasets
    assert (scan.files, scan.read, scan.skipped, scan.rows) == (9, 3, 6, 20)
    assert "u7" not in json.dumps(first.to_json()) and "secret-" not in json.dumps(first.to_json())


def test_running_the_same_delete_again_changes_nothing(
    spark: SparkSession, erased: Erased, tmp_path: Path
) -> None:
    root = copy_dataset(erased.root, tmp_path / "people")
    before = Before.of(root)

    receipts = delete(spark, erase(), [Dataset.resolve(root)])

    assert Before.of(root) == before
    assert [(r.rows, r.files_rewritten, r.files_removed) for r in receipts.values()] == [(0, 0, 0), (0, 0, 0)]


def test_a_delete_erases_rows_from_a_file_the_index_does_not_cover(
    spark: SparkSession, people_lake: Written, tmp_path: Path
) -> None:
    root = copy_dataset(people_lake.root, tmp_path / "people")
    frame(spark, people(range(2000, 2040)), slices=1).write.mode("append").partitionBy("day").parquet(
        str(root)
    )

    receipts = delete(spark, Batch({"r": ["u100"]}), [Dataset.resolve(root)])

    assert receipts["r"].rows == 20  # rows 2000…2019; u101's 20 rows stay
    assert as_set(collected(spark.read.parquet(str(root)))) == as_set(people(range(2020, 2040)) + people())
    assert fresh_files(root) == set(list_data_files(root))


# The old write's rows u0…u19 (batch a, and z which no request below touches); the new write's
# rows u20…u29 (batch b) have a `note` column the old ones lack. Asking for u1 and u21 reads 2 of
# the 3 files, in path order: batch=a first, whose columns Spark takes for both unless told to merge.
OLD_ROWS = [(f"u{n}", n, "a" if n < 10 else "z") for n in range(20)]
NEW_ROWS = [(f"u{n}", n, f"note-{n}", "b") for n in range(20, 30)]


def evolving(spark: SparkSession, root: Path) -> Path:
    """A dataset whose second write added a column: two files without `note`, one with it."""
    for rows, schema in (
        (OLD_ROWS, "user_id string, n long, batch string"),
        (NEW_ROWS, "user_id string, n long, note string, batch string"),
    ):
        df = spark.createDataFrame(rows, schema).coalesce(1)
        write(df, root, identity=["user_id"], partition_by=["batch"])
    return root


def test_access_exports_every_column_of_files_whose_schemas_differ(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = evolving(spark, tmp_path / "evolving")

    receipts = access(spark, Batch({"r": ["u1", "u21"]}), [Dataset.resolve(root)], tmp_path / "egress")

    assert receipts["r"].datasets[0].read == 2
    assert as_set(exported(tmp_path / "egress", "r", root)) == as_set(
        [
            {"user_id": "u1", "n": 1, "batch": "a"},  # JSON lines leave out nulls
            {"user_id": "u21", "n": 21, "note": "note-21", "batch": "b"},
        ]
    )


def test_a_delete_keeps_every_column_of_files_whose_schemas_differ(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Rewritten together, the new file would take the old file's columns and lose every note.
    root = evolving(spark, tmp_path / "evolving")

    receipts = delete(spark, Batch({"r": ["u1", "u21"]}), [Dataset.resolve(root)])

    assert (receipts["r"].rows, receipts["r"].files_rewritten) == (2, 2)
    left = spark.read.option("mergeSchema", "true").parquet(str(root)).select("user_id", "n", "note", "batch")
    expected = [(user, n, None, batch) for user, n, batch in OLD_ROWS if user != "u1"]
    expected += [row for row in NEW_ROWS if row[0] != "u21"]
    assert sorted(tuple(row) for row in left.collect()) == sorted(expected)


# -- delete: killed at every step ---------------------------------------------------------------


def crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step or (step == "swapped" and name.startswith("swapped ")):
            raise Crash(name)

    return hook


@pytest.mark.parametrize("step", ["stage", "verify", "index", "swap", "swapped"])
def test_a_delete_killed_at_any_step_leaves_every_file_old_or_new_and_a_rerun_finishes_the_job(
    spark: SparkSession, people_lake: Written, erased: Erased, tmp_path: Path, step: str
) -> None:
    root = copy_dataset(people_lake.root, tmp_path / "people")
    before = Before.of(root)

    with pytest.raises(Crash):
        delete(spark, erase(), [Dataset.resolve(root)], step=crash_at(step))

    # Every file is whole, holding either its old rows or its old rows less the erased ones, and
    # none is gone yet (the file erased whole is swapped last); no row is there twice; Spark
    # sees no staged file.
    now = seqs_by_file(root)
    assert set(now) == set(before.seqs)
    for path, old in before.seqs.items():
        assert now[path] in (old, sorted(set(old) - ERASED)), path
    every_row = [seq for seqs in now.values() for seq in seqs]
    assert len(every_row) == len(set(every_row))
    visible = spark.read.parquet(str(root)).inputFiles()
    assert all(INDEX_DIR not in uri for uri in visible)
    assert len(visible) == len(now)
    # The index may not lie about the half-done state: a file still holding an id is planned.
    for path, seqs in now.items():
        held = set().union(*(ids_of(record) for record in people(seqs)))
        for user_id in ("u7", "u99", "ecid-30"):
            if user_id in held:
                assert path in plan(root, user_id).candidates, (path, user_id)
    swapped = [path for path in now if now[path] != before.seqs[path]]
    assert len(swapped) == (1 if step == "swapped" else 0)
    assert spark.read.parquet(str(root)).count() == 2000 - (15 if swapped else 0)

    delete(spark, erase(), [Dataset.resolve(root)])

    assert seqs_by_file(root) == seqs_by_file(erased.root)  # the file names are the same too
    assert fresh_files(root) == set(list_data_files(root))
    untouched = set(before.stamps) - before.touched()
    assert {path: list_data_files(root)[path] for path in untouched} == {
        path: before.stamps[path] for path in untouched
    }
    assert not any((root / INDEX_DIR / "_staging").glob("*"))


# -- bounded passes -----------------------------------------------------------------------------


def test_bounds_cut_a_plan_into_passes_by_files_and_by_bytes(tmp_path: Path) -> None:
    files = {f"f{n}": DataFile(f"f{n}", size, 0) for n, size in enumerate([40, 40, 40, 100, 10])}
    whole = ScanPlan(tmp_path, 5, sorted(files), ["f3"], True, 0.0)

    by_files = [part.candidates for part in Bounds(max_files=2).split(whole, files)]
    by_bytes = [part.candidates for part in Bounds(max_bytes=100).split(whole, files)]

    assert by_files == [["f0", "f1"], ["f2", "f3"], ["f4"]]
    assert by_bytes == [["f0", "f1"], ["f2"], ["f3"], ["f4"]]  # a file bigger than the bound goes alone
    assert [part.unindexed for part in Bounds(max_files=2).split(whole, files)] == [[], ["f3"], []]
    assert not any(part.full_scan for part in Bounds(max_files=2).split(whole, files))
    assert Bounds().split(whole, files) == [whole]


def test_access_in_passes_of_two_files_exports_what_one_pass_does(
    spark: SparkSession, people_lake: Written, batch_access: Access, tmp_path: Path
) -> None:
    receipts = access(
        spark,
        Batch({r: list(ids) for r, ids in EXPECTED.items()}),
        [Dataset.resolve(people_lake.root)],
        tmp_path,
        bounds=Bounds(max_files=2),
    )
    for request in EXPECTED:
        in_passes = exported(tmp_path, request, people_lake.root)
        assert sorted(r["seq"] for r in in_passes) == sorted(
            r["seq"] for r in exported(batch_access.egress, request, people_lake.root)
        )
        assert receipts[request].rows == batch_access.receipts[request].rows


def test_delete_in_passes_of_one_file_leaves_what_one_pass_does(
    spark: SparkSession, people_lake: Written, erased: Erased, tmp_path: Path
) -> None:
    root = copy_dataset(people_lake.root, tmp_path / "people")

    receipts = delete(spark, erase(), [Dataset.resolve(root)], bounds=Bounds(max_files=1))

    assert seqs_by_file(root) == seqs_by_file(erased.root)
    assert {r: receipt.rows for r, receipt in receipts.items()} == {
        r: receipt.rows for r, receipt in erased.receipts.items()
    }


@pytest.mark.parametrize("named_at_most", [0, 32])
def test_access_finds_records_in_a_dataset_whose_path_needs_escaping(
    spark: SparkSession,
    people_lake: Written,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    named_at_most: int,
) -> None:
    # Many candidates are picked by Spark's `_metadata.file_path`, an escaped URI: a path written
    # the wrong way would match no file and find nothing, silently. Few are named to Spark.
    monkeypatch.setattr(search, "_NAMED_AT_MOST", named_at_most)
    root = copy_dataset(people_lake.root, tmp_path / "lake #1 é 100%" / "people")

    access(spark, Batch({"flat": ["u7"]}), [Dataset.resolve(root)], tmp_path / "egress")

    assert sorted(r["seq"] for r in exported(tmp_path / "egress", "flat", root)) == list(
        EXPECTED_ROWS["flat"]
    )
