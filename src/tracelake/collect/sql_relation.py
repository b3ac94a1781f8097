"""The lineage of a relation: what each output column of a query, table or temp view derives from.

`Deps` maps (source field URN, Transformation) to the Confidence of that dependency. A
`Relation` is a query's (or a table's, or a temp view's) ordered output columns with their
`Deps`, the row-level influences reaching all of them, and the real tables read. `compose`
is the rule for chaining two hops, which is how lineage passes through CTEs, subqueries and
temp views without them ever becoming nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeVar

from tracelake.model import Confidence, Transformation
from tracelake.model.names import field_urn

T = Transformation
Deps = dict[tuple[str, Transformation], Confidence]
K = TypeVar("K")

_PLAIN_PATH = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_RANK = {Confidence.LOW: 1, Confidence.MEDIUM: 2, Confidence.HIGH: 3}
INDIRECT = frozenset(t for t in Transformation if not t.is_direct)


def column_urn(table_urn: str, path: str) -> str:
    """`field_urn`, without its parsing for the plain lower-case names that are nearly all of them."""
    if _PLAIN_PATH.fullmatch(path):
        return f"{table_urn}#{path}"
    return field_urn(table_urn, path)


def compose(first: Transformation, later: Transformation) -> Transformation:
    """The transformation of a two-hop path (source →first→ middle →later→ target)."""
    if later in INDIRECT:
        return later
    if first in INDIRECT:
        return first
    if first is T.AGGREGATION or later is T.AGGREGATION:
        return T.AGGREGATION
    if first is T.IDENTITY and later is T.IDENTITY:
        return T.IDENTITY
    return T.TRANSFORMATION


def weakest(a: Confidence, b: Confidence) -> Confidence:
    return a if _RANK[a] <= _RANK[b] else b


def add_dep(deps: dict[K, Confidence], key: K, confidence: Confidence) -> None:
    """Record a dependency (or an edge), keeping the surest confidence seen for it."""
    known = deps.get(key)
    if known is None or _RANK[confidence] > _RANK[known]:
        deps[key] = confidence


def add_composed(into: Deps, deps: Deps, later: Transformation, cap: Confidence = Confidence.HIGH) -> None:
    for (source, first), confidence in deps.items():
        add_dep(into, (source, compose(first, later)), weakest(confidence, cap))


@dataclass(eq=False)
class Relation:
    """What a query, table or temp view offers whoever reads it.

    `columns` keeps the output order (positional INSERTs need it) and allows duplicate
    names. `complete` is False when an unexpanded `*` hides columns; names that are not
    listed then pass through to the star's `passthrough` relations. `ordered` is False when
    the columns are known by name only (a table whose columns the store has seen, not
    declared), and so is every relation a `*` over it expands into: nothing may be mapped by
    position onto or from them. A physical table (`table_urn` set) resolves any column name
    to its own field; `fallback` answers any unlisted name (generator outputs such as LATERAL
    VIEW's default `col`).
    """

    columns: list[tuple[str, Deps]] = field(default_factory=list)
    complete: bool = True
    ordered: bool = True
    indirect: Deps = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)
    passthrough: list[Relation] = field(default_factory=list)
    table_urn: str | None = None
    fallback: Deps | None = None
    _index: dict[str, int] = field(default_factory=dict)

    @classmethod
    def table(cls, urn: str, known_columns: list[str] | None, *, ordered: bool = True) -> Relation:
        relation = cls(complete=known_columns is not None, ordered=ordered, table_urn=urn, tables={urn})
        for name in known_columns or ():
            relation.add_column(name, {(column_urn(urn, name), T.IDENTITY): Confidence.HIGH})
        return relation

    def add_column(self, name: str, deps: Deps) -> None:
        self._index.setdefault(name, len(self.columns))
        self.columns.append((name, deps))

    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def knows(self, name: str) -> bool | None:
        """True: it has the column; False: it surely has not; None: cannot tell."""
        if name in self._index:
            return True
        # a generator's fallback answers qualified names only (`tt.col`); unqualified names
        # must not all be claimed by it
        if self.complete or self.fallback is not None:
            return False
        if self.table_urn is not None:
            return None
        answers = [relation.knows(name) for relation in self.passthrough]
        if True in answers:
            return True
        return None if None in answers else False

    def lookup(self, name: str, path: tuple[str, ...] = ()) -> Deps | None:
        """Where column `name` (and a struct path below it) comes from, or None."""
        if self.table_urn is not None:
            dotted = ".".join((name, *path))
            return {(column_urn(self.table_urn, dotted), T.IDENTITY): Confidence.HIGH}
        position = self._index.get(name)
        if position is not None:
            deps = self.columns[position][1]
            return extend_paths(deps, path) if path else deps
        if self.fallback is not None:
            return self.fallback
        candidates = [r for r in self.passthrough if r.knows(name) is True] or [
            r for r in self.passthrough if r.knows(name) is None
        ]
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0].lookup(name, path)
        merged: Deps = {}
        for relation in candidates:
            add_composed(merged, relation.lookup(name, path) or {}, T.IDENTITY, Confidence.LOW)
        return merged

    def renamed(self, names: list[str]) -> Relation:
        """`(SELECT …) AS q(a, b)` / `WITH q(a, b) AS …`: an alias list renames outputs by position."""
        out = Relation(
            complete=self.complete,
            ordered=self.ordered,
            indirect=self.indirect,
            tables=self.tables,
            passthrough=self.passthrough,
            fallback=self.fallback,
        )
        for position, (name, deps) in enumerate(self.columns):
            out.add_column(names[position] if position < len(names) else name, deps)
        return out


def extend_paths(deps: Deps, path: tuple[str, ...]) -> Deps:
    """`q.addr.city` where `q.addr` copies `t.addr` comes from `t.addr.city`."""
    suffix = ".".join(path)
    extended: Deps = {}
    for (source, kind), confidence in deps.items():
        target = f"{source}.{suffix}" if kind is T.IDENTITY else source
        add_dep(extended, (target, kind), confidence)
    return extended
