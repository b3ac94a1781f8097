"""Labels in the store: declared on nodes, inferred by propagation, with where each came from.

Declared labels are the nodes' own (`nodes.labels`: set by collectors, a schema file, or a
person through `declare`). Inferred labels are what `graph.propagate` found, kept with the
declared node they came from and the path between; saving a new propagation replaces the
inferred labels of the labels it walked, in one transaction, and says what changed — so running
it again after new lineage arrives adds the new flows and drops the ones no longer there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa

from tracelake.graph.index import UnknownNodeError
from tracelake.graph.propagate import Propagation
from tracelake.model import utcnow
from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore

INFERRED = "inferred"


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

    def save_inferred(self, propagation: Propagation, *, actor: str) -> LabelChanges:
        """Replace the inferred labels of every label `propagation` walked by what it found."""
        table = s.label_assignments
        labels = list(propagation.walks)
        changes = LabelChanges()
        now = s.to_micros(utcnow())
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
            rows = []
            for walk in propagation.walks.values():
                for position in walk.reached:
                    path = propagation.path(walk, int(position))
                    rows.append(
                        {
                            "urn": path[-1],
                            "label": walk.label,
                            "provenance": INFERRED,
                            "source": path[0],
                            "path": list(path),
                            "actor": actor,
                            "assigned_at": now,
                        }
                    )
            if rows:
                conn.execute(table.insert(), rows)
        after = {(row["urn"], row["label"]) for row in rows}
        changes.added, changes.removed = after - before, before - after
        changes.kept = len(after & before)
        return changes

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
