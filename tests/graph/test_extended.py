"""An extended index array reads as its base followed by its tail, whatever the read."""

from __future__ import annotations

import numpy as np
import pytest

from tracelake.graph.extended import Extended, extend, tail_after


def whole() -> tuple[np.ndarray, Extended]:
    base = np.array([2, 4, 6, 8], dtype=np.int64)
    return np.array([2, 4, 6, 8, 10, 12], dtype=np.int64), Extended(base, np.array([10, 12], dtype=np.int32))


def test_gathers_read_each_part_in_place_and_agree_with_the_concatenation() -> None:
    plain, extended = whole()
    for positions in ([0, 3], [4, 5], [5, 0, 4, 1], [-1, -6], []):
        at = np.array(positions, dtype=np.int64)
        assert extended[at].tolist() == plain[at].tolist()
        assert extended[at].dtype == np.int64  # the tail is held in the base's type
    assert [extended[i] for i in (0, 3, 4, 5, -1)] == [2, 8, 10, 12, 12]
    with pytest.raises(IndexError):
        extended[6]


def test_slices_masks_ufuncs_and_methods_see_the_concatenation() -> None:
    plain, extended = whole()
    assert extended[1:3].tolist() == [4, 6]  # within the base
    assert extended[4:6].tolist() == [10, 12]  # within the tail
    assert extended[2:5].tolist() == [6, 8, 10]  # across
    assert extended[::2].tolist() == [2, 6, 10]
    assert extended[plain > 5].tolist() == [6, 8, 10, 12]
    assert (extended == 10).tolist() == [False, False, False, False, True, False]
    assert (extended + 1).tolist() == (plain + 1).tolist()
    assert np.flatnonzero(extended > 7).tolist() == [3, 4, 5]
    assert (len(extended), extended.shape, extended.max(), extended.tolist()) == (6, (6,), 12, plain.tolist())
    assert np.concatenate([extended, np.array([14])]).tolist() == [2, 4, 6, 8, 10, 12, 14]


def test_a_sorted_extension_is_searched_in_its_parts() -> None:
    _, extended = whole()
    values = np.array([1, 2, 5, 8, 9, 10, 12, 13])
    assert extended.searchsorted(values).tolist() == [0, 0, 2, 3, 4, 4, 5, 6]


def test_it_is_read_only_and_nothing_extends_to_nothing() -> None:
    _, extended = whole()
    with pytest.raises(TypeError):
        np.add(np.arange(6), 1, out=extended)
    base = np.arange(3)
    assert extend(base, np.empty(0, dtype=np.int64)) is base
    assert tail_after(extended, 4).tolist() == [10, 12]
    assert tail_after(base, 1).tolist() == [1, 2]
