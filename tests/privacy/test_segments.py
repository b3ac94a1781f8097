"""Tests for index segments: many filters in one file, written atomically and read back safely.

A segment must give back every filter with the metadata it was written with and the same answers,
its tables 8-byte aligned in the file; it must appear under its final name only once complete and
leave nothing behind when writing fails; anything that is not a whole segment of a known version
must be refused with `SegmentError`, which the index treats as "skip this segment"; and no bit
flipped anywhere in a segment may make a request skip a file that holds an id (checksums of the
footer and of every block of every table). Segments of the first version, without checksums,
still read.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import xxhash

from tracelake.privacy.filters import IdentityFilter, hash_ids
from tracelake.privacy.segments import (
    BLOCK,
    MAGIC,
    SUFFIX,
    SegmentError,
    SegmentWriter,
    new_segment_path,
    read_segment,
)


def random_keys(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)


def sample_filters() -> list[tuple[IdentityFilter, dict[str, object]]]:
    return [
        (
            IdentityFilter.build(hash_ids(["u1", "u2", "u3"])),
            {"file": "a.parquet", "column": "id", "rows": 3},
        ),
        (
            IdentityFilter.build(random_keys(1001, seed=1)),
            {"file": "b.parquet", "column": "id", "rows": 1001},
        ),
        (
            IdentityFilter.build(np.zeros(0, dtype=np.uint64)),
            {"file": "c.parquet", "column": "id", "rows": 0},
        ),
        (
            IdentityFilter.build(random_keys(777, seed=2), fpp=1e-4),
            {"file": "d=1/e.parquet", "column": "email", "rows": 800, "nested": {"k": [1, 2]}},
        ),
        (IdentityFilter.build(random_keys(65, seed=3)), {"file": "f.parquet", "column": "id", "rows": 65}),
    ]


def write_sample(path: Path) -> list[tuple[IdentityFilter, dict[str, object]]]:
    filters = sample_filters()
    with SegmentWriter(path) as writer:
        for identity_filter, meta in filters:
            writer.add(identity_filter, **meta)
    return filters


def raw_segment(footer: object, data: bytes = b"") -> bytes:
    """A segment of today's layout: the footer's checksum, its length and the magic at the end."""
    encoded = json.dumps(footer).encode()
    return data + encoded + struct.pack("<QQ8s", xxhash.xxh3_64_intdigest(encoded), len(encoded), MAGIC)


def v1_segment(filters: list[tuple[IdentityFilter, dict[str, object]]]) -> bytes:
    """A segment as the first version wrote it: tables 8-byte aligned, no checksums, the footer's
    length and magic `TLIDX\\0\\1\\n` at the end."""
    data, entries = b"", []
    for identity_filter, meta in filters:
        data += b"\0" * (-len(data) % 8)
        table = identity_filter.table.tobytes()
        entries.append(
            {"offset": len(data), "length": len(table), "filter": identity_filter.params(), **meta}
        )
        data += table
    encoded = json.dumps({"version": 1, "entries": entries}).encode()
    return data + encoded + struct.pack("<Q8s", len(encoded), b"TLIDX\x00\x01\n")


def test_a_segment_gives_back_every_filter_with_its_metadata(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    written = write_sample(path)
    segment = read_segment(path)
    assert segment.path == path
    assert [stored.meta for stored in segment.filters] == [meta for _, meta in written]
    probes = np.concatenate([hash_ids(["u1", "u9"]), random_keys(1001, seed=1), random_keys(20_000, seed=9)])
    for stored, (original, _) in zip(segment.filters, written, strict=True):
        assert stored.filter.kind == original.kind
        assert stored.filter.keys == original.keys
        assert stored.filter.fuse_shape() == original.fuse_shape()
        assert np.array_equal(stored.filter.table, original.table)
        assert np.array_equal(stored.filter.might_contain(probes), original.might_contain(probes))


def test_tables_are_eight_byte_aligned_and_where_the_footer_says(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    written = write_sample(path)
    content = path.read_bytes()
    for stored, (original, _) in zip(read_segment(path).filters, written, strict=True):
        assert stored.offset % 8 == 0
        assert content[stored.offset : stored.offset + original.nbytes] == original.table.tobytes()


def test_a_segment_appears_under_its_name_only_when_closed(tmp_path: Path) -> None:
    path = tmp_path / "index" / f"one{SUFFIX}"
    with SegmentWriter(path) as writer:
        writer.add(IdentityFilter.build(hash_ids(["u1"])), file="a", column="id")
        assert not path.exists()
        leftovers = list(path.parent.iterdir())
        assert len(leftovers) == 1
        assert leftovers[0].name.endswith(".partial")
        assert leftovers[0].name.startswith(".")
        assert len(writer) == 1
    assert [entry.name for entry in path.parent.iterdir()] == [path.name]
    assert len(read_segment(path).filters) == 1


def test_a_failure_while_writing_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    with pytest.raises(RuntimeError, match="boom"), SegmentWriter(path) as writer:
        writer.add(IdentityFilter.build(random_keys(5000, seed=1)), file="a", column="id")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_an_aborted_segment_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    with SegmentWriter(path) as writer:
        writer.add(IdentityFilter.build(hash_ids(["u1"])), file="a", column="id")
        writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_a_segment_without_filters_is_readable(tmp_path: Path) -> None:
    path = tmp_path / f"empty{SUFFIX}"
    with SegmentWriter(path):
        pass
    assert read_segment(path).filters == []


def test_an_empty_file_is_not_a_segment(tmp_path: Path) -> None:
    path = tmp_path / f"empty{SUFFIX}"
    path.write_bytes(b"")
    with pytest.raises(SegmentError):
        read_segment(path)


def test_a_foreign_file_is_not_a_segment(tmp_path: Path) -> None:
    path = tmp_path / f"foreign{SUFFIX}"
    path.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    with pytest.raises(SegmentError, match="magic"):
        read_segment(path)


def test_a_wrong_magic_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    write_sample(path)
    content = path.read_bytes()
    path.write_bytes(content[:-1] + b"\x00")
    with pytest.raises(SegmentError):
        read_segment(path)


@pytest.mark.parametrize("cut", [1, 8, 16, 100])
def test_a_segment_cut_short_is_refused(tmp_path: Path, cut: int) -> None:
    path = tmp_path / f"one{SUFFIX}"
    write_sample(path)
    content = path.read_bytes()
    path.write_bytes(content[:-cut])
    with pytest.raises(SegmentError):
        read_segment(path)


def test_a_segment_missing_its_first_bytes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    write_sample(path)
    path.write_bytes(path.read_bytes()[64:])
    with pytest.raises(SegmentError, match="outside"):
        read_segment(path)


def test_a_footer_longer_than_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    path.write_bytes(b"{}" + struct.pack("<QQ8s", 0, 1000, MAGIC))
    with pytest.raises(SegmentError):
        read_segment(path)


def test_an_unreadable_footer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    footer = b"\xff\xfe{not json"
    path.write_bytes(footer + struct.pack("<QQ8s", xxhash.xxh3_64_intdigest(footer), len(footer), MAGIC))
    with pytest.raises(SegmentError, match="footer"):
        read_segment(path)


@pytest.mark.parametrize("version", [1, 3, 0, None, "2"])
def test_a_footer_of_an_unsupported_version_is_refused(tmp_path: Path, version: object) -> None:
    path = tmp_path / f"future{SUFFIX}"
    path.write_bytes(raw_segment({"version": version, "entries": []}))
    with pytest.raises(SegmentError, match="version"):
        read_segment(path)


@pytest.mark.parametrize(
    "entry",
    [
        {"offset": 0, "length": 8, "filter": {"kind": "fuse32", "keys": 1}},
        {"offset": 0, "length": 8},
        {"offset": 0, "length": 3, "filter": {"kind": "exact", "keys": 1}},
        {"offset": -8, "length": 8, "filter": {"kind": "exact", "keys": 1}},
    ],
)
def test_a_footer_entry_that_cannot_be_read_is_refused(tmp_path: Path, entry: dict[str, object]) -> None:
    path = tmp_path / f"odd{SUFFIX}"
    path.write_bytes(raw_segment({"version": 2, "entries": [entry | {"sums": 0}]}, data=b"\0" * 16))
    with pytest.raises(SegmentError):
        read_segment(path)


def test_a_footer_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"odd{SUFFIX}"
    path.write_bytes(raw_segment([1, 2, 3]))
    with pytest.raises(SegmentError):
        read_segment(path)


def test_new_segment_names_sort_in_creation_order(tmp_path: Path) -> None:
    names = [new_segment_path(tmp_path).name for _ in range(200)]
    assert sorted(names) == names
    assert len(set(names)) == len(names)
    assert all(name.startswith("seg-") and name.endswith(SUFFIX) for name in names)
    assert new_segment_path(tmp_path, "task").name.startswith("task-")
    assert new_segment_path(tmp_path).parent == tmp_path


def test_a_segment_of_the_first_version_reads_and_answers_as_written(tmp_path: Path) -> None:
    path = tmp_path / f"old{SUFFIX}"
    written = sample_filters()
    path.write_bytes(v1_segment(written))
    segment = read_segment(path)
    probes = np.concatenate([hash_ids(["u1", "u9"]), random_keys(1001, seed=1), random_keys(20_000, seed=9)])
    assert [stored.meta for stored in segment.filters] == [meta for _, meta in written]
    for stored, (original, _) in zip(segment.filters, written, strict=True):
        assert stored.blocks == 0 and not stored.damaged()  # nothing to check it against
        assert np.array_equal(stored.filter.might_contain(probes), original.might_contain(probes))


def test_every_block_of_a_table_has_its_checksum_after_it(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    write_sample(path)
    content = path.read_bytes()
    segment = read_segment(path)
    for stored in segment.filters:
        table = content[stored.offset : stored.offset + stored.filter.nbytes]
        assert stored.blocks == -(-len(table) // BLOCK)
        sums = segment.sums[stored.first_block : stored.first_block + stored.blocks]
        expected = [xxhash.xxh3_64_intdigest(table[at : at + BLOCK]) for at in range(0, len(table), BLOCK)]
        assert sums.tolist() == expected
        assert not stored.damaged()
    assert len(segment.sums) == sum(stored.blocks for stored in segment.filters)


def test_a_footer_that_fails_its_checksum_is_refused(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    write_sample(path)
    content = bytearray(path.read_bytes())
    at = content.rindex(b'"rows"')  # inside the footer: a digit of a row count changes
    content[at + 7] ^= 0x01
    path.write_bytes(bytes(content))
    with pytest.raises(SegmentError, match="checksum"):
        read_segment(path)


def test_a_flipped_bit_in_a_table_marks_only_the_blocks_that_hold_it(tmp_path: Path) -> None:
    path = tmp_path / f"one{SUFFIX}"
    big = IdentityFilter.build(random_keys(30_000, seed=5), fpp=2.0**-11)  # ~50 KB: 13 blocks
    with SegmentWriter(path) as writer:
        writer.add(big, file="a", columns=["id"])
    stored = read_segment(path).filters[0]
    content = bytearray(path.read_bytes())
    content[stored.offset + 5 * BLOCK + 100] ^= 0x10
    path.write_bytes(bytes(content))

    stored = read_segment(path).filters[0]
    assert not stored.damaged(np.array([0, BLOCK, 4 * BLOCK + 17]))  # blocks 0, 1 and 4
    assert stored.damaged(np.array([5 * BLOCK + 3000]))
    assert stored.damaged()  # and the whole table is damaged
    assert stored.damaged(np.array([5 * BLOCK]))  # a block found bad stays bad for later lookups
    # a slot read at a block's last bytes spans into the next block
    assert stored.damaged(np.array([5 * BLOCK - 1]))
