"""A kept index's array read from its `.npy` file with `pread`, so that a query of a few nodes
makes a few kilobytes resident whatever the size of the index (issue 21).

The files were first mapped (`np.load(mmap_mode="r")`): opening costs nothing, and a walk reads
only the pages it touches. But the page cache keeps a file that was read ahead in large folios
(up to 2 MB on this machine), and a fault maps a whole folio: every scattered read of a mapped
array made up to 2 MB resident, and a depth-5 query that reached 23 nodes of a ten-million-edge
store counted 270 MB of file pages against the command (`bench/cli.py`). A `FileArray` reads
the blocks that hold the entries asked for into memory of its own, which is gone with the
answer. A read that would take more than `MAX_READS` calls (a large frontier, a whole-array
operation) maps the file as before, and later reads use the map: a large answer pays for the
pages it reads once, not a call for each. So does a process that keeps asking (the server): past
`MAP_AFTER` calls an array is mapped, since a small walk through reads costs ~2 ms, ten times
one through a map whose pages are in place.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path
from typing import Any

import numpy as np

from tracelake.graph.arrays import IndexArray
from tracelake.graph.extended import Extended

BLOCK = 4096  # bytes read for any entry asked for: the page the system reads anyway
GAP = 8  # blocks: read through a gap this short rather than make another call
MAX_READS = 64  # calls one gather may make before the file is mapped instead
MAP_AFTER = 512  # calls an array makes before it is mapped for good
_FEW_SEARCHES = 8  # values a searchsorted looks up by reads; more map the file


class FileArray(IndexArray):
    """A read-only 1-D array stored in the `.npy` file at `path`. The file stays open with the
    array, so it reads on after the file is removed (as a map would)."""

    __slots__ = ("_dtype", "_file", "_length", "_map_of_file", "_mapped", "_offset", "_reads")

    def __init__(self, path: Path) -> None:
        self._mapped: np.ndarray | None = None
        self._map_of_file: mmap.mmap | None = None
        self._reads = 0
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - held as long as the array
        try:
            version = np.lib.format.read_magic(self._file)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(self._file)
            if len(shape) != 1 or dtype.hasobject or BLOCK % dtype.itemsize:
                raise ValueError(f"{path} does not hold a 1-D array of fixed-size numbers")
            self._dtype: np.dtype[Any] = dtype
            self._length: int = shape[0]
            self._offset: int = self._file.tell()
            if os.fstat(self._file.fileno()).st_size < self._offset + self._length * dtype.itemsize:
                raise ValueError(f"{path} is cut short")
        except BaseException:
            self._file.close()
            raise

    def __len__(self) -> int:
        return self._length

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._map()
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def _item(self, at: int) -> Any:
        if self._use_map():
            return self._map()[at]
        return self._read(at, at + 1)[0]

    def _range(self, start: int, stop: int) -> np.ndarray:
        if not self._use_map() and (stop - start) * self._dtype.itemsize <= MAX_READS * BLOCK:
            return self._read(start, stop)
        return self._map()[start:stop]

    def _gather(self, positions: np.ndarray) -> np.ndarray:
        per_block = BLOCK // self._dtype.itemsize
        if self._use_map() or len(positions) > MAX_READS * per_block:
            return self._map()[positions]  # a large gather maps whatever its spread: no sort first
        blocks = np.sort(positions // per_block)
        blocks = blocks[np.r_[True, blocks[1:] != blocks[:-1]]]
        breaks = np.flatnonzero(np.diff(blocks) > GAP)
        if len(breaks) >= MAX_READS:
            return self._map()[positions]
        firsts = blocks[np.r_[0, breaks + 1]]
        lasts = blocks[np.r_[breaks, len(blocks) - 1]]
        starts = np.zeros(len(firsts), dtype=np.int64)  # where each run's blocks go in `held`
        np.cumsum(lasts[:-1] - firsts[:-1] + 1, out=starts[1:])
        held = np.empty((int(starts[-1] + lasts[-1] - firsts[-1]) + 1) * per_block, dtype=self._dtype)
        for first, last, at in zip(firsts.tolist(), lasts.tolist(), starts.tolist(), strict=True):
            stop = min((last + 1) * per_block, self._length)
            self._read_into(held[at * per_block :], first * per_block, stop)
        run = np.searchsorted(firsts, positions // per_block, side="right") - 1
        return held[positions + (starts[run] - firsts[run]) * per_block]

    def searchsorted(self, values: Any, side: Any = "left", sorter: Any = None) -> Any:
        """Where `values` go in this array, which is sorted: a few values by binary search over
        reads of single entries, then of the block they narrow down to."""
        values = np.asarray(values)
        if self._use_map() or sorter is not None or values.size > _FEW_SEARCHES:
            return self._map().searchsorted(values, side=side, sorter=sorter)
        found = np.array([self._search(value, side) for value in values.ravel()], dtype=np.intp)
        return found.reshape(values.shape) if values.ndim else found[0]

    def _search(self, value: Any, side: str) -> int:
        lo, hi = 0, self._length
        while hi - lo > BLOCK // self._dtype.itemsize:
            middle = (lo + hi) // 2
            entry = self._item(middle)
            if entry < value or (side == "right" and entry == value):
                lo = middle + 1
            else:
                hi = middle
        return lo + int(self._read(lo, hi).searchsorted(value, side=side))  # type: ignore[call-overload]

    def _read(self, start: int, stop: int) -> np.ndarray:
        out = np.empty(stop - start, dtype=self._dtype)
        self._read_into(out, start, stop)
        return out

    def _read_into(self, out: np.ndarray, start: int, stop: int) -> None:
        """Entries `start` … `stop - 1` into the head of `out`."""
        size = self._dtype.itemsize
        view = out.view(np.uint8).data[: (stop - start) * size]
        done = 0
        self._reads += 1
        while done < len(view):  # a read may return short; the file does not
            got = os.preadv(self._file.fileno(), [view[done:]], self._offset + start * size + done)
            if got == 0:
                raise OSError(f"{self._file.name} ends before entry {stop - 1}")
            done += got

    def _use_map(self) -> bool:
        """Whether reads go through the map: it is made, or the array has made `MAP_AFTER` calls."""
        return self._mapped is not None or self._reads >= MAP_AFTER

    def _map(self) -> np.ndarray:
        if self._mapped is None:
            if self._length == 0:
                self._mapped = np.empty(0, dtype=self._dtype)
            else:
                self._map_of_file = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
                self._mapped = np.frombuffer(
                    self._map_of_file, dtype=self._dtype, count=self._length, offset=self._offset
                )
        return self._mapped

    def release(self) -> None:
        """Give back the mapped pages this process has read: they stay in the operating system's
        cache, and a later read maps them again (a fault, no disk read)."""
        if self._map_of_file is not None and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError, ValueError):  # a closed map, a system that refuses
                self._map_of_file.madvise(mmap.MADV_DONTNEED)


def release(*arrays: np.ndarray) -> None:
    """Give back the pages of kept arrays this process has read (`FileArray.release`), through
    a caught-up index's extensions; arrays in memory are left alone. A catch-up reads every array
    of a kept index once to copy it: without this the copy and the pages it was copied from
    would both count against the process."""
    for array in arrays:
        base: object = array
        while isinstance(base, Extended):
            base = base.base
        if isinstance(base, FileArray):
            base.release()
