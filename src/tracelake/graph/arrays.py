"""Index arrays that are not plain numpy arrays in memory, read as if they were.

A kept index's arrays are read from their files (`file_array.FileArray`), and a caught-up index's
are a base with a short tail (`extended.Extended`). An analysis treats both as 1-D numpy arrays:
an item, a slice and a gather by positions (the walks' hot reads) are each type's own cheap read;
anything else (a ufunc, a mask, `np.flatnonzero`, `.tolist()`, `.max()`) works on the whole
array, which `__array__` makes when asked for. Nothing writes into an index's arrays, so nothing
is offered for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


class IndexArray(NDArrayOperatorsMixin):
    """A read-only 1-D array. A subclass gives `__len__`, `dtype`, `__array__` (the whole array)
    and its reads: `_item` and `_gather` of in-bounds positions, `_range` of a step-1 slice."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype[Any]:
        raise NotImplementedError

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise NotImplementedError

    def _item(self, at: int) -> Any:
        raise NotImplementedError

    def _gather(self, positions: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _range(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self)[start:stop]

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    @property
    def ndim(self) -> int:
        return 1

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int | np.integer):
            at = int(key) + (len(self) if int(key) < 0 else 0)
            if not 0 <= at < len(self):
                raise IndexError(f"index {int(key)} is out of bounds for an array of {len(self)}")
            return self._item(at)
        if isinstance(key, np.ndarray) and key.ndim == 1 and key.dtype.kind in "iu":
            if len(key) == 0:
                return np.empty(0, dtype=self.dtype)
            low = int(key.min())
            if low < 0:
                key = np.where(key < 0, key + len(self), key)
                low = int(key.min())
            if low < 0 or int(key.max()) >= len(self):
                raise IndexError(f"a position is out of bounds for an array of {len(self)}")
            return self._gather(key)
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                return self._range(start, max(start, stop))
        return np.asarray(self)[key]

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(isinstance(out, IndexArray) for out in kwargs.get("out", ())):
            raise TypeError("an index array is read-only")
        inputs = tuple(np.asarray(x) if isinstance(x, IndexArray) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __iter__(self) -> Any:
        return iter(np.asarray(self))

    def __getattr__(self, name: str) -> Any:
        # numpy's protocols (`__array_interface__`…) must not find a temporary's memory
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)  # `.tolist()`, `.max()`, `.astype()`…
