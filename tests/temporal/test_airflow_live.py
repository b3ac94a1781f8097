"""Taint plans applied to a real Airflow 3 (SQLite, its REST API), drift found by reconcile, and
Tracelake's sensor and success callback inside tasks that Airflow's scheduler really runs.

scripts/airflow_test_server.py starts Apache Airflow's API server on the DAGs in airflow_dags/
(no scheduler: runs are made and marked through the API, so their states are exactly what the
test sets), or, for the sensor, with a scheduler on airflow_sensor_dags/. Airflow lives in its
own virtual environment, `.tracelake/airflow-venv` or $TRACELAKE_AIRFLOW_VENV; without one these
tests skip, unless TRACELAKE_REQUIRE_AIRFLOW=1 (as in CI, which installs it). The taint and
reconcile flow is shared with Airflow 2's test (test_airflow2_live.py): see airflow_support.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.temporal import airflow_support as shared
from tests.temporal.airflow_support import ROOT, api, at, start_airflow
from tracelake.store import LineageStore
from tracelake.temporal.instances import EntityStore


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_airflow(tmp_path_factory, "airflow_dags", ("articles", "reads")) as server:
        yield server


@pytest.fixture(scope="module")
def world(airflow: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return shared.make_world(airflow, tmp_path_factory)


def test_the_callback_recorded_the_week_each_weekly_run_made(world: dict[str, Any]) -> None:
    assert world["client"].api == "v2"
    shared.check_the_callback_recorded_the_week_each_weekly_run_made(world)


def test_taint_apply_clears_exactly_the_runs_to_rebuild_and_records_the_calls(world: dict[str, Any]) -> None:
    shared.check_taint_apply_clears_exactly_the_runs_to_rebuild_and_records_the_calls(world)


def test_reconcile_finds_changes_made_behind_the_status_tables_back(world: dict[str, Any]) -> None:
    shared.check_reconcile_finds_changes_made_behind_the_status_tables_back(world)


SENSOR_ENTITIES = """
- name: articles_by_author
  period: daily
- name: words_count
  period: daily
  depends_on: [articles_by_author]
  airflow: {dag: articles, task: count_words}
"""


def wait_for_run(airflow: dict[str, Any], run_id: str, seconds: float = 120) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = api(airflow, "GET", f"dags/articles/dagRuns/{run_id}")["state"]
        if state in ("success", "failed"):
            return str(state)
        time.sleep(1)
    return "still running"


def test_the_sensor_waits_for_readiness_and_the_callback_records_the_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A scheduler really runs airflow_sensor_dags/count_words.py with Tracelake inside its tasks."""
    folder = tmp_path_factory.mktemp("sensor-store")
    (folder / "entities.yml").write_text(SENSOR_ENTITIES)
    db = str(folder / "lineage.db")
    entities = EntityStore(LineageStore(db))
    assert entities.load([folder / "entities.yml"]).ok
    articles = entities.graph().entities["articles_by_author"]
    entities.record(articles, at("2024-03-13"), "completed", actor="test")
    env = {"PYTHONPATH": str(ROOT / "src"), "TRACELAKE_DB": db}
    with start_airflow(
        tmp_path_factory, "airflow_sensor_dags", ("articles",), env, scheduler=True
    ) as airflow:
        api(airflow, "PATCH", "dags/articles", json={"is_paused": False})
        for day in ("2024-03-13", "2024-03-14"):
            api(airflow, "POST", "dags/articles/dagRuns",
                json={"dag_run_id": day, "logical_date": f"{day}T00:00:00Z"})  # fmt: skip

        # 03-13 has its articles: the sensor lets it through and the callback records the count
        assert wait_for_run(airflow, "2024-03-13") == "success"
        # 03-14 has none yet: its sensor keeps poking
        assert wait_for_run(airflow, "2024-03-14", seconds=5) == "still running"
        assert [row.start for row in entities.status("words_count")] == [at("2024-03-13")]

        entities.record(articles, at("2024-03-14"), "completed", actor="test")
        assert wait_for_run(airflow, "2024-03-14") == "success"

    rows = entities.status("words_count")
    assert [(row.start, row.states, row.actor, row.run_id) for row in rows] == [
        (at("2024-03-13"), ("completed",), "airflow:articles.count_words", "2024-03-13"),
        (at("2024-03-14"), ("completed",), "airflow:articles.count_words", "2024-03-14"),
    ]
