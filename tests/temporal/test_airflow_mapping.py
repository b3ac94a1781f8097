"""From a plan to Airflow clears, and from a successful run back to the instance it produced,
without an Airflow: the pure mapping between instances and logical dates.

The seed's DAGs: `articles` runs load_articles and count_words daily, `reads` runs exact_reads
and user_weekly_reads weekly (Monday weeks). With `logical_date: start` a run is dated at the
start of the period it produces (Airflow 2, or Airflow 3 with data intervals); with `end`, at
its end (Airflow 3's default cron timetable runs a period once it is over).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tracelake.store import LineageStore
from tracelake.temporal.airflow import clear_requests, instance_of, logical_date
from tracelake.temporal.airflow_hooks import bound_entities, record_run
from tracelake.temporal.instances import EntityStore
from tracelake.temporal.periods import parse_moment
from tracelake.temporal.planner import EntityGraph

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"


def at(text: str) -> int:
    return parse_moment(text, ZoneInfo("UTC"))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def entities(tmp_path: Path) -> EntityStore:
    store = EntityStore(LineageStore(str(tmp_path / "lineage.db")))
    assert store.load([EXAMPLE]).ok
    return store


def test_a_rebuild_plan_becomes_one_clear_per_dag_and_range(entities: EntityStore) -> None:
    graph = entities.graph()
    # three days of articles: three days of counts (same DAG, same range: one call), one week
    plan = graph.plan("articles_by_author", at("2024-03-12"), at("2024-03-15"), until=at("2024-06-01"))

    requests, unbound = clear_requests(plan, graph)

    assert unbound == []
    assert [(r.dag_id, r.task_ids, r.start, r.end, r.instances) for r in requests] == [
        ("articles", ("load_articles", "count_words"), utc("2024-03-12"), utc("2024-03-14"), 6),
        ("reads", ("user_weekly_reads",), utc("2024-03-11"), utc("2024-03-11"), 1),
    ]
    body = requests[1].body(dry_run=False)
    assert body["only_failed"] is False and body["dry_run"] is False
    assert body["start_date"] == body["end_date"] == "2024-03-11T00:00:00+00:00"


def test_downgrades_clear_nothing_and_unbound_entities_are_named(entities: EntityStore) -> None:
    graph = entities.graph()
    unbound = {name: replace(entity, airflow=None) if name == "words_count" else entity
               for name, entity in graph.entities.items()}  # fmt: skip
    graph = EntityGraph(unbound)
    plan = graph.plan("articles_by_author", at("2024-03-12"), at("2024-03-13"), until=at("2024-06-01"))
    requests, missing = clear_requests(plan, graph)
    assert missing == ["words_count"]
    assert [r.dag_id for r in requests] == ["articles", "reads"]

    plan = graph.plan("nb_read_exact", at("2024-03-11"), at("2024-03-12"), until=at("2024-06-01"))
    requests, _ = clear_requests(plan, graph)
    # the week of user_weekly_reads is only downgraded: just exact_reads is rerun
    assert [(r.dag_id, r.task_ids) for r in requests] == [("reads", ("exact_reads",))]


def test_logical_dates_at_the_end_of_the_period(entities: EntityStore) -> None:
    graph = entities.graph()
    weekly = graph.entities["user_weekly_reads"]
    binding = replace(weekly.airflow, logical_date="end")  # type: ignore[arg-type]

    assert logical_date(binding, weekly, at("2024-03-11")) == utc("2024-03-18")
    # a run dated Monday 03-18 00:00 produced the week that ended then
    assert instance_of(binding, weekly, utc("2024-03-18")) == at("2024-03-11")
    assert instance_of(weekly.airflow, weekly, utc("2024-03-18")) == at("2024-03-18")  # type: ignore[arg-type]


def test_a_successful_run_records_the_instance_of_each_entity_bound_to_its_task(
    entities: EntityStore,
) -> None:
    graph = entities.graph()
    assert [e.name for e in bound_entities(graph.entities, "reads", "user_weekly_reads")] == [
        "user_weekly_reads"
    ]

    recorded = record_run(entities, "reads", "user_weekly_reads", utc("2024-03-13T00:00"), "scheduled__x")

    assert recorded == [("user_weekly_reads", at("2024-03-11"))]
    [row] = entities.status("user_weekly_reads")
    # the binding names no state, so the entity's last one: completed
    assert row.states == ("completed",) and row.run_id == "scheduled__x"
    assert row.actor == "airflow:reads.user_weekly_reads"
    assert record_run(entities, "reads", "some_other_task", utc("2024-03-13"), None) == []
