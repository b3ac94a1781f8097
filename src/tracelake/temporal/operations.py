"""The on-call engineer's operations on one store — an entity's status, a taint plan and applying
it — as the CLI's `status` and `taint` commands and the HTTP API both call them.

Times are what a person types: ISO dates or date-times, local to the entity's time zone when
they carry no offset. A mistake (no definitions loaded, an unknown entity, an unreadable time, an
empty range) is an `EntityError` with a sentence for the user.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from tracelake.store.sqlstore import LineageStore
from tracelake.temporal.entities import Entity
from tracelake.temporal.instances import ApplyReport, EntityStore, InstanceStatus
from tracelake.temporal.periods import parse_moment
from tracelake.temporal.planner import EntityGraph, TaintPlan, UnknownEntityError


class EntityError(ValueError):
    """A request about entities that cannot be answered, said as a sentence."""


@dataclass(slots=True)
class Taint:
    entity: Entity
    plan: TaintPlan
    applied: ApplyReport | None  # None for a dry run


class EntityOperations:
    def __init__(self, store: LineageStore) -> None:
        self.entities = EntityStore(store)

    def graph(self) -> EntityGraph:
        graph = self.entities.graph()
        if not graph.entities:
            raise EntityError(
                "no entity definitions in the store: load some with `tracelake entities load PATH`"
            )
        return graph

    def status(
        self, name: str, *, start: str | None = None, end: str | None = None, at: datetime | None = None
    ) -> tuple[Entity, list[InstanceStatus]]:
        entity = entity_of(self.graph(), name)
        lo = moment(start, entity.tz, "from") if start else None
        hi = moment(end, entity.tz, "to") if end else None
        return entity, self.entities.status(name, lo=lo, hi=hi, at=at)

    def taint(
        self,
        name: str,
        start: str,
        end: str,
        *,
        reason: str,
        until: datetime | None = None,
        apply: bool = False,
        actor: str,
    ) -> Taint:
        """Plan what to rebuild downstream of `name`'s data in [start, end); `apply` marks it."""
        graph = self.graph()
        entity = entity_of(graph, name)
        lo, hi = moment(start, entity.tz, "from"), moment(end, entity.tz, "to")
        if hi <= lo:
            raise EntityError(f"to {end} is not after from {start}")
        try:
            plan = graph.plan(name, lo, hi, until=int(until.timestamp()) if until else int(time.time()))
        except UnknownEntityError as error:
            raise EntityError(str(error)) from None
        applied = self.entities.apply(plan, reason=reason, actor=actor, graph=graph) if apply else None
        return Taint(entity, plan, applied)


def entity_of(graph: EntityGraph, name: str) -> Entity:
    if name not in graph.entities:
        known = ", ".join(sorted(graph.entities)[:10])
        raise EntityError(f"unknown entity {name!r} (known: {known}…)")
    return graph.entities[name]


def moment(text: str, tz: ZoneInfo, option: str) -> int:
    """An ISO date or time as epoch seconds; without an offset, local to `tz` (a date: its midnight)."""
    try:
        return parse_moment(text, tz)
    except ValueError:
        example = "e.g. 2024-03-10 or 2024-03-10T05:00"
        raise EntityError(f"{option} {text!r} is not an ISO date or time ({example})") from None
