"""A dependency's date range, both ways: what an instance needs, and what a taint reaches.

`needed` answers readiness: which stretch of upstream time the instance [start, end) of the
downstream entity reads. `affected` answers reprocessing: given tainted upstream time, which
downstream instances read any of it. They are duals — a downstream instance is in
`affected(T)` exactly when `needed` of it overlaps T — and the tests check that by brute force.
`affected` works on whole spans with a few calendar operations per span, never instance by
instance, so a year of a sliding window costs what one day does.

Times are epoch seconds. With the `calendar` time-zone rule, upstream and downstream times are
matched by wall clock (`rewall`); otherwise by instant.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelake.temporal.entities import Dependency, Entity, Kind, RangeKind, TzRule
from tracelake.temporal.periods import Calendar, Period, add_calendar, rewall
from tracelake.temporal.spans import Span, Spans, normalize

FOREVER = 2**62


@dataclass(frozen=True)
class DependencyEdge:
    """One dependency of one state of `downstream`, with both entities, ready for time arithmetic."""

    downstream: Entity
    state: str
    upstream: Entity
    dependency: Dependency

    @property
    def range(self) -> RangeKind:
        return self.dependency.range.kind

    @property
    def by_wall_clock(self) -> bool:
        calendar_rule = self.dependency.timezones is TzRule.CALENDAR
        return calendar_rule and self.upstream.timezone != self.downstream.timezone

    def to_downstream_clock(self, moment: int) -> int:
        if not self.by_wall_clock or abs(moment) >= FOREVER:
            return moment
        return rewall(moment, self.upstream.tz, self.downstream.tz)

    def to_upstream_clock(self, moment: int) -> int:
        if not self.by_wall_clock or abs(moment) >= FOREVER:
            return moment
        return rewall(moment, self.downstream.tz, self.upstream.tz)


def within_calendar(edge: DependencyEdge, period: Period) -> Calendar:
    """The calendar day/week/month of `all_week`, `to_date` …, in the downstream's time zone."""
    week_start = edge.downstream.week_start
    if week_start is None:
        week_start = edge.upstream.week_start or 0
    return Calendar(period, edge.downstream.tz, week_start)


def needed(edge: DependencyEdge, start: int) -> Span:
    """The upstream time [lo, hi) that the downstream instance starting at `start` reads, on the
    upstream's clock. For `latest` it is the one upstream instance that is latest by its end."""
    lo, hi = _needed_on_downstream_clock(edge, start)
    return edge.to_upstream_clock(lo), edge.to_upstream_clock(hi)


def _needed_on_downstream_clock(edge: DependencyEdge, start: int) -> Span:
    dates = edge.dependency.range
    upstream = edge.upstream
    if edge.downstream.kind is Kind.STATIC:
        return -FOREVER, FOREVER
    own = edge.downstream.calendar
    end = own.end(start)
    if upstream.kind is Kind.STATIC:
        return start, end  # the referential as it was while the instance's period ran
    kind = dates.kind
    if kind is RangeKind.SAME:
        return start, end
    if kind is RangeKind.ALL:
        return -FOREVER, end
    if kind is RangeKind.WITHIN:
        calendar = within_calendar(edge, dates.period)  # type: ignore[arg-type]  # checked definitions: WITHIN has a period, cumulative entities a span
        return calendar.floor(start), calendar.ceil(end)
    if kind is RangeKind.LAST:
        return add_calendar(end, -dates.count, dates.unit, edge.downstream.tz), end
    if kind is RangeKind.WINDOW:
        return own.shift(start, -(edge.downstream.window or 1) + 1), end
    if kind is RangeKind.PREVIOUS:
        return own.shift(start, -dates.count), own.shift(start, -dates.count + 1)
    if kind is RangeKind.TO_DATE:
        return within_calendar(edge, edge.downstream.cumulative_over).floor(start), end  # type: ignore[arg-type]  # checked definitions: WITHIN has a period, cumulative entities a span
    # LATEST: the last upstream instance that ends by this instance's end (upstream clock).
    theirs = upstream.calendar
    boundary = theirs.floor(edge.to_upstream_clock(end))
    latest = theirs.shift(boundary, -1), boundary
    return edge.to_downstream_clock(latest[0]), edge.to_downstream_clock(latest[1])


def affected(edge: DependencyEdge, tainted: Spans) -> Spans:
    """The downstream instances (as spans of their starts and ends) whose needed time overlaps
    `tainted` upstream time (upstream clock). Not clipped to any horizon: the caller does that."""
    if edge.downstream.kind is Kind.STATIC:
        return ()
    return normalize(_affected_span(edge, span) for span in tainted)


def _affected_span(edge: DependencyEdge, span: Span) -> Span:
    own = edge.downstream.calendar
    dates = edge.dependency.range
    kind = dates.kind
    if kind is RangeKind.LATEST and edge.upstream.kind is not Kind.STATIC:
        # D reads upstream u when u is the last one ending by D's end: D is affected when its
        # end falls from the end of the first tainted instance to the end of the first clean one.
        theirs = edge.upstream.calendar
        first_end = theirs.end(theirs.floor(span[0]))
        clean_end = theirs.end(theirs.ceil(span[1]))
        lo, hi = edge.to_downstream_clock(first_end), edge.to_downstream_clock(clean_end)
        return own.floor(lo - 1), own.floor(hi - 1)
    a, b = edge.to_downstream_clock(span[0]), edge.to_downstream_clock(span[1])
    if edge.upstream.kind is Kind.STATIC or kind is RangeKind.SAME:
        return own.floor(a), own.ceil(b)
    if kind is RangeKind.ALL:
        return own.floor(a), FOREVER
    if kind is RangeKind.WITHIN:
        calendar = within_calendar(edge, dates.period)  # type: ignore[arg-type]  # checked definitions: WITHIN has a period, cumulative entities a span
        return own.floor(calendar.floor(a)), own.ceil(calendar.ceil(b))
    if kind is RangeKind.LAST:
        return own.floor(a), _first_reading_after(edge, own.floor(a), b)
    if kind is RangeKind.WINDOW:
        return own.floor(a), own.shift(own.ceil(b), (edge.downstream.window or 1) - 1)
    if kind is RangeKind.PREVIOUS:
        return own.shift(own.floor(a), dates.count), own.shift(own.ceil(b), dates.count)
    # TO_DATE: forward to the end of the cumulative period that holds the taint's end
    calendar = within_calendar(edge, edge.downstream.cumulative_over)  # type: ignore[arg-type]  # checked definitions: WITHIN has a period, cumulative entities a span
    return own.floor(a), own.ceil(calendar.ceil(b))


def _first_reading_after(edge: DependencyEdge, first: int, moment: int) -> int:
    """The first downstream instance (from `first` on) whose `last N units` start at or after
    `moment`. Searched from an estimate: calendar arithmetic does not invert (a month back from
    Nov 30 is Oct 30, a month on from Oct 31 is Nov 30; a day across DST is 23 or 25 hours)."""
    own, dates, tz = edge.downstream.calendar, edge.dependency.range, edge.downstream.tz

    def reads_from(start: int) -> int:
        return add_calendar(own.end(start), -dates.count, dates.unit, tz)

    clean = max(first, own.floor(add_calendar(moment, dates.count, dates.unit, tz) - 1))
    while reads_from(clean) < moment:
        clean = own.shift(clean, 1)
    while clean > first and reads_from(own.shift(clean, -1)) >= moment:
        clean = own.shift(clean, -1)
    return clean
