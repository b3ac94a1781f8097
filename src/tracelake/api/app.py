"""The FastAPI application: settings, token checks, body limits and error shapes, around the
routers of `marquez` (OpenLineage in, Marquez-shaped lineage out) and `routes` (Tracelake's own).

Routes hold no logic: each parses its parameters, calls `Tracelake` (the CLI's service) and
returns the view's JSON. Every user mistake is a 4xx with `{"error": …}` and, where it has one,
the JSON `path` of the problem; an unknown node is a 404 naming near matches.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from tracelake.api import (
    marquez,
    routes,
    routes_answers,
    routes_operations,
    routes_review,
    routes_subscriptions,
    ui,
)
from tracelake.api.auth import Tokens
from tracelake.api.deps import RequestError
from tracelake.api.encoding import RequestBodies
from tracelake.api.gate import READ_CONCURRENCY
from tracelake.api.marquez_read import router as marquez_read_router
from tracelake.app.review import NotStable, ReviewError, UnknownSession
from tracelake.app.service import Tracelake
from tracelake.app.subscriptions import Background, WebhookPolicy
from tracelake.model import VERSION, InputError, UnknownNodeError

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
    read_concurrency: int = READ_CONCURRENCY  # reads computing at once; the rest queue (`gate`)


def create_app(service: Tracelake, settings: ApiSettings | None = None) -> FastAPI:
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
        service.close_writer()

    app = FastAPI(
        lifespan=lifespan,
        title="Tracelake",
        description="Privacy-aware data lineage: OpenLineage in, lineage, labels and policies out.",
        version=VERSION,
        dependencies=[Depends(_no_nul)],
    )
    app.state.service = service
    app.state.settings = settings
    app.state.webhooks = webhooks
    app.state.read_concurrency = settings.read_concurrency
    app.state.read_gate = anyio.Semaphore(settings.read_concurrency)  # `gate.GatedRoute` waits here
    app.state.tokens = Tokens.load(settings.token_file) if settings.token_file else None
    # every body read within the limit (413 past it, declared or not), gzip and deflate decoded
    app.add_middleware(RequestBodies, max_bytes=settings.max_body_bytes)
    app.add_exception_handler(UnknownNodeError, _unknown_node)
    app.add_exception_handler(ReviewError, _review_error)
    # the routes' own RequestError, a batch or a name the store cannot take, a privacy request…
    app.add_exception_handler(InputError, _request_error)
    app.include_router(marquez.router)
    app.include_router(marquez_read_router)
    app.include_router(routes.router)
    app.include_router(routes_answers.router)
    app.include_router(routes_review.router)
    app.include_router(routes_subscriptions.router)
    app.include_router(routes_operations.router)
    ui.mount_ui(app)
    return app


async def _no_nul(request: Request) -> None:
    """A URL naming a NUL character (`%00`) is a 400: no name holds one (JSON bodies holding one
    are refused), and PostgreSQL cannot even look one up."""
    if "\x00" in request.scope["path"]:
        raise RequestError("a NUL character (%00) is in no name", "path")
    for name, value in request.query_params.multi_items():
        if "\x00" in name or "\x00" in value:
            raise RequestError("a NUL character (%00) is in no name", name.replace("\x00", "%00"))


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
