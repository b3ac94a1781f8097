"""The taint closure: from tainted instances of one entity to every downstream instance to redo.

Tainting [T1, T2) of an entity invalidates every state of its instances overlapping it. The
planner then walks the entities downstream in topological order. For each dependency of a
state, the upstream instances that no longer hold any of the dependency's accepted states are
"broken"; the downstream instances whose date range reads broken time (`ranges.affected`) lose
that state. An instance that loses all its states is rebuilt; one that keeps some is
downgraded (say, a week that was `completed` stays `estimated` when only its exact read counts
were wrong). Static entities downstream are never rebuilt: they have no periods to redo (a
tainted static entity is listed itself, as the root). Work is on spans
of time, not single instances, and only entities the taint reaches are visited.

Nothing is planned beyond the horizon: an instance counts only if it has ended by `until`
(default: now), and not before the entity's declared `start`, so a sliding window's forward
spread stops at the end of the available data.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tracelake.temporal.entities import Entity, Kind, RangeKind, topological_order
from tracelake.temporal.periods import parse_moment, utc_label
from tracelake.temporal.ranges import DependencyEdge, affected
from tracelake.temporal.spans import EMPTY, Spans, clip, intersect, normalize, overlaps, union

Action = Literal["rebuild", "downgrade"]


class UnknownEntityError(KeyError):
    def __str__(self) -> str:
        return f"unknown entity {self.args[0]!r}"


@dataclass(frozen=True)
class PlanStep:
    """A run of consecutive instances of one entity that need the same action."""

    entity: str
    start: str  # ISO 8601 in the entity's time zone
    end: str
    action: Action
    states: tuple[str, ...]  # the states the instances lose
    keeps: tuple[str, ...]  # the states they keep (none when rebuilt)
    path: tuple[str, ...]  # entities from the tainted one to this one
    instances: int
    start_epoch: int = field(repr=False, default=0)
    end_epoch: int = field(repr=False, default=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "start": self.start,
            "end": self.end,
            "action": self.action,
            "states": list(self.states),
            "keeps": list(self.keeps),
            "instances": self.instances,
            "path": list(self.path),
        }


@dataclass(frozen=True)
class TaintPlan:
    entity: str
    start: str
    end: str
    steps: tuple[PlanStep, ...]  # topological order, then by time
    static_reached: tuple[str, ...] = ()  # static entities downstream: not rebuilt

    def to_json(self) -> list[dict[str, Any]]:
        return [step.to_dict() for step in self.steps]

    def entities(self) -> list[str]:
        return list(dict.fromkeys(step.entity for step in self.steps))


class EntityGraph:
    """Entities with their dependencies as edges, indexed for planning; build once, plan often."""

    def __init__(self, entities: Mapping[str, Entity]) -> None:
        self.entities = dict(entities)
        self.order = topological_order(self.entities)
        self.position = {name: index for index, name in enumerate(self.order)}
        self.children: dict[str, list[DependencyEdge]] = {name: [] for name in self.entities}
        self.parents: dict[str, list[DependencyEdge]] = {name: [] for name in self.entities}
        self.self_edges: dict[str, list[DependencyEdge]] = {name: [] for name in self.entities}
        self._first: dict[str, int | None] = {}  # first instances, parsed once
        for entity in self.entities.values():
            for state in entity.states:
                for dep in state.depends_on:
                    edge = DependencyEdge(entity, state.name, self.entities[dep.entity], dep)
                    self.parents[entity.name].append(edge)
                    if dep.entity == entity.name:
                        self.self_edges[entity.name].append(edge)
                    else:
                        self.children[dep.entity].append(edge)

    def horizon(self, entity: Entity, until: int) -> tuple[int | None, int]:
        """[first instance start, end of the last instance ended by `until`)."""
        if entity.kind is Kind.STATIC:
            return None, until
        if entity.name not in self._first:
            self._first[entity.name] = first_instance(entity)
        return self._first[entity.name], entity.calendar.floor(until)

    def plan(self, name: str, start: int, end: int, *, until: int) -> TaintPlan:
        """Taint `name` over [start, end) (epoch seconds) and work out everything downstream."""
        if name not in self.entities:
            raise UnknownEntityError(name)
        root = self.entities[name]
        lo, hi = self.horizon(root, until)
        if root.kind is Kind.STATIC:
            spans = clip(((start, end),), lo, hi)
        else:
            calendar = root.calendar
            spans = clip(((calendar.floor(start), calendar.ceil(end)),), lo, hi)
        invalid: dict[str, dict[str, Spans]] = {name: dict.fromkeys(root.state_names, spans)}
        if root.kind is not Kind.STATIC:
            self._follow_self_edges(root, invalid[name], invalid, lo, hi)
        via: dict[str, list[tuple[str, Spans]]] = {}  # who tainted which spans of an entity
        paths: dict[str, tuple[str, ...]] = {name: (name,)}
        pending: dict[str, list[DependencyEdge]] = {}
        queue: list[int] = []
        static: list[str] = []
        self._release(name, union(*invalid[name].values()), pending, queue)
        while queue:
            child = self.order[heapq.heappop(queue)]
            entity = self.entities[child]
            if entity.kind is Kind.STATIC:
                static.append(child)
                continue
            lost, sources = self._lost_states(entity, pending.pop(child), invalid, until)
            if not any(lost.values()):
                continue
            invalid[child] = lost
            via[child] = sources
            paths[child] = paths[sources[0][0]] + (child,)
            self._release(child, union(*lost.values()), pending, queue)
        steps = tuple(
            step
            for entity_name in sorted(invalid, key=self.position.__getitem__)
            for step in self._steps(self.entities[entity_name], invalid[entity_name], via, paths)
        )
        label = root.calendar.label if root.period else utc_label  # a static taint is a UTC window
        return TaintPlan(name, label(start), label(end), steps, tuple(static))

    def _release(
        self, name: str, spans: Spans, pending: dict[str, list[DependencyEdge]], queue: list[int]
    ) -> None:
        if not spans:
            return
        for edge in self.children[name]:
            child = edge.downstream.name
            if child not in pending:
                pending[child] = []
                heapq.heappush(queue, self.position[child])
            pending[child].append(edge)

    def _lost_states(
        self, entity: Entity, edges: list[DependencyEdge], invalid: dict[str, dict[str, Spans]], until: int
    ) -> tuple[dict[str, Spans], list[tuple[str, Spans]]]:
        lo, hi = self.horizon(entity, until)
        lost: dict[str, Spans] = dict.fromkeys(entity.state_names, EMPTY)
        sources: list[tuple[str, Spans]] = []
        for edge in edges:
            reached = clip(affected(edge, _broken(edge, invalid)), lo, hi)
            if reached:
                lost[edge.state] = union(lost[edge.state], reached)
                sources.append((edge.upstream.name, reached))
        if sources:
            invalid[entity.name] = lost  # the self-edges read the entity's own earlier instances
            self._follow_self_edges(entity, lost, invalid, lo, hi)
        return lost, sources

    def _follow_self_edges(
        self,
        entity: Entity,
        lost: dict[str, Spans],
        invalid: dict[str, dict[str, Spans]],
        lo: int | None,
        hi: int,
    ) -> None:
        """`previous` self-dependencies carry a taint forward until nothing changes (or the horizon)."""
        edges = self.self_edges[entity.name]
        changed = bool(edges)
        while changed:
            changed = False
            for edge in edges:
                reached = clip(affected(edge, _broken(edge, invalid)), lo, hi)
                grown = union(lost[edge.state], reached)
                if grown != lost[edge.state]:
                    dates = edge.dependency.range
                    # only when the state it loses is the one state it accepts is the chain unbroken
                    chained = edge.dependency.states == (edge.state,)
                    if chained and dates.kind is RangeKind.PREVIOUS and dates.count == 1:
                        # each round reaches one instance further: jump to the horizon at once
                        grown = union(grown, ((reached[0][0], hi),)) if reached else grown
                    lost[edge.state] = grown
                    changed = True

    def _steps(
        self,
        entity: Entity,
        lost: dict[str, Spans],
        via: dict[str, list[tuple[str, Spans]]],
        paths: dict[str, tuple[str, ...]],
    ) -> list[PlanStep]:
        """Cut the entity's tainted time into runs with the same lost states, in time order."""
        cuts = sorted({moment for spans in lost.values() for span in spans for moment in span})
        runs: list[tuple[int, int, tuple[str, ...]]] = []
        for lo, hi in itertools.pairwise(cuts):
            states = tuple(state for state in entity.state_names if overlaps(lost[state], lo, hi))
            if not states:
                continue
            if runs and runs[-1][1] == lo and runs[-1][2] == states:
                runs[-1] = (runs[-1][0], hi, states)
            else:
                runs.append((lo, hi, states))
        steps = []
        for lo, hi, states in runs:
            keeps = tuple(state for state in entity.state_names if state not in states)
            path = paths[entity.name]
            for upstream, spans in via.get(entity.name, ()):
                if overlaps(spans, lo, hi):
                    path = paths[upstream] + (entity.name,)
                    break
            label = entity.calendar.label if entity.period else utc_label
            steps.append(
                PlanStep(
                    entity=entity.name,
                    start=label(lo),
                    end=label(hi),
                    action="downgrade" if keeps else "rebuild",
                    states=states,
                    keeps=keeps,
                    path=path,
                    instances=_count(entity, lo, hi),
                    start_epoch=lo,
                    end_epoch=hi,
                )
            )
        return steps


def first_instance(entity: Entity) -> int | None:
    """The start of the entity's first instance, when it declares one."""
    if entity.start is None or entity.kind is Kind.STATIC:
        return None
    return entity.calendar.floor(parse_moment(entity.start, entity.tz))


def _broken(edge: DependencyEdge, invalid: dict[str, dict[str, Spans]]) -> Spans:
    """Upstream time where no instance holds any state the dependency accepts."""
    lost = invalid.get(edge.upstream.name)
    if not lost:
        return EMPTY
    broken: Spans | None = None
    for state in edge.dependency.states:
        spans = lost.get(state, EMPTY)
        broken = spans if broken is None else intersect(broken, spans)
    return normalize(broken or EMPTY)


def _count(entity: Entity, lo: int, hi: int) -> int:
    return 1 if entity.period is None else entity.calendar.count(lo, hi)
