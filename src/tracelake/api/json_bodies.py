"""JSON request bodies, parsed once per request and refused where the store or the answers could
not hold them (`model.json_values` says what is refused and why). Routes that declare a JSON body
get the check from their route class (`JsonBodyRoute`, given to every router that has such routes)
before FastAPI validates the body; a route that reads its body itself (OpenLineage's
`POST /api/v1/lineage`) calls `json_body`, and its event reader makes the check (for files of
events too). Either way the body is parsed once (Starlette keeps it on the request) and a refusal
is a 400 naming the JSON path at fault.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tracelake.api.deps import RequestError
from tracelake.model.json_values import TOO_DEEP, refusal


async def json_body(request: Request, *, check: bool = True) -> Any:
    """The request's body as JSON; a 400 when it is not JSON or (with `check`) not JSON the store
    can hold."""
    try:
        document = await request.json()
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(f"the body is not JSON: {error}", "$") from None
    except RecursionError:
        raise RequestError(TOO_DEEP, "$") from None
    refused = refusal(document) if check else None
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
