"""What the routers depend on: the service and the ingest writer of the running app, token
scopes (`READ`, `WRITE`), who a change is recorded under, times in UTC, and `RequestError`, the
one error a route raises for a request it refuses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from pydantic import AfterValidator

from tracelake.api.auth import Scope as TokenScope
from tracelake.api.auth import Tokens
from tracelake.app.service import Tracelake
from tracelake.model import InputError, as_utc


def _in_utc(moment: datetime) -> datetime:
    try:
        return as_utc(moment)
    except OverflowError:  # within hours of year 1 or 9999, with an offset that crosses the edge
        raise ValueError("the time has no UTC equivalent (years 1 to 9999)") from None


# Every time a route takes is in UTC from the start (a naive one taken as UTC, as everywhere); one
# that has no UTC equivalent is a 422, where it was a 500 in whatever compared it.
Moment = Annotated[datetime, AfterValidator(_in_utc)]


class RequestError(InputError):
    """A request the API refuses: 400 with the JSON path of the problem when there is one."""

    def __init__(self, message: str, path: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.path = path
        self.status = status


# Dependencies that do no I/O are `async`: FastAPI runs a plain `def` dependency in its thread
# pool, a hop that cost more than an OpenLineage event's whole ingest route.
async def get_service(request: Request) -> Tracelake:
    service: Tracelake = request.app.state.service
    return service


def require(scope: TokenScope) -> Callable[[Request], Awaitable[None]]:
    """A dependency that lets a request through when its bearer token has `scope`."""

    async def check(request: Request) -> None:
        tokens: Tokens | None = request.app.state.tokens
        if tokens is None:
            return
        kind, _, presented = request.headers.get("authorization", "").partition(" ")
        token = tokens.find(presented.strip()) if kind.lower() == "bearer" and presented else None
        if token is None:
            raise HTTPException(401, "a bearer token is required", {"WWW-Authenticate": "Bearer"})
        if scope not in token.scopes:
            raise HTTPException(403, f"the token {token.name!r} has no {scope} scope")
        request.state.actor = token.name

    return check


async def actor_of(request: Request) -> str:
    """Who a change is recorded under: the token's name, or `api` without tokens."""
    return getattr(request.state, "actor", "api")


READ = Depends(require("read"))
WRITE = Depends(require("write"))
