"""Events Tracelake did not write, posted as to Marquez, and found again by the names they carry.

The events are read in place from `../shared/conformance/` (see its README): OpenLineage's own
published test events (the Python client's, dbt's, the proxy's valid and deliberately invalid
ones, the spec's full example) and OpenLineage's consumer compatibility scenarios (Airflow, Spark on
Dataproc, column-level lineage). What passing means is the producers' intent and Marquez's
behaviour (`MarquezProject/marquez`, `api/.../service/models/LineageEvent.java`): an event is
refused only where Marquez's model requires something (`run.runId`, `job.namespace`…); every
dataset and job of an accepted event answers `GET /api/v1/lineage` by its namespace and name as
sent; a job's node lists the datasets of its latest event that named any; a facet that breaks its
schema is left out with a problem naming its JSON path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tracelake.api.app import create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.collect.openlineage import RunState, event_to_batch
from tracelake.model.names import asset_urn, dataset_of
from tracelake.store import LineageStore

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance"
# Marquez's LineageEvent.Run has `@NotNull String runId`: the proxy's event without one is refused.
REFUSED = {"OpenLineage__proxy__fluentd__events__event_no_run_id.json": "$.run.runId"}
# The proxy's events whose facets break the facet schemas: Marquez keeps them (its facets are not
# validated in depth); Tracelake keeps them and records where the facet broke the spec.
LEFT_OUT = {
    "OpenLineage__proxy__fluentd__events__event_invalid_dataset_facet.json": (
        "$.outputs[0].facets.ownership.owners[0].name"
    ),
    "OpenLineage__proxy__fluentd__events__event_invalid_job_facet.json": (
        "$.job.facets.ownership.owners[0].name"
    ),
    "OpenLineage__proxy__fluentd__events__event_invalid_run_facet.json": "$.run.facets.parent.run.runId",
}


def _event_files() -> list[Path]:
    if not CONFORMANCE.is_dir():
        message = f"no conformance material at {CONFORMANCE} (shared/ beside the clone)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    published = sorted((CONFORMANCE / "published-events").glob("*.json"))
    scenarios = sorted((CONFORMANCE / "compatibility-tests" / "scenarios").glob("*/events/*.json"))
    return published + scenarios


def _label(path: Path) -> str:
    return path.name if path.parent.name == "published-events" else f"{path.parents[1].name}/{path.name}"


@pytest.fixture(scope="module")
def posted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, tuple[int, Any]]]]:
    """Every event posted once, in order, to a live server: its file → (status, response body)."""
    files = _event_files()
    service = Tracelake(LineageStore(str(tmp_path_factory.mktemp("conformance") / "lineage.db")))
    answers: dict[str, tuple[int, Any]] = {}
    with serve_in_thread(create_app(service)) as url:
        for path in files:
            response = requests.post(f"{url}/api/v1/lineage", data=path.read_bytes(), timeout=30)
            answers[_label(path)] = (response.status_code, response.json() if response.content else None)
        yield url, answers
    service.close()


def _events() -> list[tuple[str, dict[str, Any]]]:
    return [(_label(path), json.loads(path.read_text())) for path in _event_files()]


def test_there_is_material_to_test_against() -> None:
    labels = [label for label, _ in _events()]
    assert len(labels) >= 60
    assert {"CLL", "airflow", "spark_dataproc_simple_producer_test"} <= {
        label.split("/")[0] for label in labels
    }


def test_every_event_marquez_accepts_is_accepted(posted: tuple[str, dict[str, tuple[int, Any]]]) -> None:
    _, answers = posted
    refused = {label: body for label, (status, body) in answers.items() if status != 201}
    assert set(refused) == set(REFUSED), refused
    for label, path in REFUSED.items():
        status, body = answers[label]
        assert status == 400 and body["path"] == path


def test_a_facet_breaking_its_schema_is_left_out_with_its_path(
    posted: tuple[str, dict[str, tuple[int, Any]]],
) -> None:
    url, _ = posted
    problems = requests.get(f"{url}/api/tracelake/v1/problems", params={"limit": 1000}, timeout=30).json()
    locations = {problem["location"] for problem in problems}
    assert set(LEFT_OUT.values()) <= locations


def _lineage(url: str, node_id: str) -> dict[str, dict[str, Any]]:
    response = requests.get(f"{url}/api/v1/lineage", params={"nodeId": node_id, "depth": 1}, timeout=30)
    assert response.status_code == 200, f"{node_id}: {response.text}"
    return {node["id"]: node for node in response.json()["graph"]}


def _accepted_events(answers: dict[str, tuple[int, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(label, event) for label, event in _events() if answers[label][0] == 201]


def test_every_dataset_is_found_by_the_name_it_was_sent_under(
    posted: tuple[str, dict[str, tuple[int, Any]]],
) -> None:
    url, answers = posted
    sent: dict[tuple[str, str], str] = {}
    for label, event in _accepted_events(answers):
        datasets = [*(event.get("inputs") or []), *(event.get("outputs") or [])]
        if "dataset" in event and "job" not in event:  # a DatasetEvent
            datasets.append(event["dataset"])
        for dataset in datasets:
            sent.setdefault((dataset["namespace"], dataset["name"]), label)
    assert len(sent) >= 30
    renamed = []
    for (namespace, name), label in sorted(sent.items()):
        graph = _lineage(url, f"dataset:{namespace}:{name}")
        urn = asset_urn(namespace, name)
        found = [
            node
            for node in graph.values()
            if node["type"] == "DATASET" and node["data"]["tracelake"]["urn"] == urn
        ]
        assert len(found) == 1, f"{label}: {namespace} {name}"
        node = found[0]
        if (node["data"]["namespace"], node["data"]["name"]) != (namespace, name):
            renamed.append((namespace, name, node["id"]))
    # only spellings the naming spec makes one (trailing slashes, partition folders, s3a) change
    assert all(
        dataset_of(asset_urn(ns, n)) == dataset_of(asset_urn(*dataset_of(asset_urn(ns, n))))
        for ns, n, _ in renamed
    )
    assert len(renamed) <= len(sent) // 10, renamed


def test_two_namespaces_never_share_a_node(posted: tuple[str, dict[str, tuple[int, Any]]]) -> None:
    _, answers = posted
    identities = {
        dataset_of(asset_urn(d["namespace"], d["name"]))
        for _, event in _accepted_events(answers)
        for d in [*(event.get("inputs") or []), *(event.get("outputs") or [])]
    }
    assert len({asset_urn(*identity) for identity in identities}) == len(identities)


def test_every_job_is_found_with_the_datasets_of_its_latest_event(
    posted: tuple[str, dict[str, tuple[int, Any]]],
) -> None:
    url, answers = posted
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    jobs: dict[tuple[str, str], str] = {}
    for label, event in _accepted_events(answers):
        if "job" not in event:
            continue
        key = (event["job"]["namespace"], event["job"]["name"])
        jobs.setdefault(key, label)
        if event.get("inputs") or event.get("outputs"):
            latest[key] = event
    assert len(jobs) >= 15
    for (namespace, name), label in sorted(jobs.items()):
        graph = _lineage(url, f"job:{namespace}:{name}")
        job = graph.get(f"job:{namespace}:{name}")
        assert job is not None, f"{label}: job {namespace} {name} not in {sorted(graph)}"
        event = latest.get((namespace, name))
        if event is None:
            continue
        inputs = {tuple(dataset_of(asset_urn(d["namespace"], d["name"]))) for d in event.get("inputs") or []}
        outputs = {
            tuple(dataset_of(asset_urn(d["namespace"], d["name"]))) for d in event.get("outputs") or []
        }
        assert inputs <= {(d["namespace"], d["name"]) for d in job["data"]["inputs"]}, label
        assert outputs <= {(d["namespace"], d["name"]) for d in job["data"]["outputs"]}, label


def test_the_spark_integrations_lifecycle_changes_are_the_tables_lives(tmp_path: Path) -> None:
    """OpenLineage's Spark integration on Dataproc: DROP TABLE t1, t2; CREATE TABLE t1; INSERT
    INTO t1; CREATE TABLE t2 AS SELECT … FROM t1 — each change sent on START and on COMPLETE.
    A change counts once its run completed; the tables live again, t1 → t2 is lineage."""
    scenario = (
        CONFORMANCE / "compatibility-tests" / "scenarios" / "spark_dataproc_simple_producer_test_complete"
    )
    if not scenario.is_dir():
        _event_files()  # skips, or fails under CI, with the reason
    events = [json.loads(path.read_text()) for path in sorted(scenario.glob("events/*.json"))]
    namespace = "hdfs://dataproc-producer-test-m"
    t1, t2 = (asset_urn(namespace, f"/user/hive/warehouse/{name}") for name in ("t1", "t2"))
    with LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}") as store:
        for event in events:
            store.ingest(event_to_batch(event))
        changes = {urn: [str(c.change) for c in store.changes(urn)] for urn in (t1, t2)}
        assert changes == {t1: ["DROP", "CREATE"], t2: ["DROP", "CREATE"]}
        assert all(c.signal == "openlineage" and c.run_id for c in store.changes(t1))
        assert store.ended_assets() == {}
        assert (t1, t2) in {(e.source, e.target) for e in store.edges()}


def test_the_run_states_read_are_the_specs() -> None:
    """The reader names a RunEvent's eventType with its own enum (the client's costs half a second
    of imports): exactly the states the spec's schema lists, in its order."""
    spec = CONFORMANCE / "openlineage-spec" / "OpenLineage.json"
    if not spec.is_file():
        _event_files()  # skips, or fails under CI, with the reason
    schema = json.loads(spec.read_text())
    event_type = schema["$defs"]["RunEvent"]["allOf"][1]["properties"]["eventType"]
    assert [state.value for state in RunState] == event_type["enum"]
