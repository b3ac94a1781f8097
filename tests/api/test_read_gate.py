"""Reads pass the server's read gate `read_concurrency` at a time; writes never wait for it.

A real uvicorn server on loopback over a real SQLite store; the service's `lineage` is wrapped
to count how many reads compute at once, and to hold one read inside while a write is posted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.api.test_api import run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.model import FlowEdge, LineageBatch, Signal
from tracelake.store import LineageStore

LINEAGE = "/api/tracelake/v1/lineage"
START = "hive.table/raw.events#user_id"


class CountedReads:
    """Wraps `Tracelake.lineage`: counts the reads inside it at once; each stays `hold` seconds,
    or until `release` is set when `blocking`."""

    def __init__(self, service: Tracelake, hold: float, *, blocking: bool = False) -> None:
        self._lineage = service.lineage
        self._lock = threading.Lock()
        self.hold, self.blocking = hold, blocking
        self.inside = self.most_at_once = 0
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.inside += 1
            self.most_at_once = max(self.most_at_once, self.inside)
        self.entered.set()
        try:
            if self.blocking:
                self.release.wait(30)
            else:
                time.sleep(self.hold)
            return self._lineage(*args, **kwargs)
        finally:
            with self._lock:
                self.inside -= 1


@pytest.fixture
def service(tmp_path: Path) -> Tracelake:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    edge = FlowEdge(START, "hive.table/dw.users#user_id", "spark.job/users", Signal.SPARK_RUNTIME)
    service.store.ingest(LineageBatch(edges=[edge]))
    return service


def other_writer(service: Tracelake) -> None:
    """A write to the server's store through a store of its own, as another process makes one."""
    edge = FlowEdge(START, "hive.table/dw.other#user_id", "spark.job/other", Signal.SPARK_RUNTIME)
    with LineageStore(service.store.url) as store:
        store.ingest(LineageBatch(edges=[edge]))


def read(base: str) -> int:
    params = {"node": START, "direction": "downstream", "depth": 5}
    return requests.get(base + LINEAGE, params=params, timeout=60).status_code


@pytest.mark.parametrize("places", [1, 2, 1_000])
def test_no_more_reads_compute_at_once_than_the_gate_has_places(
    service: Tracelake, monkeypatch: pytest.MonkeyPatch, places: int
) -> None:
    counted = CountedReads(service, hold=0.3)
    monkeypatch.setattr(service, "lineage", counted)
    app = create_app(service, ApiSettings(read_concurrency=places, subscription_interval=None))
    with serve_in_thread(app) as base, ThreadPoolExecutor(6) as clients:
        statuses = list(clients.map(lambda _: read(base), range(6)))
    service.close()
    assert statuses == [200] * 6
    assert counted.most_at_once == min(places, 6)


@contextmanager
def one_read_holding_the_gate(
    service: Tracelake, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Future[int], ThreadPoolExecutor]]:
    """A server with one place at its gate, and a read inside it until the block ends: yields the
    server's URL, that read's future and a pool with a free client for more."""
    counted = CountedReads(service, hold=0.0, blocking=True)
    monkeypatch.setattr(service, "lineage", counted)
    app = create_app(service, ApiSettings(read_concurrency=1, subscription_interval=None))
    with serve_in_thread(app) as base, ThreadPoolExecutor(2) as clients:
        held = clients.submit(read, base)
        assert counted.entered.wait(30)
        try:
            yield base, held, clients
        finally:
            counted.release.set()
            held.result()


def catch_ups_after(service: Tracelake, before: int) -> int:
    """The cache's catch-ups, once past `before` (or 10 s on)."""
    deadline = time.monotonic() + 10
    while service._indexes.catch_ups == before and time.monotonic() < deadline:
        time.sleep(0.01)
    return service._indexes.catch_ups


def test_a_write_goes_through_while_a_read_holds_the_only_place(
    service: Tracelake, monkeypatch: pytest.MonkeyPatch
) -> None:
    with one_read_holding_the_gate(service, monkeypatch) as (base, held, _):
        posted = requests.post(base + "/api/v1/lineage", json=run_event(), timeout=30)
        still_held = not held.done()
    service.close()
    assert posted.status_code == 201
    assert still_held
    assert held.result() == 200


def test_a_read_catches_the_index_up_before_the_gate_not_behind_it(
    service: Tracelake, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert service.index().version == service.store.graph_version()
    with one_read_holding_the_gate(service, monkeypatch) as (base, held, clients):
        other_writer(service)  # as another process would: this server's writer knows nothing of it
        before = service._indexes.catch_ups
        behind = clients.submit(read, base)  # queues at the gate the first read holds
        caught_up_while_held = catch_ups_after(service, before) > before and not held.done()
    assert behind.result() == 200
    service.close()
    assert caught_up_while_held
    assert service._indexes.catch_ups == before + 1  # the read behind found it caught up
