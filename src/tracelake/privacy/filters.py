"""Identity filters: static membership filters over one data file's ids, with zero false negatives.

A filter is built once per immutable data file from the 64-bit hashes of every id in it (all its
identity columns together) and answers "might this file hold id X?" for a whole batch of ids at
once. Large sets use binary fuse filters (Graf & Lemire, 2022) with fingerprints of any width
from 1 to 16 bits: a k-bit filter answers yes for an absent id at a rate of 2^-k and costs about
1.13-1.19 × k bits an id; a requested rate picks the narrowest width that meets it. Sets too small
for a fuse filter to pay are kept exactly, as sorted hashes.

Construction runs in C (`pyfusefilter`'s bundled xor_singleheader, fed a numpy buffer: its Python
wrapper would hash every id in Python) as a 16-bit filter. A fuse filter's slots XOR to each key's
fingerprint, and XOR works bit by bit, so the low k bits of every slot make a k-bit filter of the
low k bits of the fingerprint: the same filter the C library builds at 8 and 16 bits, bit for bit,
and at the widths it has no code for. Tables are packed k bits a slot, least significant bit
first (at 8 and 16 bits, the C library's own arrays). Lookups are reimplemented in numpy so one
call probes thousands of ids, and read straight from a memory-mapped index file.

Ids are hashed with XXH64, seed 42, over their UTF-8 text — exactly Spark's `xxhash64` of the id
cast to string — so the writer hashes in the JVM and a request hashes in Python.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import xxhash

from tracelake.privacy.limits import DEFAULT_FPP

SPARK_XXHASH_SEED = 42  # org.apache.spark.sql.catalyst.expressions.XxHash64's default seed
# Below this many ids the sorted hashes themselves (64 bits an id) are smaller than a fuse
# filter's fixed overhead would make worth its false positives, and fuse construction needs a few.
EXACT_MAX_KEYS = 64
MAX_BITS = 16  # the C construction's widest fingerprint, and the widest a probe reads
# Absent keys a new filter is probed with, to record the false-positive rate it really has.
MEASURE_PROBES = 1 << 14

Kind = Literal["fuse", "exact"]
_MASK32 = np.uint64(0xFFFFFFFF)
_MURMUR_1 = np.uint64(0xFF51AFD7ED558CCD)
_MURMUR_2 = np.uint64(0xC4CEB9FE1A85EC53)
# Filters written before widths other than 8 and 16 existed name their width in their kind.
_LEGACY_KINDS = {"fuse8": 8, "fuse16": 16}
# A slot of an odd width is read as the three bytes that hold it: tables of such widths carry two
# bytes more, so the last slot's read stays inside its own table.
_PAD = 2


def hash_ids(ids: Iterable[str]) -> np.ndarray:
    """The filter keys of `ids` as uint64: what Spark's `xxhash64(cast(id AS STRING))` gives."""
    return np.fromiter(
        (xxhash.xxh64_intdigest(str(value).encode(), SPARK_XXHASH_SEED) for value in ids),
        dtype=np.uint64,
    )


def as_keys(signed_hashes: Any) -> np.ndarray:
    """Spark's signed `bigint` hashes (any array-like of int64) as the filters' uint64 keys."""
    return np.asarray(signed_hashes, dtype=np.int64).view(np.uint64)


def fingerprint_bits(fpp: float) -> int:
    """The narrowest fuse fingerprint whose false-positive rate (2^-bits) is at most `fpp`."""
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"a false-positive rate must be between 0 and 1, not {fpp}")
    bits = max(1, math.ceil(-math.log2(fpp)))
    if bits > MAX_BITS:
        raise ValueError(
            f"false-positive rates below 2^-{MAX_BITS} ({2.0**-MAX_BITS:.2g}) are not supported, not {fpp}"
        )
    return bits


@dataclass(frozen=True)
class IdentityFilter:
    """One data file's ids, as a binary fuse filter or (for a few ids) an exact sorted set."""

    kind: Kind
    keys: int  # distinct ids it was built from
    table: np.ndarray  # the packed fingerprints (uint8), or the sorted keys (uint64) when exact
    bits: int = 0  # the fingerprint width of a fuse filter
    seed: int = 0
    segment_length: int = 0
    segment_count_length: int = 0
    # absent keys it said it may hold, of MEASURE_PROBES, when it was built (None: not measured)
    measured_fpp: float | None = None

    @classmethod
    def build(cls, keys: np.ndarray, fpp: float = DEFAULT_FPP) -> IdentityFilter:
        """A filter over `keys` (uint64 id hashes; duplicates allowed)."""
        bits = fingerprint_bits(fpp)
        unique = distinct(keys)
        if len(unique) <= EXACT_MAX_KEYS:
            return cls("exact", len(unique), unique, measured_fpp=0.0)
        built = _build_fuse(unique, bits)
        return dataclasses.replace(built, measured_fpp=built.false_positive_rate(MEASURE_PROBES))

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes)

    @property
    def bits_per_key(self) -> float:
        return 8.0 * self.nbytes / self.keys if self.keys else 0.0

    def might_contain(self, keys: np.ndarray) -> np.ndarray:
        """For each uint64 key: False if the file surely lacks it, True if it may hold it."""
        keys = np.asarray(keys, dtype=np.uint64)
        if self.kind == "exact":
            return np.isin(keys, self.table)
        one = np.zeros(1, dtype=np.int64)
        seed, length, count_length = (np.array([v], dtype=np.uint64) for v in self.fuse_shape())
        found: np.ndarray = probe_fuse(self.table, one, self.bits, seed, length, count_length, keys)[0]
        return found

    def false_positive_rate(self, probes: int, seed: int = 0) -> float:
        """The share of `probes` random keys it says it may hold. Random 64-bit keys are absent
        from any file's few million ids but for a chance of 2^-40 or so."""
        if not self.keys or self.kind == "exact":
            return 0.0
        absent = np.random.default_rng([seed, self.seed]).integers(
            0, 2**64, probes, np.uint64, endpoint=False
        )
        return float(self.might_contain(absent).mean())

    def fuse_shape(self) -> tuple[int, int, int]:
        """(seed, segment length, segment count × length): what places a key in the table."""
        return self.seed, self.segment_length, self.segment_count_length

    # -- storage ------------------------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """What, beside the table's bytes, it takes to read the filter back, and its measured rate."""
        params: dict[str, Any] = {"kind": self.kind, "keys": self.keys}
        if self.kind != "exact":
            params |= {
                "bits": self.bits,
                "seed": self.seed,
                "segment_length": self.segment_length,
                "segment_count_length": self.segment_count_length,
            }
        if self.measured_fpp is not None:
            params["measured_fpp"] = self.measured_fpp
        return params

    @classmethod
    def from_buffer(cls, params: dict[str, Any], buffer: Any) -> IdentityFilter:
        """The filter `params` describe, over `buffer` (bytes or a memory map; not copied)."""
        kind, bits = params["kind"], int(params.get("bits", 0))
        if kind in _LEGACY_KINDS:
            kind, bits = "fuse", _LEGACY_KINDS[kind]
        if kind not in ("fuse", "exact"):
            raise ValueError(f"unknown identity filter kind {kind!r}")
        if kind == "fuse" and not 1 <= bits <= MAX_BITS:
            raise ValueError(f"a fuse filter's fingerprints cannot be {bits} bits wide")
        measured = params.get("measured_fpp")
        made = cls(
            kind,
            int(params["keys"]),
            np.frombuffer(buffer, dtype=np.uint64 if kind == "exact" else np.uint8),
            bits,
            int(params.get("seed", 0)),
            int(params.get("segment_length", 0)),
            int(params.get("segment_count_length", 0)),
            None if measured is None else float(measured),
        )
        step, span = made.segment_length, made.segment_count_length
        # A probe must stay inside its own table: past its end lies the next filter's.
        if kind != "exact" and (
            step <= 0 or step & (step - 1) or span < 0 or table_bytes(span + 2 * step, bits) > len(made.table)
        ):
            raise ValueError(
                f"a {bits}-bit fuse filter's shape does not fit its {len(made.table)}-byte table"
            )
        return made


def table_bytes(slots: int, bits: int) -> int:
    """The bytes a table of `slots` fingerprints of `bits` takes (with its padding)."""
    return (slots * bits + 7) // 8 + (0 if bits % 8 == 0 else _PAD)


def distinct(keys: np.ndarray) -> np.ndarray:
    """The sorted distinct keys (a sort and a shift: np.unique is 20-60× slower on uint64 here)."""
    ordered = np.sort(np.asarray(keys, dtype=np.uint64))
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _murmur64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _MURMUR_1
    h = h ^ (h >> np.uint64(33))
    h = h * _MURMUR_2
    return h ^ (h >> np.uint64(33))


def probe_fuse(
    base: np.ndarray,
    offsets: np.ndarray,
    bits: int,
    seeds: np.ndarray,
    segment_lengths: np.ndarray,
    segment_count_lengths: np.ndarray,
    keys: np.ndarray,
) -> np.ndarray:
    """Probe F fuse filters of one width for Q keys at once: an (F, Q) array, True where it may hold.

    Filter f's table is `base[offsets[f]:]` (bytes; all tables of a segment share one memory
    map), so a lookup reads only the slots it probes.
    """
    wanted, slots = fuse_slots(bits, seeds, segment_lengths, segment_count_lengths, keys)
    return slot_answers(base, offsets, bits, wanted, slots)


def fuse_slots(
    bits: int,
    seeds: np.ndarray,
    segment_lengths: np.ndarray,
    segment_count_lengths: np.ndarray,
    keys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Where F fuse filters keep Q keys: each (filter, key)'s wanted fingerprint, an (F, Q) array,
    and its three slots, a (3, F, Q) array. The arithmetic is binary_fuse16_contain's, with
    (filter, key) pairs laid out as a broadcast grid."""
    column = (slice(None), None)
    with np.errstate(over="ignore"):
        mixed = _murmur64(keys[None, :] + seeds[column])
        length = segment_count_lengths[column]  # < 2^32: the high product needs no 128 bits
        low_part = ((mixed & _MASK32) * length) >> np.uint64(32)
        high = ((mixed >> np.uint64(32)) * length + low_part) >> np.uint64(32)
        step = segment_lengths[column]
        mask = step - np.uint64(1)
        h1 = (high + step) ^ ((mixed >> np.uint64(18)) & mask)
        h2 = (high + step + step) ^ (mixed & mask)
        wanted = (mixed ^ (mixed >> np.uint64(32))) & np.uint64((1 << bits) - 1)
    return wanted, np.stack([high, h1, h2])


def slot_bytes(slots: np.ndarray, bits: int) -> np.ndarray:
    """The byte of its table where each slot starts (it spans up to three)."""
    return (slots * np.uint64(bits) >> np.uint64(3)).astype(np.int64)


def slot_answers(
    base: np.ndarray, offsets: np.ndarray, bits: int, wanted: np.ndarray, slots: np.ndarray
) -> np.ndarray:
    """Whether each (filter, key)'s three slots XOR to its wanted fingerprint (`fuse_slots`)."""
    start = offsets[:, None]
    found = wanted ^ _slots(base, start, slots[0], bits)
    found ^= _slots(base, start, slots[1], bits)
    found ^= _slots(base, start, slots[2], bits)
    return found == 0


def _slots(base: np.ndarray, start: np.ndarray, slots: np.ndarray, bits: int) -> np.ndarray:
    """The fingerprints at `slots` of the tables starting at byte `start`, as uint64."""
    at = start + slot_bytes(slots, bits)
    if bits == 8:
        return base[at].astype(np.uint64)
    if bits == 16:  # little-endian pairs of bytes, as the C library's uint16_t array on x86 and ARM
        return base[at].astype(np.uint64) | (base[at + 1].astype(np.uint64) << np.uint64(8))
    word = base[at].astype(np.uint64)
    word |= base[at + 1].astype(np.uint64) << np.uint64(8)
    word |= base[at + 2].astype(np.uint64) << np.uint64(16)
    return (word >> ((slots * np.uint64(bits)) & np.uint64(7))) & np.uint64((1 << bits) - 1)


def pack_slots(values: np.ndarray, bits: int) -> np.ndarray:
    """`values` (their low `bits` each) packed `bits` a slot, least significant first, padded.

    Eight slots make exactly `bits` bytes: each group of eight is built as two 64-bit words
    (four slots in each, at most 60 bits), joined and cut to its `bits` bytes, all in numpy."""
    if bits == 8:
        return values.astype(np.uint8)
    if bits == 16:
        return values.astype("<u2").view(np.uint8)
    slots = np.zeros(-(-len(values) // 8) * 8, dtype=np.uint64)
    slots[: len(values)] = values & ((1 << bits) - 1)
    groups = slots.reshape(-1, 8)
    shifts = np.arange(4, dtype=np.uint64) * np.uint64(bits)
    low = np.bitwise_or.reduce(groups[:, :4] << shifts, axis=1)
    high = np.bitwise_or.reduce(groups[:, 4:] << shifts, axis=1)
    half = np.uint64(4 * bits)
    words = np.empty((len(groups), 2), dtype="<u8")
    words[:, 0] = low | (high << half)
    words[:, 1] = high >> (np.uint64(64) - half)
    packed = words.view(np.uint8).reshape(-1, 16)[:, :bits].ravel()[: (len(values) * bits + 7) // 8]
    return np.concatenate([packed, np.zeros(_PAD, dtype=np.uint8)])


def _build_fuse(distinct: np.ndarray, bits: int) -> IdentityFilter:
    from pyfusefilter._xorfilter import ffi, lib  # the C library the package wraps

    handle = ffi.new("binary_fuse16_t *")
    if not lib.binary_fuse16_allocate(len(distinct), handle):
        raise MemoryError(f"no memory for a fuse filter of {len(distinct)} ids")
    try:
        keys = np.ascontiguousarray(distinct, dtype=np.uint64)
        if not lib.binary_fuse16_populate(ffi.cast("uint64_t *", ffi.from_buffer(keys)), len(keys), handle):
            raise RuntimeError(f"fuse filter construction failed for {len(keys)} ids")
        raw = ffi.buffer(handle.Fingerprints, handle.ArrayLength * 2)
        slots = np.frombuffer(raw, dtype=np.uint16) & np.uint16((1 << bits) - 1)
        return IdentityFilter(
            "fuse",
            len(keys),
            pack_slots(slots, bits),
            bits,
            int(handle.Seed),
            int(handle.SegmentLength),
            int(handle.SegmentCountLength),
        )
    finally:
        lib.binary_fuse16_free(handle)
