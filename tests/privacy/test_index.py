"""Tests for a dataset's identity index: which data files a request must read, never missing one.

The invariant under test is zero false negatives: a file that holds a requested id is always a
candidate, and so is every file the index cannot vouch for (no filter for a wanted column, a filter
written for an earlier version of the file, a segment that cannot be read). Beyond that the plan
must be tight: files whose fresh filters rule the ids out are skipped, the newest fresh filter of a
file wins, nearly-everything plans say to scan the whole dataset, and compaction changes no answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tracelake.privacy.filters import IdentityFilter, fuse_slots, hash_ids, slot_bytes
from tracelake.privacy.index import (
    COMPACT_AFTER,
    INDEX_DIR,
    DataFile,
    DatasetIndex,
    ScanPlan,
    columns_of,
    is_hidden,
    list_data_files,
)
from tracelake.privacy.search import DatasetScan
from tracelake.privacy.segments import BLOCK, SUFFIX

IDS = {
    "part-0.parquet": ["u1", "u2", "u3"],
    "part-1.parquet": ["u4", "u5"],
    "day=1/part-2.parquet": ["u1", "u6"],
    "_n=3/part-3.parquet": ["u7"],
}
EMAILS = {
    "part-0.parquet": ["a@x"],
    "part-1.parquet": ["b@x"],
    "day=1/part-2.parquet": ["c@x", "u5"],
    "_n=3/part-3.parquet": ["d@x"],
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A dataset whose data files (their bytes are never parsed) sit among Spark's hidden names."""
    root = tmp_path / "dataset"
    for number, relative in enumerate(IDS):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"PAR1" + bytes(number * 10 + 5) + b"PAR1")
    for hidden in [
        "_SUCCESS",
        ".part-0.parquet.crc",
        "day=1/_SUCCESS",
        "day=1/.part-2.parquet.crc",
        "part-9.parquet._COPYING_",
        "_temporary/0/part-5.parquet",
        ".spark-staging/part-6.parquet",
        f"{INDEX_DIR}/junk.bin",
    ]:
        (root / hidden).parent.mkdir(parents=True, exist_ok=True)
        (root / hidden).write_bytes(b"not data")
    return root


def entries(
    root: Path, ids: dict[str, list[str]], column: str = "user_id", fpp: float = 0.01
) -> list[tuple[IdentityFilter, DataFile, tuple[str, ...], int]]:
    return [
        (IdentityFilter.build(hash_ids(values), fpp), DataFile.of(root, path), (column,), len(values))
        for path, values in ids.items()
    ]


def candidates(root: Path, ids: list[str], columns: list[str] | None = None) -> list[str]:
    return DatasetIndex.load(root).plan(hash_ids(ids), columns=columns).candidates


def segment_files(root: Path) -> list[Path]:
    return sorted((root / INDEX_DIR).glob(f"*{SUFFIX}"))


def rewrite(root: Path, relative: str, content: bytes) -> None:
    (root / relative).write_bytes(content)


def test_only_data_files_are_listed(root: Path) -> None:
    files = list_data_files(root)
    assert sorted(files) == sorted(IDS)
    for relative, data_file in files.items():
        status = (root / relative).stat()
        assert data_file == DataFile(relative, status.st_size, status.st_mtime_ns)


def test_a_missing_dataset_cannot_be_listed(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list_data_files(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("name", "hidden"),
    [
        ("_SUCCESS", True),
        ("_tracelake_index", True),
        (".part-0.crc", True),
        ("part-0.parquet._COPYING_", True),
        ("_n=3", False),
        ("day=1", False),
        ("part-0.parquet", False),
    ],
)
def test_hidden_names_follow_sparks_rule(name: str, hidden: bool) -> None:
    assert is_hidden(name) is hidden


def test_files_holding_a_requested_id_are_the_candidates(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    assert candidates(root, ["u1"]) == ["day=1/part-2.parquet", "part-0.parquet"]
    assert candidates(root, ["u7"]) == ["_n=3/part-3.parquet"]
    assert candidates(root, ["u5", "u3"]) == ["part-0.parquet", "part-1.parquet"]
    assert candidates(root, ["nobody"]) == []


def test_a_plan_reports_what_it_skips(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    plan = DatasetIndex.load(root).plan(hash_ids(["u4"]))
    assert plan.root == root.absolute()
    assert plan.files == 4
    assert plan.candidates == ["part-1.parquet"]
    assert plan.unindexed == []
    assert plan.skipped == 3
    assert not plan.full_scan
    assert plan.probe_seconds >= 0


def test_an_id_in_any_identity_column_makes_its_file_a_candidate(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS) + entries(root, EMAILS, column="email"))
    assert candidates(root, ["u5"]) == ["day=1/part-2.parquet", "part-1.parquet"]
    assert candidates(root, ["u5"], columns=["user_id"]) == ["part-1.parquet"]
    assert candidates(root, ["u5"], columns=["email"]) == ["day=1/part-2.parquet"]
    assert candidates(root, ["d@x"]) == ["_n=3/part-3.parquet"]


def test_a_dataset_without_an_index_is_read_whole(root: Path) -> None:
    index = DatasetIndex.load(root)
    assert index.segments == []
    assert index.problems == []
    plan = index.plan(hash_ids(["u1"]), full_scan_at=1.1)
    assert plan.candidates == sorted(IDS)
    assert sorted(plan.unindexed) == sorted(IDS)


def test_a_file_without_a_filter_is_read(root: Path) -> None:
    indexed = {path: ids for path, ids in IDS.items() if path != "part-1.parquet"}
    DatasetIndex(root).write_segment(entries(root, indexed))
    plan = DatasetIndex.load(root).plan(hash_ids(["u1"]))
    assert plan.unindexed == ["part-1.parquet"]
    assert plan.candidates == ["day=1/part-2.parquet", "part-0.parquet", "part-1.parquet"]


def test_a_file_missing_a_filter_for_a_wanted_column_is_read(root: Path) -> None:
    emails = {path: ids for path, ids in EMAILS.items() if path != "part-0.parquet"}
    DatasetIndex(root).write_segment(entries(root, IDS) + entries(root, emails, column="email"))
    plan = DatasetIndex.load(root).plan(hash_ids(["u4"]))
    assert plan.unindexed == ["part-0.parquet"]
    assert plan.candidates == ["part-0.parquet", "part-1.parquet"]
    assert candidates(root, ["u4"], columns=["email"]) == ["part-0.parquet"]
    assert candidates(root, ["u4"], columns=["user_id"]) == ["part-1.parquet"]
    assert candidates(root, ["u4"], columns=["phone"]) == sorted(IDS)


def test_a_stale_filter_never_skips_its_file_after_a_rewrite(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    rewrite(root, "part-1.parquet", b"PAR1 now holds u8 too PAR1")
    plan = DatasetIndex.load(root).plan(hash_ids(["u8"]))
    assert plan.unindexed == ["part-1.parquet"]
    assert plan.candidates == ["part-1.parquet"]


def test_a_stale_filter_never_skips_its_file_when_only_its_mtime_changed(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    path = root / "part-0.parquet"
    before = path.stat()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1000))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns + 1000)
    plan = DatasetIndex.load(root).plan(hash_ids(["u4"]))
    assert plan.unindexed == ["part-0.parquet"]
    assert plan.candidates == ["part-0.parquet", "part-1.parquet"]


def test_reindexing_a_rewritten_file_makes_it_skippable_again(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    rewrite(root, "part-1.parquet", b"PAR1 holds u8 only now PAR1")
    DatasetIndex(root).write_segment(entries(root, {"part-1.parquet": ["u8"]}))
    assert candidates(root, ["u8"]) == ["part-1.parquet"]
    assert candidates(root, ["u4"]) == []


def test_the_newest_fresh_filter_of_a_file_wins(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    DatasetIndex(root).write_segment(entries(root, {"part-0.parquet": ["u9"]}))
    assert len(segment_files(root)) == 2
    assert candidates(root, ["u9"]) == ["part-0.parquet"]
    assert candidates(root, ["u2"]) == []
    assert candidates(root, ["u1"]) == ["day=1/part-2.parquet"]


def test_an_older_filter_still_matching_its_file_outlives_a_newer_stale_one(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    current = DataFile.of(root, "part-0.parquet")
    never_landed = DataFile(current.path, current.size + 100, current.mtime_ns + 5)
    DatasetIndex(root).write_segment(
        [(IdentityFilter.build(hash_ids(["u9"])), never_landed, ("user_id",), 1)]
    )
    plan = DatasetIndex.load(root).plan(hash_ids(["u2"]))
    assert plan.unindexed == []
    assert plan.candidates == ["part-0.parquet"]
    assert candidates(root, ["u9"]) == []


def test_a_plan_turns_into_a_full_scan_when_most_files_are_candidates(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    half = DatasetIndex.load(root).plan(hash_ids(["u1"]), full_scan_at=0.5)
    assert half.full_scan
    assert half.candidates == sorted(IDS)
    assert half.skipped == 0
    below = DatasetIndex.load(root).plan(hash_ids(["u1"]), full_scan_at=0.51)
    assert not below.full_scan
    assert below.candidates == ["day=1/part-2.parquet", "part-0.parquet"]
    assert not DatasetIndex.load(root).plan(hash_ids(["u1", "u4"])).full_scan
    assert DatasetIndex.load(root).plan(hash_ids(["u1", "u4", "u7"])).full_scan


def test_unindexed_files_count_towards_a_full_scan(root: Path) -> None:
    indexed = {path: ids for path, ids in IDS.items() if path in ("part-0.parquet", "part-1.parquet")}
    DatasetIndex(root).write_segment(entries(root, indexed))
    plan = DatasetIndex.load(root).plan(hash_ids(["u4"]), full_scan_at=0.75)
    assert plan.full_scan
    assert plan.candidates == sorted(IDS)


def test_no_ids_read_only_unindexed_files(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    none = np.zeros(0, dtype=np.uint64)
    assert DatasetIndex.load(root).plan(none).candidates == []
    rewrite(root, "part-1.parquet", b"PAR1 rewritten PAR1")
    plan = DatasetIndex.load(root).plan(none)
    assert plan.candidates == ["part-1.parquet"]
    assert not plan.full_scan


def test_a_plan_can_be_given_the_files_to_consider(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    files = {path: data_file for path, data_file in list_data_files(root).items() if path != "part-0.parquet"}
    plan = DatasetIndex.load(root).plan(hash_ids(["u1"]), files=files)
    assert plan.files == 3
    assert plan.candidates == ["day=1/part-2.parquet"]
    assert DatasetIndex.load(root).plan(hash_ids(["u1"]), files={}).candidates == []


def test_a_corrupt_segment_is_skipped_and_its_files_are_read(root: Path) -> None:
    first = {path: IDS[path] for path in ("part-0.parquet", "part-1.parquet")}
    second = {path: IDS[path] for path in ("day=1/part-2.parquet", "_n=3/part-3.parquet")}
    DatasetIndex(root).write_segment(entries(root, first))
    broken = DatasetIndex(root).write_segment(entries(root, second))
    assert broken is not None
    broken.write_bytes(broken.read_bytes()[:-5])
    index = DatasetIndex.load(root)
    assert len(index.segments) == 1
    assert len(index.problems) == 1
    assert broken.name in index.problems[0]
    plan = index.plan(hash_ids(["u4"]))
    assert sorted(plan.unindexed) == sorted(second)
    assert plan.candidates == ["_n=3/part-3.parquet", "day=1/part-2.parquet", "part-1.parquet"]


def test_a_segment_with_an_unreadable_entry_is_skipped_not_raised(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    later = DatasetIndex(root).write_segment(entries(root, {"part-1.parquet": ["u4", "u5"]}))
    assert later is not None
    content = later.read_bytes()
    assert content.count(b'"kind":"exact"') == 1
    later.write_bytes(content.replace(b'"kind":"exact"', b'"kind":"exakt"'))
    index = DatasetIndex.load(root)
    assert len(index.segments) == 1
    assert len(index.problems) == 1
    assert index.plan(hash_ids(["u4"])).candidates == ["part-1.parquet"]


def test_an_empty_segment_file_is_skipped(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    (root / INDEX_DIR / f"seg-99999999999999999999-00000000{SUFFIX}").write_bytes(b"")
    index = DatasetIndex.load(root)
    assert len(index.problems) == 1
    assert index.plan(hash_ids(["u7"])).candidates == ["_n=3/part-3.parquet"]


def test_writing_no_entries_writes_no_segment(root: Path) -> None:
    assert DatasetIndex(root).write_segment([]) is None
    assert list((root / INDEX_DIR).iterdir()) == [root / INDEX_DIR / "junk.bin"]


def test_compaction_keeps_only_fresh_filters_and_changes_no_answer(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, IDS))
    DatasetIndex(root).write_segment(entries(root, EMAILS, column="email"))
    DatasetIndex(root).write_segment(entries(root, {"part-0.parquet": ["u1", "u2", "u3", "u10"]}))
    rewrite(root, "part-1.parquet", b"PAR1 rewritten after indexing PAR1")
    requests = [["u1"], ["u4"], ["u10"], ["c@x"], ["u5", "d@x"], ["nobody"], []]
    before = [DatasetIndex.load(root).plan(hash_ids(ids)) for ids in requests]
    fresh_before = {
        (path, columns_of(stored))
        for path, filters in DatasetIndex.load(root).fresh(list_data_files(root)).items()
        for stored in filters
    }
    merged = DatasetIndex.load(root).compact(force=True)
    assert merged is not None
    assert segment_files(root) == [merged]
    index = DatasetIndex.load(root)
    kept = [(str(stored.meta["file"]), columns_of(stored)) for stored in index.segments[0].filters]
    assert len(kept) == len(set(kept))
    assert set(kept) == fresh_before
    assert ("part-1.parquet", ("user_id",)) not in set(kept)
    after = [index.plan(hash_ids(ids)) for ids in requests]
    for old, new in zip(before, after, strict=True):
        assert (new.candidates, new.unindexed, new.full_scan) == (
            old.candidates,
            old.unindexed,
            old.full_scan,
        )


def test_compaction_waits_for_enough_segments(root: Path) -> None:
    for path, ids in IDS.items():
        DatasetIndex(root).write_segment(entries(root, {path: ids}))
    names = segment_files(root)
    assert len(names) == 4 < COMPACT_AFTER
    assert DatasetIndex.load(root).compact() is None
    assert segment_files(root) == names


def test_compaction_folds_a_long_history_into_one_segment(root: Path) -> None:
    for round_ in range(COMPACT_AFTER):
        DatasetIndex(root).write_segment(entries(root, {"part-0.parquet": [f"u{round_}"]}))
    merged = DatasetIndex.load(root).compact()
    assert merged is not None
    assert segment_files(root) == [merged]
    index = DatasetIndex.load(root)
    assert [stored.meta["file"] for stored in index.segments[0].filters] == ["part-0.parquet"]
    others = sorted(set(IDS) - {"part-0.parquet"})
    assert index.plan(hash_ids([f"u{COMPACT_AFTER - 1}"]), full_scan_at=1.1).candidates == sorted(IDS)
    assert index.plan(hash_ids(["u0"]), full_scan_at=1.1).candidates == others


def test_compacting_an_index_with_nothing_fresh_leaves_no_segment(root: Path) -> None:
    DatasetIndex(root).write_segment(entries(root, {"part-0.parquet": IDS["part-0.parquet"]}))
    rewrite(root, "part-0.parquet", b"PAR1 rewritten PAR1")
    assert DatasetIndex.load(root).compact(force=True) is None
    assert segment_files(root) == []
    assert DatasetIndex.load(root).plan(hash_ids(["u1"]), full_scan_at=1.1).candidates == sorted(IDS)


def test_filters_of_every_kind_and_width_in_one_segment_find_their_ids(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    sizes = {
        "exact.bin": 40,
        "fuse8.bin": 5000,
        "fuse16.bin": 3000,
        "fuse11.bin": 4000,
        "fuse5.bin": 2500,
        "small8.bin": 65,
        "small11.bin": 70,
        "empty.bin": 0,
    }
    fpps = {"fuse16.bin": 2.0**-16, "fuse11.bin": 2.0**-11, "small11.bin": 2.0**-11, "fuse5.bin": 2.0**-5}
    keys = {name: rng.integers(0, 2**64, size=size, dtype=np.uint64) for name, size in sizes.items()}
    for name in sizes:
        (tmp_path / name).write_bytes(name.encode())
    filters = {name: IdentityFilter.build(keys[name], fpps.get(name, 2.0**-8)) for name in sizes}
    assert {(f.kind, f.bits) for f in filters.values()} == {
        ("exact", 0),
        ("fuse", 8),
        ("fuse", 16),
        ("fuse", 11),
        ("fuse", 5),
    }
    DatasetIndex(tmp_path).write_segment(
        [(filters[name], DataFile.of(tmp_path, name), ("id",), sizes[name]) for name in sorted(sizes)]
    )
    index = DatasetIndex.load(tmp_path)
    for name in sizes:
        for key in keys[name][:50]:
            probe = np.array([key], dtype=np.uint64)
            plan = index.plan(probe, full_scan_at=1.1)
            assert name in plan.candidates
            assert plan.candidates == sorted(n for n in sizes if filters[n].might_contain(probe)[0])
    absent = rng.integers(0, 2**64, size=2000, dtype=np.uint64)
    expected = sorted(name for name in sizes if filters[name].might_contain(absent).any())
    assert index.plan(absent, full_scan_at=1.1).candidates == expected


def test_probing_many_files_finds_exactly_what_each_filter_says(tmp_path: Path) -> None:
    count, per_file = 300, 2000
    holders = {"f007.bin", "f150.bin", "f299.bin"}
    target = hash_ids(["wanted"])
    rng = np.random.default_rng(17)
    filters: dict[str, IdentityFilter] = {}
    stored = []
    for number in range(count):
        name = f"f{number:03d}.bin"
        (tmp_path / name).write_bytes(number.to_bytes(2, "little"))
        keys = rng.integers(0, 2**64, size=per_file, dtype=np.uint64)
        if name in holders:
            keys[123] = target[0]
        filters[name] = IdentityFilter.build(keys)
        assert (filters[name].kind, filters[name].bits) == ("fuse", 10)  # the default rate, 0.1%
        stored.append((filters[name], DataFile.of(tmp_path, name), ("id",), per_file))
    DatasetIndex(tmp_path).write_segment(stored[:150])
    DatasetIndex(tmp_path).write_segment(stored[150:])
    index = DatasetIndex.load(tmp_path)
    plan = index.plan(target)
    assert holders <= set(plan.candidates)
    assert len(plan.candidates) <= len(holders) + 10
    assert not plan.full_scan
    assert plan.candidates == sorted(name for name, f in filters.items() if f.might_contain(target)[0])
    batch = np.concatenate([target, rng.integers(0, 2**64, size=500, dtype=np.uint64)])
    brute = sorted(name for name, f in filters.items() if f.might_contain(batch).any())
    assert index.plan(batch, full_scan_at=1.1).candidates == brute


def union_entries(root: Path, ids: dict[str, list[str]], columns: tuple[str, ...]) -> list[Any]:
    """One filter a file over the ids of all its `columns`, as writes make them now."""
    return [
        (IdentityFilter.build(hash_ids(values)), DataFile.of(root, path), columns, len(values))
        for path, values in ids.items()
    ]


def test_one_filter_over_several_columns_answers_for_each_of_them(root: Path) -> None:
    both = {path: IDS[path] + EMAILS.get(path, []) for path in IDS}
    DatasetIndex(root).write_segment(union_entries(root, both, ("user_id", "email")))
    index = DatasetIndex.load(root)
    files = list_data_files(root)

    assert index.columns() == {"user_id", "email"}
    for columns in (["user_id"], ["email"], ["user_id", "email"]):
        covered = index.fresh(files, columns)
        assert set(covered) == set(IDS), columns
        assert all(len(filters) == 1 for filters in covered.values())  # the one filter, once
    # u5 is a user id of part-1 and an email of part-2
    assert candidates(root, ["u5"]) == ["day=1/part-2.parquet", "part-1.parquet"]
    assert candidates(root, ["c@x"], columns=["email"]) == sorted(p for p, v in EMAILS.items() if "c@x" in v)
    # a column no filter holds still makes every file a candidate
    assert candidates(root, ["u5"], columns=["phone"]) == sorted(IDS)


def test_a_newer_filter_over_all_columns_replaces_older_ones_of_single_columns(root: Path) -> None:
    # an index written before filters held several columns, then a file rewritten and indexed anew
    DatasetIndex(root).write_segment(entries(root, IDS) + entries(root, EMAILS, column="email"))
    rewrite(root, "part-1.parquet", b"PAR1 rewritten PAR1")
    DatasetIndex(root).write_segment(
        union_entries(root, {"part-1.parquet": ["u77", "z@x"]}, ("user_id", "email"))
    )
    index = DatasetIndex.load(root)
    covered = index.fresh(list_data_files(root), ["user_id", "email"])

    assert [columns_of(s) for s in covered["part-1.parquet"]] == [("user_id", "email")]
    assert candidates(root, ["u77"]) == ["part-1.parquet"]
    # part-1's old filters describe a file that is gone; part-2 still holds u5 as an email
    assert candidates(root, ["u5"]) == ["day=1/part-2.parquet"]


def test_no_bit_flipped_anywhere_in_a_segment_makes_a_file_holding_an_id_skipped(tmp_path: Path) -> None:
    """Every 53rd bit of a segment (tables, their checksums, padding, the footer, the tail) flipped
    in turn: each id is still found in its file, whichever way the damage shows (a segment
    refused, a file made unindexed, a block failing its checksum, metadata that no longer
    matches the file)."""
    rng = np.random.default_rng(41)
    held = {
        "eleven.bin": ([f"e{n}" for n in range(66)], 2.0**-11),
        "eight.bin": ([f"g{n}" for n in range(66)], 2.0**-8),
        "exact.bin": ([f"x{n}" for n in range(10)], 2.0**-8),
    }
    for name in held:
        (tmp_path / name).write_bytes(name.encode())
    DatasetIndex(tmp_path).write_segment(
        [
            (IdentityFilter.build(hash_ids(ids), fpp), DataFile.of(tmp_path, name), ("id",), len(ids))
            for name, (ids, fpp) in held.items()
        ]
    )
    (segment,) = segment_files(tmp_path)
    pristine = segment.read_bytes()
    files = list_data_files(tmp_path)
    keys = {name: hash_ids(ids) for name, (ids, _) in held.items()}
    flips = range(int(rng.integers(53)), 8 * len(pristine), 53)
    caught = 0
    for bit in flips:
        damaged = bytearray(pristine)
        damaged[bit // 8] ^= 1 << (bit % 8)
        segment.write_bytes(bytes(damaged))
        index = DatasetIndex.load(tmp_path)
        for name, file_keys in keys.items():
            for key in file_keys:
                plan = index.plan(key.reshape(1), files=files, full_scan_at=2.0)
                assert name in plan.candidates, f"bit {bit} of {len(pristine) * 8} hid {name}'s id"
        caught += bool(index.problems)
    # the damage was seen, not merely harmless: nearly every flip lands in checked bytes
    assert caught > 0.8 * len(flips), f"{caught} of {len(flips)} flips seen"


def damage_table_of(root: Path, file: str) -> None:
    """Flip one bit in the middle of `file`'s filter table, in whichever segment holds it."""
    index = DatasetIndex.load(root)
    stored = next(s for segment in index.segments for s in segment.filters if s.meta["file"] == file)
    content = bytearray(stored.segment.path.read_bytes())
    content[stored.offset + stored.filter.nbytes // 2] ^= 0x04
    stored.segment.path.write_bytes(bytes(content))


def test_a_damaged_filter_makes_its_file_read_and_is_recorded(root: Path) -> None:
    many = {path: [f"{path}-{n}" for n in range(500)] for path in IDS}
    DatasetIndex(root).write_segment(entries(root, many))
    damage_table_of(root, "part-1.parquet")
    index = DatasetIndex.load(root)

    plan = index.plan(hash_ids(["part-0.parquet-7"]))  # an id the damaged file does not hold
    assert "part-1.parquet" in plan.unindexed and "part-1.parquet" in plan.candidates
    assert [p for p in index.problems if "part-1.parquet" in p and "checksum" in p]
    # and a request's receipt says so
    assert plan.problems == index.problems
    assert DatasetScan.of(plan).index_problems == plan.problems


def test_compaction_never_copies_a_damaged_filter(root: Path) -> None:
    many = {path: [f"{path}-{n}" for n in range(500)] for path in IDS}
    DatasetIndex(root).write_segment(entries(root, many))
    DatasetIndex(root).write_segment(entries(root, {"part-0.parquet": many["part-0.parquet"]}))
    damage_table_of(root, "part-1.parquet")
    index = DatasetIndex.load(root)

    merged = index.compact(force=True)
    assert merged is not None
    # written anew, the damaged table would carry checksums of its damage and pass them: it is left
    # out, and its file is read until it is indexed again
    kept = {str(s.meta["file"]) for s in DatasetIndex.load(root).segments[0].filters}
    assert kept == set(IDS) - {"part-1.parquet"}
    assert candidates(root, ["nobody"]) == ["part-1.parquet"]
    assert [p for p in index.problems if "part-1.parquet" in p]


def test_a_lookup_checks_the_blocks_it_reads_and_no_more(tmp_path: Path) -> None:
    ids = [f"u{n}" for n in range(60_000)]  # 10 bits: ~87 KB of table, 22 blocks
    (tmp_path / "a.bin").write_bytes(b"a")
    built = IdentityFilter.build(hash_ids(ids))
    DatasetIndex(tmp_path).write_segment([(built, DataFile.of(tmp_path, "a.bin"), ("id",), len(ids))])
    key = next(
        k for k in hash_ids(f"nobody-{n}" for n in range(100)) if not built.might_contain(k.reshape(1))[0]
    )
    shape = [np.array([value], dtype=np.uint64) for value in built.fuse_shape()]
    _, slots = fuse_slots(built.bits, *shape, key.reshape(1))
    start = slot_bytes(slots, built.bits).ravel()
    read = set((start // BLOCK).tolist()) | set(((start + 2) // BLOCK).tolist())
    segment = segment_files(tmp_path)[0]
    table_at = DatasetIndex.load(tmp_path).segments[0].filters[0].offset
    pristine = segment.read_bytes()

    def plan_with_block_damaged(block: int) -> ScanPlan:
        damaged = bytearray(pristine)
        damaged[table_at + block * BLOCK + 1] ^= 0x01
        segment.write_bytes(bytes(damaged))
        return DatasetIndex.load(tmp_path).plan(key.reshape(1))

    unread = next(block for block in range(22) if block not in read)
    untouched = plan_with_block_damaged(unread)  # damage the lookup never reads cannot change it
    assert (untouched.candidates, untouched.problems) == ([], [])
    touched = plan_with_block_damaged(min(read))
    assert (touched.candidates, touched.unindexed) == (["a.bin"], ["a.bin"])
    assert touched.problems
