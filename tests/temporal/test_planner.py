"""Taint plans worked out by hand from the semantics in `tracelake.temporal.planner`.

Every expected step is a literal: the entity, its first and end instance boundaries as ISO
strings in the entity's time zone, the action, the states lost and kept, and the number of
instances, with the reasoning in a comment. Calendar facts used throughout: 2024 is a leap
year; 2024-01-01, 01-29, 03-11 and 04-01 are Mondays; 2024-03-13 is a Wednesday; Paris is
UTC+1 in winter, UTC+2 in summer, and changes on 2024-03-31 (02:00 → 03:00) and 2024-10-27
(03:00 → 02:00). Unless a test says otherwise, entities are in UTC and `until` is far away.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tracelake.temporal.definitions import load_definitions
from tracelake.temporal.periods import parse_moment
from tracelake.temporal.planner import EntityGraph, TaintPlan, UnknownEntityError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"
FAR = "2025-06-01T00:00:00+00:00"
BOTH = ("estimated", "completed")
DONE = ("completed",)

Row = tuple[str, str, str, str, tuple[str, ...], tuple[str, ...], int]


def at(text: str, tz: str = "UTC") -> int:
    """An ISO date or moment as epoch seconds; without an offset it is local to `tz`."""
    return parse_moment(text, ZoneInfo(tz))


def graph(tmp_path: Path, text: str) -> EntityGraph:
    path = tmp_path / "entities.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    found = load_definitions([path])
    assert found.ok, found.problems
    return EntityGraph(found.entities)


def plan(
    entities: EntityGraph, name: str, start: str, end: str, *, until: str = FAR, tz: str = "UTC"
) -> TaintPlan:
    return entities.plan(name, at(start, tz), at(end, tz), until=at(until, tz))


def rows(taint: TaintPlan, *entities: str) -> list[Row]:
    """The steps (of `entities`, or all) as (entity, start, end, action, lost, kept, instances)."""
    return [
        (step.entity, step.start, step.end, step.action, step.states, step.keeps, step.instances)
        for step in taint.steps
        if not entities or step.entity in entities
    ]


@pytest.fixture
def wordcount() -> EntityGraph:
    found = load_definitions([EXAMPLE])
    assert found.ok, found.problems
    return EntityGraph(found.entities)


# ---------------------------------------------------------------------- the seed: word counts


def test_seed_a_day_of_articles_rebuilds_its_word_count_and_its_week(wordcount: EntityGraph) -> None:
    taint = plan(wordcount, "articles_by_author", "2024-03-13", "2024-03-14")
    assert rows(taint) == [
        (
            "articles_by_author", "2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00",
            "rebuild", DONE, (), 1,
        ),
        # words_count reads the `same` day
        ("words_count", "2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild", DONE, (), 1),
        # both states of the week of Monday 03-11 read `all_week` of words_count: both are lost
        (
            "user_weekly_reads", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00",
            "rebuild", BOTH, (), 1,
        ),
    ]  # fmt: skip
    assert [step.path for step in taint.steps] == [
        ("articles_by_author",),
        ("articles_by_author", "words_count"),
        ("articles_by_author", "words_count", "user_weekly_reads"),
    ]
    assert taint.entity == "articles_by_author"
    assert (taint.start, taint.end) == ("2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00")
    assert taint.static_reached == ()
    assert taint.entities() == ["articles_by_author", "words_count", "user_weekly_reads"]


def test_seed_a_sunday_belongs_to_the_week_that_started_on_monday(wordcount: EntityGraph) -> None:
    taint = plan(wordcount, "words_count", "2024-03-17", "2024-03-18")  # Sunday 03-17
    assert rows(taint, "user_weekly_reads") == [
        (
            "user_weekly_reads", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00",
            "rebuild", BOTH, (), 1,
        ),
    ]  # fmt: skip


def test_seed_wrong_exact_reads_downgrade_the_week_to_estimated(wordcount: EntityGraph) -> None:
    taint = plan(wordcount, "nb_read_exact", "2024-03-11", "2024-03-18")
    assert rows(taint) == [
        ("nb_read_exact", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00", "rebuild", DONE, (), 1),
        # only `completed` reads nb_read_exact: the week keeps `estimated`
        (
            "user_weekly_reads", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00",
            "downgrade", ("completed",), ("estimated",), 1,
        ),
    ]  # fmt: skip
    assert taint.steps[1].path == ("nb_read_exact", "user_weekly_reads")


def test_seed_a_wrong_month_of_prominence_downgrades_the_weeks_that_read_it_as_latest(
    wordcount: EntityGraph,
) -> None:
    taint = plan(wordcount, "word_prominence", "2024-02-01", "2024-03-01")
    # A week reads the latest month that has ended by the week's end: February for the weeks ending
    # in [Mar 1, Apr 1), i.e. ending Mon 03-04, 03-11, 03-18 and 03-25: the weeks of 02-26 … 03-18.
    # The week of 03-25 ends Mon 04-01, when March has ended: it reads March. The weeks lose only
    # `estimated`; `completed` does not read word_prominence.
    assert rows(taint) == [
        ("word_prominence", "2024-02-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00", "rebuild", DONE, (), 1),
        (
            "user_weekly_reads", "2024-02-26T00:00:00+00:00", "2024-03-25T00:00:00+00:00",
            "downgrade", ("estimated",), ("completed",), 4,
        ),
    ]  # fmt: skip


def test_seed_a_taint_inside_an_instance_covers_the_whole_instance(wordcount: EntityGraph) -> None:
    # 03-13 10:00 – 03-15 02:00 touches the days 03-13, 03-14, 03-15 and the week of 03-11
    taint = plan(wordcount, "nb_read_exact", "2024-03-13T10:00", "2024-03-15T02:00")
    assert [(step.entity, step.start, step.end) for step in taint.steps] == [
        ("nb_read_exact", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00"),
        ("user_weekly_reads", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00"),
    ]
    taint = plan(wordcount, "words_count", "2024-03-13T10:00", "2024-03-15T02:00")
    assert rows(taint, "words_count") == [
        ("words_count", "2024-03-13T00:00:00+00:00", "2024-03-16T00:00:00+00:00", "rebuild", DONE, (), 3),
    ]


# ---------------------------------------------------------------------- periods up and down


HOUR_DAY_MONTH = """
    - {name: hits, period: hourly}
    - {name: daily_hits, period: daily, depends_on: [hits]}
    - {name: monthly_hits, period: monthly, depends_on: [daily_hits]}
"""


def test_ten_hours_make_one_day_and_one_month(tmp_path: Path) -> None:
    entities = graph(tmp_path, HOUR_DAY_MONTH)
    taint = plan(entities, "hits", "2024-03-13T08:00", "2024-03-13T18:00")
    assert rows(taint) == [
        ("hits", "2024-03-13T08:00:00+00:00", "2024-03-13T18:00:00+00:00", "rebuild", DONE, (), 10),
        ("daily_hits", "2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild", DONE, (), 1),
        ("monthly_hits", "2024-03-01T00:00:00+00:00", "2024-04-01T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]
    assert taint.steps[-1].path == ("hits", "daily_hits", "monthly_hits")


def test_ten_hours_across_midnight_make_two_days(tmp_path: Path) -> None:
    entities = graph(tmp_path, HOUR_DAY_MONTH)
    taint = plan(entities, "hits", "2024-03-13T20:00", "2024-03-14T06:00")
    assert rows(taint, "daily_hits", "monthly_hits") == [
        ("daily_hits", "2024-03-13T00:00:00+00:00", "2024-03-15T00:00:00+00:00", "rebuild", DONE, (), 2),
        ("monthly_hits", "2024-03-01T00:00:00+00:00", "2024-04-01T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]


def test_ten_hours_across_a_month_end_make_two_days_and_two_months(tmp_path: Path) -> None:
    entities = graph(tmp_path, HOUR_DAY_MONTH)
    taint = plan(entities, "hits", "2024-03-31T20:00", "2024-04-01T06:00")
    assert rows(taint, "daily_hits", "monthly_hits") == [
        ("daily_hits", "2024-03-31T00:00:00+00:00", "2024-04-02T00:00:00+00:00", "rebuild", DONE, (), 2),
        ("monthly_hits", "2024-03-01T00:00:00+00:00", "2024-05-01T00:00:00+00:00", "rebuild", DONE, (), 2),
    ]


@pytest.mark.parametrize("dates", ["same", "all_month"])
def test_a_week_across_a_month_boundary(tmp_path: Path, dates: str) -> None:
    entities = graph(
        tmp_path,
        f"""
        - {{name: src, period: daily}}
        - {{name: by_month, period: monthly, depends_on: [src]}}
        - name: by_week
          period: weekly
          week_start: monday
          depends_on: [{{entity: src, dates: all_week}}]
        - {{name: months_of_weeks, period: monthly, depends_on: [by_week]}}
        - name: weeks_of_months
          period: weekly
          week_start: monday
          depends_on: [{{entity: by_month, dates: {dates}}}]
        """,
    )
    taint = plan(entities, "src", "2024-02-01", "2024-02-02")  # Thursday
    # topological order, ties by name: src; by_month, by_week; months_of_weeks, weeks_of_months
    assert rows(taint) == [
        ("src", "2024-02-01T00:00:00+00:00", "2024-02-02T00:00:00+00:00", "rebuild", DONE, (), 1),
        # the month of Feb 1
        ("by_month", "2024-02-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00", "rebuild", DONE, (), 1),
        # the week of Mon 01-29 … Sun 02-04
        ("by_week", "2024-01-29T00:00:00+00:00", "2024-02-05T00:00:00+00:00", "rebuild", DONE, (), 1),
        # that week overlaps January and February
        ("months_of_weeks", "2024-01-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00", "rebuild", DONE, (), 2),
        # every week touching February reads it: from the week of 01-29 to that of 02-26 (… Sun 03-03)
        ("weeks_of_months", "2024-01-29T00:00:00+00:00", "2024-03-04T00:00:00+00:00", "rebuild", DONE, (), 5),
    ]
    assert taint.steps[3].path == ("src", "by_week", "months_of_weeks")
    assert taint.steps[4].path == ("src", "by_month", "weeks_of_months")


def test_a_month_read_with_all_month_by_a_daily_entity(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - {name: month_view, period: daily, depends_on: [{entity: src, dates: all_month}]}
        """,
    )
    # every day of February 2024 (29 days) reads the whole month, so one tainted day reaches all
    taint = plan(entities, "src", "2024-02-10", "2024-02-11")
    assert rows(taint, "month_view") == [
        ("month_view", "2024-02-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00", "rebuild", DONE, (), 29),
    ]


# ---------------------------------------------------------------------- daylight saving time


PARIS_HOURS_DAYS = """
    - {name: hits, period: hourly, timezone: Europe/Paris}
    - {name: daily_hits, period: daily, timezone: Europe/Paris, depends_on: [hits]}
    - {name: hourly_view, period: hourly, timezone: Europe/Paris, depends_on: [daily_hits]}
"""


def test_dst_spring_five_local_hours_are_four_and_make_one_23_hour_day(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_HOURS_DAYS)
    taint = plan(entities, "hits", "2024-03-31T00:00", "2024-03-31T05:00", tz="Europe/Paris")
    assert rows(taint, "hits", "daily_hits") == [
        # 00:00 and 01:00 winter time, then 03:00 and 04:00 summer time: 02:00 does not exist
        ("hits", "2024-03-31T00:00:00+01:00", "2024-03-31T05:00:00+02:00", "rebuild", DONE, (), 4),
        ("daily_hits", "2024-03-31T00:00:00+01:00", "2024-04-01T00:00:00+02:00", "rebuild", DONE, (), 1),
    ]
    daily = taint.steps[1]
    assert daily.end_epoch - daily.start_epoch == 23 * 3600
    # and every hour of that day reads it: 23 of them
    assert rows(taint, "hourly_view") == [
        ("hourly_view", "2024-03-31T00:00:00+01:00", "2024-04-01T00:00:00+02:00", "rebuild", DONE, (), 23),
    ]


def test_dst_autumn_the_day_has_25_hours(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_HOURS_DAYS)
    # the two 02:00 hours, both tainted: 02:00 summer time to 03:00 winter time is two hours
    taint = plan(entities, "hits", "2024-10-27T02:00:00+02:00", "2024-10-27T03:00:00+01:00")
    assert rows(taint) == [
        ("hits", "2024-10-27T02:00:00+02:00", "2024-10-27T03:00:00+01:00", "rebuild", DONE, (), 2),
        ("daily_hits", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00", "rebuild", DONE, (), 1),
        ("hourly_view", "2024-10-27T00:00:00+02:00", "2024-10-28T00:00:00+01:00", "rebuild", DONE, (), 25),
    ]


def test_dst_only_the_second_repeated_hour(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_HOURS_DAYS)
    taint = plan(entities, "hits", "2024-10-27T02:00:00+01:00", "2024-10-27T03:00:00+01:00")
    assert rows(taint, "hits") == [
        ("hits", "2024-10-27T02:00:00+01:00", "2024-10-27T03:00:00+01:00", "rebuild", DONE, (), 1),
    ]


@pytest.mark.parametrize(("day", "hours"), [("2024-03-31", 23), ("2024-10-27", 25), ("2024-03-13", 24)])
def test_dst_a_whole_local_day_of_hours(tmp_path: Path, day: str, hours: int) -> None:
    entities = graph(tmp_path, PARIS_HOURS_DAYS)
    taint = plan(entities, "daily_hits", day, day + "T23:00", tz="Europe/Paris")
    (view,) = taint.steps[1:]
    assert (view.entity, view.instances) == ("hourly_view", hours)
    assert view.end_epoch - view.start_epoch == hours * 3600


# ---------------------------------------------------------------------- kinds


WINDOW_30 = """
    - {name: src, period: daily}
    - {name: last_30, period: daily, kind: sliding_window, window: 30, depends_on: [src]}
"""


def test_sliding_window_one_day_spreads_30_days_forward(tmp_path: Path) -> None:
    entities = graph(tmp_path, WINDOW_30)
    taint = plan(entities, "src", "2024-03-10", "2024-03-11")
    # the windows holding 03-10 are those of 03-10 … 03-10 + 29 days = 04-08 (22 days of March, 8 of April)
    assert rows(taint, "last_30") == [
        ("last_30", "2024-03-10T00:00:00+00:00", "2024-04-09T00:00:00+00:00", "rebuild", DONE, (), 30),
    ]


@pytest.mark.parametrize("until", ["2024-03-15", "2024-03-15T18:00"])
def test_sliding_window_spread_stops_at_the_end_of_available_data(tmp_path: Path, until: str) -> None:
    entities = graph(tmp_path, WINDOW_30)
    taint = plan(entities, "src", "2024-03-10", "2024-03-11", until=until)
    # by 03-15 (or during it), the days that have ended are up to 03-14: 03-10 … 03-14
    assert rows(taint) == [
        ("src", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", DONE, (), 1),
        ("last_30", "2024-03-10T00:00:00+00:00", "2024-03-15T00:00:00+00:00", "rebuild", DONE, (), 5),
    ]


def test_until_also_cuts_the_tainted_entity_itself(tmp_path: Path) -> None:
    entities = graph(tmp_path, WINDOW_30)
    taint = plan(entities, "src", "2024-03-10", "2024-03-20", until="2024-03-12T09:00")
    # only 03-10 and 03-11 have ended by 03-12 09:00
    assert rows(taint) == [
        ("src", "2024-03-10T00:00:00+00:00", "2024-03-12T00:00:00+00:00", "rebuild", DONE, (), 2),
        ("last_30", "2024-03-10T00:00:00+00:00", "2024-03-12T00:00:00+00:00", "rebuild", DONE, (), 2),
    ]


def test_a_weekly_instance_that_has_not_ended_is_not_planned(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - {name: by_week, period: weekly, week_start: monday, depends_on: [{entity: src, dates: all_week}]}
        """,
    )
    # on Sunday 03-17 the week of 03-11 is still running (it ends Mon 03-18)
    assert rows(plan(entities, "src", "2024-03-13", "2024-03-14", until="2024-03-17T23:00"), "by_week") == []
    assert rows(plan(entities, "src", "2024-03-13", "2024-03-14", until="2024-03-18"), "by_week") == [
        ("by_week", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]


def test_cumulative_over_a_week_spreads_to_the_week_end(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - name: week_to_date
          period: daily
          kind: cumulative
          cumulative_over: weekly
          week_start: monday
          depends_on: [src]
        - name: week_to_date_sunday
          period: daily
          kind: cumulative
          cumulative_over: weekly
          week_start: sunday
          depends_on: [src]
        - {name: month_to_date, period: daily, kind: cumulative, cumulative_over: monthly, depends_on: [src]}
        """,
    )
    taint = plan(entities, "src", "2024-03-13", "2024-03-14")  # Wednesday
    assert rows(taint, "week_to_date", "week_to_date_sunday", "month_to_date") == [
        # March 13 … 31: 19 days
        ("month_to_date", "2024-03-13T00:00:00+00:00", "2024-04-01T00:00:00+00:00", "rebuild", DONE, (), 19),
        # Wed 03-13 … Sun 03-17; the next week starts again from Mon 03-18
        ("week_to_date", "2024-03-13T00:00:00+00:00", "2024-03-18T00:00:00+00:00", "rebuild", DONE, (), 5),
        # weeks from Sunday: Wed 03-13 … Sat 03-16
        (
            "week_to_date_sunday", "2024-03-13T00:00:00+00:00", "2024-03-17T00:00:00+00:00",
            "rebuild", DONE, (), 4,
        ),
    ]  # fmt: skip


def test_snapshot_only_the_days_it_was_the_latest(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: catalog, period: daily, kind: snapshot}
        - {name: weekly_catalog, period: weekly, week_start: monday, kind: snapshot}
        - {name: sales, period: daily, depends_on: [catalog, weekly_catalog]}
        """,
    )
    # the snapshot of 03-10 ends 03-11: it is the latest for the day of 03-10 only (03-11 reads 03-11's)
    assert rows(plan(entities, "catalog", "2024-03-10", "2024-03-11"), "sales") == [
        ("sales", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]
    # the weekly snapshot of 03-04 ends Mon 03-11: it is the latest for the days ending 03-11 … 03-17,
    # i.e. Sun 03-10 … Sat 03-16; from Sun 03-17 (ending 03-18) the week of 03-11 is the latest
    assert rows(plan(entities, "weekly_catalog", "2024-03-04", "2024-03-11"), "sales") == [
        ("sales", "2024-03-10T00:00:00+00:00", "2024-03-17T00:00:00+00:00", "rebuild", DONE, (), 7),
    ]


def test_static_entities_downstream_are_reached_but_never_rebuilt(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - {name: frozen_model, kind: static, depends_on: [src]}
        - {name: scores, period: daily, depends_on: [frozen_model]}
        - {name: daily_copy, period: daily, depends_on: [src]}
        """,
    )
    taint = plan(entities, "src", "2024-03-10", "2024-03-12")
    assert taint.static_reached == ("frozen_model",)
    assert taint.entities() == ["src", "daily_copy"]  # scores reads the static model, which is not redone
    assert rows(taint, "daily_copy") == [
        ("daily_copy", "2024-03-10T00:00:00+00:00", "2024-03-12T00:00:00+00:00", "rebuild", DONE, (), 2),
    ]


def test_tainting_a_static_entity_reaches_the_instances_overlapping_the_window(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: referential, kind: static}
        - {name: scores, period: daily, depends_on: [referential]}
        - name: weekly_scores
          period: weekly
          week_start: monday
          depends_on: [{entity: scores, dates: all_week}]
        """,
    )
    # the referential was wrong from 03-10 12:00 to 03-12 06:00: the days 03-10, 03-11, 03-12 read it
    taint = plan(entities, "referential", "2024-03-10T12:00", "2024-03-12T06:00")
    assert rows(taint, "scores", "weekly_scores") == [
        ("scores", "2024-03-10T00:00:00+00:00", "2024-03-13T00:00:00+00:00", "rebuild", DONE, (), 3),
        # Sun 03-10 is in the week of 03-04; 03-11 and 03-12 in the week of 03-11
        ("weekly_scores", "2024-03-04T00:00:00+00:00", "2024-03-18T00:00:00+00:00", "rebuild", DONE, (), 2),
    ]
    assert taint.steps[-1].path == ("referential", "scores", "weekly_scores")


# ---------------------------------------------------------------------- `previous` chains


RUNNING_TOTAL = """
    - {name: src, period: daily}
    - name: running_total
      period: daily
      depends_on:
        - {entity: src, dates: same}
        - {entity: running_total, dates: previous}
"""


def test_previous_an_upstream_taint_carries_a_running_total_to_until(tmp_path: Path) -> None:
    entities = graph(tmp_path, RUNNING_TOTAL)
    taint = plan(entities, "src", "2024-03-10", "2024-03-11", until="2024-03-20T12:00")
    # 03-10 reads the bad day; 03-11 reads 03-10, … up to 03-19, the last day ended by 03-20 12:00
    assert rows(taint, "running_total") == [
        ("running_total", "2024-03-10T00:00:00+00:00", "2024-03-20T00:00:00+00:00", "rebuild", DONE, (), 10),
    ]


def test_previous_tainting_the_running_total_itself_carries_it_to_until(tmp_path: Path) -> None:
    entities = graph(tmp_path, RUNNING_TOTAL)
    taint = plan(entities, "running_total", "2024-03-10", "2024-03-11", until="2024-03-20T12:00")
    # the total of 03-11 reads the (wrong) total of 03-10, and so on until 03-19
    assert rows(taint) == [
        ("running_total", "2024-03-10T00:00:00+00:00", "2024-03-20T00:00:00+00:00", "rebuild", DONE, (), 10),
    ]


def test_previous_2_reaches_every_other_day(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - name: alternating
          period: daily
          depends_on:
            - {entity: src, dates: same}
            - {entity: alternating, dates: previous_2}
        """,
    )
    taint = plan(entities, "src", "2024-03-10", "2024-03-11", until="2024-03-15")
    # 03-10 reads src; 03-12 reads 03-10; 03-14 reads 03-12; 03-16 has not ended by 03-15.
    # 03-11 and 03-13 read 03-09 and 03-11, which are fine.
    assert rows(taint, "alternating") == [
        ("alternating", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", DONE, (), 1),
        ("alternating", "2024-03-12T00:00:00+00:00", "2024-03-13T00:00:00+00:00", "rebuild", DONE, (), 1),
        ("alternating", "2024-03-14T00:00:00+00:00", "2024-03-15T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]


def test_previous_accepting_two_states_stops_where_one_is_still_held(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - name: running_total
          period: daily
          states:
            estimated:
              depends_on: [src]
            completed:
              depends_on:
                - src
                - {entity: running_total, dates: previous, states: [estimated, completed]}
        """,
    )
    taint = plan(entities, "src", "2024-03-10", "2024-03-11", until="2024-03-15")
    # 03-10 loses both states (it reads src). 03-11's `completed` reads 03-10, which now holds neither
    # state: 03-11 loses `completed` but keeps `estimated` (its src is fine). 03-12's `completed` reads
    # 03-11, which still holds `estimated`: accepted, so 03-12 is untouched, and so are the days after.
    assert rows(taint, "running_total") == [
        ("running_total", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", BOTH, (), 1),
        (
            "running_total", "2024-03-11T00:00:00+00:00", "2024-03-12T00:00:00+00:00",
            "downgrade", ("completed",), ("estimated",), 1,
        ),
    ]  # fmt: skip


# ---------------------------------------------------------------------- per-state dependencies


PER_STATE = """
    - {name: raw, period: daily}
    - {name: exact, period: daily}
    - name: reads
      period: daily
      states:
        estimated:
          depends_on: [raw]
        completed:
          depends_on: [raw, exact]
    - name: either
      period: daily
      depends_on: [{entity: reads, states: [estimated, completed]}]
    - name: exact_only
      period: daily
      depends_on: [{entity: reads, states: [completed]}]
    - name: after_either
      period: daily
      depends_on: [either]
"""


def test_a_downgrade_breaks_only_the_dependencies_that_need_the_lost_state(tmp_path: Path) -> None:
    entities = graph(tmp_path, PER_STATE)
    taint = plan(entities, "exact", "2024-03-10", "2024-03-11")
    assert rows(taint) == [
        ("exact", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", DONE, (), 1),
        # reads keeps `estimated` (raw is fine)
        (
            "reads", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00",
            "downgrade", ("completed",), ("estimated",), 1,
        ),
        # `either` accepts estimated, which reads still holds: not broken, so neither it nor
        # after_either is in the plan; exact_only needs `completed`: rebuilt
        ("exact_only", "2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]  # fmt: skip
    assert taint.steps[-1].path == ("exact", "reads", "exact_only")


def test_a_rebuild_breaks_every_dependency(tmp_path: Path) -> None:
    entities = graph(tmp_path, PER_STATE)
    taint = plan(entities, "raw", "2024-03-10", "2024-03-11")
    day = ("2024-03-10T00:00:00+00:00", "2024-03-11T00:00:00+00:00")
    assert rows(taint) == [
        ("raw", *day, "rebuild", DONE, (), 1),
        ("reads", *day, "rebuild", BOTH, (), 1),
        # topological order, ties by name among the entities ready: once `either` is done,
        # after_either comes before exact_only
        ("either", *day, "rebuild", DONE, (), 1),
        ("after_either", *day, "rebuild", DONE, (), 1),
        ("exact_only", *day, "rebuild", DONE, (), 1),
    ]
    assert [step.path for step in taint.steps[3:]] == [
        ("raw", "reads", "either", "after_either"),
        ("raw", "reads", "exact_only"),
    ]


def test_a_downgraded_stretch_next_to_a_rebuilt_one_makes_separate_steps(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: raw, period: daily}
        - {name: exact, period: daily}
        - name: reads
          period: daily
          states:
            estimated:
              depends_on: [{entity: raw, dates: previous}]
            completed:
              depends_on: [exact]
        """,
    )
    # exact 03-10 … 03-12 → reads 03-10 … 03-12 lose `completed`; raw is not involved: three
    # downgraded days in one step
    assert rows(plan(entities, "exact", "2024-03-10", "2024-03-13"), "reads") == [
        (
            "reads", "2024-03-10T00:00:00+00:00", "2024-03-13T00:00:00+00:00",
            "downgrade", ("completed",), ("estimated",), 3,
        ),
    ]  # fmt: skip


# ---------------------------------------------------------------------- start, paths and order


def test_an_entity_start_clips_the_plan(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily, start: 2024-03-09}
        - {name: late, period: daily, start: "2024-03-12", depends_on: [src]}
        - {name: later, period: daily, start: "2024-04-01", depends_on: [late]}
        """,
    )
    taint = plan(entities, "src", "2024-03-01", "2024-03-14")
    assert rows(taint) == [
        # src only exists from 03-09
        ("src", "2024-03-09T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild", DONE, (), 5),
        # late only from 03-12
        ("late", "2024-03-12T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild", DONE, (), 2),
        # later starts after the taint: nothing to redo
    ]


def test_a_weekly_start_in_mid_week_counts_from_that_week(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: src, period: daily}
        - name: by_week
          period: weekly
          week_start: monday
          start: "2024-03-13"
          depends_on: [{entity: src, dates: all_week}]
        """,
    )
    taint = plan(entities, "src", "2024-03-01", "2024-03-20")
    # the first instance is the week holding 03-13, that of 03-11; the week of 03-18 reaches past 03-20
    assert rows(taint, "by_week") == [
        ("by_week", "2024-03-11T00:00:00+00:00", "2024-03-25T00:00:00+00:00", "rebuild", DONE, (), 2),
    ]


def test_steps_are_in_topological_order_then_time_and_paths_follow_the_edges(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: z_source, period: daily}
        - {name: a_branch, period: daily, depends_on: [{entity: z_source, dates: previous_2}]}
        - {name: m_join, period: daily, depends_on: [a_branch, z_source]}
        - {name: b_unrelated, period: daily}
        """,
    )
    taint = plan(entities, "z_source", "2024-03-10", "2024-03-11")
    assert [(step.entity, step.start[:10], step.end[:10], step.path) for step in taint.steps] == [
        ("z_source", "2024-03-10", "2024-03-11", ("z_source",)),
        # a_branch of 03-12 reads z_source of 03-10
        ("a_branch", "2024-03-12", "2024-03-13", ("z_source", "a_branch")),
        # m_join reads both the same day: 03-10 through z_source directly, 03-12 through a_branch
        ("m_join", "2024-03-10", "2024-03-11", ("z_source", "m_join")),
        ("m_join", "2024-03-12", "2024-03-13", ("z_source", "a_branch", "m_join")),
    ]
    assert "b_unrelated" not in taint.entities()


def test_an_unknown_entity_is_refused(wordcount: EntityGraph) -> None:
    with pytest.raises(UnknownEntityError, match="unknown entity 'nope'"):
        plan(wordcount, "nope", "2024-03-10", "2024-03-11")


def test_step_epochs_match_their_labels(wordcount: EntityGraph) -> None:
    taint = plan(wordcount, "articles_by_author", "2024-03-13", "2024-03-14")
    for step in taint.steps:
        assert at(step.start) == step.start_epoch
        assert at(step.end) == step.end_epoch
    assert taint.steps[-1].to_dict() == {
        "entity": "user_weekly_reads",
        "start": "2024-03-11T00:00:00+00:00",
        "end": "2024-03-18T00:00:00+00:00",
        "action": "rebuild",
        "states": ["estimated", "completed"],
        "keeps": [],
        "instances": 1,
        "path": ["articles_by_author", "words_count", "user_weekly_reads"],
    }


# ---------------------------------------------------------------------- time zones


PARIS_FROM_UTC = """
    - {name: utc_hits, period: hourly, timezone: UTC}
    - name: paris_instant
      period: daily
      timezone: Europe/Paris
      depends_on: [{entity: utc_hits, dates: same, timezones: instant}]
    - name: paris_calendar
      period: daily
      timezone: Europe/Paris
      depends_on: [{entity: utc_hits, dates: same, timezones: calendar}]
"""


def test_time_zones_the_last_utc_hour_of_a_day(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_FROM_UTC)
    # 03-10 23:00–24:00 UTC is 03-11 00:00–01:00 in Paris (UTC+1): by instant, the Paris day of 03-11;
    # by calendar, the hour reads "03-10 23:00" and belongs to the Paris day of 03-10
    taint = plan(entities, "utc_hits", "2024-03-10T23:00", "2024-03-11T00:00")
    assert rows(taint, "paris_instant", "paris_calendar") == [
        ("paris_calendar", "2024-03-10T00:00:00+01:00", "2024-03-11T00:00:00+01:00", "rebuild", DONE, (), 1),
        ("paris_instant", "2024-03-11T00:00:00+01:00", "2024-03-12T00:00:00+01:00", "rebuild", DONE, (), 1),
    ]


def test_time_zones_a_whole_utc_day(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_FROM_UTC)
    # the UTC day of 07-14 is 07-14 02:00 to 07-15 02:00 in Paris (UTC+2): two Paris days by
    # instant, the Paris day of 07-14 alone by calendar
    taint = plan(entities, "utc_hits", "2024-07-14", "2024-07-15")
    assert rows(taint, "paris_instant", "paris_calendar") == [
        ("paris_calendar", "2024-07-14T00:00:00+02:00", "2024-07-15T00:00:00+02:00", "rebuild", DONE, (), 1),
        ("paris_instant", "2024-07-14T00:00:00+02:00", "2024-07-16T00:00:00+02:00", "rebuild", DONE, (), 2),
    ]


def test_time_zones_the_first_utc_hour_of_a_day(tmp_path: Path) -> None:
    entities = graph(tmp_path, PARIS_FROM_UTC)
    # 03-10 00:00–01:00 UTC is 01:00–02:00 in Paris: the Paris day of 03-10 either way
    taint = plan(entities, "utc_hits", "2024-03-10T00:00", "2024-03-10T01:00")
    assert rows(taint, "paris_instant", "paris_calendar") == [
        ("paris_calendar", "2024-03-10T00:00:00+01:00", "2024-03-11T00:00:00+01:00", "rebuild", DONE, (), 1),
        ("paris_instant", "2024-03-10T00:00:00+01:00", "2024-03-11T00:00:00+01:00", "rebuild", DONE, (), 1),
    ]


def test_time_zones_the_plan_labels_the_taint_in_the_tainted_entity_zone(tmp_path: Path) -> None:
    entities = graph(
        tmp_path,
        """
        - {name: paris_days, period: daily, timezone: Europe/Paris}
        - name: utc_days
          period: daily
          depends_on: [{entity: paris_days, timezones: calendar}]
        """,
    )
    taint = plan(entities, "paris_days", "2024-03-31", "2024-04-01", tz="Europe/Paris")
    assert (taint.start, taint.end) == ("2024-03-31T00:00:00+01:00", "2024-04-01T00:00:00+02:00")
    # the Paris day of 03-31 is, by calendar, the UTC day of 03-31
    assert rows(taint, "utc_days") == [
        ("utc_days", "2024-03-31T00:00:00+00:00", "2024-04-01T00:00:00+00:00", "rebuild", DONE, (), 1),
    ]
