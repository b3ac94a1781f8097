"""Calendar periods in a time zone: where an instance of an hourly, daily, weekly or monthly entity
starts and ends.

An entity's instances tile time: each is a half-open interval [start, end) of epoch seconds,
with boundaries at local midnight (daily), the declared first day of the week (weekly), the
first of the month (monthly) or the local hour (hourly) in the entity's time zone. So a daily
instance on a DST change day lasts 23 or 25 hours, and a week or a month is whatever the
calendar says. All arithmetic is on integer epoch seconds; `datetime` is only used to find a
boundary, through `zoneinfo`, which resolves the ambiguous and missing local times of DST.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

HOUR = 3600
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class Period(StrEnum):
    HOURLY = "hourly"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"


@dataclass(frozen=True)
class Calendar:
    """The instance boundaries of one period in one time zone (`week_start`: 0 = Monday)."""

    period: Period
    tz: ZoneInfo
    week_start: int = 0

    def floor(self, moment: int) -> int:
        """The start of the instance that holds `moment`."""
        local = datetime.fromtimestamp(moment, self.tz)
        if self.period is Period.HOURLY:
            # Keeps `fold`, so the repeated hour of a DST fall-back floors to itself.
            return int(local.replace(minute=0, second=0, microsecond=0).timestamp())
        day = local.date()
        if self.period is Period.WEEKLY:
            day -= timedelta(days=(day.weekday() - self.week_start) % 7)
        elif self.period is Period.MONTHLY:
            day = day.replace(day=1)
        return self._midnight(day)

    def ceil(self, moment: int) -> int:
        """The first instance boundary at or after `moment`."""
        start = self.floor(moment)
        return start if start == moment else self.shift(start, 1)

    def shift(self, start: int, count: int) -> int:
        """The start of the instance `count` instances after (or before) the one starting at `start`."""
        if self.period is Period.HOURLY:
            return start + count * HOUR
        day = datetime.fromtimestamp(start, self.tz).date()
        if self.period is Period.DAILY:
            day += timedelta(days=count)
        elif self.period is Period.WEEKLY:
            day += timedelta(weeks=count)
        else:
            months = day.year * 12 + day.month - 1 + count
            day = date(months // 12, months % 12 + 1, 1)
        return self._midnight(day)

    def end(self, start: int) -> int:
        return self.shift(start, 1)

    def starts(self, lo: int, hi: int) -> list[int]:
        """The starts of the instances that overlap [lo, hi)."""
        found: list[int] = []
        if hi <= lo:
            return found
        start = self.floor(lo)
        while start < hi:
            found.append(start)
            start = self.shift(start, 1)
        return found

    def count(self, lo: int, hi: int) -> int:
        """How many instances [lo, hi) holds, both ends on instance boundaries (no enumeration)."""
        if hi <= lo:
            return 0
        if self.period is Period.HOURLY:
            return (hi - lo) // HOUR
        first = datetime.fromtimestamp(lo, self.tz).date()
        last = datetime.fromtimestamp(hi, self.tz).date()
        if self.period is Period.DAILY:
            return (last - first).days
        if self.period is Period.WEEKLY:
            return (last - first).days // 7
        return (last.year - first.year) * 12 + last.month - first.month

    def label(self, moment: int) -> str:
        """ISO 8601 in the calendar's time zone, with its offset: `2024-03-31T00:00:00+01:00`."""
        return datetime.fromtimestamp(moment, self.tz).isoformat()

    def _midnight(self, day: date) -> int:
        return int(datetime(day.year, day.month, day.day, tzinfo=self.tz).timestamp())


def add_calendar(moment: int, count: int, unit: str, tz: ZoneInfo) -> int:
    """`moment` plus `count` hours, days, weeks or months, counted on the wall clock of `tz`.

    A day is a calendar day (23 or 25 hours across DST); a month keeps the day of the month,
    clamped to the month's last day.
    """
    if unit == "hours":
        return moment + count * HOUR
    local = datetime.fromtimestamp(moment, tz).replace(tzinfo=None)
    if unit == "days":
        local += timedelta(days=count)
    elif unit == "weeks":
        local += timedelta(weeks=count)
    else:
        months = local.year * 12 + local.month - 1 + count
        year, month = months // 12, months % 12 + 1
        following = date(year + month // 12, month % 12 + 1, 1)
        local = local.replace(year=year, month=month, day=min(local.day, (following - timedelta(days=1)).day))
    return int(local.replace(tzinfo=tz).timestamp())


def rewall(moment: int, source: ZoneInfo, target: ZoneInfo) -> int:
    """The instant whose wall clock in `target` reads what `moment`'s wall clock reads in `source`.

    The `calendar` time-zone rule of a dependency maps "the same local day" across zones with it.
    """
    local = datetime.fromtimestamp(moment, source).replace(tzinfo=None)
    return int(local.replace(tzinfo=target).timestamp())


def parse_moment(text: str, tz: ZoneInfo) -> int:
    """An ISO 8601 date or date-time as epoch seconds; without an offset it is local to `tz`."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return int(moment.timestamp())


def utc_label(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()
