"""Time-partitioned entities, as the CLI and the HTTP API both work them: load definitions, an
entity's status, record and check instances, plan a taint and apply it (marking the status table
and clearing the bound Airflow tasks), reconcile with Airflow, and check the entity graph against
observed lineage.

Times are what a person types: ISO dates or date-times, local to the entity's time zone when
they carry no offset. A mistake (no definitions loaded, an unknown entity, an unreadable time, an
empty range) is an `EntityError` with a sentence for the user.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tracelake.app.entity_lineage import LinkFinding, link_lineage
from tracelake.app.service import Tracelake
from tracelake.model import InputError
from tracelake.store.entity_status import InstanceStatus
from tracelake.temporal.airflow import (
    AirflowClient,
    AirflowError,
    ClearReport,
    Drift,
    apply_to_airflow,
    reconcile,
)
from tracelake.temporal.definitions import Definitions
from tracelake.temporal.entities import Entity
from tracelake.temporal.instances import ApplyReport, EntityStore, Readiness
from tracelake.temporal.periods import parse_moment
from tracelake.temporal.planner import EntityGraph, TaintPlan, UnknownEntityError


class EntityError(InputError):
    """A request about entities that cannot be answered, said as a sentence."""


@dataclass(slots=True)
class Taint:
    entity: Entity
    plan: TaintPlan
    applied: ApplyReport | None  # None for a dry run
    cleared: ClearReport | None = None  # None without Airflow (or for a dry run)
    airflow_error: str | None = None  # the status table is marked, but clearing Airflow failed


@dataclass(frozen=True, slots=True)
class AirflowSettings:
    """Where Airflow is and how to log in: a bearer token, or a user name and password."""

    url: str
    token: str | None = None
    username: str | None = None
    password: str | None = None

    def client(self) -> AirflowClient:
        return AirflowClient(self.url, token=self.token, username=self.username, password=self.password)


class EntityOperations:
    def __init__(self, service: Tracelake) -> None:
        self.service = service
        self.entities = EntityStore(service.store)

    def load(self, paths: Sequence[Path]) -> Definitions:
        """Check definitions and store them; nothing is stored if any has a problem."""
        return self.entities.load(paths)

    def entity(self, name: str) -> Entity:
        return entity_of(self.graph(), name)

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
        airflow: AirflowSettings | None = None,
    ) -> Taint:
        """Plan what to rebuild downstream of `name`'s data in [start, end); `apply` marks it in
        the status table and clears the Airflow tasks bound to what it rebuilds."""
        graph = self.graph()
        entity = entity_of(graph, name)
        lo, hi = moment(start, entity.tz, "from"), moment(end, entity.tz, "to")
        if hi <= lo:
            raise EntityError(f"to {end} is not after from {start}")
        try:
            plan = graph.plan(name, lo, hi, until=int(until.timestamp()) if until else int(time.time()))
        except UnknownEntityError as error:
            raise EntityError(str(error)) from None
        if not apply:
            return Taint(entity, plan, None)
        applied = self.entities.apply(plan, reason=reason, actor=actor, graph=graph)
        if airflow is None:
            return Taint(entity, plan, applied)
        try:
            cleared = apply_to_airflow(
                plan, graph, airflow.client(), self.entities, reason=reason, actor=actor
            )
        except AirflowError as error:
            return Taint(entity, plan, applied, airflow_error=str(error))
        return Taint(entity, plan, applied, cleared)

    def record(
        self, name: str, at: str, state: str, *, actor: str, run_id: str | None = None
    ) -> tuple[Entity, InstanceStatus]:
        """The instance of `name` holding the moment `at` now holds `state` (a run produced it)."""
        entity = self.entity(name)
        try:
            row = self.entities.record(
                entity, moment(at, entity.tz, "--at"), state, actor=actor, run_id=run_id
            )
        except ValueError as error:
            raise EntityError(str(error)) from None
        return entity, row

    def ready(self, name: str, at: str, state: str) -> tuple[EntityGraph, Readiness]:
        """Whether the dependencies of the instance holding `at` are there for `state`."""
        graph = self.graph()
        entity = entity_of(graph, name)
        try:
            return graph, self.entities.is_ready(graph, name, moment(at, entity.tz, "--at"), state)
        except ValueError as error:
            raise EntityError(str(error)) from None

    def reconcile(self, start: str, end: str, airflow: AirflowSettings) -> tuple[EntityGraph, list[Drift]]:
        """Where the status table and Airflow's task instances disagree, for instances in [start, end)."""
        graph = self.graph()
        utc = ZoneInfo("UTC")
        lo, hi = moment(start, utc, "--from"), moment(end, utc, "--to")
        try:
            return graph, reconcile(graph, airflow.client(), self.entities, lo=lo, hi=hi)
        except AirflowError as error:
            raise EntityError(str(error)) from None

    def link(self) -> list[LinkFinding]:
        """The entity graph checked against observed lineage."""
        return link_lineage(self.graph(), self.service)


def status_json(entity: Entity, row: InstanceStatus) -> dict[str, Any]:
    """An instance's status as the API and `entities status --format json` show it."""
    return {
        "instance": entity.label(row.start),
        "start": row.start,
        "end": row.end,
        "states": list(row.states),
        "valid": row.valid,
        "reason": row.reason,
        "actor": row.actor,
        "changed_at": row.changed_at.isoformat(),
        "run_id": row.run_id,
    }


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
