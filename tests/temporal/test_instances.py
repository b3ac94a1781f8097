"""The instance status table on real SQLite: recording states, readiness, applying a taint plan,
and reading the status back as it was at an earlier moment.

The example is the seed's word count (examples/entities/wordcount.yml), all in UTC; weeks start
on Monday, so the week of Wednesday 2024-03-13 runs from Monday 03-11 to Monday 03-18.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tracelake.store import LineageStore
from tracelake.temporal.instances import EntityStore
from tracelake.temporal.periods import parse_moment
from tracelake.temporal.planner import EntityGraph

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"
UTC_ZONE = ZoneInfo("UTC")


def at(text: str) -> int:
    return parse_moment(text, UTC_ZONE)


@pytest.fixture
def entities(tmp_path: Path) -> EntityStore:
    store = EntityStore(LineageStore(str(tmp_path / "lineage.db")))
    found = store.load([EXAMPLE])
    assert found.ok, found.problems
    return store


@pytest.fixture
def graph(entities: EntityStore) -> EntityGraph:
    return entities.graph()


def record_week_inputs(entities: EntityStore, graph: EntityGraph, *, skip_day: str | None = None) -> None:
    """words_count for the 7 days of the week of 03-11, February's word_prominence, the exact reads."""
    for day in range(11, 18):
        date = f"2024-03-{day}"
        if date != skip_day:
            entities.record(graph.entities["words_count"], at(date), "completed", actor="test")
    entities.record(graph.entities["word_prominence"], at("2024-02-10"), "completed", actor="test")
    entities.record(graph.entities["nb_read_exact"], at("2024-03-11"), "completed", actor="test")


def test_definitions_survive_the_store(entities: EntityStore) -> None:
    stored = entities.definitions()

    assert sorted(stored) == [
        "articles_by_author",
        "nb_read_exact",
        "user_weekly_reads",
        "word_prominence",
        "words_count",
    ]
    weekly = stored["user_weekly_reads"]
    assert weekly.state_names == ("estimated", "completed")
    assert [str(dep.dates) for dep in weekly.states[0].depends_on] == ["all_week", "latest"]


def test_a_definition_with_a_problem_stores_nothing(entities: EntityStore, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("- name: extra\n  period: daily\n  depends_on: [nowhere]\n")

    found = entities.load([broken])

    assert not found.ok
    assert "unknown entity 'nowhere'" in str(found.problems[0])
    assert "extra" not in entities.definitions()


def test_record_adds_a_state_in_the_entitys_order(entities: EntityStore, graph: EntityGraph) -> None:
    weekly = graph.entities["user_weekly_reads"]

    entities.record(weekly, at("2024-03-13T10:00"), "completed", actor="airflow", run_id="r2")
    row = entities.record(weekly, at("2024-03-12"), "estimated", actor="airflow", run_id="r1")

    assert row.start == at("2024-03-11") and row.end == at("2024-03-18")
    assert row.states == ("estimated", "completed")
    assert row.valid and row.run_id == "r1" and row.actor == "airflow"


def test_record_refuses_a_state_the_entity_does_not_have(entities: EntityStore, graph: EntityGraph) -> None:
    with pytest.raises(ValueError, match="has no state 'partial'"):
        entities.record(graph.entities["words_count"], at("2024-03-13"), "partial", actor="test")


def test_ready_when_every_needed_instance_holds_an_accepted_state(
    entities: EntityStore, graph: EntityGraph
) -> None:
    record_week_inputs(entities, graph)

    for state in ("estimated", "completed"):
        readiness = entities.is_ready(graph, "user_weekly_reads", at("2024-03-14"), state)
        assert readiness.ready, readiness.blockers


def test_not_ready_lists_the_missing_day_and_the_missing_latest_month(
    entities: EntityStore, graph: EntityGraph
) -> None:
    for day in range(11, 18):
        if day != 15:
            entities.record(graph.entities["words_count"], at(f"2024-03-{day}"), "completed", actor="t")

    readiness = entities.is_ready(graph, "user_weekly_reads", at("2024-03-11"), "estimated")

    assert not readiness.ready
    # the week ends 03-18, so the latest word_prominence ending by then is February
    assert {(b.entity, b.start, b.problem) for b in readiness.blockers} == {
        ("words_count", at("2024-03-15"), "missing"),
        ("word_prominence", at("2024-02-01"), "missing"),
    }


def test_applying_a_plan_taints_and_downgrades_and_readiness_sees_it(
    entities: EntityStore, graph: EntityGraph
) -> None:
    record_week_inputs(entities, graph)
    weekly = graph.entities["user_weekly_reads"]
    entities.record(weekly, at("2024-03-11"), "estimated", actor="t")
    entities.record(weekly, at("2024-03-11"), "completed", actor="t")

    plan = graph.plan("nb_read_exact", at("2024-03-11"), at("2024-03-12"), until=at("2024-06-01"))
    report = entities.apply(plan, reason="double-counted reads", actor="oncall", graph=graph)

    assert (report.rebuilt, report.downgraded) == (1, 1)
    [exact] = entities.status("nb_read_exact")
    assert not exact.valid and exact.states == () and exact.reason == "double-counted reads"
    [week] = entities.status("user_weekly_reads")
    assert week.valid and week.states == ("estimated",)
    assert week.reason == "double-counted reads (via nb_read_exact → user_weekly_reads)"
    completed = entities.is_ready(graph, "user_weekly_reads", at("2024-03-11"), "completed")
    assert [(b.entity, b.problem, b.detail) for b in completed.blockers] == [
        ("nb_read_exact", "tainted", "double-counted reads")
    ]
    assert entities.is_ready(graph, "user_weekly_reads", at("2024-03-11"), "estimated").ready


def test_status_at_an_earlier_moment_comes_from_the_history(
    entities: EntityStore, graph: EntityGraph
) -> None:
    words = graph.entities["words_count"]
    entities.record(words, at("2024-03-13"), "completed", actor="airflow")
    time.sleep(0.01)
    before_taint = datetime.now(UTC)
    time.sleep(0.01)
    plan = graph.plan("words_count", at("2024-03-13"), at("2024-03-14"), until=at("2024-06-01"))
    entities.apply(plan, reason="bad parse", actor="oncall", graph=graph)

    [now] = entities.status("words_count")
    [then] = entities.status("words_count", at=before_taint)

    assert not now.valid and now.actor == "oncall"
    assert then.valid and then.states == ("completed",) and then.actor == "airflow"
    assert entities.status("words_count", at=datetime(2020, 1, 1, tzinfo=UTC)) == []
