"""Tests for identity filters: what `IdentityFilter` promises the index built on it.

Every id a filter was built from must be found (zero false negatives, whatever the size, kind and
width), absent ids must be reported at about the rate the fingerprint width implies, at 8 and 16
bits the table must be the C library's own, bit for bit, and the numpy probe must answer exactly
as the C library it reimplements; a filter read back from its bytes (also as older versions wrote
them) must answer as the original, and ids must hash exactly as Spark's `xxhash64` of the id cast
to string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from pyfusefilter._xorfilter import ffi, lib

from tracelake.privacy.filters import (
    EXACT_MAX_KEYS,
    MAX_BITS,
    IdentityFilter,
    as_keys,
    distinct,
    fingerprint_bits,
    hash_ids,
    pack_slots,
    table_bytes,
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
        (EXACT_MAX_KEYS + 1, "fuse"),
        (200_000, "fuse"),
    ],
)
def test_every_inserted_key_is_found(count: int, kind: str) -> None:
    keys = random_keys(count, seed=count)
    identity_filter = IdentityFilter.build(keys)
    assert identity_filter.kind == kind
    assert identity_filter.keys == count
    assert identity_filter.might_contain(keys).all()


@pytest.mark.parametrize("bits", range(1, MAX_BITS + 1))
@pytest.mark.parametrize("count", [EXACT_MAX_KEYS + 1, 3_001, 50_000])
def test_filters_of_every_width_find_every_inserted_key(bits: int, count: int) -> None:
    keys = random_keys(count, seed=7 * bits + count)
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-bits)
    assert (identity_filter.kind, identity_filter.bits) == ("fuse", bits)
    assert identity_filter.might_contain(keys).all()
    # the table is the slots packed `bits` apiece, and no byte more than its padding
    slots = identity_filter.segment_count_length + 2 * identity_filter.segment_length
    assert identity_filter.nbytes == table_bytes(slots, bits)


def test_an_empty_filter_holds_nothing() -> None:
    identity_filter = IdentityFilter.build(np.zeros(0, dtype=np.uint64))
    assert identity_filter.keys == 0
    assert identity_filter.bits_per_key == 0.0
    assert not identity_filter.might_contain(random_keys(1000, seed=1)).any()


def test_an_exact_filter_has_no_false_positives() -> None:
    keys = random_keys(EXACT_MAX_KEYS, seed=3)
    identity_filter = IdentityFilter.build(keys)
    assert not identity_filter.might_contain(absent_keys(100_000, seed=4, present=keys)).any()


@pytest.mark.parametrize("bits", [4, 7, 8, 10, 11, 13])
def test_absent_keys_are_reported_at_two_to_the_minus_width(bits: int) -> None:
    keys = random_keys(200_000, seed=11 + bits)
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-bits)
    rate = identity_filter.might_contain(absent_keys(2_000_000, seed=12 + bits, present=keys)).mean()
    # 2,000,000 probes: at 2^-13 about 244 hits, whose binomial spread is ~6%; 25% is far outside it
    assert 0.75 * 2.0**-bits < rate < 1.25 * 2.0**-bits


def test_a_sixteen_bit_filter_reports_almost_no_absent_key() -> None:
    keys = random_keys(200_000, seed=13)
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-16)
    assert identity_filter.bits == 16
    rate = identity_filter.might_contain(absent_keys(1_000_000, seed=14, present=keys)).mean()
    assert rate < 1e-4


def test_the_rate_a_filter_was_built_with_is_measured_and_kept() -> None:
    keys = random_keys(100_000, seed=16)
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-6)
    assert identity_filter.measured_fpp is not None
    # 16,384 probes at 1/64: 256 expected hits, a spread of ~6%
    assert 0.7 / 64 < identity_filter.measured_fpp < 1.3 / 64
    assert identity_filter.params()["measured_fpp"] == identity_filter.measured_fpp
    assert IdentityFilter.build(keys[:10]).measured_fpp == 0.0  # an exact set has none


@pytest.mark.parametrize(("bits", "most"), [(8, 9.5), (10, 11.9), (11, 13.1), (16, 19.0)])
def test_a_filter_costs_about_one_and_a_sixth_of_its_width_an_id(bits: int, most: float) -> None:
    identity_filter = IdentityFilter.build(random_keys(300_000, seed=15), fpp=2.0**-bits)
    assert bits < identity_filter.bits_per_key < most


@pytest.mark.parametrize(
    ("fpp", "bits"),
    [(0.5, 1), (0.01, 7), (2.0**-8, 8), (0.0039, 9), (0.001, 10), (1e-4, 14), (2.0**-16, 16)],
)
def test_the_narrowest_fingerprint_meeting_the_rate_is_picked(fpp: float, bits: int) -> None:
    assert fingerprint_bits(fpp) == bits


@pytest.mark.parametrize("fpp", [0.0, -0.1, 1.0, 1.5, 2.0**-17, 1e-9, float("nan")])
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
    assert doubled.kind == "fuse"
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


@pytest.mark.parametrize(("bits", "count"), [(8, 65), (8, 30_000), (16, 65), (16, 30_000)])
def test_at_eight_and_sixteen_bits_the_filter_is_the_c_librarys_bit_for_bit(bits: int, count: int) -> None:
    keys = random_keys(count, seed=bits * count)
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-bits)
    assert (identity_filter.kind, identity_filter.bits) == ("fuse", bits)
    ordered = np.ascontiguousarray(distinct(keys))
    handle = _c_filter(bits, ordered)
    contain = lib.binary_fuse8_contain if bits == 8 else lib.binary_fuse16_contain
    free = lib.binary_fuse8_free if bits == 8 else lib.binary_fuse16_free
    try:
        assert identity_filter.fuse_shape() == (handle.Seed, handle.SegmentLength, handle.SegmentCountLength)
        c_table = np.frombuffer(ffi.buffer(handle.Fingerprints, handle.ArrayLength * bits // 8), np.uint8)
        assert identity_filter.table.tobytes() == c_table.tobytes()
        present = keys[:1000]
        probes = np.concatenate([random_keys(20_000, seed=count + 1), present])
        expected = np.array([bool(contain(int(key), handle)) for key in probes])
    finally:
        free(handle)
    answers = identity_filter.might_contain(probes)
    assert np.array_equal(answers, expected)
    assert answers[20_000:].all()
    assert len(answers) == 20_000 + len(present)
    if bits == 8:  # some absent key said yes (~78 expected), so the yes answers were compared too
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


@pytest.mark.parametrize(
    ("count", "fpp"), [(0, 0.01), (20, 0.01), (5000, 0.01), (5000, 0.001), (5000, 2.0**-8), (5000, 1e-4)]
)
def test_a_filter_read_back_from_its_bytes_answers_as_the_original(count: int, fpp: float) -> None:
    keys = random_keys(count, seed=31 + count)
    original = IdentityFilter.build(keys, fpp=fpp)
    restored = IdentityFilter.from_buffer(original.params(), original.table.tobytes())
    assert restored.kind == original.kind
    assert restored.bits == original.bits
    assert restored.measured_fpp == original.measured_fpp
    assert restored.keys == original.keys
    assert restored.fuse_shape() == original.fuse_shape()
    probes = np.concatenate([keys, random_keys(50_000, seed=32)])
    assert np.array_equal(restored.might_contain(probes), original.might_contain(probes))


@pytest.mark.parametrize("bits", [8, 16])
def test_a_filter_as_older_versions_stored_it_reads_as_the_same_filter(bits: int) -> None:
    # before other widths, a filter's kind named its width ("fuse8") and its params had no "bits"
    keys = random_keys(5_000, seed=33)
    built = IdentityFilter.build(keys, fpp=2.0**-bits)
    old_params = {k: v for k, v in built.params().items() if k not in ("bits", "measured_fpp")}
    restored = IdentityFilter.from_buffer(old_params | {"kind": f"fuse{bits}"}, built.table.tobytes())
    assert (restored.kind, restored.bits, restored.measured_fpp) == ("fuse", bits, None)
    probes = np.concatenate([keys, random_keys(50_000, seed=34)])
    assert np.array_equal(restored.might_contain(probes), built.might_contain(probes))


def test_an_unknown_kind_cannot_be_read_back() -> None:
    with pytest.raises(ValueError, match="kind"):
        IdentityFilter.from_buffer({"kind": "fuse32", "keys": 1}, b"\0" * 8)


@pytest.mark.parametrize("bits", [0, 17, -3])
def test_a_width_no_probe_can_read_cannot_be_read_back(bits: int) -> None:
    built = IdentityFilter.build(np.arange(1, 5_000, dtype=np.uint64))
    with pytest.raises(ValueError, match="bits wide"):
        IdentityFilter.from_buffer(built.params() | {"bits": bits}, built.table.tobytes())


@pytest.mark.parametrize(
    "change",
    [{"segment_count_length": 10**9}, {"segment_length": 3}, {"segment_length": 0}, {"bits": 16}],
)
def test_a_filter_whose_shape_overruns_its_table_cannot_be_read_back(change: dict[str, int]) -> None:
    # In a segment the next filter's table follows: probing past the end would read it silently.
    built = IdentityFilter.build(np.arange(1, 5_000, dtype=np.uint64), fpp=2.0**-11)
    with pytest.raises(ValueError, match="does not fit"):
        IdentityFilter.from_buffer(built.params() | change, built.table.tobytes())


def test_a_filter_without_its_padding_cannot_be_read_back() -> None:
    # an odd width's last slot is read as three bytes: a table cut to its slots would be overrun
    built = IdentityFilter.build(np.arange(1, 5_000, dtype=np.uint64), fpp=2.0**-11)
    with pytest.raises(ValueError, match="does not fit"):
        IdentityFilter.from_buffer(built.params(), built.table.tobytes()[:-2])


def _reference_contains(identity_filter: IdentityFilter, key: int) -> bool:
    """binary_fuse16_contain with Python integers, reading a slot's bits one at a time: the plain
    reading the vectorised probe is checked against, at every width."""
    mask64 = 2**64 - 1

    def murmur(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask64
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask64
        return h ^ (h >> 33)

    seed, step, span = identity_filter.fuse_shape()
    bits, table = identity_filter.bits, identity_filter.table.tobytes()
    mixed = murmur((key + seed) & mask64)
    high = (mixed * span) >> 64
    slots = [high, (high + step) ^ ((mixed >> 18) & (step - 1)), (high + 2 * step) ^ (mixed & (step - 1))]

    def slot(number: int) -> int:
        return sum(
            ((table[(number * bits + i) // 8] >> ((number * bits + i) % 8)) & 1) << i for i in range(bits)
        )

    wanted = (mixed ^ (mixed >> 32)) & ((1 << bits) - 1)
    return wanted == slot(slots[0]) ^ slot(slots[1]) ^ slot(slots[2])


@settings(max_examples=60, deadline=None)
@given(
    bits=st.integers(1, MAX_BITS),
    members=st.lists(st.integers(0, 2**64 - 1), min_size=EXACT_MAX_KEYS + 1, max_size=3_000),
    others=st.lists(st.integers(0, 2**64 - 1), max_size=200),
)
def test_the_probe_answers_as_a_plain_reading_of_the_table(
    bits: int, members: list[int], others: list[int]
) -> None:
    keys = np.array(members + members[:10], dtype=np.uint64)  # with repeats
    identity_filter = IdentityFilter.build(keys, fpp=2.0**-bits)
    if identity_filter.kind == "exact":  # repeats left too few distinct keys for a fuse filter
        return
    probes = np.array(members[:50] + others, dtype=np.uint64)
    answers = identity_filter.might_contain(probes)
    assert answers[: min(50, len(members))].all()  # no false negative
    assert answers.tolist() == [_reference_contains(identity_filter, int(key)) for key in probes]


@pytest.mark.parametrize("bits", range(1, MAX_BITS + 1))
@pytest.mark.parametrize("count", [1, 7, 8, 9, 1001])
def test_slots_are_packed_as_a_plain_bit_by_bit_packing_would(bits: int, count: int) -> None:
    values = np.random.default_rng(bits * count).integers(0, 2**16, count, dtype=np.uint64).astype(np.uint16)
    low = values & np.uint16((1 << bits) - 1)
    plain = np.packbits(
        ((low[:, None] >> np.arange(bits, dtype=np.uint16)) & 1).astype(np.uint8).ravel(), bitorder="little"
    )
    packed = pack_slots(values, bits)
    assert len(packed) == table_bytes(count, bits)
    assert packed[: len(plain)].tobytes() == plain.tobytes()
    assert not packed[len(plain) :].any()  # the padding is zeros
