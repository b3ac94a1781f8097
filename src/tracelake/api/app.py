"""The FastAPI application: settings, token checks, body limits and error shapes, around the
routers of `marquez` (OpenLineage in, Marquez-shaped lineage out) and `routes` (Tracelake's own).

Routes hold no logic: each parses its parameters, calls `Tracelake` (the CLI's service) and
returns the view's JSON. Every user mistake is a 4xx with `{"error": …}` and, where it has one,
the JSON `path` of the problem; an unknown node is a 404 naming near matches.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator

from tracelake.api.auth import Scope as TokenScope
from tracelake.api.auth import Tokens
from tracelake.api.encoding import RequestBodies
from tracelake.batch_json import BatchError
from tracelake.graph.index import UnknownNodeError
from tracelake.model import UrnError, as_utc
from tracelake.privacy.search import RequestError as PrivacyRequestError
from tracelake.review import NotStable, ReviewError, UnknownSession
from tracelake.service import Tracelake
from tracelake.store.group_commit import Writer
from tracelake.store.writer_process import writer_for
from tracelake.subscriptions import Background, WebhookPolicy
from tracelake.temporal.operations import EntityError

DEFAULT_MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True)
class ApiSettings:
    token_file: Path | None = None  # None: no authentication (the embedded default)
    max_body_bytes: int = DEFAULT_MAX_BODY
    policy_dir: Path | None = None  # the only folder policy files are read from
    subscription_interval: float | None = 0.5  # seconds between subscription checks; None: off
    webhook_backoff: float = 1.0  # seconds before a failed webhook's first retry (then doubled)
    lake_roots: tuple[Path, ...] = ()  # the only folders a privacy request may name datasets in
    # Hosts, addresses and networks (10.0.0.0/8) webhooks may reach though they are not public.
    webhook_allow: tuple[str, ...] = ()
    listen_host: str | None = None  # where the server listens: webhooks may not reach it unless allowed


def _in_utc(moment: datetime) -> datetime:
    try:
        return as_utc(moment)
    except OverflowError:  # within hours of year 1 or 9999, with an offset that crosses the edge
        raise ValueError("the time has no UTC equivalent (years 1 to 9999)") from None


# Every time a route takes is in UTC from the start (a naive one taken as UTC, as everywhere); one
# that has no UTC equivalent is a 422, where it was a 500 in whatever compared it.
Moment = Annotated[datetime, AfterValidator(_in_utc)]


class RequestError(ValueError):
    """A request the API refuses: 400 with the JSON path of the problem when there is one."""

    def __init__(self, message: str, path: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.path = path
        self.status = status


def create_app(service: Tracelake, settings: ApiSettings | None = None) -> FastAPI:
    from tracelake.api import marquez, routes, routes_operations, routes_review, routes_subscriptions, ui
    from tracelake.api.marquez_read import router as marquez_read_router

    settings = settings or ApiSettings()
    webhooks = WebhookPolicy.of(settings.webhook_allow, settings.listen_host)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        background = None
        if settings.subscription_interval:
            background = Background(
                service, settings.subscription_interval, settings.webhook_backoff, policy=webhooks
            )
            background.start()
        yield
        if background is not None:
            background.stop()
        app.state.commits.close()

    app = FastAPI(
        lifespan=lifespan,
        title="Tracelake",
        description="Privacy-aware data lineage: OpenLineage in, lineage, labels and policies out.",
        version="0.1.0",
        dependencies=[Depends(_no_nul)],
    )
    app.state.service = service
    app.state.settings = settings
    app.state.webhooks = webhooks
    app.state.tokens = Tokens.load(settings.token_file) if settings.token_file else None
    app.state.commits = writer_for(service.store)  # ingest routes write through it
    # every body read within the limit (413 past it, declared or not), gzip and deflate decoded
    app.add_middleware(RequestBodies, max_bytes=settings.max_body_bytes)
    app.add_exception_handler(UnknownNodeError, _unknown_node)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(BatchError, _request_error)
    app.add_exception_handler(ReviewError, _review_error)
    app.add_exception_handler(EntityError, _request_error)
    app.add_exception_handler(PrivacyRequestError, _request_error)
    app.add_exception_handler(UrnError, _request_error)  # a name the store cannot key (over 2,000 bytes)
    app.include_router(marquez.router)
    app.include_router(marquez_read_router)
    app.include_router(routes.router)
    app.include_router(routes_review.router)
    app.include_router(routes_subscriptions.router)
    app.include_router(routes_operations.router)
    ui.mount_ui(app)
    return app


# Dependencies that do no I/O are `async`: FastAPI runs a plain `def` dependency in its thread
# pool, a hop that cost more than an OpenLineage event's whole ingest route.
async def get_service(request: Request) -> Tracelake:
    return request.app.state.service  # type: ignore[no-any-return]


async def get_commits(request: Request) -> Writer:
    return request.app.state.commits  # type: ignore[no-any-return]


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


async def _no_nul(request: Request) -> None:
    """A URL naming a NUL character (`%00`) is a 400: no name holds one (JSON bodies holding one
    are refused), and PostgreSQL cannot even look one up."""
    if "\x00" in request.scope["path"]:
        raise RequestError("a NUL character (%00) is in no name", "path")
    for name, value in request.query_params.multi_items():
        if "\x00" in name or "\x00" in value:
            raise RequestError("a NUL character (%00) is in no name", name.replace("\x00", "%00"))


READ = Depends(require("read"))
WRITE = Depends(require("write"))


async def _unknown_node(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, UnknownNodeError)
    return JSONResponse(
        {"error": str(error), "node": error.urn, "candidates": list(error.suggestions)},
        status_code=404,
    )


async def _review_error(request: Request, error: Exception) -> JSONResponse:
    status = 404 if isinstance(error, UnknownSession) else 409 if isinstance(error, NotStable) else 400
    return JSONResponse({"error": str(error)}, status_code=status)


async def _request_error(request: Request, error: Exception) -> JSONResponse:
    body: dict[str, Any] = {"error": str(getattr(error, "reason", None) or error)}
    path = getattr(error, "path", None)
    if path:
        body["path"] = path
    return JSONResponse(body, status_code=getattr(error, "status", 400))
