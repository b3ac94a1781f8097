"""Tracelake's Marquez read routes checked against Marquez's own OpenAPI document
(`shared/conformance/marquez/openapi.yml`, read in place), on a live server over a seeded store.

Two ways: every implemented route's real answer, for names the store holds, is validated with
`jsonschema` against the response schema the document gives the operation (deterministic); and
Schemathesis generates requests for the same GET operations from the document (path names two
times in three taken from the store, else as generated) and checks each answer: no server error,
JSON, a body matching the document's schema, and a status the request explains: the document
lists 200 alone, where Marquez itself answers 404 for a name it does not hold and 400 or 422 for a
parameter it refuses.

Where the document is wrong about Marquez itself, `_corrected` mends it, narrowly and each with
why; Tracelake's deliberate differences are said where checked. Without the document (a clone
with no `shared/` beside it) the tests skip, and fail instead when `CI` is set.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonschema
import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

from tests.api.test_marquez_read import (
    EVENTS,
    KAFKA,
    LAKE,
    ORDERS,
    POSTGRES,
    RUN_A,
    RUN_B,
    RUN_FLINK,
    S3,
    TOPIC,
)
from tracelake.api.app import create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.model.names import asset_urn
from tracelake.store import LineageStore
from tracelake.store.labels import LabelStore

OPENAPI = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "marquez" / "openapi.yml"
DOCUMENT_URI = "urn:marquez:openapi"
# The GET operations Tracelake serves, as the document names their paths.
SERVED = [
    "/namespaces",
    "/namespaces/{namespace}",
    "/sources",
    "/sources/{source}",
    "/namespaces/{namespace}/datasets",
    "/namespaces/{namespace}/datasets/{dataset}",
    "/namespaces/{namespace}/datasets/{dataset}/versions",
    "/namespaces/{namespace}/datasets/{dataset}/versions/{version}",
    "/namespaces/{namespace}/jobs",
    "/namespaces/{namespace}/jobs/{job}",
    "/namespaces/{namespace}/jobs/{job}/runs",
    "/namespaces/{namespace}/jobs/{job}/versions",
    "/namespaces/{namespace}/jobs/{job}/versions/{version}",
    "/jobs/runs/{id}",
    "/jobs/runs/{id}/facets",
    "/search",
    "/tags",
    "/events/lineage",
]


def _document() -> dict[str, Any]:
    if not OPENAPI.exists():
        reason = f"Marquez's OpenAPI document is not at {OPENAPI} (shared/conformance beside the clone)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    loaded = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    # as JSON sees it: YAML reads unquoted examples' times as datetimes and codes as numbers
    document: dict[str, Any] = json.loads(json.dumps(loaded, default=str))
    return document


def _corrected(document: dict[str, Any]) -> dict[str, Any]:
    """The document with its errors about Marquez's own answers mended (each narrowly)."""
    fixed = copy.deepcopy(document)
    schemas = fixed["components"]["schemas"]
    # Marquez answers a run's facets as {facet name: facet}; the document says the whole map is
    # one facet (with `_producer` and `_schemaURL` of its own)
    schemas["FacetsResult"]["properties"]["facets"] = {
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/CustomFacet"},
    }
    # a dataset version's tags are a list, as a dataset's are (Marquez's DatasetVersion model)
    schemas["DatasetVersion"]["properties"]["tags"] = {"type": "array", "items": {"type": "string"}}
    # Marquez leaves a null description out of its JSON (its mapper writes no nulls), so a
    # version without one has none: `required` cannot hold for it
    schemas["DatasetVersion"]["required"].remove("description")
    # `type:` with no value (null) for the search result's name and time: strings in Marquez
    for member in ("name", "updatedAt"):
        schemas["SearchResult"]["properties"][member]["type"] = "string"
    # search's `before`/`after`: a stray key of the parameter's own name, and `pattern:
    # YYYY-MM-DD`, a regular expression only that literal text matches, where a date is meant
    for parameter in fixed["paths"]["/search"]["get"]["parameters"]:
        if parameter.get("name") in ("before", "after"):
            parameter.pop(parameter["name"], None)
            parameter["schema"] = {"type": "string", "format": "date", "example": "2022-09-15"}
    return fixed


# ---------------------------------------------------------------- a live server over a seeded store


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return _corrected(_document())


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, document: dict[str, Any]) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("marquez_openapi")
    service = Tracelake(LineageStore(str(folder / "lineage.db")))
    log = folder / "etl.sql"
    log.write_text("INSERT INTO dating.b SELECT user_id, religion FROM dating.a;\n")
    service.ingest_sql(log)
    with serve_in_thread(create_app(service)) as base:
        for event in EVENTS:
            requests.post(f"{base}/api/v1/lineage", json=event, timeout=30).raise_for_status()
        LabelStore(service.store).declare(asset_urn(POSTGRES, ORDERS), ["PII"])
        yield base
    service.close()


# ---------------------------------------------------------------- every route's real answer


def _validator(document: dict[str, Any], path: str, status: str = "200") -> jsonschema.Draft4Validator:
    """A validator of the operation's response body, references resolved in the document."""
    ref = document["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(document, default_specification=DRAFT4)
    )
    schema = {"$ref": DOCUMENT_URI + ref["$ref"]}
    return jsonschema.Draft4Validator(
        schema, registry=registry, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )


def _requests(held: dict[str, list[tuple[str, ...]]]) -> list[tuple[str, str]]:
    """(document path, request path) for every served route, on names the store holds."""
    dataset_version = held["/namespaces/{namespace}/datasets/{dataset}/versions/{version}"][0][-1]
    job_version = held["/namespaces/{namespace}/jobs/{job}/versions/{version}"][0][-1]
    ns, ds = quote(POSTGRES, safe=""), quote(ORDERS, safe="")
    s3, lake = quote(S3, safe=""), quote(LAKE, safe="")
    return [
        ("/namespaces", "/namespaces"),
        ("/namespaces/{namespace}", f"/namespaces/{ns}"),
        ("/sources", "/sources"),
        ("/sources/{source}", f"/sources/{ns}"),
        ("/namespaces/{namespace}/datasets", f"/namespaces/{ns}/datasets"),
        ("/namespaces/{namespace}/datasets", f"/namespaces/{s3}/datasets"),
        ("/namespaces/{namespace}/datasets/{dataset}", f"/namespaces/{ns}/datasets/{ds}"),
        (
            "/namespaces/{namespace}/datasets/{dataset}",
            f"/namespaces/{quote(KAFKA, safe='')}/datasets/{TOPIC}",
        ),
        ("/namespaces/{namespace}/datasets/{dataset}/versions", f"/namespaces/{s3}/datasets/{lake}/versions"),
        ("/namespaces/{namespace}/datasets/{dataset}/versions", f"/namespaces/{ns}/datasets/{ds}/versions"),
        (
            "/namespaces/{namespace}/datasets/{dataset}/versions/{version}",
            f"/namespaces/{s3}/datasets/{lake}/versions/{dataset_version}",
        ),
        ("/namespaces/{namespace}/jobs", "/namespaces/airflow/jobs"),
        ("/namespaces/{namespace}/jobs", "/namespaces/tracelake/jobs"),
        ("/namespaces/{namespace}/jobs/{job}", "/namespaces/airflow/jobs/shop.load"),
        ("/namespaces/{namespace}/jobs/{job}", "/namespaces/flink/jobs/orders_enrichment"),
        ("/namespaces/{namespace}/jobs/{job}/runs", "/namespaces/airflow/jobs/shop.load/runs"),
        ("/namespaces/{namespace}/jobs/{job}/versions", "/namespaces/airflow/jobs/shop.load/versions"),
        (
            "/namespaces/{namespace}/jobs/{job}/versions/{version}",
            f"/namespaces/airflow/jobs/shop.load/versions/{job_version}",
        ),
        ("/jobs/runs/{id}", f"/jobs/runs/{RUN_A}"),
        ("/jobs/runs/{id}/facets", f"/jobs/runs/{RUN_A}/facets?type=run"),
        ("/jobs/runs/{id}/facets", f"/jobs/runs/{RUN_A}/facets?type=job"),
        ("/search", "/search?q=order"),
        ("/search", "/search?q=a&filter=JOB&sort=UPDATE_AT"),
        ("/tags", "/tags"),
        ("/events/lineage", "/events/lineage"),
    ]


def test_every_served_route_answers_in_the_documents_shape(
    url: str, document: dict[str, Any], held: dict[str, list[tuple[str, ...]]]
) -> None:
    checked = set()
    for path, request in _requests(held):
        response = requests.get(f"{url}/api/v1{request}", timeout=30)
        assert response.status_code == 200, (request, response.text)
        body = response.json()
        errors = sorted(_validator(document, path).iter_errors(body), key=lambda e: list(e.absolute_path))
        assert not errors, (request, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]])
        checked.add(path)
    assert checked == set(SERVED)


def test_the_answers_are_not_empty_where_the_store_has_data(url: str) -> None:
    """So that the shape test above checks lists with items in them, not empty ones."""

    def get(path: str) -> Any:
        return requests.get(f"{url}/api/v1{path}", timeout=30).json()

    assert get(f"/namespaces/{quote(POSTGRES, safe='')}/datasets")["datasets"][0]["fields"]
    assert get("/namespaces/airflow/jobs")["jobs"][0]["latestRuns"][-1]["facets"]
    assert get(f"/jobs/runs/{RUN_A}")["inputDatasetVersions"]
    assert get("/tags")["tags"] and get("/events/lineage")["events"] and get("/search?q=order")["results"]


# ---------------------------------------------------------------- generated requests

EXAMPLES = 12  # per operation: the file runs in seconds


@pytest.fixture(scope="module")
def operations(url: str, document: dict[str, Any]) -> dict[str, Any]:
    """The served GET operations of the document, as Schemathesis reads them, by path."""
    config = schemathesis.Config.from_dict({"base-url": f"{url}/api/v1"})
    schema = schemathesis.openapi.from_dict(document, config=config).include(method="GET", path=SERVED)
    return {
        operation.path: operation for operation in (result.ok() for result in schema.get_all_operations())
    }


# Schemathesis's own pytest loader (`schemathesis.pytest`) reads a private attribute pytest 9 no
# longer has, so each operation's cases are drawn here with Hypothesis from its strategies.
@pytest.mark.parametrize("path", SERVED)
def test_generated_requests_get_answers_the_document_allows(
    path: str, operations: dict[str, Any], held: dict[str, list[tuple[str, ...]]]
) -> None:
    operation = operations[path]
    holds = held.get(path, [])
    params = re.findall(r"{(\w+)}", path)
    generated = operation.as_strategy(GenerationMode.POSITIVE)
    if holds:
        # names the store holds twice as often as generated ones, so that most answers are not 404s
        holding = st.sampled_from(holds).flatmap(
            lambda names: operation.as_strategy(
                GenerationMode.POSITIVE, path_parameters=dict(zip(params, names, strict=True))
            )
        )
        generated = st.one_of(generated, holding, holding)

    def explained_status(ctx: Any, response: Any, case: Any) -> None:
        """The document lists 200 alone, but Marquez answers 404 for what it does not hold and
        400 or 422 for parameters it refuses; a refusal must say why, and be one of those."""
        status = response.status_code
        if status == 200:
            return
        body = response.json()
        assert isinstance(body, dict) and ("error" in body or "detail" in body), body
        values = tuple(str(case.path_parameters[name]) for name in params)
        if status == 404:
            assert values not in holds, f"404 for {values}, which the store holds"
            return
        assert status in (400, 422) and _refused(case.query or {}), f"{status} for {case.query}: {body}"

    @given(case=generated)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(
            checks=[
                not_a_server_error,
                content_type_conformance,
                response_schema_conformance,
                explained_status,
            ]
        )

    check()


@pytest.fixture(scope="module")
def held(url: str) -> dict[str, list[tuple[str, ...]]]:
    """The path parameters of each operation that name what the store holds."""

    def versions(path: str) -> list[str]:
        found = requests.get(f"{url}/api/v1{path}", timeout=30).json()["versions"]
        return [v["version"] for v in found]

    namespaces = [(ns,) for ns in (POSTGRES, S3, KAFKA, "airflow", "flink", "tracelake")]
    datasets = [(POSTGRES, ORDERS), (S3, LAKE), (KAFKA, TOPIC)]
    jobs = [("airflow", "shop.load"), ("flink", "orders_enrichment")]
    runs = [(RUN_A,), (RUN_B,), (RUN_FLINK,)]
    lake = f"/namespaces/{quote(S3, safe='')}/datasets/{quote(LAKE, safe='')}/versions"
    job = "/namespaces/airflow/jobs/shop.load/versions"
    held = {
        "/namespaces/{namespace}": namespaces,
        "/sources/{source}": [(POSTGRES,), (S3,), (KAFKA,)],
        "/namespaces/{namespace}/datasets": namespaces,
        "/namespaces/{namespace}/datasets/{dataset}": datasets,
        "/namespaces/{namespace}/datasets/{dataset}/versions": datasets,
        "/namespaces/{namespace}/datasets/{dataset}/versions/{version}": [
            (S3, LAKE, v) for v in versions(lake)
        ],
        "/namespaces/{namespace}/jobs": namespaces,
        "/namespaces/{namespace}/jobs/{job}": jobs,
        "/namespaces/{namespace}/jobs/{job}/runs": jobs,
        "/namespaces/{namespace}/jobs/{job}/versions": jobs,
        "/namespaces/{namespace}/jobs/{job}/versions/{version}": [
            ("airflow", "shop.load", v) for v in versions(job)
        ],
        "/jobs/runs/{id}": runs,
        "/jobs/runs/{id}/facets": runs,
    }
    return held


def _refused(query: dict[str, Any]) -> list[str]:
    """The query parameters Marquez (and so Tracelake) refuses: a negative count, a blank search,
    a filter, sort or direction it does not know, a time it cannot read."""
    given = {name: str(value) for name, value in query.items() if value is not None}
    words = {
        "filter": {"DATASET", "JOB"},
        "sort": {"NAME", "UPDATE_AT", "UPDATED_AT"},
        "sortDirection": {"ASC", "DESC"},
    }
    refused = [name for name in ("limit", "offset") if name in given and int(given[name]) < 0]
    refused += [
        name
        for name, allowed in words.items()
        if name in given and given[name].strip().upper() not in allowed
    ]
    refused += ["q"] if "q" in given and not given["q"].strip() else []
    for name in ("before", "after"):
        if name in given:
            try:
                datetime.fromisoformat(given[name])
            except ValueError:
                refused.append(name)
    return refused
