"""Change subscriptions through a real server: a webhook receiver on loopback (a real HTTP server
that can be told to fail), server-sent events read off a streaming response, and the delivery
log. The change is an OpenLineage event adding a Kafka topic downstream of ads.user_segments.
Loopback is no webhook's to reach unless the operator allows it, so the server allows the
receiver's address as an operator would (`--webhook-allow 127.0.0.1`); what it refuses — at
subscription, and again at delivery — is tested here too, and by a real `tracelake serve`."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from typer.testing import CliRunner

from tests.api.test_api import EXAMPLE, run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.app.subscriptions import WebhookPolicy
from tracelake.cli import app
from tracelake.store import LineageStore
from tracelake.store.subscriptions import SubscriptionStore

API = "/api/tracelake/v1"
SEGMENTS = "hive.table/ads.user_segments"
TOPIC = "kafka.topic//broker:9092/ads.export_topic"


class Receiver:
    """A webhook endpoint that answers 500 to the first `failures` posts, then 204 (or a redirect
    to `redirect`, when given)."""

    def __init__(self, failures: int = 0, redirect: str | None = None) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                failing = len(receiver.received) <= receiver.failures
                self.send_response(500 if failing else 307 if redirect else 204)
                if redirect and not failing:
                    self.send_header("Location", redirect)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()  # later attempts are refused at once, not left to time out


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Tracelake]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    yield service
    service.close()


@pytest.fixture
def url(service: Tracelake) -> Iterator[str]:
    """A server that lets webhooks reach loopback (where the test's receivers listen)."""
    settings = ApiSettings(subscription_interval=0.05, webhook_backoff=0.1, webhook_allow=("127.0.0.1",))
    with serve_in_thread(create_app(service, settings)) as base:
        yield base


@pytest.fixture
def guarded(service: Tracelake) -> Iterator[str]:
    """A server as it comes: webhooks reach public addresses only."""
    settings = ApiSettings(subscription_interval=0.05, webhook_backoff=0.1, listen_host="127.0.0.1")
    with serve_in_thread(create_app(service, settings)) as base:
        yield base


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


def deliveries(url: str, subscription: str) -> list[dict[str, Any]]:
    response = requests.get(f"{url}{API}/subscriptions/{subscription}/deliveries", timeout=10)
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("webhook", "refused"),
    [
        ("http://127.0.0.1:9/hook", "address 127.0.0.1 is a loopback address"),
        ("http://[::1]:9/", "address ::1 is a loopback address"),
        ("http://localhost:9/", "host localhost resolves to"),  # every address of a name is asked
        ("http://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is a link-local address"),
        ("http://10.0.0.7/", "address 10.0.0.7 is a private address"),
        ("http://192.168.1.1:8080/", "address 192.168.1.1 is a private address"),
        ("http://[fd00::1]/", "address fd00::1 is a private address"),
        ("http://0.0.0.0:8750/", "address 0.0.0.0 is an unspecified address"),
        ("http://[::ffff:127.0.0.1]/", "address ::ffff:127.0.0.1 is a loopback address"),  # IPv4 inside IPv6
        ("http://100.64.0.1/", "address 100.64.0.1 is a non-public address"),  # carrier-grade NAT
        ("http://224.0.0.1/", "address 224.0.0.1 is a multicast address"),
        ("http://no-such-host.invalid/", "webhook host no-such-host.invalid does not resolve"),
    ],
)
def test_webhooks_to_internal_addresses_are_refused_when_subscribing(
    guarded: str, webhook: str, refused: str
) -> None:
    response = requests.post(
        f"{guarded}{API}/subscriptions", json={"node": SEGMENTS, "webhook_url": webhook}, timeout=10
    )

    assert response.status_code == 400, response.text
    assert response.json()["path"] == "$.webhook_url"
    assert refused in response.json()["error"]
    assert requests.get(f"{guarded}{API}/subscriptions", timeout=10).json() == []


def test_the_servers_own_address_is_refused_though_public_unless_allowed(service: Tracelake) -> None:
    own = "8.8.8.8"  # a public address the server says it listens on (nothing is sent there)
    webhook = f"http://{own}:8750/api/v1/lineage"
    answers = []
    for allow in ((), (own,)):
        settings = ApiSettings(subscription_interval=None, listen_host=own, webhook_allow=allow)
        with serve_in_thread(create_app(service, settings)) as base:
            answers.append(
                requests.post(
                    f"{base}{API}/subscriptions", json={"node": SEGMENTS, "webhook_url": webhook}, timeout=10
                )
            )
    refused, allowed = answers
    assert refused.status_code == 400
    assert refused.json()["error"].startswith("webhook address 8.8.8.8 is this server's own address")
    assert allowed.status_code == 201, allowed.text


def test_a_webhook_the_server_no_longer_allows_is_refused_at_delivery_and_not_retried(
    guarded: str, service: Tracelake
) -> None:
    receiver = Receiver()
    # made while loopback was allowed (a server restarted with another --webhook-allow since)
    made = SubscriptionStore(service.store).create(
        SEGMENTS, "downstream", None, {"nodes": [SEGMENTS], "edges": []}, webhook_url=receiver.url, actor="t"
    )
    add_the_topic(guarded)

    log = wait_for(lambda: deliveries(guarded, made.id))
    time.sleep(0.5)  # five backoffs' worth: a retry would show
    receiver.close()
    assert receiver.received == []
    assert deliveries(guarded, made.id) == log
    [attempt] = log
    assert attempt["event_delivery"] == "refused" and attempt["status_code"] is None
    assert attempt["error"].startswith("refused: webhook address 127.0.0.1 is a loopback address")
    # the change itself is not lost: it is still read as an event
    events = requests.get(f"{guarded}{API}/subscriptions/{made.id}/events", timeout=10).json()
    assert [e["added_nodes"] for e in events] == [[TOPIC]]


def test_an_allowed_host_name_is_posted_to_the_address_it_was_checked_at_under_its_name(
    service: Tracelake,
) -> None:
    receiver = Receiver()
    port = receiver.url.split(":")[2].split("/")[0]
    settings = ApiSettings(subscription_interval=0.05, webhook_backoff=0.1, webhook_allow=("localhost",))
    with serve_in_thread(create_app(service, settings)) as base:
        subscribe(base, webhook_url=f"http://localhost:{port}/hook?team=ads")
        add_the_topic(base)
        headers, body = wait_for(lambda: receiver.received)[0]
    receiver.close()
    # connected to an address of localhost (::1 first where it has one, then 127.0.0.1, where
    # the receiver listens), asked for under the name the subscriber gave
    assert headers["Host"] == f"localhost:{port}"
    assert json.loads(body)["added_nodes"] == [TOPIC]


def test_a_webhook_redirect_is_not_followed(url: str) -> None:
    elsewhere = Receiver()
    receiver = Receiver(redirect=elsewhere.url)
    made = subscribe(url, webhook_url=receiver.url)
    add_the_topic(url)

    first = wait_for(lambda: deliveries(url, made["id"]))[0]
    time.sleep(0.3)
    receiver.close()
    elsewhere.close()
    assert first["status_code"] == 307 and first["event_delivery"] in ("pending", "failed")
    assert elsewhere.received == []


def test_tracelake_serve_takes_webhook_allow(tmp_path: Path) -> None:
    """A real `tracelake serve`: what --webhook-allow names is accepted, its neighbours are not;
    an entry that is no host, address or network is a one-line error."""
    db = tmp_path / "lineage.db"
    Tracelake(LineageStore(str(db))).ingest_sql(
        EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tracelake = str(Path(sys.executable).parent / "tracelake")
    command = [tracelake, "serve", "--port", str(port), "--db", str(db)]
    env = {key: value for key, value in os.environ.items() if key != "TRACELAKE_TOKENS"}
    server = subprocess.Popen(
        [*command, "--webhook-allow", "10.1.0.0/16", "--webhook-allow", "hooks.internal"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=30)
        answers = {
            webhook: requests.post(
                f"{base}{API}/subscriptions", json={"node": SEGMENTS, "webhook_url": webhook}, timeout=10
            ).status_code
            for webhook in ("http://10.1.2.3/hook", "http://10.2.0.1/hook", f"{base}/api/v1/lineage")
        }
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert answers == {
        "http://10.1.2.3/hook": 201,
        "http://10.2.0.1/hook": 400,
        f"{base}/api/v1/lineage": 400,
    }

    bad = CliRunner().invoke(app, ["serve", "--webhook-allow", "10.0.0.0/33", "--db", str(db)])
    assert bad.exit_code == 2
    assert bad.stderr.strip().splitlines() == [
        "error: --webhook-allow '10.0.0.0/33': expected a host name, an address or a network "
        "such as 10.0.0.0/8"
    ]


def _answers(base: str) -> bool:
    try:
        return requests.get(f"{base}{API}/subscriptions", timeout=1).status_code == 200
    except requests.ConnectionError:
        return False


def test_an_https_webhook_goes_to_the_checked_address_and_its_certificate_must_name_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real TLS receiver for `localhost` on 127.0.0.1, its certificate trusted as a CA's would be:
    the post connects to the checked address, yet the certificate is checked against the name."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate with")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    request = (
        "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost"
    )
    subprocess.run(
        ["openssl", *request.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    receiver = Receiver()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
    port = receiver.server.server_address[1]
    policy = WebhookPolicy.of(["localhost"])

    target = policy.check(f"https://localhost:{port}/hook")
    answer = policy.post(target, b"{}", {"Content-Type": "application/json"}, timeout=5)
    elsewhere = replace(target, host="hooks.example.com", host_header="hooks.example.com")
    with pytest.raises(urllib3.exceptions.SSLError, match=r"hooks\.example\.com"):
        policy.post(elsewhere, b"{}", {}, timeout=5)
    receiver.close()

    assert answer.status == 204
    assert "127.0.0.1" in target.addresses
    assert [headers["Host"] for headers, _ in receiver.received] == [f"localhost:{port}"]
