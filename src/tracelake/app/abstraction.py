"""The same lineage at another level of abstraction: collapsed to groups, or narrowed to part.

`grouped` collapses a lineage answer to one node a group (an owner, a layer, an asset kind, or a
domain, team or product named in the assets' properties), each with its member tables, and one
edge a pair of groups with the number of table-to-table flows between them; flows inside a group
are counted on it. A column belongs to its table's group. `narrowed` keeps the part of an answer
whose tables carry a label (on the table or one of its columns) or sit in a layer; the starts
always stay, and an edge stays when both its ends do.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.app.views import GraphView
from tracelake.graph.traverse import Direction
from tracelake.model import InputError
from tracelake.store.records import NodeRecord

GROUP_KEYS = ("owner", "layer", "kind", "domain", "team", "product")
NONE = "(none)"


@dataclass(frozen=True, slots=True)
class Group:
    id: str  # `<key>:<value>`
    value: str
    members: tuple[str, ...]  # the tables (assets) in it, sorted
    internal_flows: int  # table-to-table flows between two of its members
    holds_start: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "value": self.value,
            "size": len(self.members),
            "members": list(self.members),
            "internal_flows": self.internal_flows,
            "holds_start": self.holds_start,
        }


@dataclass(slots=True)
class GroupedView:
    by: str
    groups: list[Group] = field(default_factory=list)
    flows: list[tuple[str, str, int]] = field(default_factory=list)  # (group, group, table flows)

    def to_json(self) -> dict[str, Any]:
        return {
            "group_by": self.by,
            "groups": [group.to_json() for group in self.groups],
            "edges": [{"source": a, "target": b, "flows": n} for a, b, n in self.flows],
        }


def group_value(record: NodeRecord | None, by: str) -> str:
    """The group a table falls in: its owner, layer or kind, or the property of that name."""
    if record is None:
        return NONE
    if by == "owner":
        value = record.owner
    elif by == "layer":
        value = record.layer
    elif by == "kind":
        value = record.kind
    else:
        value = record.properties.get(by)
    return str(value) if value not in (None, "") else NONE


def grouped(service: Tracelake, view: GraphView, by: str, starts: Collection[str] = ()) -> GroupedView:
    """`view` collapsed to groups of tables by `by` (one of `GROUP_KEYS`)."""
    if by not in GROUP_KEYS:
        raise InputError(f"group by one of {', '.join(GROUP_KEYS)}, not {by!r}")
    tables = sorted({_table_of(node.id) for node in view.nodes})
    records = service.store.nodes(tables)
    group_of = {table: f"{by}:{group_value(records.get(table), by)}" for table in tables}
    members: dict[str, list[str]] = defaultdict(list)
    for table, group in group_of.items():
        members[group].append(table)
    pairs = {(_table_of(e.source), _table_of(e.target)) for e in view.edges}
    pairs = {(a, b) for a, b in pairs if a != b and a in group_of and b in group_of}
    between: Counter[tuple[str, str]] = Counter()
    inside: Counter[str] = Counter()
    for source, target in pairs:
        a, b = group_of[source], group_of[target]
        if a == b:
            inside[a] += 1
        else:
            between[(a, b)] += 1
    start_tables = {_table_of(start) for start in starts}
    return GroupedView(
        by=by,
        groups=[
            Group(
                group, group.partition(":")[2], tuple(names), inside[group], bool(start_tables & set(names))
            )
            for group, names in sorted(members.items())
        ],
        flows=[(a, b, n) for (a, b), n in sorted(between.items())],
    )


def narrowed(
    service: Tracelake,
    view: GraphView,
    *,
    labels: Collection[str] = (),
    layers: Collection[str] = (),
    starts: Collection[str] = (),
) -> GraphView:
    """The part of `view` whose tables carry one of `labels` (on themselves or a column) and sit
    in one of `layers` (each test only when given); the starts and their columns stay."""
    if not labels and not layers:
        return view
    tables = {_table_of(node.id) for node in view.nodes}
    records = service.store.nodes(tables)
    wanted = set(labels)
    # declared on the table or on one of its columns (which a table-level walk does not reach)
    labelled = {_table_of(urn) for urn, found in service.store.labelled("").items() if wanted & set(found)}
    kept = {
        table
        for table in tables
        if (not labels or table in labelled)
        and (not layers or group_value(records.get(table), "layer") in layers)
    } | {_table_of(start) for start in starts}
    return GraphView(
        nodes=[node for node in view.nodes if _table_of(node.id) in kept],
        edges=[e for e in view.edges if _table_of(e.source) in kept and _table_of(e.target) in kept],
    )


def _table_of(urn: str) -> str:
    return urn.partition("#")[0]


def lineage_at_level(
    service: Tracelake,
    names: Collection[str],
    direction: Direction = "both",
    filters: TraversalFilters | None = None,
    *,
    labels: Collection[str] = (),
    layers: Collection[str] = (),
    group_by: str | None = None,
) -> GraphView | GroupedView:
    """Lineage of `names`, narrowed to `labels` and `layers`, and collapsed by `group_by` if given."""
    starts = service.resolve(list(names))
    view = narrowed(
        service, service.lineage(starts, direction, filters), labels=labels, layers=layers, starts=starts
    )
    return grouped(service, view, group_by, starts) if group_by is not None else view
