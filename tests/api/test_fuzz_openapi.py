"""Every operation of the server's own OpenAPI document (`/openapi.json`), fuzzed with Schemathesis
against a live, token-protected server on a store of each backend (SQLite, PostgreSQL): no answer
is a server error, every answer the document describes has its shape and content type, and every
refusal says why in JSON. The server holds the dating example's lineage, an OpenLineage job, the
word-count entities, a policy folder, a discovery session, a subscription and a privacy request,
and the requests carry a token with both scopes, so that generated requests reach the routes rather
than stopping at authentication; path and query names the store holds are drawn as often as
generated ones, so that not every answer is a 404. Generation is bounded (`EXAMPLES` cases per
operation and mode, no shrinking) and derandomized, so a CI run tries the same cases every time;
`TRACELAKE_FUZZ_EXAMPLES` raises the count for a longer run by hand.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

from tests.api.test_api import RUN_ID, run_event
from tests.conftest import fresh_database
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.auth import new_token
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore
from tracelake.temporal.instances import EntityStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dating"
ENTITIES = ROOT / "examples" / "entities" / "wordcount.yml"
API = "/api/tracelake/v1"
EXAMPLES = int(os.environ.get("TRACELAKE_FUZZ_EXAMPLES", "6"))  # per operation and mode

# Query values the store holds, drawn as often as generated ones where an operation takes them.
HELD_QUERIES: dict[str, list[Any]] = {
    "node": [["dating.user_profile"], ["dating.safety_training_tbl#target_religion"]],
    "source": ["dating.user_profile_raw#religion"],
    "target": ["ads.user_segments#segment"],
    "nodeId": ["dataset:hive:ads.user_segments", "job:airflow:ads.export"],
}


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    held: dict[str, list[tuple[str, ...]]]  # document path → path parameters the store holds


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on a store of each backend: they refuse different things."""
    folder = tmp_path_factory.mktemp("fuzz_openapi")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            store_url = f"sqlite:///{folder / 'lineage.db'}"
        else:
            store_url = stack.enter_context(fresh_database(request.getfixturevalue("postgres_server")))
        service = Tracelake(LineageStore(store_url))
        stack.callback(service.close)
        yield stack.enter_context(_serving(service, folder))


@contextlib.contextmanager
def _serving(service: Tracelake, folder: Path) -> Iterator[Server]:
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    assert EntityStore(service.store).load([ENTITIES]).ok
    token = new_token("fuzz", ["read", "write"], folder / "tokens.yml")
    (folder / "policies").mkdir()
    (folder / "policies" / "dating.yml").write_text((EXAMPLE / "policies.yml").read_text())
    (folder / "lake").mkdir()
    settings = ApiSettings(
        token_file=folder / "tokens.yml",
        policy_dir=folder / "policies",
        lake_roots=(folder / "lake",),
        subscription_interval=None,  # no webhook is ever sent to a generated address
    )
    with serve_in_thread(create_app(service, settings)) as url, requests.Session() as http:
        http.headers["Authorization"] = f"Bearer {token}"

        def made(method: str, path: str, body: Any) -> Any:
            response = http.request(method, url + path, json=body, timeout=30)
            assert response.status_code in (200, 201), response.text
            return response.json() if response.content else None

        made("POST", "/api/v1/lineage", run_event())
        made("POST", f"{API}/labels", {"node": "dating.user_profile#religion", "labels": ["religion"]})
        session = made("POST", f"{API}/discovery", {"label": "religion"})["id"]
        subscription = made("POST", f"{API}/subscriptions", {"node": "dating.user_profile"})["id"]
        request = made("POST", f"{API}/privacy/requests", {"kind": "access", "ids": ["u1"]})["id"]
        held = {
            f"{API}/nodes/{{name}}": [("dating.user_profile",), ("ads.user_segments#segment",)],
            f"{API}/entities/{{name}}/status": [("words_count",), ("articles_by_author",)],
            f"{API}/entities/{{name}}/taint": [("articles_by_author",)],
            f"{API}/privacy/requests/{{request_id}}": [(request,)],
            f"{API}/privacy/requests/{{request_id}}/audit": [(request,)],
            "/api/v1/namespaces/{namespace}": [("airflow",), ("hive",)],
            "/api/v1/namespaces/{namespace}/jobs": [("airflow",)],
            "/api/v1/namespaces/{namespace}/jobs/{job}": [("airflow", "ads.export")],
            "/api/v1/namespaces/{namespace}/jobs/{job}/runs": [("airflow", "ads.export")],
            "/api/v1/namespaces/{namespace}/jobs/{job}/versions": [("airflow", "ads.export")],
            "/api/v1/namespaces/{namespace}/datasets": [("hive",)],
            "/api/v1/namespaces/{namespace}/datasets/{dataset}": [("hive", "ads.user_segments")],
            "/api/v1/namespaces/{namespace}/datasets/{dataset}/versions": [("hive", "ads.user_segments")],
            "/api/v1/sources/{source}": [("hive",)],
            "/api/v1/jobs/runs/{id}": [(RUN_ID,)],
            "/api/v1/jobs/runs/{id}/facets": [(RUN_ID,)],
        }
        for route in ("", "/next", "/decisions", "/rule", "/export", "/confirm"):
            held[f"{API}/discovery/{{session_id}}{route}"] = [(session,)]
        # not `/stream`: for a subscription that exists it streams until the client goes away
        for route in ("", "/events", "/deliveries"):
            held[f"{API}/subscriptions/{{subscription_id}}{route}"] = [(subscription,)]
        yield Server(url, token, held)


@pytest.fixture(scope="module")
def operations(server: Server) -> list[Any]:
    document = requests.get(f"{server.url}/openapi.json", timeout=30).json()
    config = schemathesis.Config.from_dict({"base-url": server.url})
    schema = schemathesis.openapi.from_dict(document, config=config)
    return [result.ok() for result in schema.get_all_operations()]


def test_the_server_is_protected_and_the_document_has_every_route(
    server: Server, operations: list[Any]
) -> None:
    assert requests.get(f"{server.url}{API}/kinds", timeout=10).status_code == 401
    labels = {operation.label for operation in operations}
    assert len(labels) >= 60
    assert {"POST /api/v1/lineage", f"POST {API}/policies/check", f"GET {API}/privacy/requests"} <= labels


# uvicorn's own answer to a request line it will not parse, before the application sees it
UNPARSED = b"Invalid HTTP request received."


def refusal_explained(ctx: Any, response: Any, case: Any) -> None:
    """A 4xx says why, in JSON: `error` (Tracelake's) or `detail` (FastAPI's validation errors);
    and none is the 401 of a request the token did not let through. A request line of tens of
    kilobytes (a thousand generated node names) is refused by uvicorn in plain text before the
    application: that refusal is the HTTP server's, and is let through."""
    assert response.status_code != 401, "the fuzzing's token was not taken"
    if response.status_code == 400 and response.content == UNPARSED and len(response.request.url) > 16_384:
        return
    if 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body, dict) and ("error" in body or "detail" in body), body
        assert not isinstance(body.get("error"), str) or body["error"].strip(), body


def _strategy(operation: Any, mode: GenerationMode, held: dict[str, list[tuple[str, ...]]]) -> Any:
    """The operation's generated cases, and as many again on the names the store holds."""
    generated = operation.as_strategy(mode)
    names = re.findall(r"{(\w+)}", operation.path)
    known = [
        operation.as_strategy(mode, path_parameters=dict(zip(names, values, strict=True)))
        for values in held.get(operation.path, [])
    ]
    parameters = {parameter.name for parameter in operation.query}
    queries = {name: values for name, values in HELD_QUERIES.items() if name in parameters}
    if queries and not names:
        known += [
            st.fixed_dictionaries(
                {name: st.sampled_from(values) for name, values in queries.items()}
            ).flatmap(lambda query: operation.as_strategy(mode, query=query))
        ]
    return st.one_of(generated, *known) if known else generated


def _negatable(operation: Any) -> bool:
    """Whether a request can break the operation's document: it takes a body, or a parameter that
    is more than any string (a number, a bound, a choice); a string alone has nothing to break."""

    def constrains(schema: dict[str, Any]) -> bool:
        kept = {key: value for key, value in schema.items() if key not in ("title", "description")}
        if "anyOf" in kept and len(kept) == 1:
            return any(constrains(option) for option in kept["anyOf"] if option != {"type": "null"})
        return kept != {"type": "string"}

    return bool(list(operation.body)) or any(
        constrains(parameter.definition.get("schema", {})) for parameter in operation.iter_parameters()
    )


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_no_operation_answers_a_server_error(
    server: Server, operations: list[Any], mode: GenerationMode
) -> None:
    http = requests.Session()  # one connection for the cases, not one each
    http.headers["Authorization"] = f"Bearer {server.token}"
    failures: dict[str, str] = {}
    tried = 0
    for operation in operations:

        @given(case=_strategy(operation, mode, server.held))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],  # bounded: a failure is reported as found
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            nonlocal tried
            tried += 1
            case.call_and_validate(
                session=http,
                timeout=30,
                checks=[
                    not_a_server_error,
                    response_schema_conformance,
                    content_type_conformance,
                    refusal_explained,
                ],
            )

        if mode is GenerationMode.NEGATIVE and not _negatable(operation):
            continue
        try:
            check()
        except Exception as error:  # every operation's failure is reported, not only the first
            failures[operation.label] = str(error)[:2000]
    http.close()
    print(f"\nfuzzed {len(operations)} operations ({mode}): {tried} cases, {len(failures)} failing")
    assert not failures, "\n\n".join(f"{label}:\n{error}" for label, error in failures.items())
