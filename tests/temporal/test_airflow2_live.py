"""AirflowClient on a real Airflow 2 (SQLite, `/api/v1` with HTTP basic auth): its clears and
task instance listings, and the same taint-apply and reconcile flow as Airflow 3's test.

scripts/airflow_test_server.py --major 2 starts Airflow 2's webserver on the DAGs in
airflow_dags/, with no scheduler: runs are made and marked through the API, so their states are
exactly what the test sets. Airflow 2 lives in `.tracelake/airflow2-venv` or
$TRACELAKE_AIRFLOW2_VENV; without one these tests skip, unless TRACELAKE_REQUIRE_AIRFLOW=1 (as in
CI, which installs it). The flow's checks live in airflow_support.py; the client's own tests use
runs of `articles` in May (and June and July, for paging), which the flow (March) never reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest

from tests.temporal import airflow_support as shared
from tests.temporal.airflow_support import api, mark, start_airflow, states, succeed, utc
from tracelake.temporal.airflow import AirflowClient, AirflowError, ClearRequest

MAY = [f"2024-05-{day:02d}" for day in range(6, 11)]
TASKS = ("load_articles", "count_words")


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with start_airflow(tmp_path_factory, "airflow_dags", ("articles", "reads"), major=2) as server:
        yield server


@pytest.fixture(scope="module")
def client(airflow: dict[str, Any]) -> AirflowClient:
    return AirflowClient(airflow["url"], username=airflow["username"], password=airflow["password"])


@pytest.fixture(scope="module")
def may(airflow: dict[str, Any]) -> list[str]:
    """Five daily runs of `articles` in May, both tasks succeeded, but count_words failed on 05-08."""
    for day in MAY:
        succeed(airflow, "articles", day, TASKS)
    mark(airflow, "articles", "2024-05-08", "count_words", "failed")
    return MAY


@pytest.fixture(scope="module")
def world(airflow: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return shared.make_world(airflow, tmp_path_factory)


def in_may(client: AirflowClient, task: str) -> dict[str, str | None]:
    return states(client, "articles", task, "2024-05-01", "2024-05-31")


def clear_request(task_ids: tuple[str, ...], first: str, last: str) -> ClearRequest:
    return ClearRequest("articles", task_ids, utc(first), utc(last), entities=(), instances=0)


def test_the_client_finds_api_v1_and_logs_in_with_basic_auth(airflow: dict[str, Any]) -> None:
    client = AirflowClient(airflow["url"], username=airflow["username"], password=airflow["password"])
    assert client.api == "v1"
    assert client.task_instances("articles", "load_articles", utc("2024-01-01"), utc("2024-01-02")) == []
    intruder = AirflowClient(airflow["url"], username=airflow["username"], password="wrong")
    with pytest.raises(AirflowError, match="HTTP 401"):
        intruder.task_instances("articles", "load_articles", utc("2024-01-01"), utc("2024-01-02"))


def test_task_instances_lists_the_tasks_states_in_the_logical_date_range(
    client: AirflowClient, may: list[str]
) -> None:
    found = client.task_instances("articles", "count_words", utc("2024-05-07"), utc("2024-05-09"))
    assert sorted((ti.dag_id, ti.task_id, ti.logical_date, ti.state) for ti in found) == [
        ("articles", "count_words", utc("2024-05-07"), "success"),
        ("articles", "count_words", utc("2024-05-08"), "failed"),
        ("articles", "count_words", utc("2024-05-09"), "success"),
    ]
    assert in_may(client, "load_articles") == dict.fromkeys(may, "success")


def test_task_instances_reads_every_page(airflow: dict[str, Any], client: AirflowClient) -> None:
    """/api/v1 cannot filter by task: 60 runs of two tasks make 120 task instances, two pages."""
    days = [date(2024, 6, 1) + timedelta(days=n) for n in range(60)]  # June and July
    for day in days:
        api(
            airflow,
            "POST",
            "dags/articles/dagRuns",
            json={"dag_run_id": f"paging-{day}", "logical_date": f"{day}T00:00:00Z"},
        )

    found = client.task_instances("articles", "count_words", utc("2024-06-01"), utc("2024-07-31"))

    assert sorted(ti.logical_date.date() for ti in found) == days
    assert {ti.state for ti in found} == {None}


def test_clear_clears_exactly_the_chosen_tasks_in_the_date_range_failed_or_not(
    client: AirflowClient, may: list[str]
) -> None:
    """only_failed is false: 05-07's success is cleared as well as 05-08's failure; load_articles,
    and count_words outside [05-07, 05-08], are left alone."""
    request = clear_request(("count_words",), "2024-05-07", "2024-05-08")
    before = in_may(client, "count_words")

    planned = client.clear(request, dry_run=True)

    chosen = [("articles", "count_words", utc("2024-05-07")), ("articles", "count_words", utc("2024-05-08"))]
    assert sorted((ti.dag_id, ti.task_id, ti.logical_date) for ti in planned) == chosen
    assert in_may(client, "count_words") == before  # a dry run changes nothing

    cleared = client.clear(request)

    assert sorted((ti.dag_id, ti.task_id, ti.logical_date) for ti in cleared) == chosen
    assert in_may(client, "count_words") == {
        day: (None if day in ("2024-05-07", "2024-05-08") else "success") for day in may
    }
    assert in_may(client, "load_articles") == dict.fromkeys(may, "success")


def test_clear_without_task_ids_clears_every_task_of_the_dag(client: AirflowClient, may: list[str]) -> None:
    cleared = client.clear(clear_request((), "2024-05-10", "2024-05-10"))

    assert sorted(ti.task_id for ti in cleared) == sorted(TASKS)
    assert in_may(client, "load_articles")["2024-05-10"] is None
    assert in_may(client, "count_words")["2024-05-10"] is None
    assert in_may(client, "load_articles")["2024-05-09"] == "success"


def test_the_callback_recorded_the_week_each_weekly_run_made(world: dict[str, Any]) -> None:
    assert world["client"].api == "v1"
    shared.check_the_callback_recorded_the_week_each_weekly_run_made(world)


def test_taint_apply_clears_exactly_the_runs_to_rebuild_and_records_the_calls(world: dict[str, Any]) -> None:
    shared.check_taint_apply_clears_exactly_the_runs_to_rebuild_and_records_the_calls(world)


def test_reconcile_finds_changes_made_behind_the_status_tables_back(world: dict[str, Any]) -> None:
    shared.check_reconcile_finds_changes_made_behind_the_status_tables_back(world)
