"""Index segments: many identity filters in one file, so an index is a few files, not thousands.

A segment is the filters' tables back to back (each 8-byte aligned), then a JSON footer that
lists, for every filter, where its table sits, how to read it (`IdentityFilter.params`) and
what it describes (free metadata: the data file, its size and modification time, the column…),
then the footer's length and a magic number — Parquet's layout, so a writer streams tables out
as they come and a reader finds everything from the end. Tables are read through a memory map:
opening a segment reads its footer only, and a lookup touches only the pages it probes.

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

from tracelake.privacy.filters import IdentityFilter

MAGIC = b"TLIDX\x00\x01\n"
SUFFIX = ".tli"
_TAIL = struct.Struct("<Q8s")  # footer length, magic
_ALIGN = 8


class SegmentError(ValueError):
    """A file that is not a readable segment (truncated, foreign, or of an unknown version)."""


@dataclass(frozen=True)
class StoredFilter:
    """One filter of a segment, with the metadata it was written with."""

    segment: Segment
    meta: dict[str, Any]
    filter: IdentityFilter
    offset: int  # byte offset of its table in the segment


@dataclass(frozen=True, eq=False)
class Segment:
    """A segment's file, its bytes (memory-mapped) and its filters."""

    path: Path
    buffer: memoryview
    filters: list[StoredFilter] = field(default_factory=list)


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
        self._entries.append(
            {"offset": self._position, "length": len(data), "filter": identity_filter.params(), **meta}
        )
        self._out.write(data)
        self._position += len(data)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> Path:
        footer = json.dumps({"version": 1, "entries": self._entries}, separators=(",", ":")).encode()
        self._out.write(footer)
        self._out.write(_TAIL.pack(len(footer), MAGIC))
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
    """The segment at `path`: its footer read, its tables memory-mapped (not read)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _TAIL.size:
            raise SegmentError(f"{path}: too short to be an index segment")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    footer_length, magic = _TAIL.unpack(mapped[size - _TAIL.size :])
    if magic != MAGIC or footer_length > size - _TAIL.size:
        raise SegmentError(f"{path}: not a Tracelake index segment (bad magic or footer)")
    start = size - _TAIL.size - footer_length
    try:
        footer = json.loads(mapped[start : size - _TAIL.size])
    except ValueError as error:
        raise SegmentError(f"{path}: unreadable footer ({error})") from None
    version = footer.get("version") if isinstance(footer, dict) else None
    if version != 1:
        raise SegmentError(f"{path}: segment version {version!r} is not supported")
    segment = Segment(path, memoryview(mapped))
    try:
        for entry in footer["entries"]:
            offset, length = int(entry.pop("offset")), int(entry.pop("length"))
            if offset < 0 or length < 0 or offset + length > start:
                raise SegmentError(f"{path}: a filter lies outside the data")
            params = entry.pop("filter")
            table = IdentityFilter.from_buffer(params, segment.buffer[offset : offset + length])
            segment.filters.append(StoredFilter(segment, entry, table, offset))
    except SegmentError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SegmentError(f"{path}: unreadable filter entry ({error!r})") from None
    return segment


def new_segment_path(folder: Path, prefix: str = "seg") -> Path:
    """A fresh segment name that sorts after every earlier one of the folder (by creation time)."""
    return folder / f"{prefix}-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{SUFFIX}"
