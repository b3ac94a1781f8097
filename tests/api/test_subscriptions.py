"""Change subscriptions through a real server: a webhook receiver on loopback (a real HTTP server
that can be told to fail), server-sent events read off a streaming response, and the delivery
log. The change is an OpenLineage event adding a Kafka topic downstream of ads.user_segments."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.api.test_api import EXAMPLE, run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.service import Tracelake
from tracelake.store import LineageStore

API = "/api/tracelake/v1"
SEGMENTS = "hive.table/ads.user_segments"
TOPIC = "kafka.topic//broker:9092/ads.export_topic"


class Receiver:
    """A webhook endpoint that answers 500 to the first `failures` posts, then 204."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                failing = len(receiver.received) <= receiver.failures
                self.send_response(500 if failing else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    settings = ApiSettings(subscription_interval=0.05, webhook_backoff=0.1)
    with serve_in_thread(create_app(service, settings)) as base:
        yield base
    service.close()


def subscribe(url: str, **body: Any) -> dict[str, Any]:
    response = requests.post(f"{url}{API}/subscriptions", json={"node": SEGMENTS, **body}, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def add_the_topic(url: str) -> None:
    requests.post(f"{url}/api/v1/lineage", json=run_event(), timeout=10).raise_for_status()


def test_a_webhook_is_told_of_the_change_signed_with_the_secret(url: str) -> None:
    receiver = Receiver()
    made = subscribe(url, webhook_url=receiver.url)
    add_the_topic(url)

    headers, body = wait_for(lambda: receiver.received)[0]
    receiver.close()
    change = json.loads(body)
    assert change["added_nodes"] == [TOPIC]  # a table's closure is of tables; a field's, of fields
    assert change["added_edges"] == [[SEGMENTS, TOPIC]]
    assert change["removed_nodes"] == change["removed_edges"] == []
    expected = hmac.new(made["secret"].encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Tracelake-Signature"] == f"sha256={expected}"


def test_a_failing_webhook_is_retried_until_it_answers_and_every_attempt_is_logged(url: str) -> None:
    receiver = Receiver(failures=2)
    made = subscribe(url, webhook_url=receiver.url)
    add_the_topic(url)

    log = wait_for(
        lambda: (
            [
                d
                for d in requests.get(f"{url}{API}/subscriptions/{made['id']}/deliveries", timeout=10).json()
                if d["event_delivery"] == "delivered"
            ]
            and requests.get(f"{url}{API}/subscriptions/{made['id']}/deliveries", timeout=10).json()
        )
    )
    receiver.close()
    assert [(d["attempt"], d["status_code"]) for d in log] == [(1, 500), (2, 500), (3, 204)]
    bodies = {body for _, body in receiver.received}
    assert len(receiver.received) == 3 and len(bodies) == 1  # the same event each time


def test_events_stream_as_server_sent_events_and_resume_after_the_last_id(url: str) -> None:
    made = subscribe(url)
    lines: list[str] = []

    def listen() -> None:
        with requests.get(
            f"{url}{API}/subscriptions/{made['id']}/stream", stream=True, timeout=20
        ) as response:
            for line in response.iter_lines(decode_unicode=True):
                lines.append(line)
                if line.startswith("data:"):
                    return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    time.sleep(0.2)
    add_the_topic(url)
    listener.join(15)

    assert lines[lines.index("event: closure.changed") - 1] == "id: 1"
    data = json.loads(lines[-1].removeprefix("data: "))
    assert data["seq"] == 1 and data["added_edges"] == [[SEGMENTS, TOPIC]]

    # a client reconnecting with Last-Event-ID: 0 gets event 1 again, at once
    headers = {"Last-Event-ID": "0"}
    with requests.get(
        f"{url}{API}/subscriptions/{made['id']}/stream", headers=headers, stream=True, timeout=10
    ) as response:
        replayed = next(line for line in response.iter_lines(decode_unicode=True) if line.startswith("id:"))
    assert replayed == "id: 1"

    # polling: a client that saw event 1 gets nothing again; one that saw nothing gets it again
    polled = requests.get(f"{url}{API}/subscriptions/{made['id']}/events", params={"after": 1}, timeout=10)
    assert polled.json() == []
    again = requests.get(f"{url}{API}/subscriptions/{made['id']}/events", params={"after": 0}, timeout=10)
    assert [e["seq"] for e in again.json()] == [1]


def test_no_change_no_event_and_unknown_subscriptions_are_404(url: str) -> None:
    made = subscribe(url, direction="upstream")
    add_the_topic(url)  # downstream of ads.user_segments: its upstream closure is unchanged
    time.sleep(0.5)
    assert requests.get(f"{url}{API}/subscriptions/{made['id']}/events", timeout=10).json() == []
    assert requests.get(f"{url}{API}/subscriptions/sub-nothing/events", timeout=10).status_code == 404
    assert requests.delete(f"{url}{API}/subscriptions/{made['id']}", timeout=10).status_code == 204
    assert requests.get(f"{url}{API}/subscriptions/{made['id']}", timeout=10).status_code == 404
    listed = requests.get(f"{url}{API}/subscriptions", timeout=10).json()
    assert made["id"] not in {s["id"] for s in listed}
    assert "secret" not in json.dumps(listed)
