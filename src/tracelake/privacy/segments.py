"""Index segments: many identity filters in one file, so an index is a few files, not thousands.

A segment is the filters' tables back to back (each 8-byte aligned, each followed by the
checksums of its 4 KiB blocks), then a JSON footer that lists, for every filter, where its table
and checksums sit, how to read it (`IdentityFilter.params`) and what it describes (free
metadata: the data file, its size and modification time, the columns…), then the footer's
checksum, its length and a magic number — Parquet's layout, so a writer streams tables out as
they come and a reader finds everything from the end. Tables are read through a memory map:
opening a segment reads its footer only, and a lookup touches only the pages it probes.

Nothing read from a segment is trusted unchecked, since a filter that lost an id would make a
request skip a file that holds it. The footer is checked when the segment is opened (a damaged
one is no segment: its files are read); a table's blocks are checked when a lookup first reads
them (`StoredFilter.damaged`), so a one-id request checks the few blocks it probes, not the
whole index, and a damaged filter's file is read. Checksums are XXH3-64. Segments written
before checksums (version 1) are read as they are.

A segment is written under a temporary name and renamed into place when complete: a reader sees
a whole segment or none.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import xxhash

from tracelake.privacy.filters import IdentityFilter

MAGIC = b"TLIDX\x00\x02\n"
SUFFIX = ".tli"
BLOCK = 4096  # bytes of a table under one checksum
_TAIL = struct.Struct("<QQ8s")  # footer checksum, footer length, magic
_MAGIC_V1 = b"TLIDX\x00\x01\n"  # before checksums: no footer checksum in the tail
_TAIL_V1 = struct.Struct("<Q8s")
_ALIGN = 8
_UNCHECKED, _GOOD, _BAD = 0, 1, 2


class SegmentError(ValueError):
    """A file that is not a readable segment (truncated, foreign, or of an unknown version)."""


@dataclass(frozen=True)
class StoredFilter:
    """One filter of a segment, with the metadata it was written with."""

    segment: Segment
    meta: dict[str, Any]
    filter: IdentityFilter
    offset: int  # byte offset of its table in the segment
    first_block: int = 0  # its table's first block among the segment's checksummed blocks
    blocks: int = 0  # its table's blocks (0: a segment written before checksums)

    def damaged(self, positions: np.ndarray | None = None) -> bool:
        """Whether a block of the table holding any of the byte `positions` (every block when
        None) fails its checksum. A lookup reading those bytes must not be trusted then."""
        if not self.blocks:
            return False
        if positions is None:
            return bool(
                self.segment.damaged_blocks(np.arange(self.first_block, self.first_block + self.blocks)).any()
            )
        return bool(damaged_tables([self], np.asarray(positions, dtype=np.int64).reshape(1, 1, -1))[0])


@dataclass(frozen=True, eq=False)
class Segment:
    """A segment's file, its bytes (memory-mapped) and its filters, with the checksums of its
    tables' blocks (all filters' in one array, so a lookup checks many filters' blocks at once)."""

    path: Path
    buffer: memoryview
    filters: list[StoredFilter] = field(default_factory=list)
    sums: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    spans: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))  # a block's bytes
    # per block: unchecked, good or bad (checked once, when a lookup first reads it)
    checked: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint8))

    def damaged_blocks(self, blocks: np.ndarray) -> np.ndarray:
        """For each of `blocks` (numbers among the segment's), whether it fails its checksum."""
        blocks = np.asarray(blocks, dtype=np.int64)
        todo = np.unique(blocks[self.checked[blocks] == _UNCHECKED])
        for block, (start, end), expected in zip(
            todo.tolist(), self.spans[todo].tolist(), self.sums[todo].tolist(), strict=True
        ):
            good = xxhash.xxh3_64_intdigest(self.buffer[start:end]) == expected
            self.checked[block] = _GOOD if good else _BAD
        damaged: np.ndarray = self.checked[blocks] == _BAD
        return damaged


class SegmentWriter:
    """Streams filters into a new segment at `path`; the file appears only on `close()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._partial = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.partial")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self._partial, "wb")  # noqa: SIM115 - closed in close()/abort()
        self._entries: list[dict[str, Any]] = []
        self._position = 0

    def add(self, identity_filter: IdentityFilter, **meta: Any) -> None:
        padding = -self._position % _ALIGN
        if padding:
            self._out.write(b"\0" * padding)
            self._position += padding
        data = identity_filter.table.tobytes()
        sums = block_sums(data)
        entry = {"offset": self._position, "length": len(data), "filter": identity_filter.params(), **meta}
        self._out.write(data)
        self._position += len(data)
        padding = -self._position % _ALIGN
        self._out.write(b"\0" * padding + sums.tobytes())
        entry["sums"] = self._position + padding
        self._position += padding + sums.nbytes
        self._entries.append(entry)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> Path:
        footer = json.dumps({"version": 2, "entries": self._entries}, separators=(",", ":")).encode()
        self._out.write(footer)
        self._out.write(_TAIL.pack(xxhash.xxh3_64_intdigest(footer), len(footer), MAGIC))
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
        os.replace(self._partial, self.path)
        return self.path

    def abort(self) -> None:
        self._out.close()
        self._partial.unlink(missing_ok=True)

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            self.abort()
        elif not self._out.closed:  # not already closed or aborted inside the block
            self.close()


def read_segment(path: Path) -> Segment:
    """The segment at `path`: its footer read and checked, its tables memory-mapped (not read)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _TAIL_V1.size:
            raise SegmentError(f"{path}: too short to be an index segment")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    magic = mapped[size - 8 :]
    if magic not in (MAGIC, _MAGIC_V1) or size < (_TAIL if magic == MAGIC else _TAIL_V1).size:
        raise SegmentError(f"{path}: not a Tracelake index segment (bad magic)")
    checksum: int | None = None
    if magic == MAGIC:
        tail = _TAIL
        checksum, footer_length, _ = _TAIL.unpack(mapped[size - _TAIL.size :])
    else:
        tail = _TAIL_V1
        footer_length, _ = _TAIL_V1.unpack(mapped[size - _TAIL_V1.size :])
    if footer_length > size - tail.size:
        raise SegmentError(f"{path}: not a Tracelake index segment (bad footer length)")
    start = size - tail.size - footer_length
    footer_bytes = mapped[start : size - tail.size]
    if checksum is not None and xxhash.xxh3_64_intdigest(footer_bytes) != checksum:
        raise SegmentError(f"{path}: the footer fails its checksum (the segment is damaged)")
    try:
        footer = json.loads(footer_bytes)
    except ValueError as error:
        raise SegmentError(f"{path}: unreadable footer ({error})") from None
    version = footer.get("version") if isinstance(footer, dict) else None
    if version != (2 if magic == MAGIC else 1):
        raise SegmentError(f"{path}: segment version {version!r} is not supported")
    buffer = memoryview(mapped)
    read: list[tuple[dict[str, Any], IdentityFilter, int, int, int]] = []
    sums: list[np.ndarray] = []
    spans: list[np.ndarray] = []
    try:
        for entry in footer["entries"]:
            offset, length = int(entry.pop("offset")), int(entry.pop("length"))
            if offset < 0 or length < 0 or offset + length > start:
                raise SegmentError(f"{path}: a filter lies outside the data")
            table = IdentityFilter.from_buffer(entry.pop("filter"), buffer[offset : offset + length])
            first, count = sum(map(len, sums)), 0
            if version == 2:
                at, count = int(entry.pop("sums")), -(-length // BLOCK)
                if at < 0 or at % _ALIGN or at + 8 * count > start:
                    raise SegmentError(f"{path}: a filter's checksums lie outside the data")
                sums.append(np.frombuffer(buffer[at : at + 8 * count], dtype="<u8"))
                starts = offset + BLOCK * np.arange(count, dtype=np.int64)
                spans.append(np.stack([starts, np.minimum(starts + BLOCK, offset + length)], axis=1))
            read.append((entry, table, offset, first, count))
    except SegmentError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SegmentError(f"{path}: unreadable filter entry ({error!r})") from None
    segment = Segment(path, buffer)
    if sums:
        segment = Segment(
            path,
            buffer,
            sums=np.concatenate(sums).astype(np.uint64),
            spans=np.concatenate(spans),
            checked=np.zeros(sum(map(len, sums)), dtype=np.uint8),
        )
    segment.filters.extend(StoredFilter(segment, *found) for found in read)
    return segment


def damaged_tables(filters: list[StoredFilter], read: np.ndarray) -> np.ndarray:
    """For filters of one segment, whether a block holding any byte a lookup read (`read`,
    (K, F, Q) byte positions in each table: K slots of Q keys) fails its checksum: all in numpy,
    each block hashed once in the segment's life."""
    segment = filters[0].segment
    if not len(segment.sums):  # written before checksums
        return np.zeros(len(filters), dtype=bool)
    firsts = np.array([stored.first_block for stored in filters], dtype=np.int64)
    counts = np.array([stored.blocks for stored in filters], dtype=np.int64)
    starts = np.cumsum(counts) - counts
    # the lookup reads (nearly) every block (each position and its third byte): check them all
    if 2 * read.shape[0] * read.shape[2] >= counts.mean():
        blocks = np.repeat(firsts - starts, counts) + np.arange(counts.sum())
        bad: np.ndarray = np.logical_or.reduceat(segment.damaged_blocks(blocks), starts)
        return bad
    # a slot spans up to three bytes, which may straddle a block's end
    lasts = np.array([stored.filter.nbytes - 1 for stored in filters], dtype=np.int64)
    ends = np.minimum(read + 2, lasts[None, :, None])
    blocks = firsts[None, :, None] + np.concatenate([read, ends]) // BLOCK
    return np.asarray(segment.damaged_blocks(blocks.ravel()).reshape(blocks.shape).any(axis=(0, 2)))


def block_sums(data: bytes) -> np.ndarray:
    """XXH3-64 of each BLOCK of `data`, as little-endian uint64."""
    view = memoryview(data)
    return np.array(
        [xxhash.xxh3_64_intdigest(view[at : at + BLOCK]) for at in range(0, len(data), BLOCK)], dtype="<u8"
    )


def new_segment_path(folder: Path, prefix: str = "seg") -> Path:
    """A fresh segment name that sorts after every earlier one of the folder (by creation time)."""
    return folder / f"{prefix}-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{SUFFIX}"
