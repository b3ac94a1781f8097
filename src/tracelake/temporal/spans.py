"""Sets of time as sorted, disjoint, half-open intervals of epoch seconds.

The taint planner moves whole ranges of instances between entities, so it works on these
instead of one instance at a time: ten tainted hours and a year of a sliding window are each
one interval, whatever the period.
"""

from __future__ import annotations

from collections.abc import Iterable

Span = tuple[int, int]
Spans = tuple[Span, ...]

EMPTY: Spans = ()


def normalize(spans: Iterable[Span]) -> Spans:
    """Sorted, with empty intervals dropped and overlapping or touching ones merged."""
    merged: list[list[int]] = []
    for start, end in sorted(span for span in spans if span[0] < span[1]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((start, end) for start, end in merged)


def union(*sets: Spans) -> Spans:
    return normalize(span for spans in sets for span in spans)


def intersect(left: Spans, right: Spans) -> Spans:
    found: list[Span] = []
    i = j = 0
    while i < len(left) and j < len(right):
        start, end = max(left[i][0], right[j][0]), min(left[i][1], right[j][1])
        if start < end:
            found.append((start, end))
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return tuple(found)


def clip(spans: Spans, lo: int | None, hi: int | None) -> Spans:
    """The part of `spans` within [lo, hi); None is unbounded."""
    low = lo if lo is not None else -(2**62)
    high = hi if hi is not None else 2**62
    return tuple(
        (max(s, low), min(e, high)) for s, e in spans if s < high and e > low and max(s, low) < min(e, high)
    )


def covers(spans: Spans, start: int, end: int) -> bool:
    return any(s <= start and end <= e for s, e in spans)


def overlaps(spans: Spans, start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in spans)
