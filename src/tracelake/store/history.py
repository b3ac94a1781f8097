"""How a process's observations become its versions: the planning half of an ingest.

A process is observed at instants (a log entry's time, a run's start) moving data along a set
of edges; each observation is kept (`process_observations`: instant and content hash). Its
versions are what the observations say, in time order, whatever order they arrived in: a
version starts at an observation whose edges differ from the observation before it, and lasts
until the next such observation. So the version in force at T is always that of the latest
observation at or before T, and a late observation splits the version it falls in — the
re-run after it reinstates the old edges. Two observations at the same instant are one: their
edges are united (order-free, and a running job re-reporting a growing edge set grows it).

`plan_history` is pure: from the stored versions and the stored observations at or after the
earliest incoming one, and the incoming observations, it says which versions to insert,
delete or re-time. The store carries the plan out and supplies the edges behind each hash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class StoredVersion:
    valid_from: int
    valid_to: int | None
    content_hash: str

    def covers(self, moment: int) -> bool:
        return self.valid_from <= moment and (self.valid_to is None or moment < self.valid_to)


@dataclass
class HistoryPlan:
    """What one ingest changes in one process's history."""

    insert: list[StoredVersion] = field(default_factory=list)  # new versions, with their edges
    delete: list[StoredVersion] = field(default_factory=list)  # stored versions gone (with their edges)
    retime: list[StoredVersion] = field(default_factory=list)  # stored versions with a new valid_to
    touch: list[StoredVersion] = field(default_factory=list)  # stored versions observed again
    observations: dict[int, str] = field(default_factory=dict)  # new or changed observations
    unchanged: int = 0  # incoming observations that started no version

    @property
    def replaced(self) -> int:
        """Versions whose start stays but whose edges change."""
        starts = {v.valid_from for v in self.insert}
        return sum(1 for v in self.delete if v.valid_from in starts)


def plan_history(
    stored: Sequence[StoredVersion],
    stored_observations: Mapping[int, str],
    incoming: Mapping[int, str],
    unite: Callable[[str, str], str],
) -> HistoryPlan:
    """Fold `incoming` observations (instant → content hash) into a process's history.

    `stored_observations` must hold every stored observation at or after the earliest incoming
    instant; `unite(a, b)` gives the content hash of the union of two hashes' edges.
    """
    plan = HistoryPlan()
    if not incoming:
        return plan
    if not stored and len(incoming) == 1:  # a process seen for the first time: one version
        ((at, content),) = incoming.items()
        plan.insert.append(StoredVersion(at, None, content))
        plan.observations[at] = content
        return plan
    versions = sorted(stored, key=lambda v: v.valid_from)
    earliest = min(incoming)
    covering = next((v for v in versions if v.covers(earliest)), None)
    base = covering.valid_from if covering is not None else earliest
    # What is known from `base` on: the covering version stands for its observations before
    # `earliest` (they all had its edges), then every observation after.
    sequence = dict(stored_observations)
    if covering is not None:
        sequence.setdefault(covering.valid_from, covering.content_hash)
    previous = next((v for v in reversed(versions) if v.valid_from < base), None)
    if previous is not None:
        # The version before may come to hold what the first one derived here holds (a late
        # observation united with one at the same instant): derived from it, the two are one.
        base = previous.valid_from
        sequence.setdefault(previous.valid_from, previous.content_hash)
    for at in sorted(incoming):
        content = incoming[at]
        before = sequence.get(at)
        if before is not None:
            content = before if before == content else unite(before, content)
            if content == before:
                continue
        sequence[at] = content
        plan.observations[at] = content
    derived = _versions_of({at: h for at, h in sequence.items() if at >= base})
    kept = {v.valid_from: v for v in versions if v.valid_from >= base}
    observed = sorted(incoming)
    for version in derived:
        old = kept.pop(version.valid_from, None)
        if old is None:
            plan.insert.append(version)
        elif old.content_hash != version.content_hash:
            plan.delete.append(old)
            plan.insert.append(version)
        elif old.valid_to != version.valid_to:
            plan.retime.append(version)
        elif any(version.covers(at) for at in observed):
            plan.touch.append(version)
    plan.delete.extend(kept.values())
    starts = {v.valid_from for v in plan.insert}
    plan.unchanged = sum(1 for at in incoming if at not in starts)
    return plan


def _versions_of(sequence: Mapping[int, str]) -> list[StoredVersion]:
    """Maximal runs of equal consecutive hashes, each lasting until the next run starts."""
    starts: list[tuple[int, str]] = []
    for at in sorted(sequence):
        if not starts or starts[-1][1] != sequence[at]:
            starts.append((at, sequence[at]))
    return [
        StoredVersion(at, starts[i + 1][0] if i + 1 < len(starts) else None, content)
        for i, (at, content) in enumerate(starts)
    ]


__all__ = ["HistoryPlan", "StoredVersion", "plan_history"]
