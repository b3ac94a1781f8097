"""What the interfaces show: plain records of nodes and edges, and their stable JSON shape.

The CLI, the HTTP API and scripts all print the same `GraphView`; its JSON form
`{"nodes": [{"id": URN, "kind": ...}], "edges": [{"source": URN, "target": URN, ...}]}` is a
contract other tools script against, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracelake.model import EdgeVersion


@dataclass(frozen=True, slots=True)
class NodeView:
    id: str
    kind: str  # asset | field | process
    type: str  # the asset kind, e.g. hive.table
    distance: int | None = None  # hops from the nearest start node; 0 for a start
    owner: str | None = None
    layer: str | None = None
    labels: tuple[str, ...] = ()
    data_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "type": self.type,
            "distance": self.distance,
            "owner": self.owner,
            "layer": self.layer,
            "labels": list(self.labels),
            "data_type": self.data_type,
        }


@dataclass(slots=True)
class GraphView:
    nodes: list[NodeView] = field(default_factory=list)
    edges: list[EdgeVersion] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": [n.to_json() for n in self.nodes], "edges": [e.to_json() for e in self.edges]}


@dataclass(frozen=True, slots=True)
class ImpactView:
    asset: str
    type: str
    distance: int
    owner: str | None
    layer: str | None
    via_fields: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.asset,
            "type": self.type,
            "distance": self.distance,
            "owner": self.owner,
            "layer": self.layer,
            "via_fields": list(self.via_fields),
        }
