"""What the live Airflow tests share: a throwaway Airflow 3 or 2 (scripts/airflow_test_server.py),
calls to its REST API, and the taint-apply and reconcile flow that both majors must pass.

Airflow lives in a virtual environment of its own: `.tracelake/airflow-venv` (Airflow 3, or
$TRACELAKE_AIRFLOW_VENV) and `.tracelake/airflow2-venv` (Airflow 2, or $TRACELAKE_AIRFLOW2_VENV).
Without one the tests that need it skip, unless TRACELAKE_REQUIRE_AIRFLOW=1 (as in CI, which
installs both).

Bindings: `articles` is daily and dated at the start of the day it loads (`logical_date:
start`); `reads` runs at Monday 00:00 for the week that just ended, so a run dated 03-18 made
the week of 03-11 (`logical_date: end`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.store import LineageStore
from tracelake.temporal.airflow import AirflowClient, reconcile, recorded_clears
from tracelake.temporal.airflow_hooks import record_run
from tracelake.temporal.instances import EntityStore

ROOT = Path(__file__).resolve().parents[2]
VENVS = {
    3: Path(os.environ.get("TRACELAKE_AIRFLOW_VENV", ROOT / ".tracelake" / "airflow-venv")),
    2: Path(os.environ.get("TRACELAKE_AIRFLOW2_VENV", ROOT / ".tracelake" / "airflow2-venv")),
}

ENTITIES = """
- name: articles_by_author
  period: daily
  airflow: {dag: articles, task: load_articles}
- name: words_count
  period: daily
  depends_on: [articles_by_author]
  airflow: {dag: articles, task: count_words}
- name: nb_read_exact
  period: weekly
  week_start: monday
  airflow: {dag: reads, task: exact_reads, logical_date: end}
- name: user_weekly_reads
  period: weekly
  week_start: monday
  airflow: {dag: reads, task: user_weekly_reads, logical_date: end}
  states:
    estimated:
      depends_on: [{entity: words_count, dates: all_week}]
    completed:
      depends_on:
        - {entity: words_count, dates: all_week}
        - {entity: nb_read_exact}
"""
DAYS = [f"2024-03-{day:02d}" for day in range(11, 18)]
MONDAYS = ["2024-03-18", "2024-03-25"]  # the runs of the weeks of 03-11 and 03-18


@contextmanager
def start_airflow(
    tmp_path_factory: pytest.TempPathFactory,
    dags: str,
    expect: tuple[str, ...],
    env: dict[str, str] | None = None,
    *,
    scheduler: bool = False,
    major: int = 3,
) -> Iterator[dict[str, Any]]:
    """A throwaway Airflow `major` on the DAGs of tests/temporal/<dags>, until the block ends."""
    venv = VENVS[major]
    if not (venv / "bin" / "airflow").exists():
        if os.environ.get("TRACELAKE_REQUIRE_AIRFLOW") == "1":
            pytest.fail(f"Airflow {major} is required here but {venv} has none")
        install = f"scripts/airflow_test_server.py --major {major} --install-only --venv {venv}"
        pytest.skip(f"no Airflow {major} in {venv} ({install})")
    command = [
        sys.executable, str(ROOT / "scripts" / "airflow_test_server.py"),
        "--major", str(major), "--venv", str(venv), "--home", str(tmp_path_factory.mktemp("airflow-home")),
        "--dags", str(Path(__file__).parent / dags),
        *[argument for dag in expect for argument in ("--expect-dag", dag)],
        *(["--scheduler"] if scheduler else []),
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line:
        server.wait()
        pytest.fail(f"airflow_test_server.py exited with {server.returncode} before Airflow was ready")
    try:
        yield json.loads(line)
    finally:
        server.terminate()
        server.wait(timeout=60)


def api(airflow: dict[str, Any], method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    """A call to the server's REST API (`/api/v2` with its token, `/api/v1` with basic auth)."""
    if airflow["token"]:
        kwargs["headers"] = {"Authorization": f"Bearer {airflow['token']}"}
    else:
        kwargs["auth"] = (airflow["username"], airflow["password"])
    response = requests.request(method, f"{airflow['url']}/api/{airflow['api']}/{path}", timeout=30, **kwargs)
    assert response.status_code < 300, response.text
    return response.json()  # type: ignore[no-any-return]


def mark(airflow: dict[str, Any], dag: str, run: str, task: str, state: str = "success") -> None:
    """Set a task instance's state, as someone in the UI would (no callback fires)."""
    body: dict[str, Any] = {"new_state": state}
    if airflow["api"] == "v1":
        body["dry_run"] = False  # /api/v1 only reports what it would change unless told
    api(airflow, "PATCH", f"dags/{dag}/dagRuns/{run}/taskInstances/{task}", json=body)


def succeed(airflow: dict[str, Any], dag: str, day: str, tasks: tuple[str, ...]) -> None:
    """A run of `dag` dated `day` whose tasks all succeeded, as the scheduler would leave it."""
    api(airflow, "POST", f"dags/{dag}/dagRuns", json={"dag_run_id": day, "logical_date": f"{day}T00:00:00Z"})
    for task in tasks:
        mark(airflow, dag, day, task)


def states(
    client: AirflowClient, dag: str, task: str, lo: str = "2024-03-01", hi: str = "2024-04-01"
) -> dict[str, str | None]:
    """The task's states by the day of their logical dates, for logical dates in [lo, hi]."""
    found = client.task_instances(dag, task, utc(lo), utc(hi))
    return {ti.logical_date.date().isoformat(): ti.state for ti in found}


def utc(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def at(day: str) -> int:
    return int(utc(day).timestamp())


def make_world(airflow: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Airflow with a week of daily runs and two weekly runs, all succeeded, and a status table
    fed by the success callback for each of them."""
    folder = tmp_path_factory.mktemp("store")
    (folder / "entities.yml").write_text(ENTITIES)
    db = str(folder / "lineage.db")
    entities = EntityStore(LineageStore(db))
    assert entities.load([folder / "entities.yml"]).ok
    for day in DAYS:
        succeed(airflow, "articles", day, ("load_articles", "count_words"))
        for task in ("load_articles", "count_words"):
            record_run(entities, "articles", task, utc(day), run_id=day)
    for monday in MONDAYS:
        succeed(airflow, "reads", monday, ("exact_reads", "user_weekly_reads"))
        for task in ("exact_reads", "user_weekly_reads"):
            record_run(entities, "reads", task, utc(monday), run_id=monday)
    client = AirflowClient(airflow["url"], username=airflow["username"], password=airflow["password"])
    return {"db": db, "entities": entities, "client": client, "airflow": airflow}


def check_the_callback_recorded_the_week_each_weekly_run_made(world: dict[str, Any]) -> None:
    rows = world["entities"].status("user_weekly_reads")
    assert [(row.start, row.run_id) for row in rows] == [
        (at("2024-03-11"), "2024-03-18"),
        (at("2024-03-18"), "2024-03-25"),
    ]
    assert reconcile(world["entities"].graph(), world["client"], world["entities"], lo=at("2024-03-01"),
                     hi=at("2024-04-01")) == []  # fmt: skip


def check_taint_apply_clears_exactly_the_runs_to_rebuild_and_records_the_calls(world: dict[str, Any]) -> None:
    airflow, client = world["airflow"], world["client"]
    # Wednesday's articles were loaded twice: that day and its word count are rebuilt, and so is the
    # week of 03-11 (its run is dated 03-18). The week of 03-18 and the other days are left alone.
    result = CliRunner().invoke(
        app,
        [
            "taint", "articles_by_author", "--from", "2024-03-13", "--to", "2024-03-14",
            "--reason", "articles loaded twice", "--until", "2024-04-01", "--apply", "--actor", "oncall",
            "--airflow-url", airflow["url"], "--airflow-user", airflow["username"],
            "--airflow-password", airflow["password"], "--db", world["db"],
        ],
        env={"COLUMNS": "250"},
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    assert "cleared 2 task instance(s) of articles (load_articles, count_words)" in result.stderr
    assert "cleared 1 task instance(s) of reads (user_weekly_reads)" in result.stderr
    articles = states(client, "articles", "load_articles")
    assert articles == {day: (None if day == "2024-03-13" else "success") for day in DAYS}
    assert states(client, "articles", "count_words")["2024-03-13"] is None
    assert states(client, "reads", "user_weekly_reads") == {"2024-03-18": None, "2024-03-25": "success"}
    assert states(client, "reads", "exact_reads") == {"2024-03-18": "success", "2024-03-25": "success"}
    calls = recorded_clears(world["entities"])
    assert [(c["dag_id"], c["task_ids"], c["start_date"], c["end_date"], c["dry_run"]) for c in calls] == [
        ("articles", ["load_articles", "count_words"], "2024-03-13T00:00:00+00:00",
         "2024-03-13T00:00:00+00:00", False),
        ("reads", ["user_weekly_reads"], "2024-03-18T00:00:00+00:00", "2024-03-18T00:00:00+00:00", False),
    ]  # fmt: skip
    assert calls[1]["cleared"] == ["user_weekly_reads@2024-03-18T00:00:00+00:00"]


def check_reconcile_finds_changes_made_behind_the_status_tables_back(world: dict[str, Any]) -> None:
    airflow, client, entities = world["airflow"], world["client"], world["entities"]
    # Someone marks the cleared Wednesday load as success in the UI (no callback fires), and clears
    # Friday's load, which the status table still holds as completed.
    mark(airflow, "articles", "2024-03-13", "load_articles")
    api(airflow, "POST", "dags/articles/clearTaskInstances",
        json={"dry_run": False, "only_failed": False, "task_ids": ["load_articles"],
              "start_date": "2024-03-15T00:00:00Z", "end_date": "2024-03-15T00:00:00Z"})  # fmt: skip

    drifts = reconcile(entities.graph(), client, entities, lo=at("2024-03-01"), hi=at("2024-04-01"))

    found = {(d.entity, datetime.fromtimestamp(d.start, UTC).date().isoformat(), d.airflow_state, d.problem)
             for d in drifts}  # fmt: skip
    assert found == {
        ("articles_by_author", "2024-03-13", "success",
         "Airflow succeeded but the status table has it tainted (articles loaded twice)"),
        ("articles_by_author", "2024-03-15", None,
         "the status table says completed, but Airflow's task is cleared"),
    }  # fmt: skip
