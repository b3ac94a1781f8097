"""A kept index array read from its file answers every read exactly as the array in memory, and a
few scattered reads leave nothing of the file resident in the process."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracelake.graph import file_array
from tracelake.graph.extended import Extended
from tracelake.graph.file_array import FileArray, release

DTYPES = (np.int64, np.int32, np.int8, np.uint64, np.float64, np.bool_)


def kept(tmp_path: Path, values: np.ndarray, name: str = "array") -> FileArray:
    path = tmp_path / f"{name}.npy"
    np.save(path, values, allow_pickle=False)
    return FileArray(path)


def unmapped(array: FileArray) -> FileArray:
    return FileArray(Path(array._file.name))


def resident_kb(path: Path) -> int:
    """The resident KB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dtype=st.sampled_from(DTYPES),
    length=st.one_of(st.sampled_from([0, 1, 513, 5_000]), st.integers(0, 5_000)),
    seed=st.integers(0, 2**32 - 1),
    max_reads=st.sampled_from([1, 3, 64]),
    gap=st.sampled_from([0, 1, 8]),
    map_after=st.sampled_from([0, 5, 512]),
    spread=st.sampled_from([3, 100]),  # 3: runs of equal values longer than a block
)
def test_gathers_items_slices_and_searches_agree_with_the_array_in_memory(
    tmp_path: Path,
    dtype: type[np.generic],
    length: int,
    seed: int,
    max_reads: int,
    gap: int,
    map_after: int,
    spread: int,
) -> None:
    rng = np.random.default_rng(seed)
    low = 0 if dtype == np.uint64 else -spread // 2
    plain = np.sort(rng.integers(low, low + spread, length))
    plain = plain.astype(dtype)
    array = kept(tmp_path, plain, f"a{seed}")
    with (
        patch.object(file_array, "MAX_READS", max_reads),
        patch.object(file_array, "GAP", gap),
        patch.object(file_array, "MAP_AFTER", map_after),
    ):
        for count in (1, 5, 40, 2_000):
            if length == 0:
                break
            # duplicates, negatives, any order; both far apart and close together
            positions = rng.integers(-length, length, count)
            assert array[positions].tolist() == plain[positions].tolist()
            near = rng.integers(0, min(length, 700), count)
            assert array[near].tolist() == plain[near].tolist()
            assert array[near].dtype == plain.dtype
        assert array[np.empty(0, dtype=np.int64)].tolist() == []
        for at in {0, length // 2, length - 1} if length else ():
            assert array[at] == plain[at] and array[at - length] == plain[at - length]
        for start, stop in ((0, length), (length // 3, length // 2), (length - 1, length + 5), (7, 3)):
            assert array[start:stop].tolist() == plain[start:stop].tolist()
        assert array[::3].tolist() == plain[::3].tolist()
        if dtype != np.bool_:
            values = np.array([-60, -3, -1, 0, 1, 17, 49, 200])
            values = values[values >= 0] if dtype == np.uint64 else values
            values = values.astype(dtype)
            for side in ("left", "right"):
                expected = plain.searchsorted(values, side).tolist()
                # each on an array no read has mapped: a few values are searched by reads
                assert unmapped(array).searchsorted(values, side=side).tolist() == expected
                for value, at in zip(values, expected, strict=True):
                    assert int(unmapped(array).searchsorted(value, side=side)) == at
                many = np.repeat(values, 3)  # more than are searched by reads
                assert (
                    unmapped(array).searchsorted(many, side=side).tolist() == np.repeat(expected, 3).tolist()
                )


def test_masks_ufuncs_and_methods_see_the_whole_array(tmp_path: Path) -> None:
    plain = np.arange(10, dtype=np.int64) * 3
    array = kept(tmp_path, plain)
    assert (len(array), array.shape, array.ndim, array.dtype) == (10, (10,), 1, np.dtype(np.int64))
    assert array[plain > 20].tolist() == [21, 24, 27]
    assert (array + 1).tolist() == (plain + 1).tolist()
    assert np.flatnonzero(array % 2 == 0).tolist() == [0, 2, 4, 6, 8]
    assert (array.max(), array.tolist(), list(array)) == (27, plain.tolist(), plain.tolist())
    assert np.concatenate([array, np.array([30])]).tolist() == [*plain.tolist(), 30]
    with pytest.raises(IndexError):
        array[10]
    with pytest.raises(IndexError):
        array[np.array([3, 10])]
    with pytest.raises(TypeError):
        np.add(plain, 1, out=array)


def test_it_reads_on_after_its_file_is_removed(tmp_path: Path) -> None:
    """A newer index replaces the directory of the one a reader opened: the reader goes on."""
    plain = np.arange(100_000, dtype=np.int64)
    array = kept(tmp_path, plain)
    (tmp_path / "array.npy").unlink()
    assert array[np.array([5, 99_999])].tolist() == [5, 99_999]
    assert int(array.sum()) == int(plain.sum())  # mapped from the open file


def test_files_that_are_not_a_plain_vector_are_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "matrix.npy", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="1-D"):
        FileArray(tmp_path / "matrix.npy")
    np.save(tmp_path / "vector.npy", np.arange(10))
    for name, cut in (("header", 20), ("data", 8)):
        whole = (tmp_path / "vector.npy").read_bytes()
        (tmp_path / f"{name}.npy").write_bytes(whole[: 20 if name == "header" else -cut])
        with pytest.raises(ValueError):
            FileArray(tmp_path / f"{name}.npy")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_scattered_reads_leave_nothing_of_the_file_resident(tmp_path: Path) -> None:
    """The reason for the type: a mapped array made a page cache folio (up to 2 MB) resident at
    each scattered read; these reads are the process's own memory, gone with the answer."""
    path = tmp_path / "edges.npy"
    plain = np.arange(4_000_000, dtype=np.int64)  # 32 MB, read ahead whole into the page cache
    np.save(path, plain)
    path.read_bytes()
    array = FileArray(path)
    positions = np.random.default_rng(1).integers(0, len(plain), 20)
    assert array[positions].tolist() == plain[positions].tolist()
    assert int(array.searchsorted(3_999_999)) == 3_999_999
    assert resident_kb(path) == 0


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_released_pages_leave_the_process_and_the_values_stay(tmp_path: Path) -> None:
    path = tmp_path / "edges.npy"
    array = kept(tmp_path, np.arange(2_000_000, dtype=np.int64), "edges")  # 16 MB
    in_memory = np.arange(10, dtype=np.int64)
    assert int(array.sum()) == 1_999_999 * 2_000_000 // 2  # every page read, through a map
    assert resident_kb(path) > 15_000

    release(Extended(array, np.array([7])), in_memory)  # found through an extension

    assert resident_kb(path) < 1_000
    assert int(array.sum()) == 1_999_999 * 2_000_000 // 2  # read again from the cache
    assert list(in_memory) == list(range(10))
