"""`needed` and `affected` are exact duals, checked by brute force.

For every edge below (each range kind, each entity kind, every period, Europe/Paris across both
DST changes of 2024, weeks starting Monday and Sunday, both time-zone rules) and several
tainted upstream spans aligned to the upstream calendar, the downstream instances in
`affected(edge, T)` must be exactly those D, enumerated one by one with `calendar.starts`, whose
`needed(edge, D)` overlaps T. `affected` must also cut on downstream instance boundaries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tracelake.temporal.entities import (
    DateRange,
    Dependency,
    Entity,
    EntityState,
    Kind,
    RangeKind,
    TzRule,
    check,
)
from tracelake.temporal.periods import Calendar, Period, parse_moment
from tracelake.temporal.ranges import FOREVER, DependencyEdge, affected, needed
from tracelake.temporal.spans import Span, Spans, covers, normalize, overlaps

PARIS = "Europe/Paris"
MONDAY, SUNDAY = 0, 6


def entity(
    name: str,
    period: Period | None,
    *,
    timezone: str = PARIS,
    kind: Kind = Kind.TIME_SERIES,
    week_start: int | None = None,
    window: int | None = None,
    cumulative_over: Period | None = None,
) -> Entity:
    return Entity(
        name=name,
        period=period,
        timezone=timezone,
        kind=kind,
        week_start=week_start,
        window=window,
        cumulative_over=cumulative_over,
    )


def edge(downstream: Entity, upstream: Entity, dates: str, timezones: TzRule | None = None) -> DependencyEdge:
    return DependencyEdge(
        downstream,
        "completed",
        upstream,
        Dependency(upstream.name, DateRange.parse(dates), timezones=timezones),
    )


HOURLY = entity("hourly", Period.HOURLY)
DAILY = entity("daily", Period.DAILY)
WEEKLY_MON = entity("weekly_mon", Period.WEEKLY, week_start=MONDAY)
WEEKLY_SUN = entity("weekly_sun", Period.WEEKLY, week_start=SUNDAY)
MONTHLY = entity("monthly", Period.MONTHLY)
HOURLY_UTC = entity("hourly_utc", Period.HOURLY, timezone="UTC")
DAILY_UTC = entity("daily_utc", Period.DAILY, timezone="UTC")
DAILY_SNAPSHOT = entity("daily_snapshot", Period.DAILY, kind=Kind.SNAPSHOT)
MONTHLY_SNAPSHOT = entity("monthly_snapshot", Period.MONTHLY, kind=Kind.SNAPSHOT)
REFERENTIAL = entity("referential", None, kind=Kind.STATIC)

EDGES: dict[str, DependencyEdge] = {
    # same
    "daily same hourly": edge(DAILY, HOURLY, "same"),
    "hourly same daily": edge(entity("h", Period.HOURLY), DAILY, "same"),
    "weekly(mon) same daily": edge(WEEKLY_MON, DAILY, "same"),
    "weekly(sun) same daily": edge(WEEKLY_SUN, DAILY, "same"),
    "monthly same weekly(mon)": edge(MONTHLY, WEEKLY_MON, "same"),
    "weekly(sun) same monthly": edge(WEEKLY_SUN, MONTHLY, "same"),
    "daily same monthly": edge(DAILY, MONTHLY, "same"),
    # all
    "daily all daily": edge(entity("d", Period.DAILY), DAILY, "all"),
    "weekly(mon) all hourly": edge(WEEKLY_MON, HOURLY, "all"),
    # within
    "daily all_week daily (downstream week starts sunday)": edge(
        entity("d", Period.DAILY, week_start=SUNDAY), entity("u", Period.DAILY), "all_week"
    ),
    "daily all_week weekly(mon) (week start of the upstream)": edge(DAILY, WEEKLY_MON, "all_week"),
    "weekly(mon) all_week daily": edge(WEEKLY_MON, DAILY, "all_week"),
    "weekly(sun) all_month monthly": edge(WEEKLY_SUN, MONTHLY, "all_month"),
    "hourly all_day hourly": edge(entity("h", Period.HOURLY), HOURLY, "all_day"),
    "monthly all_week daily (week start monday)": edge(
        entity("m", Period.MONTHLY, week_start=MONDAY), DAILY, "all_week"
    ),
    # last N units
    "daily last_36_hours hourly": edge(DAILY, HOURLY, "last_36_hours"),
    "hourly last_36_hours hourly": edge(entity("h", Period.HOURLY), HOURLY, "last_36_hours"),
    "daily last_7_days daily": edge(entity("d", Period.DAILY), DAILY, "last_7_days"),
    "weekly(mon) last_2_weeks daily": edge(WEEKLY_MON, DAILY, "last_2_weeks"),
    "monthly last_3_months monthly": edge(entity("m", Period.MONTHLY), MONTHLY, "last_3_months"),
    "weekly(sun) last_1_months daily": edge(WEEKLY_SUN, DAILY, "last_1_months"),
    "daily last_1_months daily": edge(entity("d", Period.DAILY), DAILY, "last_1_months"),
    "hourly last_1_months daily": edge(entity("h", Period.HOURLY), DAILY, "last_1_months"),
    "hourly last_2_days hourly": edge(entity("h", Period.HOURLY), HOURLY, "last_2_days"),
    # sliding window
    "daily window 3 of daily": edge(
        entity("w", Period.DAILY, kind=Kind.SLIDING_WINDOW, window=3), DAILY, "window"
    ),
    "weekly(sun) window 3 of daily": edge(
        entity("w", Period.WEEKLY, kind=Kind.SLIDING_WINDOW, window=3, week_start=SUNDAY), DAILY, "window"
    ),
    "hourly window 3 of hourly": edge(
        entity("w", Period.HOURLY, kind=Kind.SLIDING_WINDOW, window=3), HOURLY, "window"
    ),
    # previous
    "daily previous daily": edge(entity("d", Period.DAILY), DAILY, "previous"),
    "daily previous_2 daily": edge(entity("d", Period.DAILY), DAILY, "previous_2"),
    "hourly previous_2 hourly": edge(entity("h", Period.HOURLY), HOURLY, "previous_2"),
    "monthly previous_2 monthly": edge(entity("m", Period.MONTHLY), MONTHLY, "previous_2"),
    "daily previous_2 hourly": edge(DAILY, HOURLY, "previous_2"),
    # cumulative
    "daily cumulative over month": edge(
        entity("c", Period.DAILY, kind=Kind.CUMULATIVE, cumulative_over=Period.MONTHLY), DAILY, "to_date"
    ),
    "daily cumulative over week (monday)": edge(
        entity("c", Period.DAILY, kind=Kind.CUMULATIVE, cumulative_over=Period.WEEKLY, week_start=MONDAY),
        DAILY,
        "to_date",
    ),
    "daily cumulative over week (sunday)": edge(
        entity("c", Period.DAILY, kind=Kind.CUMULATIVE, cumulative_over=Period.WEEKLY, week_start=SUNDAY),
        HOURLY,
        "to_date",
    ),
    "hourly cumulative over day": edge(
        entity("c", Period.HOURLY, kind=Kind.CUMULATIVE, cumulative_over=Period.DAILY), HOURLY, "to_date"
    ),
    # latest
    "weekly(mon) latest monthly snapshot": edge(WEEKLY_MON, MONTHLY_SNAPSHOT, "latest"),
    "daily latest monthly snapshot": edge(DAILY, MONTHLY_SNAPSHOT, "latest"),
    "daily latest daily snapshot": edge(entity("d", Period.DAILY), DAILY_SNAPSHOT, "latest"),
    "hourly latest daily snapshot": edge(HOURLY, DAILY_SNAPSHOT, "latest"),
    "monthly latest weekly(sun)": edge(MONTHLY, WEEKLY_SUN, "latest"),
    "daily latest daily(utc), calendar rule": edge(DAILY, DAILY_UTC, "latest", TzRule.CALENDAR),
    # static upstream
    "daily reads a static referential": edge(DAILY, REFERENTIAL, "all"),
    "hourly reads a static referential": edge(HOURLY, REFERENTIAL, "all"),
    # time zones
    "paris daily same utc daily, instant": edge(DAILY, DAILY_UTC, "same", TzRule.INSTANT),
    "paris daily same utc daily, calendar": edge(DAILY, DAILY_UTC, "same", TzRule.CALENDAR),
    "paris daily same utc hourly, instant": edge(DAILY, HOURLY_UTC, "same", TzRule.INSTANT),
    "paris daily same utc hourly, calendar": edge(DAILY, HOURLY_UTC, "same", TzRule.CALENDAR),
    "paris weekly(mon) all_week utc daily, calendar": edge(
        WEEKLY_MON, DAILY_UTC, "all_week", TzRule.CALENDAR
    ),
    "utc daily last_7_days paris daily, calendar": edge(
        entity("d", Period.DAILY, timezone="UTC"), DAILY, "last_7_days", TzRule.CALENDAR
    ),
    "paris cumulative over month of utc daily, calendar": edge(
        entity("c", Period.DAILY, kind=Kind.CUMULATIVE, cumulative_over=Period.MONTHLY),
        DAILY_UTC,
        "to_date",
        TzRule.CALENDAR,
    ),
}


# Two stretches of about three months, each around one of Paris' DST changes in 2024
# (2024-03-31 02:00 → 03:00, 2024-10-27 03:00 → 02:00), with month ends of 30, 31 and 29 days.
WINDOWS = {
    "spring": ("2024-01-15", "2024-04-20"),
    "autumn": ("2024-09-10", "2024-12-10"),
}
# Moments the tainted spans start at (local to the upstream); each is floored to the upstream calendar.
TAINT_STARTS = {
    "spring": [
        "2024-01-30T00:00", "2024-01-31T23:00", "2024-02-01T00:00", "2024-02-28T10:00", "2024-02-29T00:00",
        "2024-03-10T07:00", "2024-03-30T22:00", "2024-03-31T01:00", "2024-03-31T03:00",
        "2024-04-01T00:00",
    ],
    "autumn": [
        "2024-09-30T23:00", "2024-10-26T23:00", "2024-10-27T01:00", "2024-10-27T02:00",
        "2024-10-27T03:00", "2024-10-30T00:00", "2024-10-31T00:00", "2024-11-15T12:00",
    ],
}  # fmt: skip
LENGTHS = (1, 2, 5)  # tainted instances per span


def tainted_spans(edge: DependencyEdge, window: str) -> Iterator[Spans]:
    upstream = edge.upstream
    tz = upstream.tz
    starts = [parse_moment(text, tz) for text in TAINT_STARTS[window]]
    if upstream.kind is Kind.STATIC:
        for start in starts:  # a static entity is tainted over any stretch of time
            yield ((start, start + 5 * 3600),)
        return
    calendar = upstream.calendar
    for start in starts:
        for length in LENGTHS:
            first = calendar.floor(start)
            yield ((first, calendar.shift(first, length)),)
    # two disjoint stretches at once
    a, b = calendar.floor(starts[0]), calendar.floor(starts[-1])
    if calendar.shift(a, 1) < b:
        yield normalize([(a, calendar.shift(a, 1)), (b, calendar.shift(b, 1))])


def downstream_instances(edge: DependencyEdge, window: str) -> list[Span]:
    own: Calendar = edge.downstream.calendar
    lo, hi = (parse_moment(text, edge.downstream.tz) for text in WINDOWS[window])
    return [(start, own.end(start)) for start in own.starts(lo, hi)]


def label(edge: DependencyEdge, moment: int) -> str:
    return datetime.fromtimestamp(moment, ZoneInfo(edge.downstream.timezone)).isoformat()


def check_duality(name: str, edge: DependencyEdge, window: str) -> None:
    instances = downstream_instances(edge, window)
    reads = [needed(edge, start) for start, _ in instances]
    own = edge.downstream.calendar
    for taint in tainted_spans(edge, window):
        found = affected(edge, taint)
        for lo, hi in found:
            for boundary in (lo, hi):
                assert abs(boundary) >= FOREVER or own.floor(boundary) == boundary, (
                    f"{name}: affected({taint}) cuts inside an instance at {label(edge, boundary)}"
                )
        wrong = [
            (label(edge, start), "expected" if expected else "unexpected")
            for (start, end), read in zip(instances, reads, strict=True)
            if (expected := overlaps(taint, *read)) != covers(found, start, end)
        ]
        assert not wrong, f"{name}: taint {[(label(edge, a), label(edge, b)) for a, b in taint]}: {wrong}"


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("name", sorted(EDGES))
def test_affected_is_exactly_the_instances_whose_needed_time_overlaps_the_taint(
    name: str, window: str
) -> None:
    check_duality(name, EDGES[name], window)


def test_the_calendar_rule_between_hourly_entities_is_refused() -> None:
    # A repeated or missing wall-clock hour across DST would read an empty or a double span, and
    # `affected` could not mirror it: the rule is for days and longer, hours match by instant.
    entities = {
        "paris_hits": replace(HOURLY, name="paris_hits"),
        "utc_hits": replace(
            HOURLY_UTC,
            name="utc_hits",
            states=(EntityState("completed", (Dependency("paris_hits", DateRange.parse("same"),
                                                         timezones=TzRule.CALENDAR),)),),
        ),
    }  # fmt: skip

    problems = check(entities)

    assert [problem.reason for problem in problems] == [
        "utc_hits: the `calendar` time-zone rule cannot match hours to hours: use `timezones: instant`"
    ]


def test_the_edges_cover_every_range_kind_and_every_entity_kind() -> None:
    edges = list(EDGES.values())
    assert {edge.range for edge in edges} == set(RangeKind)
    assert {edge.upstream.kind for edge in edges} | {edge.downstream.kind for edge in edges} == set(Kind) - {
        Kind.STATIC
    } | {Kind.STATIC}
    assert {edge.downstream.period for edge in edges} == set(Period)
    assert {edge.dependency.timezones for edge in edges} == {None, TzRule.INSTANT, TzRule.CALENDAR}


# -------------------------------------------------------------- calendar arithmetic that does not invert


def paris(text: str) -> int:
    return parse_moment(text, ZoneInfo(PARIS))


def test_last_1_months_reaches_the_day_whose_window_starts_on_a_clamped_date() -> None:
    monthly_window = edge(entity("d", Period.DAILY), DAILY, "last_1_months")
    # The instance of Feb 28 ends Feb 29, so it reads [Feb 29 - 1 month, Feb 29) = [Jan 29, Feb 29).
    assert needed(monthly_window, paris("2024-02-28")) == (paris("2024-01-29"), paris("2024-02-29"))
    # A taint on Jan 30 therefore reaches it; the instance of Feb 29 reads [Feb 1, Mar 1) and is clean.
    # So the affected days are Jan 30 … Feb 28, the span [Jan 30, Feb 29).
    assert affected(monthly_window, ((paris("2024-01-30"), paris("2024-01-31")),)) == (
        (paris("2024-01-30"), paris("2024-02-29")),
    )


def test_last_2_days_of_an_hourly_entity_reaches_every_hour_reading_the_repeated_hour() -> None:
    two_days = edge(entity("h", Period.HOURLY), HOURLY, "last_2_days")
    # The hour 2024-10-29 01:00+01:00 ends at 02:00+01:00; two days earlier is 2024-10-27 02:00, which
    # happens twice, and `needed` takes the first one (02:00+02:00): it reads the first 02:00 hour.
    assert needed(two_days, paris("2024-10-29T01:00")) == (
        paris("2024-10-27T02:00+02:00"),
        paris("2024-10-29T02:00+01:00"),
    )
    # So tainting that first 02:00 hour must reach every hour up to and including 10-29 01:00+01:00.
    first_two_oclock = (paris("2024-10-27T02:00+02:00"), paris("2024-10-27T02:00+01:00"))
    assert affected(two_days, (first_two_oclock,)) == (
        (first_two_oclock[0], paris("2024-10-29T02:00+01:00")),
    )
