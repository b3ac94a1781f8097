"""Entity definitions and instance status in the lineage store; readiness of an instance.

The status table says, for each instance of each entity, which states it holds, whether it is
valid, and who changed it, when, in which run and why. Every change is appended to a history
table too, so `status(..., at=D)` answers "what was the status of X on date D". A run records a
state on success (`record`, what the Airflow callback calls); a taint plan, once applied,
invalidates the instances it rebuilds and takes the lost states off those it downgrades.

`is_ready` checks one instance's dependencies for one state against the table: every upstream
instance its date range needs must be there, valid, and hold an accepted state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tracelake.store import LineageStore
from tracelake.store.entity_status import EntityTables, InstanceStatus, StatusChange, StatusRows
from tracelake.temporal.definitions import Definitions, entity_from_dict, load_definitions
from tracelake.temporal.entities import Entity, Kind, RangeKind
from tracelake.temporal.planner import EntityGraph, TaintPlan, UnknownEntityError, first_instance
from tracelake.temporal.ranges import FOREVER, DependencyEdge, needed

STATIC_START = 0  # the one instance of a static entity


@dataclass(frozen=True)
class Blocker:
    """An upstream instance that keeps an instance from being ready, and why."""

    entity: str
    start: int
    end: int
    problem: str  # missing | tainted | lacks state
    detail: str = ""


@dataclass(frozen=True)
class Readiness:
    entity: str
    start: int
    state: str
    blockers: tuple[Blocker, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.blockers


@dataclass
class ApplyReport:
    instances: int = 0
    rebuilt: int = 0
    downgraded: int = 0


class EntityStore:
    """Entities and their instances' status in one lineage store (`store.entity_status`)."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self.tables = EntityTables(store)

    # -- definitions

    def load(self, paths: Sequence[Path]) -> Definitions:
        """Read and check definitions against those stored; store them only if all are sound."""
        found = load_definitions(paths, known=self.definitions())
        if found.ok:
            self.save_definitions(found.entities.values())
        return found

    def save_definitions(self, entities: Iterable[Entity]) -> int:
        """Store (or replace) definitions, all in one transaction."""
        return self.tables.save_definitions({entity.name: entity.to_dict() for entity in entities})

    def definitions(self) -> dict[str, Entity]:
        return {entity.name: entity for entity in map(entity_from_dict, self.tables.definitions())}

    def graph(self) -> EntityGraph:
        return EntityGraph(self.definitions())

    # -- instances

    def record(
        self,
        entity: Entity,
        moment: int,
        state: str,
        *,
        actor: str,
        run_id: str | None = None,
        replace_states: bool = False,
    ) -> InstanceStatus:
        """The instance holding `moment` now holds `state` and is valid (a run just produced it)."""
        entity.require_state(state)
        start, end = instance_bounds(entity, moment)
        with self.tables.reading() as rows:
            current = rows.current(entity.name, start)
        held = set() if replace_states or current is None or not current.valid else set(current.states)
        held.add(state)
        states = tuple(name for name in entity.state_names if name in held)
        with self.tables.writing() as rows:
            rows.write([StatusChange(entity.name, start, end, states, True, None, actor, run_id)])
        with self.tables.reading() as rows:
            recorded = rows.current(entity.name, start)
        assert recorded is not None
        return recorded

    def apply(self, plan: TaintPlan, *, reason: str, actor: str, graph: EntityGraph) -> ApplyReport:
        """Mark the plan in the table, in one transaction: rebuilt instances invalid with no
        state, downgraded ones without the states they lost. Written a step at a time in bulk."""
        report = ApplyReport()
        with self.tables.writing() as rows:
            for step in plan.steps:
                entity = graph.entities[step.entity]
                if entity.kind is Kind.STATIC:
                    starts = [STATIC_START]
                else:
                    starts = entity.calendar.starts(step.start_epoch, step.end_epoch)
                current = {row.start: row for row in rows.between(entity.name, starts[0], starts[-1] + 1)}
                why = f"{reason} (via {' → '.join(step.path)})" if len(step.path) > 1 else reason
                changes = []
                for start in starts:
                    if step.action == "rebuild":
                        states: tuple[str, ...] = ()
                    else:
                        row = current.get(start)
                        held = row.states if row is not None else entity.state_names
                        states = tuple(state for state in held if state not in step.states)
                    end = instance_bounds(entity, start)[1]
                    changes.append(StatusChange(entity.name, start, end, states, bool(states), why, actor))
                rows.write(changes)
                counted = len(changes)
                report.instances += counted
                report.rebuilt += counted if step.action == "rebuild" else 0
                report.downgraded += counted if step.action == "downgrade" else 0
        return report

    def status(
        self, entity: str, *, lo: int | None = None, hi: int | None = None, at: datetime | None = None
    ) -> list[InstanceStatus]:
        """Instances of `entity` starting in [lo, hi): as they are, or as they were at `at`."""
        if at is not None:
            return self.tables.as_of(entity, lo, hi, at)
        with self.tables.reading() as rows:
            return rows.between(entity, lo, hi)

    def is_ready(self, graph: EntityGraph, name: str, moment: int, state: str) -> Readiness:
        """Whether the instance holding `moment` has what `state` needs, or what is missing."""
        if name not in graph.entities:
            raise UnknownEntityError(name)
        entity = graph.entities[name]
        entity.require_state(state)
        start, _ = instance_bounds(entity, moment)
        blockers: list[Blocker] = []
        with self.tables.reading() as rows:
            for edge in graph.parents[name]:
                if edge.state != state:
                    continue
                for up_start, up_end in _needed_instances(edge, start, rows):
                    row = rows.current(edge.upstream.name, up_start)
                    blocker = _blocker(edge.upstream, up_start, up_end, row, edge.dependency.states)
                    if blocker is not None:
                        blockers.append(blocker)
        return Readiness(name, start, state, tuple(blockers))


def instance_bounds(entity: Entity, moment: int) -> tuple[int, int]:
    """[start, end) of the instance of `entity` that holds `moment` (the one instance if static)."""
    if entity.kind is Kind.STATIC:
        return STATIC_START, FOREVER
    calendar = entity.calendar
    start = calendar.floor(moment)
    return start, calendar.end(start)


def _needed_instances(edge: DependencyEdge, start: int, rows: StatusRows) -> list[tuple[int, int]]:
    """The upstream instances the downstream instance at `start` reads over `edge`; none before
    the upstream's declared start. Full history (`all`) is the instances on record."""
    upstream = edge.upstream
    if upstream.kind is Kind.STATIC:
        return [(STATIC_START, FOREVER)]
    lo, hi = needed(edge, start)
    first = first_instance(upstream)
    if edge.dependency.range.kind is RangeKind.ALL:
        return [(row.start, row.end) for row in rows.between(upstream.name, first, hi)]
    calendar = upstream.calendar
    if first is not None:
        lo = max(lo, first)
    return [(up, calendar.end(up)) for up in calendar.starts(lo, hi)]


def _blocker(
    upstream: Entity, start: int, end: int, row: InstanceStatus | None, accepted: Sequence[str]
) -> Blocker | None:
    if row is None:
        return Blocker(upstream.name, start, end, "missing")
    if not row.valid:
        return Blocker(upstream.name, start, end, "tainted", row.reason or "")
    if not set(row.states) & set(accepted):
        detail = f"holds {', '.join(row.states) or 'none'}; needs {' or '.join(accepted)}"
        return Blocker(upstream.name, start, end, "lacks state", detail)
    return None
