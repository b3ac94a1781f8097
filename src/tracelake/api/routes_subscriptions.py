"""Subscription routes under `/api/tracelake/v1/subscriptions`: subscribe to the upstream or
downstream closure of a node (with a webhook, or to read as a stream), read its events — as
JSON, or as server-sent events resuming after `Last-Event-ID` — and its webhook delivery log.
The webhook's signing secret is shown once, when the subscription is made; a webhook the server
may not reach (`subscriptions.WebhookPolicy`) is a 400 naming the address."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import AnyHttpUrl, BaseModel, Field
from starlette.concurrency import run_in_threadpool

from tracelake.api.deps import READ, WRITE, RequestError, actor_of
from tracelake.api.json_bodies import JsonBodyRoute
from tracelake.app.subscriptions import Direction, Subscriptions, WebhookRefused

router = APIRouter(
    prefix="/api/tracelake/v1/subscriptions", tags=["subscriptions"], route_class=JsonBodyRoute
)
HEARTBEAT_SECONDS = 15.0


class Subscribe(BaseModel):
    node: str
    direction: Direction = "downstream"
    depth: int | None = Field(None, ge=1, le=100)
    webhook_url: AnyHttpUrl | None = None


def _subscriptions(request: Request) -> Subscriptions:
    return Subscriptions(request.app.state.service, request.app.state.webhooks)


Watched = Annotated[Subscriptions, Depends(_subscriptions)]


@router.post("", dependencies=[WRITE], status_code=201)
def subscribe(watched: Watched, body: Subscribe, actor: Annotated[str, Depends(actor_of)]) -> dict[str, Any]:
    """Watch a closure from now on; the answer carries the webhook secret, shown only here."""
    url = str(body.webhook_url) if body.webhook_url else None
    try:
        made = watched.subscribe(body.node, body.direction, depth=body.depth, webhook_url=url, actor=actor)
    except WebhookRefused as refusal:
        raise RequestError(str(refusal), "$.webhook_url") from None
    return {**made.public(), "secret": made.secret}


@router.get("", dependencies=[READ])
def subscriptions(watched: Watched) -> list[dict[str, Any]]:
    return [s.public() for s in watched.all()]


@router.get("/{subscription_id}", dependencies=[READ])
def subscription(watched: Watched, subscription_id: str) -> dict[str, Any]:
    return watched.get(subscription_id).public()


@router.delete("/{subscription_id}", dependencies=[WRITE], status_code=204)
def unsubscribe(watched: Watched, subscription_id: str) -> None:
    watched.delete(subscription_id)


@router.get("/{subscription_id}/events", dependencies=[READ])
def events(
    watched: Watched, subscription_id: str, after: Annotated[int, Query(ge=0)] = 0
) -> list[dict[str, Any]]:
    """The changes after event `after`, oldest first (poll with the last seq seen)."""
    watched.get(subscription_id)
    return [e.to_json() for e in watched.events(subscription_id, after=after)]


@router.get("/{subscription_id}/deliveries", dependencies=[READ])
def deliveries(watched: Watched, subscription_id: str) -> list[dict[str, Any]]:
    """Every webhook attempt: when, the answer's status or the error, and where the event stands."""
    return watched.deliveries(subscription_id)


@router.get("/{subscription_id}/stream", dependencies=[READ])
async def stream(
    request: Request,
    watched: Watched,
    subscription_id: str,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID")] = None,
    after: Annotated[int, Query(ge=0)] = 0,
) -> StreamingResponse:
    """Server-sent events: every change after `Last-Event-ID` (or `after`), then each new one."""
    watched.get(subscription_id)
    interval: float = request.app.state.settings.subscription_interval or 0.5

    async def produce() -> AsyncIterator[str]:
        seen = last_event_id if last_event_id is not None else after
        quiet = 0.0
        yield "retry: 1000\n\n"
        while not await request.is_disconnected():
            found = await run_in_threadpool(watched.events, subscription_id, after=seen)
            for event in found:
                seen = event.seq
                yield f"id: {event.seq}\nevent: closure.changed\ndata: {json.dumps(event.to_json())}\n\n"
            if found:
                quiet = 0.0
                continue
            await asyncio.sleep(interval)
            quiet += interval
            if quiet >= HEARTBEAT_SECONDS:
                quiet = 0.0
                yield ": keep-alive\n\n"

    return StreamingResponse(produce(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
