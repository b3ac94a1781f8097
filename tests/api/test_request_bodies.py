"""Bodies and parameters the API must refuse with a 4xx and a one-line JSON reason, never a 500 or
a reset connection, over a real server: bodies over the size limit (declared, chunked, waiting for
`100 Continue`, on a connection the client closes), JSON nested deeper than any document, or
holding text or numbers no answer could carry, on every route that takes JSON, YAML nested as deep,
names and labels longer than the store keeps (and, pinned as strict xfails on PostgreSQL, other
strings longer than its columns), a URL naming a NUL character, and a query value a route does not
know."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.api.test_api import run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.model.json_values import MAX_NESTING
from tracelake.store import LineageStore

LIMIT = 1024 * 1024
OVER = 8 * LIMIT  # a body well past what the sockets' buffers hold, so a reset would show
API = "/api/tracelake/v1"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    service = Tracelake(LineageStore(str(tmp_path_factory.mktemp("bodies") / "lineage.db")))
    settings = ApiSettings(max_body_bytes=LIMIT, subscription_interval=None)
    with serve_in_thread(create_app(service, settings)) as base:
        yield base
    service.close()


def _connect(url: str, head: str) -> socket.socket:
    address = urlsplit(url)
    connection = socket.create_connection((address.hostname, address.port), timeout=10)
    connection.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
    return connection


def _answer(connection: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one answer on the connection, read until the server closes it."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


# ---------------------------------------------------------------- bodies over the limit


def test_a_declared_length_over_the_limit_is_a_413_before_the_body_is_sent(url: str) -> None:
    connection = _connect(
        url,
        f"POST /api/v1/lineage HTTP/1.1\nHost: tracelake\nContent-Type: application/json\n"
        f"Content-Length: {OVER}\nConnection: close\n",
    )
    # the answer comes before a byte of the body is sent ...
    first = connection.recv(65536)
    assert first.startswith(b"HTTP/1.1 413 "), first
    # ... and the server reads the body it refused before closing, so the client, still sending as
    # clients that read no answer before the end of their body do, is not reset
    connection.sendall(b" " * OVER)
    rest = b""
    while chunk := connection.recv(65536):
        rest += chunk
    head, _, body = (first + rest).partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {"error": f"the body is over the limit of {LIMIT:,} bytes", "path": "$"}


def test_a_client_that_closes_the_connection_reads_the_413_not_a_reset(url: str) -> None:
    response = requests.post(
        f"{url}/api/v1/lineage", data=b" " * OVER, headers={"Connection": "close"}, timeout=30
    )
    assert response.status_code == 413
    assert response.json()["error"] == f"the body is over the limit of {LIMIT:,} bytes"


def test_a_chunked_body_is_a_413_once_it_passes_the_limit(url: str) -> None:
    response = requests.post(f"{url}/api/v1/lineage", data=iter([b" " * 65536] * (OVER // 65536)), timeout=30)
    assert response.status_code == 413
    assert response.json() == {"error": f"the body is over the limit of {LIMIT:,} bytes", "path": "$"}


def test_a_client_waiting_for_100_continue_is_refused_without_being_told_to_send(url: str) -> None:
    connection = _connect(
        url,
        f"POST /api/v1/lineage HTTP/1.1\nHost: tracelake\nContent-Length: {OVER}\nExpect: 100-continue\n",
    )
    status, body = _answer(connection)  # no `100 Continue` before it, and nothing sent
    assert status == 413
    assert body["error"] == f"the body is over the limit of {LIMIT:,} bytes"


def test_the_next_request_after_a_refused_body_lands(url: str) -> None:
    with requests.Session() as http:
        assert http.post(f"{url}/api/v1/lineage", data=b" " * OVER, timeout=30).status_code == 413
        response = http.post(f"{url}/api/v1/lineage", json=run_event("after.refusal"), timeout=30)
    assert response.status_code == 201


# ---------------------------------------------------------------- nesting


def _json_routes(url: str) -> list[tuple[str, str]]:
    """(method, path) of every operation whose document says it takes a JSON body."""
    document = requests.get(f"{url}/openapi.json", timeout=10).json()
    return [
        (method.upper(), path.replace("{session_id}", "s").replace("{name}", "e"))
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("depth", "wrap", "path"),
    [
        (MAX_NESTING + 50, '{{"node": {}, "labels": ["x"]}}', "$.node[0][0][0][0][0][0][0]…"),
        (950, '{{"node": {}, "labels": ["x"]}}', "$.node[0][0][0][0][0][0][0]…"),  # parsed, then too deep
        (1000, "{}", "$"),  # too deep for Python's parser itself
        (100_000, "{}", "$"),
    ],
)
def test_json_nested_too_deep_is_a_400_on_every_route_that_takes_json(
    url: str, depth: int, wrap: str, path: str
) -> None:
    routes = _json_routes(url)
    assert ("POST", "/api/v1/lineage") in routes and len(routes) >= 12
    body = wrap.format(_nested(depth))
    for method, route in routes:
        response = requests.request(
            method, url + route, data=body, headers={"Content-Type": "application/json"}, timeout=30
        )
        assert response.status_code == 400, (route, response.text[:200])
        assert response.json() == {
            "error": f"the document nests deeper than {MAX_NESTING} levels",
            "path": path,
        }


@pytest.mark.parametrize(
    ("text", "reason", "path"),
    [
        ('{"node": "a\\ud800", "labels": ["x"]}', "a string with a lone surrogate escape", "$.node"),
        (
            '{"node": "a", "labels": [{"\\udfff": 1}]}',
            "a string with a lone surrogate escape",
            "$.labels[0].\\udfff",
        ),
        ('{"node": "a", "labels": ["b\\u0000"]}', "a string with a NUL character", "$.labels[0]"),
        ('{"node": NaN, "labels": ["x"]}', "a number that is not finite", "$.node"),
        ('{"node": "a", "labels": [-1e999]}', "a number that is not finite", "$.labels[0]"),
    ],
)
def test_json_no_answer_could_carry_is_a_400_on_every_route_that_takes_json(
    url: str, text: str, reason: str, path: str
) -> None:
    """Python's parser takes lone surrogates and non-finite numbers; UTF-8 and JSON cannot carry
    them back (they were 500s when the store wrote them, or when a read route answered them)."""
    for method, route in _json_routes(url):
        response = requests.request(
            method, url + route, data=text, headers={"Content-Type": "application/json"}, timeout=30
        )
        assert response.status_code == 400, (route, response.text[:200])
        assert response.json()["error"].startswith(reason) and response.json()["path"] == path


def test_a_name_longer_than_the_store_keys_is_a_400(url: str) -> None:
    event = run_event("long" + "n" * 3000)
    response = requests.post(f"{url}/api/v1/lineage", json=event, timeout=30)
    assert response.status_code == 400
    assert "over the 2,000-byte limit" in response.json()["error"]


def test_json_as_deep_as_allowed_is_read(url: str) -> None:
    event = run_event("deep.facets")
    event["run"]["facets"] = {"deep": json.loads(_nested(MAX_NESTING - 3))}  # $.run.facets.deep[…]
    assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=30).status_code == 201


def test_posted_yaml_nested_too_deep_or_not_yaml_is_a_400(url: str) -> None:
    for text in (_nested(2000), "- {name: p, kind: purpose, label: pii, zone: 2024-13-01}"):
        response = requests.post(
            f"{url}{API}/policies/check", data=text, headers={"Content-Type": "text/yaml"}, timeout=30
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("body: not valid YAML: ")
    response = requests.post(
        f"{url}{API}/policies/check",
        data="- {name: p, kind: purpose, label: pii, zone: 5}",
        headers={"Content-Type": "text/yaml"},
        timeout=30,
    )
    assert response.status_code == 400
    assert "`zone` is a zone or a list of them" in response.json()["error"]


# ---------------------------------------------------------------- parameters


def test_a_privacy_request_status_not_known_is_a_400_naming_the_known_ones(url: str) -> None:
    response = requests.get(f"{url}{API}/privacy/requests", params={"status": "x"}, timeout=10)
    assert response.status_code == 400
    assert response.json() == {"error": "a request status is one of pending, running, done, failed, not 'x'"}


def test_a_nul_character_in_a_url_is_a_400_on_either_backend(store: LineageStore) -> None:
    """PostgreSQL cannot look up a NUL character: such a URL was a 500 there, and no name holds one."""
    with serve_in_thread(create_app(Tracelake(store), ApiSettings(subscription_interval=None))) as url:
        for path, where in [
            (f"{API}/search?q=a%00", "q"),
            (f"{API}/lineage?node=a%00&node=b", "node"),
            (f"{API}/nodes/a%00", "path"),
            ("/api/v1/namespaces/a%00/jobs", "path"),
            ("/api/v1/lineage?nodeId=dataset:a%00:b", "nodeId"),
        ]:
            response = requests.get(url + path, timeout=30)
            assert response.status_code == 400, (path, response.text[:200])
            assert response.json() == {"error": "a NUL character (%00) is in no name", "path": where}


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_time_with_no_utc_equivalent_is_a_422_on_every_route_that_takes_one(url: str, moment: str) -> None:
    """Each was a 500 (an OverflowError) where the time was first compared with one in UTC."""
    node = {"node": "dating.user_profile"}
    for method, path, where, given in [
        ("GET", f"{API}/lineage", "as_of", node),
        ("GET", f"{API}/impact", "as_of", node),
        ("GET", f"{API}/paths", "as_of", {"source": "a", "target": "b"}),
        ("GET", f"{API}/nodes/dating.user_profile", "as_of", {}),
        ("GET", f"{API}/diff", "since", {}),
        ("GET", f"{API}/diff", "until", {"since": "2024-01-01"}),
        ("GET", f"{API}/readers", "since", node),
        ("GET", f"{API}/readers", "until", node),
        ("GET", f"{API}/entities/words_count/status", "at", {}),
        ("GET", "/api/v1/events/lineage", "before", {}),
        ("GET", "/api/v1/events/lineage", "after", {}),
        ("POST", f"{API}/lineage", "as_of", {"node": ["dating.user_profile"]}),
        (
            "POST",
            f"{API}/entities/words_count/taint",
            "until",
            {"from": "2024-01-01", "to": "2024-01-02", "reason": "x"},
        ),
    ]:
        if method == "GET":
            response = requests.get(url + path, params={**given, where: moment}, timeout=30)
        else:
            response = requests.post(url + path, json={**given, where: moment}, timeout=30)
        assert response.status_code == 422, (path, where, response.text[:200])
        [error] = response.json()["detail"]
        assert error["loc"][-1] == where and "has no UTC equivalent" in error["msg"]


# ---------------------------------------------------------------- strings longer than the store's columns

LONG = "L" * 3000


def test_a_label_longer_than_the_store_assigns_is_a_400(url: str) -> None:
    """It was taken, then a 500 on PostgreSQL when propagation spread it or a session was saved."""
    for path, body in [
        (f"{API}/labels", {"node": "dating.user_profile", "labels": ["pii", LONG]}),
        (f"{API}/discovery", {"label": LONG}),
    ]:
        response = requests.post(url + path, json=body, timeout=30)
        assert response.status_code == 400, (path, response.text[:200])
        assert response.json() == {"error": "a label is at most 200 characters, not 3,000"}


def _event_with(**changes: Any) -> dict[str, Any]:
    event = run_event("long.strings")
    for member, value in changes.items():
        event[member] = {**event[member], **value} if isinstance(value, dict) else value
    return event


# Strings bound for VARCHAR columns that PostgreSQL holds to their length (SQLite holds any): they
# were 500s there. A kind too long is in the node's name, refused (400); any other such value is
# left out of the node, with a problem saying so, and the rest is stored.
TOO_LONG_FOR_POSTGRES: dict[str, tuple[str, Any]] = {
    "asset owner (nodes.owner, 200)": (
        f"{API}/batches",
        {"assets": [{"urn": "hive.table/d.o", "owner": LONG}]},
    ),
    "asset layer (nodes.layer, 50)": (
        f"{API}/batches",
        {"assets": [{"urn": "hive.table/d.l", "layer": LONG}]},
    ),
    "asset kind (nodes.kind, 200)": (f"{API}/batches", {"assets": [{"urn": f"hive.{'k' * 300}/d.k"}]}),
    "field data type (nodes.data_type, 500)": (
        f"{API}/batches",
        {"fields": [{"urn": "hive.table/d.t#c", "data_type": LONG}]},
    ),
    "OpenLineage ownership facet's owner (nodes.owner, 200)": (
        "/api/v1/lineage",
        _event_with(
            job={"facets": {"ownership": {"_producer": "p", "_schemaURL": "s", "owners": [{"name": LONG}]}}}
        ),
    ),
    "OpenLineage jobType facet's jobType, the job's kind (nodes.kind, 200)": (
        "/api/v1/lineage",
        _event_with(job={"facets": {"jobType": {"_producer": "p", "_schemaURL": "s", "jobType": LONG}}}),
    ),
    "OpenLineage ownership facet's owner of a job without edges (nodes.owner, 200)": (
        "/api/v1/lineage",
        {
            **_event_with(inputs=[], outputs=[]),
            "job": {
                "namespace": "n",
                "name": "alone",
                "facets": {"ownership": {"_producer": "p", "_schemaURL": "s", "owners": [{"name": LONG}]}},
            },
        },
    ),
    "OpenLineage schema facet's field type (nodes.data_type, 500)": (
        "/api/v1/lineage",
        _event_with(
            outputs=[
                {
                    "namespace": "s3://b",
                    "name": "o",
                    "facets": {
                        "schema": {
                            "_producer": "p",
                            "_schemaURL": "s",
                            "fields": [{"name": "c", "type": LONG}],
                        }
                    },
                }
            ]
        ),
    ),
    "OpenLineage dataset namespace's scheme (nodes.kind, 200)": (
        "/api/v1/lineage",
        _event_with(outputs=[{"namespace": f"{'x' * 300}://h", "name": "o"}]),
    ),
}


@pytest.mark.parametrize("case", sorted(TOO_LONG_FOR_POSTGRES))
def test_a_string_longer_than_its_column_is_refused_or_left_out(store: LineageStore, case: str) -> None:
    path, body = TOO_LONG_FOR_POSTGRES[case]
    with serve_in_thread(create_app(Tracelake(store), ApiSettings(subscription_interval=None))) as url:
        response = requests.post(url + path, json=body, timeout=30)
    if "kind" in case and "jobType" not in case:
        assert response.status_code == 400 and "over the 200-character limit" in response.json()["error"]
    else:
        assert response.status_code in (200, 201), response.text[:200]
        assert any("left out" in problem.reason for problem in store.problems())
        nodes = [store.node(urn) for urn in store.search_urns("", limit=100)]
        assert not any(LONG in (n.owner, n.layer, n.data_type, n.kind) for n in nodes if n is not None)
