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

from tracelake.api.app import READ, WRITE, RequestError, actor_of, get_service
from tracelake.api.json_bodies import JsonBodyRoute
from tracelake.service import Tracelake
from tracelake.store.subscriptions import Subscription, SubscriptionStore
from tracelake.subscriptions import Direction, Subscriptions, WebhookRefused

router = APIRouter(
    prefix="/api/tracelake/v1/subscriptions", tags=["subscriptions"], route_class=JsonBodyRoute
)
Service = Annotated[Tracelake, Depends(get_service)]
HEARTBEAT_SECONDS = 15.0


class Subscribe(BaseModel):
    node: str
    direction: Direction = "downstream"
    depth: int | None = Field(None, ge=1, le=100)
    webhook_url: AnyHttpUrl | None = None


def _found(service: Tracelake, subscription_id: str) -> Subscription:
    subscription = SubscriptionStore(service.store).get(subscription_id)
    if subscription is None:
        raise RequestError(f"no subscription {subscription_id!r}", status=404)
    return subscription


@router.post("", dependencies=[WRITE], status_code=201)
def subscribe(
    request: Request, service: Service, body: Subscribe, actor: Annotated[str, Depends(actor_of)]
) -> dict[str, Any]:
    """Watch a closure from now on; the answer carries the webhook secret, shown only here."""
    url = str(body.webhook_url) if body.webhook_url else None
    try:
        made = Subscriptions(service, request.app.state.webhooks).subscribe(
            body.node, body.direction, depth=body.depth, webhook_url=url, actor=actor
        )
    except WebhookRefused as refusal:
        raise RequestError(str(refusal), "$.webhook_url") from None
    return {**made.public(), "secret": made.secret}


@router.get("", dependencies=[READ])
def subscriptions(service: Service) -> list[dict[str, Any]]:
    return [s.public() for s in SubscriptionStore(service.store).all()]


@router.get("/{subscription_id}", dependencies=[READ])
def subscription(service: Service, subscription_id: str) -> dict[str, Any]:
    return _found(service, subscription_id).public()


@router.delete("/{subscription_id}", dependencies=[WRITE], status_code=204)
def unsubscribe(service: Service, subscription_id: str) -> None:
    if not SubscriptionStore(service.store).delete(subscription_id):
        raise RequestError(f"no subscription {subscription_id!r}", status=404)


@router.get("/{subscription_id}/events", dependencies=[READ])
def events(
    service: Service, subscription_id: str, after: Annotated[int, Query(ge=0)] = 0
) -> list[dict[str, Any]]:
    """The changes after event `after`, oldest first (poll with the last seq seen)."""
    _found(service, subscription_id)
    return [e.to_json() for e in SubscriptionStore(service.store).events(subscription_id, after=after)]


@router.get("/{subscription_id}/deliveries", dependencies=[READ])
def deliveries(service: Service, subscription_id: str) -> list[dict[str, Any]]:
    """Every webhook attempt: when, the answer's status or the error, and where the event stands."""
    _found(service, subscription_id)
    return SubscriptionStore(service.store).deliveries(subscription_id)


@router.get("/{subscription_id}/stream", dependencies=[READ])
async def stream(
    request: Request,
    service: Service,
    subscription_id: str,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID")] = None,
    after: Annotated[int, Query(ge=0)] = 0,
) -> StreamingResponse:
    """Server-sent events: every change after `Last-Event-ID` (or `after`), then each new one."""
    _found(service, subscription_id)
    store = SubscriptionStore(service.store)
    interval: float = request.app.state.settings.subscription_interval or 0.5

    async def produce() -> AsyncIterator[str]:
        seen = last_event_id if last_event_id is not None else after
        quiet = 0.0
        yield "retry: 1000\n\n"
        while not await request.is_disconnected():
            found = await run_in_threadpool(store.events, subscription_id, after=seen)
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
