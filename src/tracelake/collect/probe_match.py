"""Payload matching for privacy probes: did a value a request received reach a sink, and how?

A payload is flattened once, when it is captured, into `Leaf`s: immutable scalar values (text,
bytes, numbers) with the field path that holds them. Dicts give dotted paths (`metadata.religion`),
list elements keep their list's path, and a string that holds a JSON document is opened too but
its contents keep the string's path — the column that holds them. A source value matches a sink
leaf as EXACT_MATCH when it is the sink field's own value, and as CONTAINS when it is inside it: a
nested value, a list element, a value in a JSON string, or a substring of text or bytes. Values
shorter than `min_length` bytes (booleans, empty values, `2`) are not matched at all: they
would match by chance. Matching stops at a deadline in the thread's own CPU time (so other
threads contending for the interpreter do not eat the budget); what it found so far stands.
"""

from __future__ import annotations

import dataclasses
import json
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Scalar = str | bytes | int | float


class MatchKind(StrEnum):
    EXACT_MATCH = "EXACT_MATCH"
    CONTAINS = "CONTAINS"
    NO_MATCH = "NO_MATCH"


@dataclass(frozen=True, slots=True)
class Leaf:
    """One scalar of a payload; `direct` when it is the field's whole value (not inside it)."""

    path: str
    value: Scalar
    direct: bool = True


@dataclass(frozen=True, slots=True)
class Match:
    source: Leaf
    sink: Leaf
    kind: MatchKind


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of a payload is kept: leaves beyond `max_leaves` or `max_bytes` are dropped."""

    max_leaves: int = 256
    max_bytes: int = 64 * 1024
    max_depth: int = 8


def flatten(payload: Any, limits: Limits, *, top: str = "value") -> tuple[list[Leaf], bool]:
    """The payload's leaves and whether any were dropped by the limits.

    A payload that is not a mapping is one field named `top` (a log message, a query's text).
    """
    record = _plain(payload)
    if not isinstance(record, dict):
        record = {top: record}
    leaves: list[Leaf] = []
    budget = [limits.max_bytes]
    truncated = False
    for key, value in record.items():
        for leaf in _leaves(str(key), value, True, 0, limits):
            size = len(leaf.value) if isinstance(leaf.value, str | bytes) else 8
            if len(leaves) >= limits.max_leaves or size > budget[0]:
                truncated = True
                return leaves, truncated
            budget[0] -= size
            leaves.append(leaf)
    return leaves, truncated


def _leaves(path: str, value: Any, direct: bool, depth: int, limits: Limits) -> Iterator[Leaf]:
    value = _plain(value)
    if value is None or isinstance(value, bool) or depth > limits.max_depth:
        return
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(f"{path}.{key}", inner, False, depth + 1, limits)
    elif isinstance(value, list | tuple | set | frozenset):
        for inner in value:
            yield from _leaves(path, inner, False, depth + 1, limits)
    elif isinstance(value, str):
        text = value if value.isascii() else unicodedata.normalize("NFC", value)
        yield Leaf(path, text, direct)
        document = _json_document(text)
        if document is not None:
            for inner in _leaves(path, document, False, depth + 1, limits):
                yield Leaf(path, inner.value, False)  # inside a string column: the column holds it
    elif isinstance(value, bytes | bytearray | memoryview):
        yield Leaf(path, bytes(value), direct)
    elif isinstance(value, int | float):
        yield Leaf(path, value, direct)
    else:
        yield Leaf(path, str(value), direct)  # dates, UUIDs, decimals: as they would be logged


def _plain(value: Any) -> Any:
    """Request models and records as plain data: pydantic models, dataclasses, mappings."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, dict) or not hasattr(value, "items"):
        return value
    return dict(value.items())


def _json_document(text: str) -> Any:
    if len(text) < 2 or text[0] not in "{[":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def canonical(value: Scalar) -> Scalar:
    """Values that are equal as a reader would see them: `42`, `42.0` and `"42"` are one value."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return value


def _long_enough(value: Scalar, min_length: int) -> bool:
    """In bytes of UTF-8, so that two CJK characters (`佛教`) are long enough and `no` is not."""
    if isinstance(value, str):
        return (len(value) if value.isascii() else len(value.encode())) >= min_length
    return len(value if isinstance(value, bytes) else str(value)) >= min_length


def match(
    sources: list[Leaf], sinks: list[Leaf], *, min_length: int = 3, deadline_ns: int | None = None
) -> tuple[list[Match], bool]:
    """Every (source leaf, sink leaf) match, and whether the deadline cut the search short.

    Equal values are found through a dict (linear); substrings need each text pair, which is
    what the deadline bounds.
    """
    by_value: dict[Scalar, list[Leaf]] = {}
    texts: list[Leaf] = []
    for leaf in sinks:
        by_value.setdefault(canonical(leaf.value), []).append(leaf)
        if isinstance(leaf.value, str | bytes):
            texts.append(leaf)
    found: list[Match] = []
    for count, source in enumerate(sources):
        if deadline_ns is not None and count % 16 == 0 and time.thread_time_ns() > deadline_ns:
            return found, True
        if not _long_enough(source.value, min_length):
            continue
        equal = by_value.get(canonical(source.value), [])
        for sink in equal:
            found.append(Match(source, sink, MatchKind.EXACT_MATCH if sink.direct else MatchKind.CONTAINS))
        needle = source.value
        if isinstance(needle, int | float):
            continue  # a number inside text is too often a coincidence (ids in timestamps)
        needle_bytes = needle if isinstance(needle, bytes) else needle.encode()
        for sink in texts:
            haystack = sink.value
            if isinstance(haystack, str):
                if isinstance(needle, bytes):
                    continue  # raw bytes are not looked for in text
                contained = len(haystack) > len(needle) and needle in haystack
            elif isinstance(haystack, bytes):
                contained = len(haystack) > len(needle_bytes) and needle_bytes in haystack
            else:
                continue  # `texts` holds text and bytes only
            # a longer value only: an equal one was found above, through the dict
            if contained:
                found.append(Match(source, sink, MatchKind.CONTAINS))
    return found, False
