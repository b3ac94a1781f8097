"""Critical path: the chain of upstream runs that decided when a table became ready on a date
(`tracelake critical-path`).

A table is ready on a day when the first run of a process that writes it completes that day: at
its end, or at its start for a signal that only knows when a run started (a SQL log's). Going
upstream, each run waited for the inputs its process read while it ran: of the runs that wrote
them and became ready before it started (within `LOOKBACK`), the one that became ready last is
the one it waited for, the next step up. The path stops where no such run is found (a source, or inputs
written long before).

Each step is set beside what is usual for its process, from its completed runs in the `USUAL`
days before: how long it took against its median length, and how much later than its median
time of day it became ready (`late`). A step's own share of the lateness (`added`) is its
lateness less that of the step it waited for: the runs that made a table late are those that
added to it, not those that passed on an upstream delay.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tracelake.app.service import Tracelake
from tracelake.graph.index import GraphIndex
from tracelake.graph.upstream_window import flows_into
from tracelake.model import InputError, shifted
from tracelake.store.events import RunRecord
from tracelake.store.schema import to_micros
from tracelake.store.timeline import RunsInWindow, runs_in_window
from tracelake.temporal.definitions import time_zone

LOOKBACK = timedelta(days=1)
USUAL = timedelta(days=7)
MAX_STEPS = 100
_DONE = {"COMPLETE", None}  # a run that says nothing of its outcome (a SQL log's) counts as done


@dataclass(frozen=True, slots=True)
class PathStep:
    asset: str  # what the run wrote, on the path
    process: str
    run_id: str
    started_at: datetime | None
    ended_at: datetime | None
    ready_at: datetime  # its end, or its start when the end is not known
    waited_seconds: float | None  # from the upstream step's ready to this run's start
    took_seconds: float | None
    usual_seconds: float | None  # the median length of the process's runs before
    late_seconds: float | None  # ready this much later in the day than the process's median
    added_seconds: float | None = None  # its own share of the lateness

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "process": self.process,
            "run_id": self.run_id,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "ready_at": self.ready_at.isoformat(),
            "waited_seconds": self.waited_seconds,
            "took_seconds": self.took_seconds,
            "usual_seconds": self.usual_seconds,
            "late_seconds": self.late_seconds,
            "added_seconds": self.added_seconds,
        }


@dataclass(slots=True)
class CriticalPathView:
    asset: str
    day: date
    timezone: str
    ready_at: datetime | None  # None: no run of a writer completed that day
    steps: list[PathStep] = field(default_factory=list)  # upstream first, the table's own run last

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "date": self.day.isoformat(),
            "timezone": self.timezone,
            "ready_at": _iso(self.ready_at),
            "steps": [step.to_json() for step in self.steps],
        }


def zone(name: str) -> ZoneInfo:
    found = time_zone(name)
    if found is None:
        raise InputError(f"unknown time zone {name!r} (an IANA name, e.g. UTC or Europe/Paris)")
    return found


def critical_path(service: Tracelake, name: str, day: date, timezone: str = "UTC") -> CriticalPathView:
    """The runs that decided when `name` became ready on `day` (a day in `timezone`)."""
    tz = zone(timezone)
    index = service.index()
    (urn,) = service.resolve([name], index)
    position = index.positions[urn]
    lo = datetime.combine(day, time.min, tz)
    hi = shifted(lo, timedelta(days=1))
    try:
        lo_us, hi_us = to_micros(lo), to_micros(hi)
    except OverflowError:  # the first or last day of the calendar, in a zone off UTC
        raise InputError(f"{day} in {timezone} has no UTC equivalent (years 1 to 9999)") from None
    writers = {process for _, process in flows_into(index, position, lo_us, hi_us)}
    walk = _Walk(service, index, tz)
    first = walk.first_ready(writers, lo, hi)
    view = CriticalPathView(urn, day, timezone, None)
    if first is None:
        return view
    run, process = first
    steps = [walk.step(run, position)]
    seen = {run.run_id}
    while len(steps) < MAX_STEPS:
        found = walk.waited_for(steps[-1], position, process)
        if found is None or found[0].run_id in seen:
            break
        run, process, position = found
        seen.add(run.run_id)
        steps.append(walk.step(run, position))
    view.steps = _annotated(steps[::-1])
    view.ready_at = view.steps[-1].ready_at
    return view


def _annotated(steps: list[PathStep]) -> list[PathStep]:
    """The steps, upstream first, with how long each waited after the one before it and its
    own share of the lateness."""
    annotated: list[PathStep] = []
    for upstream, step in zip([None, *steps], steps, strict=False):
        waited = added = None
        if upstream is not None:
            waited = ((step.started_at or step.ready_at) - upstream.ready_at).total_seconds()
        if step.late_seconds is not None:
            before = (
                upstream.late_seconds if upstream is not None and upstream.late_seconds is not None else 0.0
            )
            added = step.late_seconds - max(before, 0.0)
        annotated.append(replace(step, waited_seconds=waited, added_seconds=added))
    return annotated


class _Walk:
    """The store reads of one path: runs of given processes around a moment, and what is usual."""

    def __init__(self, service: Tracelake, index: GraphIndex, tz: ZoneInfo) -> None:
        self.service, self.index, self.tz = service, index, tz
        self.usual: dict[int, RunsInWindow] = {}  # by process position: the runs its step was read with

    def runs(self, processes: set[int], since: datetime, until: datetime) -> list[tuple[RunRecord, int]]:
        """Done runs of the processes (positions) ready within [since, until], with their process."""
        ids = {int(self.index.node_ids[process]): process for process in processes}
        found = runs_in_window(self.service.store, ids, since, until, lookback=USUAL)
        done = []
        for process_id, runs in found.runs.items():
            self.usual[ids[process_id]] = found
            done += [
                (run, ids[process_id])
                for run in runs
                if run.status in _DONE and run.moment is not None and since <= run.moment <= until
            ]
        return done

    def first_ready(self, writers: set[int], lo: datetime, hi: datetime) -> tuple[RunRecord, int] | None:
        done = [(run, process) for run, process in self.runs(writers, lo, hi) if _ready(run) < hi]
        return min(done, key=lambda found: (_ready(found[0]), found[0].run_id), default=None)

    def waited_for(self, step: PathStep, asset: int, process: int) -> tuple[RunRecord, int, int] | None:
        """The run the step's run waited for: of the runs that wrote its inputs and became ready
        before it started, the last; with its process and the input it wrote."""
        start = step.started_at or step.ready_at
        since = shifted(start, -LOOKBACK)
        at = to_micros(start)
        # what the process read in this run: its flows in force while it ran (a producer such as
        # OpenLineage's says them when the run completes, so they begin at its end, not its start)
        inputs = {
            source
            for source, by in flows_into(self.index, asset, at, to_micros(step.ready_at))
            if by == process and source != asset
        }
        wrote: dict[int, int] = {}  # writer → the first input it writes
        for source in sorted(inputs):
            for _, writer in flows_into(self.index, source, to_micros(since), at):
                wrote.setdefault(writer, source)
        if not wrote:
            return None
        done = [(run, writer) for run, writer in self.runs(set(wrote), since, start) if _ready(run) <= start]
        if not done:
            return None
        run, writer = max(done, key=lambda found: (_ready(found[0]), found[0].run_id))
        return run, writer, wrote[writer]

    def step(self, run: RunRecord, asset: int) -> PathStep:
        process = self.index.positions[run.process]
        found = self.usual[process]
        process_id = int(self.index.node_ids[process])
        ready = _ready(run)
        took = (run.ended_at - run.started_at).total_seconds() if run.started_at and run.ended_at else None
        earlier = found.earlier.get(process_id, [])
        late = None
        if earlier and run.ended_at is not None:
            usual_end = statistics.median(self._time_of_day(end) for _, end in earlier)
            late = self._time_of_day(to_micros(run.ended_at)) - usual_end
        return PathStep(
            asset=self.index.urns[asset],
            process=run.process,
            run_id=run.run_id,
            started_at=run.started_at,
            ended_at=run.ended_at,
            ready_at=ready,
            waited_seconds=None,
            took_seconds=took,
            usual_seconds=found.usual_seconds(process_id),
            late_seconds=late,
        )

    def _time_of_day(self, micros: int) -> float:
        moment = datetime.fromtimestamp(micros / 1e6, self.tz)
        return (moment - datetime.combine(moment.date(), time.min, self.tz)).total_seconds()


def _ready(run: RunRecord) -> datetime:
    moment = run.moment
    assert moment is not None  # runs() keeps only runs that know one
    return moment


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None
