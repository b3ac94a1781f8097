"""Labels in the store: declared on nodes, inferred by propagation, confirmed by discovery.

Declared labels are the nodes' own (`nodes.labels`: set by collectors, a schema file, or a
person through `declare`). Inferred labels are what `graph.propagate` found, kept with the
declared node they came from and the path between; saving a new propagation replaces the
inferred labels of the labels it walked, in one transaction, and says what changed — so running
it again after new lineage arrives adds the new flows and drops the ones no longer there.
Confirmed labels are a discovery session's reviewed set; sessions are stored here too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from tracelake.model import UnknownNodeError, utcnow
from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore

INFERRED = "inferred"
CONFIRMED = "confirmed"
MAX_LABEL = s.width(s.label_assignments.c.label)  # the longest label an assignment can hold


@dataclass(frozen=True)
class LabelAssignment:
    urn: str
    label: str
    provenance: str  # declared | inferred | confirmed
    source: str
    path: tuple[str, ...]


@dataclass
class LabelChanges:
    added: set[tuple[str, str]] = field(default_factory=set)  # (urn, label)
    removed: set[tuple[str, str]] = field(default_factory=set)
    kept: int = 0


class LabelStore:
    def __init__(self, store: LineageStore) -> None:
        self.store = store

    def declare(self, urn: str, labels: Iterable[str]) -> tuple[str, ...]:
        """Add declared labels to a node; returns its declared labels."""
        return self._change(urn, lambda held: held | set(labels))

    def undeclare(self, urn: str, labels: Iterable[str]) -> tuple[str, ...]:
        return self._change(urn, lambda held: held - set(labels))

    def declared(self) -> dict[str, tuple[str, ...]]:
        return self.store.labelled("")

    def save_inferred(
        self, walked: Collection[str], reached: Iterable[tuple[str, Sequence[str]]], *, actor: str
    ) -> LabelChanges:
        """Replace the inferred labels of every label `walked` by those `reached`: (label, path
        from the declared node it came from to the node it reached)."""
        table = s.label_assignments
        labels = list(walked)
        changes = LabelChanges()
        now = s.to_micros(utcnow())
        rows: list[dict[str, Any]] = [
            {
                "urn": path[-1],
                "label": label,
                "provenance": INFERRED,
                "source": path[0],
                "path": list(path),
                "actor": actor,
                "assigned_at": now,
            }
            for label, path in reached
        ]
        with self.store.engine.begin() as conn:
            before = {
                (urn, label)
                for urn, label in conn.execute(
                    sa.select(table.c.urn, table.c.label).where(
                        table.c.provenance == INFERRED, table.c.label.in_(labels)
                    )
                )
            }
            conn.execute(table.delete().where(table.c.provenance == INFERRED, table.c.label.in_(labels)))
            if rows:
                conn.execute(table.insert(), rows)
        after: set[tuple[str, str]] = {(row["urn"], row["label"]) for row in rows}
        changes.added, changes.removed = after - before, before - after
        changes.kept = len(after & before)
        return changes

    def confirm(
        self, label: str, session_id: str, confirmed: Iterable[tuple[str, Sequence[str]]], *, actor: str
    ) -> int:
        """Store a discovery session's set, (node, path to it), as the confirmed labels of `label`
        (replacing its earlier ones)."""
        table = s.label_assignments
        now = s.to_micros(utcnow())
        rows = [
            {
                "urn": urn,
                "label": label,
                "provenance": CONFIRMED,
                "source": session_id,
                "path": list(path),
                "actor": actor,
                "assigned_at": now,
            }
            for urn, path in confirmed
        ]
        with self.store.engine.begin() as conn:
            conn.execute(table.delete().where(table.c.provenance == CONFIRMED, table.c.label == label))
            if rows:
                conn.execute(table.insert(), rows)
        return len(rows)

    def save_session(self, session_id: str, label: str, data: Mapping[str, Any], *, actor: str) -> None:
        """Keep a discovery session (its JSON form), created by `actor` or updated."""
        table = s.discovery_sessions
        now = s.to_micros(utcnow())
        with self.store.engine.begin() as conn:
            update = table.update().where(table.c.id == session_id)
            updated = conn.execute(update.values(session=dict(data), updated_at=now)).rowcount
            if not updated:
                conn.execute(
                    table.insert().values(
                        id=session_id,
                        label=label,
                        session=dict(data),
                        created_by=actor,
                        created_at=now,
                        updated_at=now,
                    )
                )

    def load_session(self, session_id: str) -> dict[str, Any] | None:
        """A session's JSON form as saved, or None when there is no such session."""
        table = s.discovery_sessions
        with self.store.engine.connect() as conn:
            data = conn.execute(sa.select(table.c.session).where(table.c.id == session_id)).scalar()
        return None if data is None else dict(data)

    def sessions(self) -> list[tuple[str, str, str]]:
        """(id, label, created by) of every session, newest first."""
        table = s.discovery_sessions
        query = sa.select(table.c.id, table.c.label, table.c.created_by).order_by(table.c.created_at.desc())
        with self.store.engine.connect() as conn:
            return [(row.id, row.label, row.created_by) for row in conn.execute(query)]

    def assignments(self, *, urn: str | None = None, label: str | None = None) -> list[LabelAssignment]:
        """Declared and inferred labels, optionally of one node or one label."""
        found = [
            LabelAssignment(node, name, "declared", node, (node,))
            for node, names in self.declared().items()
            for name in names
            if (urn is None or node == urn) and (label is None or name == label)
        ]
        table = s.label_assignments
        query = sa.select(table.c.urn, table.c.label, table.c.provenance, table.c.source, table.c.path)
        if urn is not None:
            query = query.where(table.c.urn == urn)
        if label is not None:
            query = query.where(table.c.label == label)
        with self.store.engine.connect() as conn:
            for row in conn.execute(query.order_by(table.c.label, table.c.urn)):
                found.append(LabelAssignment(row.urn, row.label, row.provenance, row.source, tuple(row.path)))
        return found

    def _change(self, urn: str, update: Callable[[set[str]], set[str]]) -> tuple[str, ...]:
        nodes = s.nodes
        with self.store.engine.begin() as conn:
            row = conn.execute(sa.select(nodes.c.id, nodes.c.labels).where(nodes.c.urn == urn)).first()
            if row is None:
                raise UnknownNodeError(urn)
            labels = sorted(update(set(row.labels or ())))
            conn.execute(nodes.update().where(nodes.c.id == row.id).values(labels=labels or None))
        return tuple(labels)
