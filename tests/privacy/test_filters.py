"""Tests for identity filters: what `IdentityFilter` promises the index built on it.

Every id a filter was built from must be found (zero false negatives, whatever the size and kind),
absent ids must be reported at about the rate the fingerprint width implies, the numpy probe must
answer exactly as the C library it reimplements, a filter read back from its bytes must answer as
the original, and ids must hash exactly as Spark's `xxhash64` of the id cast to string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xxhash
from pyfusefilter._xorfilter import ffi, lib

from tracelake.privacy.filters import (
    EXACT_MAX_KEYS,
    IdentityFilter,
    as_keys,
    distinct,
    fingerprint_bits,
    hash_ids,
)


def random_keys(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, size=count, dtype=np.uint64, endpoint=False)


def absent_keys(count: int, seed: int, present: np.ndarray) -> np.ndarray:
    candidates = random_keys(count + 1000, seed)
    return candidates[~np.isin(candidates, present)][:count]


@pytest.mark.parametrize(
    ("count", "kind"),
    [
        (0, "exact"),
        (1, "exact"),
        (EXACT_MAX_KEYS, "exact"),
        (EXACT_MAX_KEYS + 1, "fuse8"),
        (200_000, "fuse8"),
    ],
)
def test_every_inserted_key_is_found(count: int, kind: str) -> None:
    keys = random_keys(count, seed=count)
    identity_filter = IdentityFilter.build(keys)
    assert identity_filter.kind == kind
    assert identity_filter.keys == count
    assert identity_filter.might_contain(keys).all()


def test_sixteen_bit_filters_find_every_inserted_key() -> None:
    keys = random_keys(50_000, seed=7)
    identity_filter = IdentityFilter.build(keys, fpp=1e-4)
    assert identity_filter.kind == "fuse16"
    assert identity_filter.table.dtype == np.uint16
    assert identity_filter.might_contain(keys).all()


def test_an_empty_filter_holds_nothing() -> None:
    identity_filter = IdentityFilter.build(np.zeros(0, dtype=np.uint64))
    assert identity_filter.keys == 0
    assert identity_filter.bits_per_key == 0.0
    assert not identity_filter.might_contain(random_keys(1000, seed=1)).any()


def test_an_exact_filter_has_no_false_positives() -> None:
    keys = random_keys(EXACT_MAX_KEYS, seed=3)
    identity_filter = IdentityFilter.build(keys)
    assert not identity_filter.might_contain(absent_keys(100_000, seed=4, present=keys)).any()


def test_an_eight_bit_filter_reports_about_one_absent_key_in_256() -> None:
    keys = random_keys(200_000, seed=11)
    identity_filter = IdentityFilter.build(keys, fpp=0.01)
    assert identity_filter.kind == "fuse8"
    rate = identity_filter.might_contain(absent_keys(1_000_000, seed=12, present=keys)).mean()
    assert 0.002 < rate < 0.006


def test_a_sixteen_bit_filter_reports_almost_no_absent_key() -> None:
    keys = random_keys(200_000, seed=13)
    identity_filter = IdentityFilter.build(keys, fpp=1e-4)
    assert identity_filter.kind == "fuse16"
    rate = identity_filter.might_contain(absent_keys(1_000_000, seed=14, present=keys)).mean()
    assert rate < 1e-4


def test_an_eight_bit_filter_costs_under_ten_bits_an_id() -> None:
    identity_filter = IdentityFilter.build(random_keys(200_000, seed=15))
    assert identity_filter.kind == "fuse8"
    assert 8.0 < identity_filter.bits_per_key < 10.0


@pytest.mark.parametrize(
    ("fpp", "bits"), [(0.5, 8), (0.01, 8), (2.0**-8, 8), (0.0039, 16), (1e-4, 16), (2.0**-16, 16)]
)
def test_the_narrowest_fingerprint_meeting_the_rate_is_picked(fpp: float, bits: int) -> None:
    assert fingerprint_bits(fpp) == bits


@pytest.mark.parametrize("fpp", [0.0, -0.1, 1.0, 1.5, 2.0**-17, 1e-9])
def test_unsupported_rates_are_refused(fpp: float) -> None:
    with pytest.raises(ValueError):
        fingerprint_bits(fpp)


def test_building_refuses_an_unsupported_rate() -> None:
    with pytest.raises(ValueError):
        IdentityFilter.build(random_keys(10, seed=1), fpp=0.0)


def test_duplicate_ids_count_once() -> None:
    small = random_keys(10, seed=21)
    large = random_keys(1000, seed=22)
    assert IdentityFilter.build(np.concatenate([small, small, small[:3]])).keys == 10
    doubled = IdentityFilter.build(np.concatenate([large, large[::-1]]))
    assert doubled.keys == 1000
    assert doubled.kind == "fuse8"
    assert np.array_equal(doubled.table, IdentityFilter.build(large).table)


def test_distinct_sorts_and_drops_repeats() -> None:
    keys = np.array([5, 2**64 - 1, 5, 0, 2**63, 0], dtype=np.uint64)
    assert distinct(keys).tolist() == [0, 5, 2**63, 2**64 - 1]


def _c_filter(bits: int, keys: np.ndarray) -> Any:
    allocate = lib.binary_fuse8_allocate if bits == 8 else lib.binary_fuse16_allocate
    populate = lib.binary_fuse8_populate if bits == 8 else lib.binary_fuse16_populate
    handle = ffi.new(f"binary_fuse{bits}_t *")
    assert allocate(len(keys), handle)
    assert populate(ffi.cast("uint64_t *", ffi.from_buffer(keys)), len(keys), handle)
    return handle


@pytest.mark.parametrize(("bits", "fpp", "count"), [(8, 0.01, 65), (8, 0.01, 30_000), (16, 1e-4, 30_000)])
def test_the_numpy_probe_answers_exactly_as_the_c_library(bits: int, fpp: float, count: int) -> None:
    keys = random_keys(count, seed=bits * count)
    identity_filter = IdentityFilter.build(keys, fpp=fpp)
    assert identity_filter.kind == f"fuse{bits}"
    ordered = np.ascontiguousarray(distinct(keys))
    handle = _c_filter(bits, ordered)
    contain = lib.binary_fuse8_contain if bits == 8 else lib.binary_fuse16_contain
    free = lib.binary_fuse8_free if bits == 8 else lib.binary_fuse16_free
    try:
        assert identity_filter.fuse_shape() == (handle.Seed, handle.SegmentLength, handle.SegmentCountLength)
        c_table = np.frombuffer(
            ffi.buffer(handle.Fingerprints, handle.ArrayLength * bits // 8), identity_filter.table.dtype
        )
        assert np.array_equal(identity_filter.table, c_table)
        present = keys[:1000]
        probes = np.concatenate([random_keys(20_000, seed=count + 1), present])
        expected = np.array([bool(contain(int(key), handle)) for key in probes])
    finally:
        free(handle)
    answers = identity_filter.might_contain(probes)
    assert np.array_equal(answers, expected)
    assert answers[20_000:].all()
    assert len(answers) == 20_000 + len(present)
    assert answers[:20_000].any()


def test_ids_hash_like_sparks_xxhash64_of_their_text() -> None:
    assert hash_ids(["abc"]).tolist() == [xxhash.xxh64_intdigest(b"abc", 42)]
    assert hash_ids(["é"]).tolist() == [xxhash.xxh64_intdigest("é".encode(), 42)]
    assert hash_ids([42]).tolist() == hash_ids(["42"]).tolist()
    assert hash_ids(["u1", "u2"]).dtype == np.uint64
    assert len(hash_ids([])) == 0


def test_sparks_signed_hashes_are_the_same_keys() -> None:
    assert as_keys([-1, 0, 1, -(2**63)]).tolist() == [2**64 - 1, 0, 1, 2**63]
    keys = hash_ids([f"u{i}" for i in range(100)])
    assert np.array_equal(as_keys(keys.view(np.int64).tolist()), keys)


@pytest.mark.parametrize(("count", "fpp"), [(0, 0.01), (20, 0.01), (5000, 0.01), (5000, 1e-4)])
def test_a_filter_read_back_from_its_bytes_answers_as_the_original(count: int, fpp: float) -> None:
    keys = random_keys(count, seed=31 + count)
    original = IdentityFilter.build(keys, fpp=fpp)
    restored = IdentityFilter.from_buffer(original.params(), original.table.tobytes())
    assert restored.kind == original.kind
    assert restored.keys == original.keys
    assert restored.fuse_shape() == original.fuse_shape()
    probes = np.concatenate([keys, random_keys(50_000, seed=32)])
    assert np.array_equal(restored.might_contain(probes), original.might_contain(probes))


def test_an_unknown_kind_cannot_be_read_back() -> None:
    with pytest.raises(ValueError, match="kind"):
        IdentityFilter.from_buffer({"kind": "fuse32", "keys": 1}, b"\0" * 8)


@pytest.mark.parametrize(
    "change",
    [{"segment_count_length": 10**9}, {"segment_length": 3}, {"segment_length": 0}],
)
def test_a_filter_whose_shape_overruns_its_table_cannot_be_read_back(change: dict[str, int]) -> None:
    # In a segment the next filter's table follows: probing past the end would read it silently.
    built = IdentityFilter.build(np.arange(1, 5_000, dtype=np.uint64))
    with pytest.raises(ValueError, match="does not fit"):
        IdentityFilter.from_buffer(built.params() | change, built.table.tobytes())
