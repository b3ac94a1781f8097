"""Labels, discovery sessions, policies and hotness over HTTP, through a real server, on the
dating example's query log and ML configs (the same workflow tests/graph/test_dating_discovery.py
works out by hand: religion on dating.user_profile reaches six fields by SQL; the configs' feature
and model wait as candidates; the ads segment breaks the purpose policy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tracelake.api.app import ApiSettings, create_app
from tracelake.api.auth import new_token
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating"
API = "/api/tracelake/v1"
RELIGION = "hive.table/dating.user_profile#religion"
FEATURE, MODEL = "ai.feature/DATING_USER_RELIGION_SCORE", "ai.model/dating_ranking_model"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Tracelake]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    service.ingest_configs([EXAMPLE / "configs"])
    yield service
    service.close()


@pytest.fixture
def url(service: Tracelake) -> Iterator[str]:
    with serve_in_thread(create_app(service, ApiSettings(policy_dir=EXAMPLE))) as base:
        yield base


def call(method: str, url: str, path: str, expect: int = 200, **kwargs: Any) -> Any:
    response = requests.request(method, url + path, timeout=30, **kwargs)
    assert response.status_code == expect, response.text
    return response.json()


def test_a_discovery_session_over_http_from_declaration_to_confirmed_labels(url: str) -> None:
    declared = call(
        "POST", url, f"{API}/labels", json={"node": "dating.user_profile#religion", "labels": ["religion"]}
    )
    assert declared == {"node": RELIGION, "declared": ["religion"]}

    started = call("POST", url, f"{API}/discovery", 201, json={"label": "religion"})
    session = started["id"]
    assert started["candidates"] == [FEATURE, MODEL]
    assert not started["stable"]
    call("POST", url, f"{API}/discovery/{session}/confirm", 409)  # not stable yet

    for node in (FEATURE, MODEL):
        decision = call(
            "POST",
            url,
            f"{API}/discovery/{session}/decisions",
            json={"node": node, "include": True, "reason": "ml"},
        )
        assert decision["also_excluded"] == []
    after = call("POST", url, f"{API}/discovery/{session}/next")
    assert after["new"] == ["web.endpoint/ranking.recommend"]
    assert after["stable"]

    exported = call("POST", url, f"{API}/discovery/{session}/confirm")
    assert exported["decisions"][FEATURE] == {"state": "included", "reason": "ml", "by": "api"}
    confirmed = {
        a["node"]
        for a in call("GET", url, f"{API}/labels", params={"label": "religion"})
        if a["provenance"] == "confirmed"
    }
    assert {FEATURE, MODEL, "web.endpoint/ranking.recommend"} <= confirmed


def test_an_unknown_session_is_a_404_and_a_bad_decision_a_400(url: str) -> None:
    call("GET", url, f"{API}/discovery/discovery-000000000000", 404)
    call("POST", url, f"{API}/labels", json={"node": RELIGION, "labels": ["religion"]})
    session = call("POST", url, f"{API}/discovery", 201, json={"label": "religion"})["id"]
    # a reached node is not a candidate: it cannot be included
    body = {"node": "dating.safety_log_tbl#religion", "include": True, "reason": "x"}
    error = call("POST", url, f"{API}/discovery/{session}/decisions", 400, json=body)["error"]
    assert error == "cannot include hive.table/dating.safety_log_tbl#religion: it is reached"


def test_propagation_over_http_reports_what_each_label_reached(url: str) -> None:
    call("POST", url, f"{API}/labels", json={"node": RELIGION, "labels": ["religion"]})
    spread = call("POST", url, f"{API}/propagate", json={})
    assert "hive.table/dating.safety_training_latest#target_religion" in spread["labels"]["religion"]
    assert spread["added"] == len(spread["labels"]["religion"])
    call("POST", url, f"{API}/labels/remove", json={"node": RELIGION, "labels": ["religion"]})
    assert "no declared label" in call("POST", url, f"{API}/propagate", 400, json={})["error"]


def test_the_policy_folder_is_checked_and_nothing_outside_it_is_read(url: str) -> None:
    call("POST", url, f"{API}/labels", json={"node": RELIGION, "labels": ["religion"]})
    report = call("GET", url, f"{API}/policies/violations")
    assert [(v["policy"], v["path"]) for v in report["violations"]] == [
        ("religion-stays-out-of-ads", [RELIGION, "hive.table/ads.user_segments#segment"])
    ]
    assert call("GET", url, f"{API}/policies/violations", params={"file": "policies.yml"})["policies"] == 3
    for outside in ("../../pyproject.toml", "/etc/passwd", "schema.yaml/../../README.md"):
        call("GET", url, f"{API}/policies/violations", 404, params={"file": outside})


def test_posted_policies_are_checked_and_malformed_ones_refused(url: str) -> None:
    call("POST", url, f"{API}/labels", json={"node": RELIGION, "labels": ["religion"]})
    text = (
        "policies:\n"
        "  - name: no-religion-in-safety\n    kind: purpose\n    label: religion\n"
        "    zone: hive.table/dating.safety_\n"
    )
    found = call("POST", url, f"{API}/policies/check", data=text, headers={"Content-Type": "text/yaml"})
    # the zone prefix covers the safety log and both training tables, and religion reaches all three
    assert {v["path"][-1] for v in found["violations"]} == {
        "hive.table/dating.safety_log_tbl#religion",
        "hive.table/dating.safety_training_tbl#target_religion",
        "hive.table/dating.safety_training_latest#target_religion",
    }
    bad = "policies:\n  - name: x\n    kind: nonsense\n"
    assert "kind must be one of" in call("POST", url, f"{API}/policies/check", 400, data=bad)["error"]


def test_hot_ranks_the_most_relied_upon_assets(url: str) -> None:
    ranked = call("GET", url, f"{API}/hot", params={"limit": 3})
    assert len(ranked) == 3
    assert ranked[0]["score"] >= ranked[1]["score"] >= ranked[2]["score"]


def test_decisions_are_recorded_under_the_tokens_name(service: Tracelake, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yml"
    token = new_token("alice", ["read", "write"], tokens)
    headers = {"Authorization": f"Bearer {token}"}
    with serve_in_thread(create_app(service, ApiSettings(token_file=tokens))) as base:
        call("POST", base, f"{API}/labels", headers=headers, json={"node": RELIGION, "labels": ["religion"]})
        session = call("POST", base, f"{API}/discovery", 201, headers=headers, json={"label": "religion"})[
            "id"
        ]
        body = {"node": FEATURE, "include": False, "reason": "not religion"}
        call("POST", base, f"{API}/discovery/{session}/decisions", headers=headers, json=body)
        member = call("GET", base, f"{API}/discovery/{session}", headers=headers)["members"][FEATURE]
        # and without a policy folder, no file is read
        call("GET", base, f"{API}/policies/violations", 404, headers=headers)
    assert member["by"] == "alice"
