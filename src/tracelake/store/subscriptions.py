"""Subscriptions in the store: what is watched, the log of changes found, and webhook attempts.

The event log is the delivery contract: each change gets a `seq`; a server-sent-events client
resumes after the last `seq` it saw, and a webhook event stays `pending` until a 2xx answer (or
its last attempt), each attempt logged. So every change is delivered at least once — except to a
webhook whose address the server refuses, which is logged `refused` and not tried again.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from tracelake.model import utcnow
from tracelake.store import schema as s
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.sqlstore import LineageStore


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    node: str
    direction: str  # upstream | downstream
    depth: int | None
    webhook_url: str | None
    secret: str | None
    closure: dict[str, Any]
    created_by: str

    def public(self) -> dict[str, Any]:
        """What the API shows: never the secret."""
        return {
            "id": self.id,
            "node": self.node,
            "direction": self.direction,
            "depth": self.depth,
            "webhook_url": self.webhook_url,
            "closure_size": {"nodes": len(self.closure["nodes"]), "edges": len(self.closure["edges"])},
            "created_by": self.created_by,
        }


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    subscription_id: str
    at: str
    graph_version: int
    change: dict[str, Any]
    delivery: str
    attempts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "subscription": self.subscription_id,
            "at": self.at,
            "graph_version": self.graph_version,
            **self.change,
        }


@dataclass(frozen=True, slots=True)
class Webhook:
    """An event to post, where, and the secret that signs it."""

    event: Event
    url: str
    secret: str


class SubscriptionStore:
    def __init__(self, store: LineageStore) -> None:
        self.engine = store.engine

    def create(
        self,
        node: str,
        direction: str,
        depth: int | None,
        closure: dict[str, Any],
        *,
        webhook_url: str | None,
        actor: str,
    ) -> Subscription:
        subscription = Subscription(
            id=f"sub-{secrets.token_hex(6)}",
            node=node,
            direction=direction,
            depth=depth,
            webhook_url=webhook_url,
            secret=secrets.token_urlsafe(24) if webhook_url else None,
            closure=closure,
            created_by=actor,
        )
        with self.engine.begin() as conn:
            conn.execute(
                s.subscriptions.insert().values(
                    id=subscription.id,
                    node=node,
                    direction=direction,
                    depth=depth,
                    webhook_url=webhook_url,
                    secret=subscription.secret,
                    closure=closure,
                    created_by=actor,
                    created_at=to_micros(utcnow()),
                )
            )
        return subscription

    def all(self) -> list[Subscription]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(s.subscriptions).order_by(s.subscriptions.c.created_at)).all()
        return [_subscription(row) for row in rows]

    def get(self, subscription_id: str) -> Subscription | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(s.subscriptions).where(s.subscriptions.c.id == subscription_id)
            ).first()
        return _subscription(row) if row else None

    def delete(self, subscription_id: str) -> bool:
        with self.engine.begin() as conn:
            found = conn.execute(s.subscriptions.delete().where(s.subscriptions.c.id == subscription_id))
            conn.execute(
                s.subscription_events.delete().where(
                    s.subscription_events.c.subscription_id == subscription_id
                )
            )
        return found.rowcount > 0

    def record(
        self, subscription: Subscription, closure: dict[str, Any], change: dict[str, Any], version: int
    ) -> int:
        """Store the new closure and its change as the next event, in one transaction."""
        now = to_micros(utcnow())
        with self.engine.begin() as conn:
            conn.execute(
                s.subscriptions.update()
                .where(s.subscriptions.c.id == subscription.id)
                .values(closure=closure)
            )
            result = conn.execute(
                s.subscription_events.insert().values(
                    subscription_id=subscription.id,
                    at=now,
                    graph_version=version,
                    change=change,
                    delivery="pending" if subscription.webhook_url else "none",
                    attempts=0,
                    next_attempt_at=now,
                )
            )
            key = result.inserted_primary_key
            assert key is not None  # an insert of one row
            return int(key[0])

    def events(self, subscription_id: str, *, after: int = 0, limit: int = 1000) -> list[Event]:
        t = s.subscription_events
        query = (
            sa.select(t)
            .where(t.c.subscription_id == subscription_id, t.c.seq > after)
            .order_by(t.c.seq)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [_event(row) for row in conn.execute(query)]

    def due(self, limit: int = 100) -> list[Webhook]:
        """Webhook events whose next attempt is due, oldest first."""
        t, subs = s.subscription_events, s.subscriptions
        query = (
            sa.select(t, subs.c.webhook_url, subs.c.secret)
            .join(subs, subs.c.id == t.c.subscription_id)
            .where(t.c.delivery == "pending", t.c.next_attempt_at <= to_micros(utcnow()))
            .order_by(t.c.seq)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [Webhook(_event(row), row.webhook_url, row.secret) for row in conn.execute(query)]

    def attempted(
        self,
        event: Event,
        *,
        status_code: int | None,
        error: str | None,
        retry_in: float | None,
        refused: bool = False,
    ) -> None:
        """Log one delivery attempt; `retry_in` None means it is settled (delivered, given up or
        refused)."""
        now = to_micros(utcnow())
        delivered = status_code is not None and 200 <= status_code < 300
        if refused:
            state = "refused"
        elif delivered:
            state = "delivered"
        else:
            state = "pending" if retry_in is not None else "failed"
        with self.engine.begin() as conn:
            conn.execute(
                s.subscription_deliveries.insert().values(
                    seq=event.seq, attempt=event.attempts + 1, at=now, status_code=status_code, error=error
                )
            )
            conn.execute(
                s.subscription_events.update()
                .where(s.subscription_events.c.seq == event.seq)
                .values(
                    delivery=state,
                    attempts=event.attempts + 1,
                    next_attempt_at=now + int((retry_in or 0) * 1_000_000),
                )
            )

    def deliveries(self, subscription_id: str) -> list[dict[str, Any]]:
        d, t = s.subscription_deliveries, s.subscription_events
        query = (
            sa.select(d, t.c.delivery)
            .join(t, t.c.seq == d.c.seq)
            .where(t.c.subscription_id == subscription_id)
            .order_by(d.c.id)
        )
        with self.engine.connect() as conn:
            return [
                {
                    "seq": row.seq,
                    "attempt": row.attempt,
                    "at": from_micros(row.at).isoformat(),
                    "status_code": row.status_code,
                    "error": row.error,
                    "event_delivery": row.delivery,
                }
                for row in conn.execute(query)
            ]


def _subscription(row: Any) -> Subscription:
    return Subscription(
        row.id, row.node, row.direction, row.depth, row.webhook_url, row.secret, row.closure, row.created_by
    )


def _event(row: Any) -> Event:
    return Event(
        row.seq,
        row.subscription_id,
        from_micros(row.at).isoformat(),
        row.graph_version,
        row.change,
        row.delivery,
        row.attempts,
    )
