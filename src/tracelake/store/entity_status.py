"""The tables of time-partitioned entities: their definitions, the status of their instances
(current, and every change in a history table) and the Airflow clears made for taint plans.
Every statement about them is here; what an entity is and what its instances need is
`temporal`'s to say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model import utcnow
from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore


@dataclass(frozen=True)
class InstanceStatus:
    entity: str
    start: int
    end: int
    states: tuple[str, ...]
    valid: bool
    reason: str | None
    actor: str
    changed_at: datetime
    run_id: str | None


@dataclass(frozen=True)
class StatusChange:
    """What an instance holds from now on, who says so and why."""

    entity: str
    start: int
    end: int
    states: Sequence[str]
    valid: bool
    reason: str | None
    actor: str
    run_id: str | None = None


class StatusRows:
    """Reads and writes of instance status inside one transaction; what it writes is changed at
    one moment, the transaction's."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.now = s.to_micros(utcnow())

    def current(self, entity: str, start: int) -> InstanceStatus | None:
        table = s.entity_instances
        query = sa.select(table).where(table.c.entity == entity, table.c.start_s == start)
        row = self.conn.execute(query).first()
        return _status(row) if row is not None else None

    def between(self, entity: str, lo: int | None, hi: int | None) -> list[InstanceStatus]:
        """The current status of `entity`'s instances starting in [lo, hi), in start order."""
        table = s.entity_instances
        query = _between(sa.select(table).where(table.c.entity == entity), table, lo, hi)
        return [_status(row) for row in self.conn.execute(query.order_by(table.c.start_s))]

    def write(self, changes: Sequence[StatusChange]) -> None:
        """Replace the current rows of one entity's instances (a run of consecutive ones) and
        append them to the history."""
        if not changes:
            return
        rows = [
            {
                "entity": change.entity,
                "start_s": change.start,
                "end_s": change.end,
                "states": list(change.states),
                "valid": change.valid,
                "reason": change.reason,
                "actor": change.actor,
                "changed_at": self.now,
                "run_id": change.run_id,
            }
            for change in changes
        ]
        table = s.entity_instances
        self.conn.execute(
            table.delete().where(
                table.c.entity == rows[0]["entity"],
                table.c.start_s >= rows[0]["start_s"],
                table.c.start_s <= rows[-1]["start_s"],
            )
        )
        self.conn.execute(table.insert(), rows)
        self.conn.execute(s.entity_instance_history.insert(), rows)


class EntityTables:
    """Entity definitions, instance status and Airflow clears in one lineage store."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store

    # -- definitions

    def save_definitions(self, definitions: Mapping[str, dict[str, Any]]) -> int:
        """Store (or replace) definitions, by name, all in one transaction."""
        now = s.to_micros(utcnow())
        rows = [{"name": name, "definition": data, "loaded_at": now} for name, data in definitions.items()]
        table = s.entity_definitions
        with self.store.engine.begin() as conn:
            if rows:
                conn.execute(table.delete().where(table.c.name.in_(list(definitions))))
                conn.execute(table.insert(), rows)
        return len(rows)

    def definitions(self) -> list[dict[str, Any]]:
        with self.store.engine.connect() as conn:
            return list(conn.execute(sa.select(s.entity_definitions.c.definition)).scalars().all())

    # -- instance status

    @contextmanager
    def reading(self) -> Iterator[StatusRows]:
        with self.store.engine.connect() as conn:
            yield StatusRows(conn)

    @contextmanager
    def writing(self) -> Iterator[StatusRows]:
        """One transaction: what is read in it is what its writes replace."""
        with self.store.engine.begin() as conn:
            yield StatusRows(conn)

    def as_of(self, entity: str, lo: int | None, hi: int | None, at: datetime) -> list[InstanceStatus]:
        """The status `entity`'s instances starting in [lo, hi) had at `at`."""
        history = s.entity_instance_history
        latest = (
            sa.select(history.c.start_s, sa.func.max(history.c.id).label("id"))
            .where(history.c.entity == entity, history.c.changed_at <= s.to_micros(at))
            .group_by(history.c.start_s)
            .subquery()
        )
        query = sa.select(history).join(latest, history.c.id == latest.c.id)
        query = _between(query, history, lo, hi).order_by(history.c.start_s)
        with self.store.engine.connect() as conn:
            return [_status(row) for row in conn.execute(query)]

    def tainted_between(self, since: datetime, until: datetime) -> list[InstanceStatus]:
        """Every time an instance was marked invalid within [since, until], oldest first."""
        history = s.entity_instance_history
        query = (
            sa.select(history)
            .where(
                history.c.valid.is_(False),
                history.c.changed_at.between(s.to_micros(since), s.to_micros(until)),
            )
            .order_by(history.c.changed_at, history.c.entity, history.c.start_s)
        )
        with self.store.engine.connect() as conn:
            return [_status(row) for row in conn.execute(query)]

    # -- Airflow clears

    def record_clear(self, **values: Any) -> None:
        """One clear call made (or, `dry_run`, planned) in Airflow for a taint plan."""
        with self.store.engine.begin() as conn:
            conn.execute(s.airflow_clears.insert().values(at=s.to_micros(utcnow()), **values))

    def clears(self) -> list[dict[str, Any]]:
        table = s.airflow_clears
        with self.store.engine.connect() as conn:
            rows = conn.execute(sa.select(table).order_by(table.c.id)).mappings().all()
        return [dict(row) for row in rows]


def _between(query: sa.Select[Any], table: sa.Table, lo: int | None, hi: int | None) -> sa.Select[Any]:
    if lo is not None:
        query = query.where(table.c.start_s >= lo)
    if hi is not None:
        query = query.where(table.c.start_s < hi)
    return query


def _status(row: sa.Row[Any]) -> InstanceStatus:
    return InstanceStatus(
        entity=row.entity,
        start=row.start_s,
        end=row.end_s,
        states=tuple(row.states),
        valid=bool(row.valid),
        reason=row.reason,
        actor=row.actor,
        changed_at=s.from_micros(row.changed_at),
        run_id=row.run_id,
    )


__all__ = ["EntityTables", "InstanceStatus", "StatusChange", "StatusRows"]
