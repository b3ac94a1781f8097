"""What the interfaces show: plain records of nodes and edges, and their stable JSON shape.

The CLI, the HTTP API and scripts all print the same `GraphView`; its JSON form
`{"nodes": [{"id": URN, "kind": ...}], "edges": [{"source": URN, "target": URN, ...}]}` is a
contract other tools script against, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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


@dataclass(frozen=True, slots=True)
class EdgeView:
    source: str
    target: str
    process: str
    signal: str
    confidence: str
    transformation: str | None
    valid_from: datetime
    valid_to: datetime | None

    @property
    def direct(self) -> bool | None:
        """None for an asset edge; True when the value flows, False when it only influences."""
        if self.transformation is None:
            return None
        return self.transformation in ("IDENTITY", "TRANSFORMATION", "AGGREGATION")

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "process": self.process,
            "signal": self.signal,
            "confidence": self.confidence,
            "transformation": self.transformation,
            "direct": self.direct,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
        }


@dataclass(slots=True)
class GraphView:
    nodes: list[NodeView] = field(default_factory=list)
    edges: list[EdgeView] = field(default_factory=list)

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
