"""Critical path, root cause and coverage on a real producer's events: OpenLineage's Airflow
compatibility scenario (`../shared/conformance/compatibility-tests/scenarios/airflow`, read in
place), posted as Airflow posted them, one by one, to a live server's Marquez endpoint.

The scenario's DAG run on 2024-11-26 (its scenario.md and events, times as the events give them):
BQ.upload (START 13:05:25.547948, COMPLETE 13:05:29.606867) loads gs://mock-bucket/copied.csv and
test.csv into bigquery mock-project.test.upload; BQ.copy (13:05:31.724484 → 13:05:34.626595)
copies it to test.upload_cp; BQ.download (13:05:37.621840 → 13:05:39.460005) writes
gs://mock-bucket/result.csv from it. Each task says its inputs and outputs only when it
completes, so each flow begins at its task's COMPLETE.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.api.test_openlineage_conformance import _event_files
from tracelake.api.app import create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.model.names import asset_urn
from tracelake.store import LineageStore

API = "/api/tracelake/v1"
RESULT = asset_urn("gs://mock-bucket", "result.csv")
UPLOAD, UPLOAD_CP = (
    asset_urn("bigquery", "mock-project.test.upload"),
    asset_urn("bigquery", "mock-project.test.upload_cp"),
)


def job(name: str) -> str:
    return f"openlineage.job/airflow/{name}"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    files = [path for path in _event_files() if path.parents[1].name == "airflow"]
    assert len(files) == 32  # the scenario's events, line_01 … line_32
    service = Tracelake(LineageStore(str(tmp_path_factory.mktemp("airflow") / "lineage.db")))
    with serve_in_thread(create_app(service)) as base:
        for path in sorted(files):
            response = requests.post(f"{base}/api/v1/lineage", data=path.read_bytes(), timeout=30)
            assert response.status_code == 201, f"{path.name}: {response.text}"
        yield base
    service.close()


def get(url: str, path: str, **params: Any) -> Any:
    response = requests.get(url + API + path, params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_critical_path_of_the_result_file_is_the_dags_three_tasks(url: str) -> None:
    answer = get(url, "/critical-path", node=RESULT, date="2024-11-26")
    assert answer["ready_at"] == "2024-11-26T13:05:39.460005+00:00"  # BQ.download's COMPLETE
    steps = [(s["process"], s["asset"]) for s in answer["steps"]]
    assert steps == [(job("BQ.upload"), UPLOAD), (job("BQ.copy"), UPLOAD_CP), (job("BQ.download"), RESULT)]
    # waited: each START less the COMPLETE before it; took: each COMPLETE less its START
    waited = [s["waited_seconds"] for s in answer["steps"]]
    assert waited[0] is None
    assert waited[1:] == pytest.approx([31.724484 - 29.606867, 37.621840 - 34.626595], abs=1e-6)
    took = [s["took_seconds"] for s in answer["steps"]]
    assert took == pytest.approx(
        [29.606867 - 25.547948, 34.626595 - 31.724484, 39.460005 - 37.621840], abs=1e-6
    )
    assert [s["usual_seconds"] for s in answer["steps"]] == [None, None, None]  # no run before that day


def test_what_changed_upstream_of_the_result_file_that_day(url: str) -> None:
    answer = get(url, "/why", node=RESULT, since="2024-11-26T00:00:00Z", until="2024-11-27T00:00:00Z")
    found = [(c["kind"], c["subject"], c["distance"], c["score"], c["at"][11:26]) for c in answer["causes"]]
    # severity × 0.8 a hop: a new input 0.7, a process first seen 0.5; every flow is new that day
    assert found == [
        ("input_added", job("BQ.download"), 0, 0.7, "13:05:39.460005"),
        ("input_added", job("BQ.copy"), 1, 0.56, "13:05:34.626595"),
        ("process_new", job("BQ.download"), 0, 0.5, "13:05:39.460005"),
        ("input_added", job("BQ.upload"), 2, 0.448, "13:05:29.606867"),  # from copied.csv
        ("input_added", job("BQ.upload"), 2, 0.448, "13:05:29.606867"),  # from test.csv
        ("process_new", job("BQ.copy"), 1, 0.4, "13:05:34.626595"),
        ("process_new", job("BQ.upload"), 2, 0.32, "13:05:29.606867"),
    ]
    added = [c for c in answer["causes"] if c["kind"] == "input_added" and c["subject"] == job("BQ.upload")]
    sources = {c["route"][0]["source"] for c in added}
    assert sources == {asset_urn("gs://mock-bucket", "copied.csv"), asset_urn("gs://mock-bucket", "test.csv")}
    assert not [c for c in answer["causes"] if c["kind"].startswith("run_")]  # every task completed


def test_coverage_of_the_scenario(url: str) -> None:
    view = get(url, "/coverage", at="2024-11-26T23:59:59Z")
    assert set(view["by_signal"]) == {"openlineage"}
    # result.csv: written by BQ.download, read by nothing; the load's two files: read, never written
    assert RESULT in view["written_never_read"]["first"]
    sources = {asset_urn("gs://mock-bucket", "copied.csv"), asset_urn("gs://mock-bucket", "test.csv")}
    assert sources <= set(view["read_never_written"]["first"])
    assert not {RESULT, UPLOAD, UPLOAD_CP} & set(view["read_never_written"]["first"])
    # before the DAG ran, lineage knew nothing of it
    assert get(url, "/coverage", at="2024-11-25T23:59:59Z")["assets"]["total"] == 0


def test_the_events_are_the_scenarios_own() -> None:
    """The hand-worked times above are the events' (not something this project wrote)."""
    files = {path.name: path for path in _event_files() if path.parents[1].name == "airflow"}
    events = {
        name: json.loads(files[name].read_text()) for name in ("line_02.json", "line_03.json", "line_07.json")
    }
    assert (events["line_02.json"]["eventType"], events["line_02.json"]["eventTime"]) == (
        "START",
        "2024-11-26T13:05:25.547948+00:00",
    )
    assert events["line_03.json"]["outputs"][0]["name"] == "mock-project.test.upload"
    assert events["line_07.json"]["outputs"][0] == {
        **events["line_07.json"]["outputs"][0],
        "namespace": "gs://mock-bucket",
        "name": "result.csv",
    }
