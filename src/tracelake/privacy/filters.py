"""Identity filters: static membership filters over one data file's ids, with zero false negatives.

A filter is built once per immutable data file from the 64-bit hashes of every id in it and
answers "might this file hold id X?" for a whole batch of ids at once. Large sets use binary fuse
filters (Graf & Lemire, 2022): 8-bit fingerprints cost about 9.1 bits an id for a 2^-8 (0.39%)
false-positive rate, 16-bit ones about 18 bits for 2^-16; a requested rate picks the narrowest
fingerprint that meets it. Sets too small for a fuse filter to pay are kept exactly, as sorted
hashes. Construction runs in C (`pyfusefilter`'s bundled xor_singleheader, fed a numpy buffer:
its Python wrapper would hash every id in Python); lookups are reimplemented in numpy so one call
probes thousands of ids, and read straight from a memory-mapped index file.

Ids are hashed with XXH64, seed 42, over their UTF-8 text — exactly Spark's `xxhash64` of the id
cast to string — so the writer hashes in the JVM and a request hashes in Python.
"""

from __future__ import annotations

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

Kind = Literal["fuse8", "fuse16", "exact"]
_MASK32 = np.uint64(0xFFFFFFFF)
_MURMUR_1 = np.uint64(0xFF51AFD7ED558CCD)
_MURMUR_2 = np.uint64(0xC4CEB9FE1A85EC53)


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
    if fpp >= 2.0**-8:
        return 8
    if fpp >= 2.0**-16:
        return 16
    raise ValueError(f"false-positive rates below 2^-16 ({2.0**-16:.2g}) are not supported, not {fpp}")


@dataclass(frozen=True)
class IdentityFilter:
    """One data file's ids, as a binary fuse filter or (for a few ids) an exact sorted set."""

    kind: Kind
    keys: int  # distinct ids it was built from
    table: np.ndarray  # fingerprints (uint8/uint16), or the sorted keys (uint64) when exact
    seed: int = 0
    segment_length: int = 0
    segment_count_length: int = 0

    @classmethod
    def build(cls, keys: np.ndarray, fpp: float = DEFAULT_FPP) -> IdentityFilter:
        """A filter over `keys` (uint64 id hashes; duplicates allowed)."""
        bits = fingerprint_bits(fpp)
        unique = distinct(keys)
        if len(unique) <= EXACT_MAX_KEYS:
            return cls("exact", len(unique), unique)
        return _build_fuse(unique, bits)

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
        found: np.ndarray = probe_fuse(self.table, one, seed, length, count_length, keys)[0]
        return found

    def fuse_shape(self) -> tuple[int, int, int]:
        """(seed, segment length, segment count × length): what places a key in the table."""
        return self.seed, self.segment_length, self.segment_count_length

    # -- storage ------------------------------------------------------------------------------

    def params(self) -> dict[str, Any]:
        """What, beside the table's bytes, it takes to read the filter back."""
        params: dict[str, Any] = {"kind": self.kind, "keys": self.keys}
        if self.kind != "exact":
            params |= {
                "seed": self.seed,
                "segment_length": self.segment_length,
                "segment_count_length": self.segment_count_length,
            }
        return params

    @classmethod
    def from_buffer(cls, params: dict[str, Any], buffer: Any) -> IdentityFilter:
        """The filter `params` describe, over `buffer` (bytes or a memory map; not copied)."""
        kind = params["kind"]
        if kind not in _TABLE_DTYPE:
            raise ValueError(f"unknown identity filter kind {kind!r}")
        made = cls(
            kind,
            int(params["keys"]),
            np.frombuffer(buffer, dtype=_TABLE_DTYPE[kind]),
            int(params.get("seed", 0)),
            int(params.get("segment_length", 0)),
            int(params.get("segment_count_length", 0)),
        )
        step, span = made.segment_length, made.segment_count_length
        # A probe must stay inside its own table: past its end lies the next filter's.
        if kind != "exact" and (
            step <= 0 or step & (step - 1) or span < 0 or span + 2 * step > len(made.table)
        ):
            raise ValueError(f"a {kind} filter's shape does not fit its {len(made.table)}-slot table")
        return made


_TABLE_DTYPE: dict[str, type[np.generic]] = {"fuse8": np.uint8, "fuse16": np.uint16, "exact": np.uint64}


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
    seeds: np.ndarray,
    segment_lengths: np.ndarray,
    segment_count_lengths: np.ndarray,
    keys: np.ndarray,
) -> np.ndarray:
    """Probe F fuse filters of one kind for Q keys at once: an (F, Q) array, True where it may hold.

    Filter f's table is `base[offsets[f]:]` (all tables of a segment share one memory map), so a
    lookup reads only the slots it probes. The arithmetic is binary_fuse*_contain's, with
    (filter, key) pairs laid out as a broadcast grid.
    """
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
        fingerprint = (mixed ^ (mixed >> np.uint64(32))).astype(base.dtype)
    start = offsets[column]
    found = fingerprint ^ base[start + high.astype(np.int64)]
    found ^= base[start + h1.astype(np.int64)]
    found ^= base[start + h2.astype(np.int64)]
    return found == 0


def _build_fuse(distinct: np.ndarray, bits: int) -> IdentityFilter:
    from pyfusefilter._xorfilter import ffi, lib  # the C library the package wraps

    kind: Kind = "fuse8" if bits == 8 else "fuse16"
    allocate, populate, free = (
        (lib.binary_fuse8_allocate, lib.binary_fuse8_populate, lib.binary_fuse8_free)
        if bits == 8
        else (lib.binary_fuse16_allocate, lib.binary_fuse16_populate, lib.binary_fuse16_free)
    )
    handle = ffi.new(f"binary_fuse{bits}_t *")
    if not allocate(len(distinct), handle):
        raise MemoryError(f"no memory for a fuse filter of {len(distinct)} ids")
    try:
        keys = np.ascontiguousarray(distinct, dtype=np.uint64)
        if not populate(ffi.cast("uint64_t *", ffi.from_buffer(keys)), len(keys), handle):
            raise RuntimeError(f"fuse filter construction failed for {len(keys)} ids")
        raw = ffi.buffer(handle.Fingerprints, handle.ArrayLength * bits // 8)
        table = np.frombuffer(raw, dtype=_TABLE_DTYPE[kind]).copy()
        return IdentityFilter(
            kind,
            len(keys),
            table,
            int(handle.Seed),
            int(handle.SegmentLength),
            int(handle.SegmentCountLength),
        )
    finally:
        free(handle)
