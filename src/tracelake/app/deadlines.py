"""Deadlines checked against when tables became ready (`tracelake deadlines load|check`).

For each declared deadline and each day asked about, the table's critical path that day
(`app.critical_path`) says when it became ready. The answer is one of:

- `met`: ready at least `margin` before the deadline;
- `at_risk`: ready, but with less than `margin` to spare; or not ready yet, with the deadline
  less than `margin` away;
- `missed`: ready after the deadline, or not ready when it passed;
- `pending`: not ready yet, the deadline further away than `margin`;
- `unknown_asset`: lineage has never seen the table.

A deadline at risk or missed names the runs of its critical path that put it there: those that
added `BLAME_FROM` or more of lateness themselves (a run late only because what it waited for was
late adds nothing), most first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from tracelake.app.critical_path import CriticalPathView, PathStep, critical_path, zone
from tracelake.app.service import Tracelake
from tracelake.model import InputError, Problem, UnknownNodeError, utcnow
from tracelake.store.deadlines import save_deadlines, stored_deadlines
from tracelake.temporal.deadlines import Deadline, deadline_from_dict, load_deadlines

DEFAULT_MARGIN = timedelta(minutes=30)
BLAME_FROM = timedelta(minutes=5)
MAX_DAYS = 366


class DeadlineError(InputError):
    """Deadline files that cannot be used: every problem, with its file and line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(problem) for problem in problems))


@dataclass(slots=True)
class DeadlineCheck:
    deadline: Deadline
    day: date
    status: str
    due: datetime
    asset: str | None  # the URN the deadline names (None: unknown to lineage)
    ready_at: datetime | None = None
    margin_seconds: float | None = None  # due - ready (negative: late)
    culprits: list[PathStep] = field(default_factory=list)
    path: CriticalPathView | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset or self.deadline.asset,
            "date": self.day.isoformat(),
            "status": self.status,
            "due": self.due.isoformat(),
            "timezone": self.deadline.timezone,
            "owner": self.deadline.owner,
            "ready_at": self.ready_at.isoformat() if self.ready_at else None,
            "margin_seconds": self.margin_seconds,
            "culprits": [step.to_json() for step in self.culprits],
            "critical_path": [step.to_json() for step in self.path.steps] if self.path else [],
        }


class DeadlineOperations:
    def __init__(self, service: Tracelake) -> None:
        self.service = service

    def load(self, paths: Sequence[Path]) -> list[Deadline]:
        """Check the files and store their deadlines; nothing is stored if any has a problem."""
        deadlines, problems = load_deadlines(paths)
        if problems:
            raise DeadlineError(problems)
        save_deadlines(self.service.store, {d.asset: d.to_dict() for d in deadlines})
        return deadlines

    def deadlines(self) -> list[Deadline]:
        return [deadline_from_dict(data) for data in stored_deadlines(self.service.store)]

    def check(
        self,
        first: date,
        last: date | None = None,
        *,
        margin: timedelta = DEFAULT_MARGIN,
        now: datetime | None = None,
    ) -> list[DeadlineCheck]:
        """Every stored deadline on every day of [first, last], by day then asset."""
        last = last or first
        if last < first:
            raise InputError(f"the last day {last} is before the first {first}")
        if (last - first).days >= MAX_DAYS:
            raise InputError(f"at most {MAX_DAYS} days at a time")
        deadlines = self.deadlines()
        if not deadlines:
            raise InputError("no deadlines in the store: load some with `tracelake deadlines load FILE`")
        now = now or utcnow()
        days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        return [self._check(deadline, day, margin, now) for day in days for deadline in deadlines]

    def _check(self, deadline: Deadline, day: date, margin: timedelta, now: datetime) -> DeadlineCheck:
        due = datetime.combine(day, deadline.by, zone(deadline.timezone))
        try:
            path = critical_path(self.service, deadline.asset, day, deadline.timezone)
        except UnknownNodeError:
            return DeadlineCheck(deadline, day, "unknown_asset", due, None)
        found = DeadlineCheck(deadline, day, "pending", due, path.asset, path.ready_at, path=path)
        if path.ready_at is not None:
            found.margin_seconds = (due - path.ready_at).total_seconds()
            if path.ready_at > due:
                found.status = "missed"
            else:
                found.status = "at_risk" if due - path.ready_at < margin else "met"
        elif now > due:
            found.status = "missed"
        elif due - now < margin:
            found.status = "at_risk"
        if found.status in ("missed", "at_risk"):
            blamed = [s for s in path.steps if (s.added_seconds or 0) >= BLAME_FROM.total_seconds()]
            found.culprits = sorted(blamed, key=lambda s: -(s.added_seconds or 0))
        return found
