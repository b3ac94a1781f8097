"""JSON request bodies, parsed once per request and refused where the store or the answers could
not hold them: nested deeper than any document Tracelake takes (`MAX_NESTING` levels; Python's JSON
parser, FastAPI's validation errors, which echo the input, and the store's JSON encoder all
recurse, and a body nested a thousand arrays deep would overflow their stack), a string or key with
a lone surrogate escape (`"\\ud800"`: JSON lets it through, UTF-8 cannot encode it, so the store
could not write it nor any answer carry it) or a NUL character (`"\\u0000"`, which PostgreSQL
refuses to store), or a number that is not finite (`NaN`, `Infinity`, `1e999`: Python's parser
takes them, JSON has no way to answer them). Routes that declare a JSON body get the check from
their route class (`JsonBodyRoute`, given to every router that has such routes) before FastAPI
validates the body; a route that reads its body itself (OpenLineage's `POST /api/v1/lineage`) calls
`json_body`. Either way the body is parsed once (Starlette keeps it on the request) and a refusal
is a 400 naming the JSON path at fault.
"""

from __future__ import annotations

import email.message
import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tracelake.api.deps import RequestError

MAX_NESTING = 100


async def json_body(request: Request) -> Any:
    """The request's body as JSON; a 400 when it is not JSON or not JSON the store can hold."""
    try:
        document = await request.json()
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(f"the body is not JSON: {error}", "$") from None
    except RecursionError:
        raise RequestError(_TOO_DEEP, "$") from None
    refused = _refused(document)
    if refused is not None:
        raise RequestError(*refused)
    return document


class JsonBodyRoute(APIRoute):
    """A route whose JSON body, when it declares one, is checked by `json_body` before FastAPI
    validates it (bodies of other media types, such as posted YAML, are left to the route)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def checked(request: Request) -> Response:
            if _is_json(request.headers.get("content-type")) and await request.body():
                await json_body(request)
            return await handler(request)

        return checked


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this content type as JSON (`application/json`, `…+json`)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _refused(document: Any) -> tuple[str, str] | None:
    """Why and where (a JSON path) `document` cannot be taken, or None. Without recursion, and
    inline: it runs on every event ingested (each container keeps a link to its parent rather than
    its path, which is spelled out only for the one at fault)."""
    if type(document) is not dict and type(document) is not list:
        reason = _scalar_refused(document)
        return None if reason is None else (reason, "$")
    stack: list[tuple[Any, int, Any]] = [(document, 0, None)]
    while stack:
        value, depth, link = stack.pop()
        if depth > MAX_NESTING:
            return _TOO_DEEP, _path(link)
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


_TOO_DEEP = f"the body nests deeper than {MAX_NESTING} levels"
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
