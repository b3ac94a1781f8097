"""Entities and privacy requests over HTTP, through a real server on a real SQLite store.

The taint plan is the seed's word-count example (examples/entities/wordcount.yml), worked by
hand: articles_by_author wrong on Wednesday 2024-03-06 (UTC) → that day of words_count (dates:
same) → the week of user_weekly_reads starting Monday 2024-03-04 (all_week, in both states);
word_prominence and nb_read_exact do not read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore
from tracelake.temporal.instances import EntityStore

ENTITIES = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"
API = "/api/tracelake/v1"


def day(*date: int) -> str:
    return datetime(*date, tzinfo=UTC).isoformat()


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    (tmp_path / "lake" / "events").mkdir(parents=True)
    return tmp_path / "lake"


@pytest.fixture
def url(tmp_path: Path, lake: Path) -> Iterator[str]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    assert EntityStore(service.store).load([ENTITIES]).ok
    with serve_in_thread(create_app(service, ApiSettings(lake_roots=(lake,)))) as base:
        yield base
    service.close()


def call(method: str, url: str, path: str, expect: int = 200, **kwargs: Any) -> Any:
    response = requests.request(method, url + path, timeout=30, **kwargs)
    assert response.status_code == expect, response.text
    return response.json()


def test_a_taint_plan_over_http_and_applying_it(url: str) -> None:
    body = {"from": "2024-03-06", "to": "2024-03-07", "reason": "bad parser", "until": "2024-04-01T00:00:00Z"}
    plan = call("POST", url, f"{API}/entities/articles_by_author/taint", json=body)
    assert [(s["entity"], s["start"], s["end"], s["action"]) for s in plan["steps"]] == [
        ("articles_by_author", day(2024, 3, 6), day(2024, 3, 7), "rebuild"),
        ("words_count", day(2024, 3, 6), day(2024, 3, 7), "rebuild"),
        ("user_weekly_reads", day(2024, 3, 4), day(2024, 3, 11), "rebuild"),
    ]
    assert plan["applied"] is None
    assert call("GET", url, f"{API}/entities/words_count/status") == []  # a dry run changes nothing

    applied = call("POST", url, f"{API}/entities/articles_by_author/taint", json={**body, "apply": True})
    assert applied["applied"] == {"instances": 3, "rebuilt": 3, "downgraded": 0}
    [row] = call("GET", url, f"{API}/entities/words_count/status")
    assert (row["instance"], row["valid"], row["actor"]) == (day(2024, 3, 6), False, "api")
    assert row["reason"] == "bad parser (via articles_by_author → words_count)"


def test_entity_mistakes_are_400s_with_a_sentence(url: str) -> None:
    body = {"from": "2024-03-06", "to": "2024-03-07", "reason": "x"}
    assert "unknown entity" in call("POST", url, f"{API}/entities/nope/taint", 400, json=body)["error"]
    bad = {**body, "from": "last tuesday"}
    assert (
        "is not an ISO date" in call("POST", url, f"{API}/entities/words_count/taint", 400, json=bad)["error"]
    )
    backwards = {**body, "from": "2024-03-07", "to": "2024-03-06"}
    assert (
        "is not after" in call("POST", url, f"{API}/entities/words_count/taint", 400, json=backwards)["error"]
    )
    names = [e["name"] for e in call("GET", url, f"{API}/entities")]
    assert names[0] == "articles_by_author" and "user_weekly_reads" in names


def test_a_privacy_request_is_queued_and_its_ids_never_come_back(url: str, lake: Path) -> None:
    body = {"kind": "delete", "ids": ["user-1", "user-2", "user-1"], "datasets": [str(lake / "events")]}
    queued = call("POST", url, f"{API}/privacy/requests", 201, json=body)
    assert (queued["status"], queued["id_count"], queued["requester"]) == ("pending", 2, "api")
    again = call("GET", url, f"{API}/privacy/requests/{queued['id']}")
    listed = call("GET", url, f"{API}/privacy/requests")
    trail = call("GET", url, f"{API}/privacy/requests/{queued['id']}/audit")
    assert [e["event"] for e in trail] == ["submitted"]
    for answer in (queued, again, listed, trail):
        assert "user-1" not in str(answer)


def test_a_privacy_request_cannot_name_a_folder_outside_the_lake(url: str, tmp_path: Path) -> None:
    body = {"kind": "access", "ids": ["user-1"], "datasets": [str(tmp_path)]}
    refused = call("POST", url, f"{API}/privacy/requests", 403, json=body)
    assert refused["path"] == "$.datasets[0]"
    call("GET", url, f"{API}/privacy/requests/delete-000000000000", 404)
    assert call("GET", url, f"{API}/privacy/requests") == []
