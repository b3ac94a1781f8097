"""Calendar boundaries, worked out by hand from a calendar and the Paris DST rules of 2024.

Paris is UTC+1 in winter and UTC+2 in summer; in 2024 the clocks jump 02:00 → 03:00 on Sunday
March 31 and fall back 03:00 → 02:00 on Sunday October 27. 2024-03-13 is a Wednesday, 2024 is
a leap year. Every expected moment is written as an ISO string with its offset.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from tracelake.temporal.periods import Calendar, Period, add_calendar, parse_moment, rewall

PARIS = ZoneInfo("Europe/Paris")
UTC = ZoneInfo("UTC")
HOUR = 3600


def at(text: str) -> int:
    """An ISO moment with its offset, as epoch seconds."""
    return parse_moment(text, UTC)


def test_a_paris_day_lasts_23_hours_when_the_clocks_go_forward() -> None:
    daily = Calendar(Period.DAILY, PARIS)
    start = daily.floor(at("2024-03-31T12:00:00+02:00"))
    assert start == at("2024-03-31T00:00:00+01:00")  # midnight is still winter time
    assert daily.end(start) == at("2024-04-01T00:00:00+02:00")
    assert daily.end(start) - start == 23 * HOUR


def test_a_paris_day_lasts_25_hours_when_the_clocks_go_back() -> None:
    daily = Calendar(Period.DAILY, PARIS)
    start = daily.floor(at("2024-10-27T12:00:00+01:00"))
    assert start == at("2024-10-27T00:00:00+02:00")
    assert daily.end(start) == at("2024-10-28T00:00:00+01:00")
    assert daily.end(start) - start == 25 * HOUR


def test_an_ordinary_paris_day_lasts_24_hours() -> None:
    daily = Calendar(Period.DAILY, PARIS)
    start = daily.floor(at("2024-03-13T23:59:59+01:00"))
    assert start == at("2024-03-13T00:00:00+01:00")
    assert daily.end(start) - start == 24 * HOUR


def test_both_occurrences_of_the_repeated_hour_floor_to_themselves_an_hour_apart() -> None:
    hourly = Calendar(Period.HOURLY, PARIS)
    first = at("2024-10-27T02:00:00+02:00")  # 00:00 UTC
    second = at("2024-10-27T02:00:00+01:00")  # 01:00 UTC
    assert second - first == HOUR
    assert hourly.floor(first) == first
    assert hourly.floor(second) == second
    assert hourly.floor(first + 1800) == first  # 02:30 summer time
    assert hourly.floor(second + 1800) == second  # 02:30 winter time
    assert hourly.end(first) == second
    assert hourly.label(first) == "2024-10-27T02:00:00+02:00"
    assert hourly.label(second) == "2024-10-27T02:00:00+01:00"


def test_the_hours_of_the_dst_days_number_23_and_25() -> None:
    hourly = Calendar(Period.HOURLY, PARIS)
    spring = hourly.starts(at("2024-03-31T00:00:00+01:00"), at("2024-04-01T00:00:00+02:00"))
    autumn = hourly.starts(at("2024-10-27T00:00:00+02:00"), at("2024-10-28T00:00:00+01:00"))
    assert len(spring) == 23
    assert len(autumn) == 25
    # 01:00 winter time is followed directly by 03:00 summer time
    assert hourly.label(spring[1]) == "2024-03-31T01:00:00+01:00"
    assert hourly.label(spring[2]) == "2024-03-31T03:00:00+02:00"


@pytest.mark.parametrize(
    ("week_start", "expected"),
    [
        (0, "2024-03-11T00:00:00+01:00"),  # Monday before Wednesday 03-13
        (6, "2024-03-10T00:00:00+01:00"),  # Sunday before it
        (2, "2024-03-13T00:00:00+01:00"),  # weeks starting on Wednesday: the day itself
        (3, "2024-03-07T00:00:00+01:00"),  # weeks starting on Thursday: the Thursday before
    ],
)
def test_a_week_starts_on_its_declared_day(week_start: int, expected: str) -> None:
    weekly = Calendar(Period.WEEKLY, PARIS, week_start)
    start = weekly.floor(at("2024-03-13T15:00:00+01:00"))
    assert weekly.label(start) == expected
    assert weekly.end(start) - start == 7 * 24 * HOUR


def test_the_week_over_the_spring_change_lasts_167_hours() -> None:
    weekly = Calendar(Period.WEEKLY, PARIS, 0)
    start = weekly.floor(at("2024-03-31T12:00:00+02:00"))
    assert weekly.label(start) == "2024-03-25T00:00:00+01:00"
    assert weekly.label(weekly.end(start)) == "2024-04-01T00:00:00+02:00"
    assert weekly.end(start) - start == 7 * 24 * HOUR - HOUR


def test_monthly_shift_crosses_the_year_end_both_ways() -> None:
    monthly = Calendar(Period.MONTHLY, PARIS)
    december = monthly.floor(at("2023-12-25T10:00:00+01:00"))
    assert monthly.label(december) == "2023-12-01T00:00:00+01:00"
    assert monthly.label(monthly.shift(december, 1)) == "2024-01-01T00:00:00+01:00"
    assert monthly.label(monthly.shift(december, 3)) == "2024-03-01T00:00:00+01:00"
    assert monthly.label(monthly.shift(december, 5)) == "2024-05-01T00:00:00+02:00"
    assert monthly.label(monthly.shift(december, 13)) == "2025-01-01T00:00:00+01:00"
    assert monthly.label(monthly.shift(december, -12)) == "2022-12-01T00:00:00+01:00"
    january = monthly.shift(december, 1)
    assert monthly.label(monthly.shift(january, -1)) == "2023-12-01T00:00:00+01:00"
    # February 2024 has 29 days
    february = monthly.shift(january, 1)
    assert monthly.end(february) - february == 29 * 24 * HOUR


def test_ceil_is_the_next_boundary_unless_on_one() -> None:
    daily = Calendar(Period.DAILY, PARIS)
    midnight = at("2024-03-13T00:00:00+01:00")
    assert daily.ceil(midnight) == midnight
    assert daily.ceil(midnight + 1) == at("2024-03-14T00:00:00+01:00")
    assert daily.ceil(at("2024-03-31T05:00:00+02:00")) == at("2024-04-01T00:00:00+02:00")


def test_starts_lists_every_instance_overlapping_the_range() -> None:
    daily = Calendar(Period.DAILY, UTC)
    # [03-10 12:00, 03-12 00:00) overlaps the days of 03-10 and 03-11, not 03-12
    starts = daily.starts(at("2024-03-10T12:00:00+00:00"), at("2024-03-12T00:00:00+00:00"))
    assert [daily.label(start) for start in starts] == [
        "2024-03-10T00:00:00+00:00",
        "2024-03-11T00:00:00+00:00",
    ]
    # a range ending on a boundary does not reach the next day
    assert len(daily.starts(at("2024-03-10T00:00:00+00:00"), at("2024-03-11T00:00:00+00:00"))) == 1


@pytest.mark.parametrize(
    ("moment", "count", "expected"),
    [
        ("2024-01-31T00:00:00+01:00", 1, "2024-02-29T00:00:00+01:00"),  # clamped to Feb 29 (leap year)
        ("2023-01-31T00:00:00+01:00", 1, "2023-02-28T00:00:00+01:00"),  # Feb 28 in a common year
        ("2024-03-31T00:00:00+01:00", -1, "2024-02-29T00:00:00+01:00"),
        ("2024-01-31T00:00:00+01:00", 2, "2024-03-31T00:00:00+01:00"),  # summer time only from 02:00
        ("2024-02-29T12:00:00+01:00", 1, "2024-03-29T12:00:00+01:00"),
        ("2024-03-29T12:00:00+01:00", 1, "2024-04-29T12:00:00+02:00"),  # summer time by then
        ("2024-12-31T10:00:00+01:00", 2, "2025-02-28T10:00:00+01:00"),  # across the year end
        ("2024-10-31T00:00:00+01:00", 1, "2024-11-30T00:00:00+01:00"),
        ("2024-05-15T08:30:00+02:00", -5, "2023-12-15T08:30:00+01:00"),
    ],
)
def test_add_calendar_by_months_keeps_the_day_clamped(moment: str, count: int, expected: str) -> None:
    assert add_calendar(at(moment), count, "months", PARIS) == at(expected)


def test_add_calendar_counts_days_and_weeks_on_the_wall_clock() -> None:
    noon = at("2024-03-30T12:00:00+01:00")
    assert add_calendar(noon, 1, "days", PARIS) == at("2024-03-31T12:00:00+02:00")  # 23 hours later
    assert add_calendar(noon, 1, "days", PARIS) - noon == 23 * HOUR
    autumn_noon = at("2024-10-26T12:00:00+02:00")
    assert add_calendar(autumn_noon, 1, "days", PARIS) == at("2024-10-27T12:00:00+01:00")  # 25 hours later
    assert add_calendar(autumn_noon, 1, "days", PARIS) - autumn_noon == 25 * HOUR
    wednesday = at("2024-03-27T00:00:00+01:00")
    assert add_calendar(wednesday, 1, "weeks", PARIS) == at("2024-04-03T00:00:00+02:00")
    assert add_calendar(at("2024-04-03T00:00:00+02:00"), -1, "weeks", PARIS) == wednesday


def test_add_calendar_counts_hours_as_elapsed_time() -> None:
    # 01:30 winter time + 1 hour is 03:30 summer time: 02:30 does not exist that night
    def plus_hours(moment: str, count: int) -> int:
        return add_calendar(at(moment), count, "hours", PARIS)

    assert plus_hours("2024-03-31T01:30:00+01:00", 1) == at("2024-03-31T03:30:00+02:00")
    assert plus_hours("2024-10-27T02:00:00+02:00", 1) == at("2024-10-27T02:00:00+01:00")
    # 36 hours from midnight on the 23-hour day: 23 hours to the next midnight, then 13 more
    assert plus_hours("2024-03-31T00:00:00+01:00", 36) == at("2024-04-01T13:00:00+02:00")


def test_rewall_keeps_the_wall_clock_reading() -> None:
    # midnight in Paris (23:00 UTC the evening before) read as midnight UTC
    assert rewall(at("2024-03-10T00:00:00+01:00"), PARIS, UTC) == at("2024-03-10T00:00:00+00:00")
    assert rewall(at("2024-07-14T00:00:00+02:00"), PARIS, UTC) == at("2024-07-14T00:00:00+00:00")
    assert rewall(at("2024-03-10T00:00:00+00:00"), UTC, PARIS) == at("2024-03-10T00:00:00+01:00")
    assert rewall(at("2024-07-14T18:45:00+00:00"), UTC, PARIS) == at("2024-07-14T18:45:00+02:00")
    new_york = ZoneInfo("America/New_York")
    assert rewall(at("2024-03-10T00:00:00+01:00"), PARIS, new_york) == at("2024-03-10T00:00:00-05:00")


def test_parse_moment_reads_dates_local_to_the_zone_unless_they_carry_an_offset() -> None:
    assert parse_moment("2024-03-31", PARIS) == at("2024-03-31T00:00:00+01:00")
    assert parse_moment("2024-04-01", PARIS) == at("2024-04-01T00:00:00+02:00")
    assert parse_moment("2024-03-31T05:00", PARIS) == at("2024-03-31T03:00:00+00:00")
    assert parse_moment(" 2024-03-31T05:00:00+00:00 ", PARIS) == at("2024-03-31T05:00:00+00:00")
    assert parse_moment("2024-03-31T05:00:00Z", PARIS) == at("2024-03-31T05:00:00+00:00")


def test_labels_carry_the_zone_offset() -> None:
    assert Calendar(Period.DAILY, PARIS).label(at("2024-03-30T23:00:00+00:00")) == "2024-03-31T00:00:00+01:00"
    assert Calendar(Period.DAILY, UTC).label(at("2024-03-30T23:00:00+00:00")) == "2024-03-30T23:00:00+00:00"
