"""An index array caught up without copying it: its base (a kept index's file, or
the arrays a build made) followed by a short tail of what was appended since.

A catch-up that only appends (new processes and their edges, the usual write) used to copy every
array of the index to add a few rows: at ten million edges 1.3 GB a round, over a second, and a
one-off command's memory grew by as much. `extend(base, tail)` is read as the concatenation by
everything an analysis does: a gather by positions (the walks' one hot operation) reads each
part in place; anything else (a ufunc, a mask, `np.flatnonzero`, `.tolist()`) works on the
concatenation, made when asked for. Nothing writes into an index's arrays, so none is offered.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from tracelake.graph.arrays import IndexArray


class Extended(IndexArray):
    """A read-only 1-D array: `base`, then `tail` (in `base`'s type)."""

    __slots__ = ("_split", "base", "tail")

    def __init__(self, base: np.ndarray, tail: np.ndarray) -> None:
        self.base = base
        self.tail = tail.astype(base.dtype, copy=False)
        self._split = len(base)

    def __len__(self) -> int:
        return self._split + len(self.tail)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.base.dtype

    def _item(self, at: int) -> Any:
        return self.base[at] if at < self._split else self.tail[at - self._split]

    def _range(self, start: int, stop: int) -> np.ndarray:
        if stop <= self._split:
            return self.base[start:stop]
        if start >= self._split:
            return self.tail[start - self._split : stop - self._split]
        return np.concatenate([self.base[start:], self.tail[: stop - self._split]])

    def _gather(self, positions: np.ndarray) -> np.ndarray:
        if int(positions.max()) < self._split:
            return self.base[positions]
        in_base = positions < self._split
        out = np.empty(len(positions), dtype=self.dtype)
        out[in_base] = self.base[positions[in_base]]
        out[~in_base] = self.tail[positions[~in_base] - self._split]
        return out

    def searchsorted(self, values: Any, side: Any = "left") -> Any:
        """Where `values` go in this array, sorted as a whole (as node and edge ids are: the tail's
        after the base's), without joining the two."""
        values = np.asarray(values)
        in_base = self.base.searchsorted(values, side=side)
        in_tail = self._split + self.tail.searchsorted(values, side=side)
        return np.where(in_base < self._split, in_base, in_tail)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate([self.base, self.tail])
        return whole if dtype is None else whole.astype(dtype, copy=False)


def extend(base: np.ndarray, tail: np.ndarray) -> np.ndarray:
    """`base` then `tail`, read as one array (`Extended`); `base` itself when nothing follows.

    Typed as an ndarray because every reader of an index's arrays may treat it as one."""
    if len(tail) == 0:
        return base
    return cast(np.ndarray, Extended(base, tail))


def tail_after(array: np.ndarray | Extended, length: int) -> np.ndarray:
    """What `array` holds past its first `length` entries: an `Extended` array's tail, without
    reading its base."""
    if isinstance(array, Extended) and len(array.base) == length:
        return array.tail
    return np.asarray(array[length:])  # a slice of an index array reads only what it holds
