"""JSON values Tracelake can take: documents parsed from a request or a file are refused where the
store or the answers could not hold them — nested deeper than any document Tracelake takes
(`MAX_NESTING` levels; Python's JSON parser, FastAPI's validation errors, which echo the input, and
the store's JSON encoder all recurse, and a value nested a thousand arrays deep would overflow their
stack), a string or key with a lone surrogate escape (`"\\ud800"`: JSON lets it through, UTF-8
cannot encode it, so the store could not write it nor any answer carry it) or a NUL character
(`"\\u0000"`, which PostgreSQL refuses to store), or a number that is not finite (`NaN`,
`Infinity`, `1e999`: Python's parser takes them, JSON has no way to answer them). The HTTP API's
bodies and OpenLineage events from files are checked alike.
"""

from __future__ import annotations

import math
import re
from typing import Any

MAX_NESTING = 100
TOO_DEEP = f"the document nests deeper than {MAX_NESTING} levels"


def refusal(document: Any) -> tuple[str, str] | None:
    """Why and where (a JSON path, `$.a[0].b`) `document` cannot be taken, or None. Without
    recursion, and inline: it runs on every event ingested (each container keeps a link to its
    parent rather than its path, which is spelled out only for the one at fault)."""
    if type(document) is not dict and type(document) is not list:
        reason = _scalar_refused(document)
        return None if reason is None else (reason, "$")
    stack: list[tuple[Any, int, Any]] = [(document, 0, None)]
    while stack:
        value, depth, link = stack.pop()
        if depth > MAX_NESTING:
            return TOO_DEEP, _path(link)
        for step, item in value.items() if type(value) is dict else enumerate(value):
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, depth + 1, (link, step)))
            # the cheap tests first: they spare nearly every value and key a closer look
            elif (
                (kind is str and ("\x00" in item or not item.isascii()))
                or (kind is float and not math.isfinite(item))
            ) and (reason := _scalar_refused(item)) is not None:
                return reason, _path((link, step))
            if (
                type(step) is str
                and ("\x00" in step or not step.isascii())
                and (reason := _scalar_refused(step)) is not None
            ):
                return reason, _path((link, step))
    return None


def _scalar_refused(value: Any) -> str | None:
    """Why a key or a value that is no container cannot be taken, or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a string with a NUL character (\\u0000) cannot be stored (PostgreSQL refuses it)"
        if not value.isascii() and _SURROGATE.search(value) is not None:
            return "a string with a lone surrogate escape (\\ud800-\\udfff) is not Unicode text"
    if isinstance(value, float) and not math.isfinite(value):
        return "a number that is not finite (NaN, Infinity or past 1.8e308) is not JSON"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _path(link: Any) -> str:
    """`$.a[0].b` from a chain of (parent link, step) pairs: its first eight steps (then `…`), keys
    escaped where they are not Unicode."""
    steps: list[str | int] = []
    while link is not None:
        link, step = link
        steps.append(step)
    steps.reverse()
    shown = "".join(f"[{step}]" if isinstance(step, int) else "." + _shown(step) for step in steps[:8])
    return f"${shown}{'…' if len(steps) > 8 else ''}"


def _shown(key: str) -> str:
    return key.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\u0000")
