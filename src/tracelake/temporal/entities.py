"""Entities: time-partitioned data, its states, and what each state depends on.

An entity (Dailymotion's word) is a table or file set produced in time slices: `words_count`
daily, `user_weekly_reads` weekly. Each instance (one slice) can hold several states
(`estimated`, then `completed`), and each state declares its own dependencies: which entity,
which of its instances (a date range relative to the instance: the same period, all of the
week, the last 30 days, the latest available, …) and in which accepted states. Definitions are
YAML (`tracelake.temporal.definitions` reads them); `check` finds what makes a set unusable:
unknown entities and states, ranges that can never be satisfied, time zones mixed without a
rule, dependency cycles.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from tracelake.model import Problem
from tracelake.temporal.periods import WEEKDAYS, Calendar, Period

DEFAULT_STATE = "completed"


class Kind(StrEnum):
    """How an instance relates to time, which sets the default range of its dependencies."""

    TIME_SERIES = "time_series"  # the data of its own period
    SLIDING_WINDOW = "sliding_window"  # the data of its last `window` periods
    CUMULATIVE = "cumulative"  # the data since the start of its `cumulative_over` period
    SNAPSHOT = "snapshot"  # a whole referential as of its period; readers take the latest
    STATIC = "static"  # one instance, no period


class TzRule(StrEnum):
    """How a dependency between entities of different time zones matches periods."""

    INSTANT = "instant"  # the same moments: a Paris day is 23:00–23:00 UTC
    CALENDAR = "calendar"  # the same wall-clock dates: the Paris day of 03-10 needs the UTC day of 03-10


class RangeKind(StrEnum):
    SAME = "same"  # the instances overlapping this instance's own period
    ALL = "all"  # every instance (a static upstream, full history)
    WITHIN = "within"  # overlapping the calendar day/week/month that contains this instance
    LAST = "last"  # overlapping the `count` `unit`s that end where this instance ends
    WINDOW = "window"  # overlapping this instance's sliding window (its last `window` periods)
    PREVIOUS = "previous"  # overlapping the instance `count` periods before this one
    TO_DATE = "to_date"  # from the start of the cumulative period to this instance's end
    LATEST = "latest"  # the latest upstream instance that ends by this instance's end


_LAST = re.compile(r"last_(\d+)_(hours|days|weeks|months)")
_PREVIOUS = re.compile(r"previous(?:_(\d+))?")
_WITHIN = {"all_day": Period.DAILY, "all_week": Period.WEEKLY, "all_month": Period.MONTHLY}
_ALIASES = {"last_available": "latest", "latest_available": "latest"}


@dataclass(frozen=True)
class DateRange:
    """Which instances of an upstream entity an instance needs, relative to its own period."""

    kind: RangeKind
    count: int = 0  # LAST, PREVIOUS
    unit: str = ""  # LAST: hours|days|weeks|months
    period: Period | None = None  # WITHIN: the calendar period

    @classmethod
    def parse(cls, text: str) -> DateRange:
        """`same`, `all`, `all_day|all_week|all_month`, `last_30_days`, `window`, `previous[_N]`,
        `to_date`, `latest` (also `last_available`)."""
        word = _ALIASES.get(text.strip().lower(), text.strip().lower())
        if word in _WITHIN:
            return cls(RangeKind.WITHIN, period=_WITHIN[word])
        if match := _LAST.fullmatch(word):
            return cls(RangeKind.LAST, count=int(match[1]), unit=match[2])
        if match := _PREVIOUS.fullmatch(word):
            return cls(RangeKind.PREVIOUS, count=int(match[1] or 1))
        try:
            return cls(RangeKind(word))
        except ValueError:
            raise ValueError(
                f"unknown date range {text!r}: use same, all, all_day, all_week, all_month, "
                "last_<N>_<hours|days|weeks|months>, window, previous[_<N>], to_date or latest"
            ) from None

    def __str__(self) -> str:
        if self.kind is RangeKind.WITHIN:
            return {period: word for word, period in _WITHIN.items()}[self.period]  # type: ignore[index]  # a WITHIN range always has a period
        if self.kind is RangeKind.LAST:
            return f"last_{self.count}_{self.unit}"
        if self.kind is RangeKind.PREVIOUS:
            return "previous" if self.count == 1 else f"previous_{self.count}"
        return self.kind.value


@dataclass(frozen=True)
class Dependency:
    entity: str
    dates: DateRange | None  # as written (None: not written), the upstream's default once checked
    states: tuple[str, ...] = (DEFAULT_STATE,)
    timezones: TzRule | None = None
    line: int = field(default=0, compare=False)  # where it was declared, for messages

    @property
    def range(self) -> DateRange:
        """The dates needed, once `check` has given a dependency written without them its default."""
        if self.dates is None:
            raise ValueError(f"the dependency on {self.entity} has no dates: its entities were not checked")
        return self.dates


@dataclass(frozen=True)
class EntityState:
    name: str
    depends_on: tuple[Dependency, ...] = ()


@dataclass(frozen=True)
class AirflowBinding:
    """The Airflow task that produces an entity's instances.

    `logical_date` says which end of the instance a run's logical date is: `start` for Airflow
    2 and for Airflow 3 DAGs with data intervals, `end` for Airflow 3's default cron timetable,
    which runs (and dates) a period once it is over. A success records `state` (default: the
    entity's last state).
    """

    dag_id: str
    task_id: str | None = None  # None: every task of the DAG
    logical_date: str = "start"  # start | end
    state: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dag": self.dag_id, "task": self.task_id}
        if self.logical_date != "start":
            data["logical_date"] = self.logical_date
        if self.state:
            data["state"] = self.state
        return data


@dataclass(frozen=True)
class Entity:
    name: str
    period: Period | None  # None for a static entity
    timezone: str = "UTC"
    kind: Kind = Kind.TIME_SERIES
    week_start: int | None = None  # 0 = Monday; required for weekly entities
    window: int | None = None  # SLIDING_WINDOW: its length in periods
    cumulative_over: Period | None = None  # CUMULATIVE: the period it resets at
    states: tuple[EntityState, ...] = (EntityState(DEFAULT_STATE),)
    start: str | None = None  # the first instance, ISO 8601 in the entity's time zone
    airflow: AirflowBinding | None = None
    asset: str | None = None  # a lineage asset URN
    source: str = ""
    line: int = 0

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def calendar(self) -> Calendar:
        if self.period is None:
            raise ValueError(f"{self.name} is static: it has no periods")
        return Calendar(self.period, self.tz, self.week_start or 0)

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(state.name for state in self.states)

    def label(self, start: int) -> str:
        """An instance's start as ISO 8601 in the entity's time zone (`static` for a static one)."""
        return self.calendar.label(start) if self.period is not None else "static"

    def require_state(self, name: str) -> EntityState:
        for state in self.states:
            if state.name == name:
                return state
        raise ValueError(f"{self.name} has no state {name!r} (its states: {', '.join(self.state_names)})")

    def default_range(self, upstream: Entity) -> DateRange:
        """The range a dependency on `upstream` means when it names none."""
        if upstream.kind is Kind.STATIC or self.kind is Kind.STATIC:
            return DateRange(RangeKind.ALL)
        if upstream.kind is Kind.SNAPSHOT:
            return DateRange(RangeKind.LATEST)
        if self.kind is Kind.SLIDING_WINDOW:
            return DateRange(RangeKind.WINDOW)
        if self.kind is Kind.CUMULATIVE:
            return DateRange(RangeKind.TO_DATE)
        return DateRange(RangeKind.SAME)

    def to_dict(self) -> dict[str, Any]:
        """The definition as plain data, the shape `entity_from_dict` reads back (stored as JSON)."""
        return {
            "name": self.name,
            "period": self.period.value if self.period else None,
            "timezone": self.timezone,
            "kind": self.kind.value,
            "week_start": WEEKDAYS[self.week_start] if self.week_start is not None else None,
            "window": self.window,
            "cumulative_over": self.cumulative_over.value if self.cumulative_over else None,
            "start": self.start,
            "airflow": self.airflow.to_dict() if self.airflow else None,
            "asset": self.asset,
            "states": {
                state.name: {
                    "depends_on": [
                        {
                            "entity": dep.entity,
                            "dates": str(dep.dates),
                            "states": list(dep.states),
                            **({"timezones": dep.timezones.value} if dep.timezones else {}),
                        }
                        for dep in state.depends_on
                    ]
                }
                for state in self.states
            },
            "source": self.source,
            "line": self.line,
        }


# ---------------------------------------------------------------------- checking a set


def check(entities: dict[str, Entity]) -> list[Problem]:
    """Problems of a set of entities: unknown entities and states, ranges that can never be
    satisfied, time zones mixed without a rule, and dependency cycles. Fills in default ranges.
    """
    problems: list[Problem] = []
    for name in sorted(entities):
        entity = entities[name]
        resolved = []
        for state in entity.states:
            deps = []
            for dep in state.depends_on:
                dep, problem = _check_dependency(entity, dep, entities)
                deps.append(dep)
                if problem:
                    problems.append(Problem(entity.source, f"{entity.name}: {problem}", f"line {dep.line}"))
            resolved.append(EntityState(state.name, tuple(deps)))
        entities[name] = replace(entity, states=tuple(resolved))
    problems.extend(_cycles(entities))
    return problems


def _check_dependency(
    entity: Entity, dep: Dependency, entities: Mapping[str, Entity]
) -> tuple[Dependency, str]:
    upstream = entities.get(dep.entity)
    if upstream is None:
        return dep, f"depends on unknown entity {dep.entity!r}"
    if dep.dates is None:
        dep = replace(dep, dates=entity.default_range(upstream))
    missing = [state for state in dep.states if state not in upstream.state_names]
    if missing:
        return dep, (
            f"needs {dep.entity} in state {missing[0]!r}, which it never holds "
            f"(its states: {', '.join(upstream.state_names)}): the dependency can never be satisfied"
        )
    dates = dep.range
    if dates.kind in (RangeKind.LAST, RangeKind.PREVIOUS) and dates.count < 1:
        return dep, f"range {dates} covers no time: it can never be satisfied"
    if entity.kind is Kind.STATIC and dates.kind is not RangeKind.ALL:
        return (
            dep,
            f"{entity.name} is static (no periods), so its dependency on {dep.entity} can only be `all`",
        )
    if dates.kind is RangeKind.WINDOW and entity.kind is not Kind.SLIDING_WINDOW:
        return dep, f"range `window` needs a sliding_window entity; {entity.name} is {entity.kind.value}"
    if dates.kind is RangeKind.TO_DATE and entity.kind is not Kind.CUMULATIVE:
        return dep, f"range `to_date` needs a cumulative entity; {entity.name} is {entity.kind.value}"
    if (
        dates.kind is RangeKind.WITHIN
        and dates.period is Period.WEEKLY
        and entity.week_start is None
        and (upstream.week_start is None)
    ):
        return dep, f"range all_week needs a week start: declare `week_start` on {entity.name}"
    hourly = entity.period is Period.HOURLY and upstream.period is Period.HOURLY
    if dep.timezones is TzRule.CALENDAR and hourly and upstream.timezone != entity.timezone:
        # wall-clock hours do not map one to one across DST: a repeated hour would read nothing
        return dep, "the `calendar` time-zone rule cannot match hours to hours: use `timezones: instant`"
    if dep.entity == entity.name and dates.kind is not RangeKind.PREVIOUS:
        return dep, f"an instance cannot depend on itself over `{dates}`: only `previous` instances"
    if dep.entity == entity.name and not set(dep.states) & set(entity.state_names):
        return dep, "depends on itself in a state it never holds"
    calendar_range = dates.kind not in (RangeKind.ALL, RangeKind.LATEST)
    if (
        calendar_range
        and upstream.kind is not Kind.STATIC
        and upstream.timezone != entity.timezone
        and dep.timezones is None
    ):
        return dep, (
            f"{entity.name} ({entity.timezone}) and {dep.entity} ({upstream.timezone}) are in different time "
            f"zones: say how their periods match with `timezones: instant` (the same moments) or "
            f"`timezones: calendar` (the same local dates)"
        )
    return dep, ""


def _cycles(entities: Mapping[str, Entity]) -> list[Problem]:
    """One problem per dependency cycle between different entities, naming the cycle."""
    upstreams = {
        name: sorted({dep.entity for state in entity.states for dep in state.depends_on
                      if dep.entity in entities and dep.entity != name})
        for name, entity in entities.items()
    }  # fmt: skip
    problems: list[Problem] = []
    done: set[str] = set()
    for root in sorted(entities):
        if root in done:
            continue
        # iterative DFS: `stack` holds (entity, its next upstream index); `on_path` the current chain
        stack: list[tuple[str, int]] = [(root, 0)]
        on_path = {root: 0}
        while stack:
            name, index = stack[-1]
            if index == len(upstreams[name]):
                stack.pop()
                on_path.pop(name)
                done.add(name)
                continue
            stack[-1] = (name, index + 1)
            upstream = upstreams[name][index]
            if upstream in on_path:
                cycle = [entry for entry, _ in stack[on_path[upstream] :]] + [upstream]
                entity = entities[name]
                line = next(
                    (
                        dep.line
                        for state in entity.states
                        for dep in state.depends_on
                        if dep.entity == upstream
                    ),
                    entity.line,
                )
                problems.append(
                    Problem(entity.source, f"dependency cycle: {' → '.join(reversed(cycle))}", f"line {line}")
                )
            elif upstream not in done:
                on_path[upstream] = len(stack)
                stack.append((upstream, 0))
    return problems


def topological_order(entities: Mapping[str, Entity]) -> list[str]:
    """Upstream before downstream; ties in name order. Assumes `check` found no cycle."""
    downstream: dict[str, list[str]] = {name: [] for name in entities}
    waiting = dict.fromkeys(entities, 0)
    for name, entity in entities.items():
        for upstream in {dep.entity for state in entity.states for dep in state.depends_on}:
            if upstream != name and upstream in entities:
                downstream[upstream].append(name)
                waiting[name] += 1
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for child in downstream[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    return order
