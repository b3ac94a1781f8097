"""`GET /api/tracelake/v1/why` through a real uvicorn server, over the dating example's query log
and runs sent by the OpenLineage Python client as a producer sends them to Marquez.

From the log (examples/dating/query_log.jsonl): ads.user_segments reads dating.user_profile,
which the profile_etl.load job writes from dating.user_profile_raw; nothing upstream of
ads.user_segments changed on 2024-03-12. The test adds, that day, an Airflow job that starts
writing user_profile_raw from crm.users and fails: two hops up from ads.user_segments.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tracelake.api.app import create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.deadlines import DeadlineOperations
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating"
WHY = "/api/tracelake/v1/why"
SEGMENTS, RAW = "hive.table/ads.user_segments", "hive.table/dating.user_profile_raw"
JOB = "openlineage.job/airflow/crm_profiles"
RUN_ID = "0190c6c1-2b3a-7000-8000-0000000000aa"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Tracelake]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    yield service
    service.close()


@pytest.fixture
def url(service: Tracelake) -> Iterator[str]:
    with serve_in_thread(create_app(service)) as base:
        yield base


def send_failed_run(url: str) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, endpoint="api/v1/lineage")))
    for state, time in (
        (RunState.START, "2024-03-12T09:00:00+00:00"),
        (RunState.FAIL, "2024-03-12T09:20:00+00:00"),
    ):
        client.emit(
            RunEvent(
                eventType=state,
                eventTime=time,
                run=Run(runId=RUN_ID),
                job=Job(namespace="airflow", name="crm_profiles"),
                producer="https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
                inputs=[InputDataset(namespace="hive", name="crm.users")],
                outputs=[OutputDataset(namespace="hive", name="dating.user_profile_raw")],
            )
        )


def why(url: str, **params: str) -> requests.Response:
    return requests.get(url + WHY, params={"node": "ads.user_segments", **params}, timeout=30)


def test_a_failed_run_two_hops_up_is_the_first_cause(url: str) -> None:
    window = {"since": "2024-03-12T00:00:00Z", "until": "2024-03-13T00:00:00Z"}
    before = why(url, **window)
    assert before.status_code == 200, before.text
    assert before.json()["causes"] == []  # the log's 2024-03-12 jobs ran as on the days before

    send_failed_run(url)
    answer = why(url, **window).json()
    assert answer["asset"] == SEGMENTS
    found = [(c["kind"], c["subject"], c["distance"], c["score"]) for c in answer["causes"]]
    # SEVERITY × 0.8², by hand: a failed run 1.0, a new input 0.7, a new process 0.5
    assert found == [
        ("run_failed", JOB, 2, 0.64),
        ("input_added", JOB, 2, 0.448),
        ("process_new", JOB, 2, 0.32),
    ]
    failed = answer["causes"][0]
    assert failed["run_id"] == RUN_ID and failed["detail"] == "FAIL"
    assert failed["at"] == "2024-03-12T09:20:00+00:00"
    assert [hop["target"] for hop in failed["route"]] == ["hive.table/dating.user_profile", SEGMENTS]
    assert answer["causes"][1]["route"][0] == {
        "source": "hive.table/crm.users",
        "target": RAW,
        "process": JOB,
    }


def test_limit_keeps_the_first_causes_and_counts_them_all(url: str) -> None:
    send_failed_run(url)
    answer = why(url, since="2024-03-12T00:00:00Z", until="2024-03-13T00:00:00Z", limit="1").json()
    assert answer["found"] == 3 and [c["kind"] for c in answer["causes"]] == ["run_failed"]


def test_bad_questions_are_4xx_with_one_message(url: str) -> None:
    unknown = why(url, node="no_such.table")
    assert unknown.status_code == 404
    empty = why(url, since="2024-03-13T00:00:00Z", until="2024-03-12T00:00:00Z")
    assert empty.status_code == 400 and "window is empty" in empty.json()["error"]
    assert why(url, depth="-1").status_code == 422


# ---------------------------------------------------------------- critical path and deadlines


def test_the_critical_path_over_http(url: str) -> None:
    """The log's jobs on 2024-03-12 (tests/test_cli_answers.py works them out)."""
    response = requests.get(
        url + "/api/tracelake/v1/critical-path",
        params={"node": "ads.user_segments", "date": "2024-03-12"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    steps = response.json()["steps"]
    assert [s["process"] for s in steps] == [
        "sql.job/raw.profile_events",
        "sql.job/profile_etl.load",
        "sql.job/ads.segments",
    ]
    bad_zone = requests.get(
        url + "/api/tracelake/v1/critical-path",
        params={"node": "ads.user_segments", "date": "2024-03-12", "timezone": "Mars/Olympus"},
        timeout=30,
    )
    assert bad_zone.status_code == 400 and "unknown time zone" in bad_zone.json()["error"]


def test_deadlines_over_http(url: str, service: Tracelake) -> None:
    path = url + "/api/tracelake/v1/deadlines"
    none_yet = requests.get(path, params={"from": "2024-03-12"}, timeout=30)
    assert none_yet.status_code == 400 and "no deadlines in the store" in none_yet.json()["error"]
    DeadlineOperations(service).load([EXAMPLE / "deadlines.yml"])
    checks = requests.get(path, params={"from": "2024-03-11", "to": "2024-03-12"}, timeout=30).json()[
        "checks"
    ]
    assert [(c["date"], c["asset"], c["status"]) for c in checks] == [
        ("2024-03-11", SEGMENTS, "missed"),
        ("2024-03-11", "hive.table/dating.safety_training_tbl", "met"),
        ("2024-03-12", SEGMENTS, "missed"),
        ("2024-03-12", "hive.table/dating.safety_training_tbl", "met"),
    ]
    backwards = requests.get(path, params={"from": "2024-03-12", "to": "2024-03-11"}, timeout=30)
    assert backwards.status_code == 400


def test_coverage_over_http(url: str) -> None:
    """The dating log's tables on 2024-03-12: 11 of 15 written (tests/test_cli_answers.py)."""
    response = requests.get(
        url + "/api/tracelake/v1/coverage", params={"at": "2024-03-12T23:59:59Z", "history": 1}, timeout=30
    )
    assert response.status_code == 200, response.text
    view = response.json()
    assert view["assets"]["covered"] == 11 and view["assets"]["total"] == 15
    assert [point["at"][:10] for point in view["history"]] == ["2024-03-05", "2024-03-12"]
    assert view["history"][0]["assets"]["total"] == 0  # before the log's first statement


def test_lineage_grouped_over_http_is_the_plain_answer_collapsed(url: str) -> None:
    path = url + "/api/tracelake/v1/lineage"
    query = {"node": "dating.user_profile", "direction": "downstream"}
    plain = requests.get(path, params=query, timeout=30).json()
    grouped = requests.get(path, params={**query, "group_by": "kind"}, timeout=30).json()
    tables = {n["id"] for n in plain["nodes"]}
    pairs = {(e["source"], e["target"]) for e in plain["edges"] if e["source"] != e["target"]}
    # every table of the log is a hive.table: one group, all the plain answer's tables, its flows inside
    assert [(g["id"], set(g["members"]), g["internal_flows"]) for g in grouped["groups"]] == [
        ("kind:hive.table", tables, len(pairs))
    ]
    assert grouped["edges"] == []
    bad = requests.get(path, params={**query, "group_by": "colour"}, timeout=30)
    assert bad.status_code == 422
