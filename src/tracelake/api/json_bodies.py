"""JSON request bodies, parsed once per request and refused when they nest deeper than any
document Tracelake takes: no event, batch or query is near `MAX_NESTING` levels, while Python's
JSON parser, FastAPI's validation errors (which echo the input) and the store's JSON encoder all
recurse, and a body nested a thousand arrays deep would overflow their stack into a 500.

Routes that declare a JSON body get the check from their route class (`JsonBodyRoute`, given to
every router that has such routes), before FastAPI validates the body; a route that reads its body
itself (OpenLineage's `POST /api/v1/lineage`) calls `json_body`. Either way the parse is shared
(Starlette keeps the parsed body on the request) and a refusal is a 400 naming the JSON path at
fault.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tracelake.api.app import RequestError

MAX_NESTING = 100


async def json_body(request: Request) -> Any:
    """The request's body as JSON; a 400 when it is not JSON or nests deeper than MAX_NESTING."""
    try:
        document = await request.json()
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(f"the body is not JSON: {error}", "$") from None
    except RecursionError:
        raise RequestError(f"the body nests deeper than {MAX_NESTING} levels", "$") from None
    too_deep = _too_deep(document) if isinstance(document, dict | list) else None
    if too_deep is not None:
        raise RequestError(f"the body nests deeper than {MAX_NESTING} levels", too_deep)
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


def _too_deep(document: Any) -> str | None:
    """Where `document` nests deeper than MAX_NESTING (a JSON path), or None; without recursion."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(document, 0, ())]
    while stack:
        value, depth, steps = stack.pop()
        if depth > MAX_NESTING:
            shown = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in steps[:8])
            return f"${shown}…"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for step, item in items:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, (*steps, step)))
    return None
