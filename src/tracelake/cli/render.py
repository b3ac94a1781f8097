"""Text renderings of a GraphView (and of one collapsed to groups): JSON, Graphviz DOT and Mermaid.

Field nodes are drawn inside their asset (a DOT cluster, a Mermaid subgraph) so a column
graph still reads as tables; indirect column edges (filters, joins…) are dashed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING

from tracelake.app.views import GraphView, NodeView
from tracelake.model import EdgeVersion

if TYPE_CHECKING:
    from tracelake.app.abstraction import GroupedView


def to_json(view: GraphView) -> str:
    return json.dumps(view.to_json(), indent=2, sort_keys=False)


def _label(urn: str) -> str:
    return urn.partition("#")[2] or urn.partition("/")[2] or urn


def _asset_of(urn: str) -> str:
    return urn.partition("#")[0]


def _grouped(nodes: list[NodeView]) -> dict[str, list[NodeView]]:
    groups: dict[str, list[NodeView]] = defaultdict(list)
    for node in nodes:
        groups[_asset_of(node.id)].append(node)
    return groups


def _edge_note(edge: EdgeVersion) -> str:
    note = edge.transformation or ""
    if edge.confidence != "HIGH":
        note = f"{note} ({edge.confidence})".strip()
    return note


def to_dot(view: GraphView) -> str:
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph lineage {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];']
    for number, (asset, members) in enumerate(sorted(_grouped(view.nodes).items())):
        fields = [n for n in members if n.kind == "field"]
        if fields:
            lines.append(f"  subgraph cluster_{number} {{")
            lines.append(f"    label={quote(_label(asset))};")
            for node in fields:
                style = ", style=bold" if node.distance == 0 else ""
                lines.append(f"    {quote(node.id)} [label={quote(_label(node.id))}{style}];")
            lines.append("  }")
        for node in members:
            if node.kind != "field":
                style = ", style=bold" if node.distance == 0 else ""
                lines.append(f"  {quote(node.id)} [label={quote(_label(node.id))}{style}];")
    for edge in view.edges:
        attributes = [f"label={quote(_edge_note(edge))}"] if _edge_note(edge) else []
        if edge.direct is False:
            attributes.append("style=dashed")
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {quote(edge.source)} -> {quote(edge.target)}{suffix};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(view: GraphView) -> str:
    ids = {node.id: f"n{number}" for number, node in enumerate(view.nodes)}

    def text(label: str) -> str:
        return '"' + label.replace('"', "#quot;") + '"'

    lines = ["flowchart LR"]
    for number, (asset, members) in enumerate(sorted(_grouped(view.nodes).items())):
        fields = [n for n in members if n.kind == "field"]
        if fields:
            lines.append(f"  subgraph g{number}[{text(_label(asset))}]")
            lines.extend(f"    {ids[n.id]}[{text(_label(n.id))}]" for n in fields)
            lines.append("  end")
        lines.extend(f"  {ids[n.id]}[{text(_label(n.id))}]" for n in members if n.kind != "field")
    for edge in view.edges:
        if edge.source not in ids or edge.target not in ids:
            continue
        arrow = "-.->" if edge.direct is False else "-->"
        note = _edge_note(edge)
        label = f"|{text(note)}|" if note else ""
        lines.append(f"  {ids[edge.source]} {arrow}{label} {ids[edge.target]}")
    return "\n".join(lines) + "\n"


def _group_label(group_value: str, size: int, internal: int) -> str:
    inside = f", {internal} flows inside" if internal else ""
    return f"{group_value} ({size} tables{inside})"


def grouped_to_dot(view: GroupedView) -> str:
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        f"digraph lineage_by_{view.by} {{",
        "  rankdir=LR;",
        '  node [shape=box3d, fontname="Helvetica"];',
    ]
    for group in view.groups:
        style = ", style=bold" if group.holds_start else ""
        label = _group_label(group.value, len(group.members), group.internal_flows)
        lines.append(f"  {quote(group.id)} [label={quote(label)}{style}];")
    for source, target, flows in view.flows:
        lines.append(f"  {quote(source)} -> {quote(target)} [label={quote(str(flows))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def grouped_to_mermaid(view: GroupedView) -> str:
    ids = {group.id: f"g{number}" for number, group in enumerate(view.groups)}
    lines = ["flowchart LR"]
    for group in view.groups:
        label = _group_label(group.value, len(group.members), group.internal_flows).replace('"', "#quot;")
        lines.append(f'  {ids[group.id]}[["{label}"]]')
    lines.extend(f'  {ids[a]} -->|"{n}"| {ids[b]}' for a, b, n in view.flows)
    return "\n".join(lines) + "\n"
