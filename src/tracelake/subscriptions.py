"""Change subscriptions: "tell me when the upstream or downstream closure of X changes".

A subscription names a node, a direction and an optional depth, and keeps the closure it last
saw (its nodes and edges). `Watcher.check` recomputes every closure when the graph's version has
moved and records each difference as an event (`store.subscriptions`), delivered two ways: a
`Dispatcher` POSTs it to the subscription's webhook — signed with its secret
(`X-Tracelake-Signature: sha256=<HMAC of the body>`), retried with exponential backoff until a
2xx or the last attempt, every attempt logged — and the API streams it as server-sent events,
from where a client's `Last-Event-ID` left off. Both run in the server's background threads.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Literal

import requests

from tracelake.graph import traverse
from tracelake.service import Tracelake
from tracelake.store.subscriptions import Subscription, SubscriptionStore, Webhook

log = logging.getLogger(__name__)
Direction = Literal["upstream", "downstream"]


def closure(service: Tracelake, node: str, direction: Direction, depth: int | None) -> dict[str, Any]:
    """The nodes and edges `direction` of `node` (fields included when `node` is a field)."""
    index = service.index()
    result = traverse.lineage(index, [node], direction, depth=depth)
    nodes = sorted(index.urns[p] for p in result.distances())
    edges = sorted({(e.source, e.target) for e in (index.edge(p) for p in result.edge_positions())})
    return {"nodes": nodes, "edges": [list(edge) for edge in edges]}


def difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    old_nodes, new_nodes = set(before["nodes"]), set(after["nodes"])
    old_edges = {tuple(e) for e in before["edges"]}
    new_edges = {tuple(e) for e in after["edges"]}
    if old_nodes == new_nodes and old_edges == new_edges:
        return None
    return {
        "added_nodes": sorted(new_nodes - old_nodes),
        "removed_nodes": sorted(old_nodes - new_nodes),
        "added_edges": [list(e) for e in sorted(new_edges - old_edges)],
        "removed_edges": [list(e) for e in sorted(old_edges - new_edges)],
    }


class Subscriptions:
    """Create and read subscriptions; what the API routes call."""

    def __init__(self, service: Tracelake) -> None:
        self.service = service
        self.store = SubscriptionStore(service.store)

    def subscribe(
        self, node: str, direction: Direction, *, depth: int | None, webhook_url: str | None, actor: str
    ) -> Subscription:
        [urn] = self.service.resolve([node])
        current = closure(self.service, urn, direction, depth)
        return self.store.create(urn, direction, depth, current, webhook_url=webhook_url, actor=actor)


@dataclass
class Watcher:
    """Finds closure changes after the graph moved; one check per new graph version."""

    service: Tracelake
    seen_version: int = -1

    def check(self) -> list[int]:
        """Record the changes since the last check; returns the new events' seqs."""
        version = self.service.store.graph_version()
        if version == self.seen_version:
            return []
        store = SubscriptionStore(self.service.store)
        found = []
        for subscription in store.all():
            try:
                now = closure(self.service, subscription.node, subscription.direction, subscription.depth)  # type: ignore[arg-type]
            except KeyError:  # the node is gone from the graph: everything it reached is removed
                now = {"nodes": [], "edges": []}
            change = difference(subscription.closure, now)
            if change is not None:
                found.append(store.record(subscription, now, change, version))
        self.seen_version = version
        return found


@dataclass
class Dispatcher:
    """Delivers due webhook events; an event is retried after 1, 2, 4 … seconds until
    `max_attempts`, then marked failed (still in the log, still readable over SSE)."""

    service: Tracelake
    max_attempts: int = 8
    timeout: float = 5.0
    first_backoff: float = 1.0

    def deliver_due(self) -> int:
        store = SubscriptionStore(self.service.store)
        delivered = 0
        for webhook in store.due():
            event = webhook.event
            status, error = self._post(webhook)
            ok = status is not None and 200 <= status < 300
            last = event.attempts + 1 >= self.max_attempts
            retry_in = None if ok or last else self.first_backoff * 2**event.attempts
            store.attempted(event, status_code=status, error=error, retry_in=retry_in)
            delivered += ok
        return delivered

    def _post(self, webhook: Webhook) -> tuple[int | None, str | None]:
        event = webhook.event
        body = json.dumps(event.to_json(), sort_keys=True).encode()
        signature = hmac.new(webhook.secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-Tracelake-Event": "closure.changed",
            "X-Tracelake-Delivery": str(event.seq),
            "X-Tracelake-Signature": f"sha256={signature}",
        }
        try:
            response = requests.post(webhook.url, data=body, headers=headers, timeout=self.timeout)
        except requests.RequestException as error:
            return None, type(error).__name__
        return response.status_code, None if response.ok else response.reason


class Background:
    """The watcher and dispatcher on one daemon thread, every `interval` seconds."""

    def __init__(self, service: Tracelake, interval: float = 0.5, backoff: float = 1.0) -> None:
        self.watcher = Watcher(service)
        self.dispatcher = Dispatcher(service, first_backoff=backoff)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tracelake-subscriptions", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.watcher.check()
                self.dispatcher.deliver_due()
            except Exception:  # a bad round must not end the thread; the next one retries
                log.exception("subscription round failed")
