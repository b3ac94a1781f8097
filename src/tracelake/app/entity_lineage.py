"""Entity dependencies checked against observed lineage.

Entities name the lineage asset they are stored in (`asset:`). Lineage then says which entity
really reads which: when lineage shows data flowing from entity A's asset to entity B's asset
but B is not downstream of A in the entity graph, a taint of A would miss B — a warning, with
the `depends_on` to add when the flow is direct. The other way round, a declared dependency
that no observed flow backs is reported too (stale, or a signal not collected yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tracelake.app.service import Tracelake
from tracelake.graph import traverse
from tracelake.model import UnknownNodeError
from tracelake.temporal.planner import EntityGraph

Finding = Literal["missing dependency", "unobserved dependency", "unknown asset"]


@dataclass(frozen=True)
class LinkFinding:
    kind: Finding
    upstream: str  # entity names ("" for an unknown asset)
    downstream: str
    detail: str
    suggestion: str = ""


def link_lineage(graph: EntityGraph, service: Tracelake) -> list[LinkFinding]:
    """Compare the entity graph with the lineage graph, asset by asset."""
    findings: list[LinkFinding] = []
    by_asset: dict[str, str] = {}
    for name in graph.order:
        asset = graph.entities[name].asset
        if asset is None:
            continue
        try:
            [urn] = service.resolve([asset])
        except UnknownNodeError:
            findings.append(
                LinkFinding("unknown asset", "", name, f"asset {asset} is not in the lineage store")
            )
            continue
        by_asset[urn] = name
    index = service.index()
    downstream_entities = _closure(graph)
    observed: set[tuple[str, str]] = set()
    for urn, upstream in by_asset.items():
        for reached in traverse.impact(index, [urn]):
            downstream = by_asset.get(reached.asset)
            if downstream is None or downstream == upstream:
                continue
            observed.add((upstream, downstream))
            if downstream in downstream_entities[upstream]:
                continue
            hops = f"{reached.distance} hop{'s' if reached.distance > 1 else ''}"
            suggestion = (
                f"add to {downstream}: depends_on: [{{entity: {upstream}}}]" if reached.distance == 1 else ""
            )
            findings.append(
                LinkFinding(
                    "missing dependency",
                    upstream,
                    downstream,
                    f"lineage shows {urn} → {reached.asset} ({hops}), but {downstream} does not depend on "
                    f"{upstream}: tainting {upstream} would miss it",
                    suggestion,
                )
            )
    for name in graph.order:
        for edge in graph.parents[name]:
            upstream = edge.upstream.name
            both_mapped = edge.upstream.asset and graph.entities[name].asset
            if upstream != name and both_mapped and (upstream, name) not in observed:
                findings.append(
                    LinkFinding(
                        "unobserved dependency",
                        upstream,
                        name,
                        f"{name} ({edge.state}) depends on {upstream}, but no lineage flow from "
                        f"{edge.upstream.asset} to {graph.entities[name].asset} was observed",
                    )
                )
    return _unique(findings)


def _closure(graph: EntityGraph) -> dict[str, set[str]]:
    """Every entity downstream of each entity (through any state's dependencies)."""
    below: dict[str, set[str]] = {name: set() for name in graph.order}
    for name in reversed(graph.order):
        for edge in graph.children[name]:
            child = edge.downstream.name
            below[name] |= {child} | below[child]
    return below


def _unique(findings: list[LinkFinding]) -> list[LinkFinding]:
    return list(dict.fromkeys(findings))
