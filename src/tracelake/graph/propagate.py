"""Label propagation: where data labelled `religion` (or `identity.user_id`, `pii.email`…) flows.

Labels declared on fields (or assets) flow downstream along lineage edges, one breadth-first
walk per label over the in-memory index, governed by `PropagationRules`: a minimum confidence,
which column transformations carry a label (a copy, a computation or a CASE on the value does;
a use that only filters, joins, groups or sorts rows does not, unless asked), asset kinds and zones
(URN prefixes such as `hive.table/ads.`) where a label stops (it reaches them but goes no
further), and a maximum depth. Every inferred label keeps the path that produced it: the first
shortest route from a declared node, made on demand from the walk (a label can reach millions
of fields; their paths are not built unless asked for). A pure function of the index: storing
the labels is the caller's business.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from tracelake.graph.index import ASSET, GraphIndex, gather_slots
from tracelake.graph.traverse import EdgeFilter, TraversalFilters, edge_filter, sorted_unique
from tracelake.model import Confidence, Transformation

# A label rides along a value copied or computed from the labelled one, or chosen by it (a CASE
# on `religion` that outputs 'faith_christian' encodes it), not along a use that only selects,
# joins, groups or orders rows.
CARRYING = frozenset(
    {
        Transformation.IDENTITY,
        Transformation.TRANSFORMATION,
        Transformation.AGGREGATION,
        Transformation.CONDITIONAL,
    }
)


@dataclass(frozen=True)
class PropagationRules:
    min_confidence: Confidence = Confidence.MEDIUM
    transformations: frozenset[Transformation] = CARRYING
    stop_kinds: frozenset[str] = frozenset()  # asset kinds a label reaches but does not leave
    stop_zones: tuple[str, ...] = ()  # URN prefixes of assets a label reaches but does not leave
    max_depth: int | None = None


@dataclass(frozen=True)
class InferredLabel:
    node: str
    label: str
    source: str  # the declared node it came from
    path: tuple[str, ...]  # node URNs from `source` to `node`
    stopped: bool = False  # the node is in a stop kind or zone: the label goes no further

    @property
    def depth(self) -> int:
        return len(self.path) - 1


@dataclass(frozen=True)
class LabelWalk:
    """Where one label reached, as arrays over node positions (the walk itself, kept whole)."""

    label: str
    reached: np.ndarray  # positions with the inferred label, nearest first
    dist: np.ndarray  # hop distance per position, -1 unreached, 0 declared
    parent_edge: np.ndarray  # the edge each reached position was first reached by
    stopped: np.ndarray  # bool per position: in a stop kind or zone


@dataclass
class Propagation:
    """Every label's walk; inferred labels and their paths are made on demand."""

    index: GraphIndex
    walks: dict[str, LabelWalk] = field(default_factory=dict)

    @property
    def inferred(self) -> list[InferredLabel]:
        return [self.inferred_label(walk, int(p)) for walk in self.walks.values() for p in walk.reached]

    def inferred_label(self, walk: LabelWalk, position: int) -> InferredLabel:
        path = self.path(walk, position)
        stopped = bool(walk.stopped[position])
        return InferredLabel(self.index.urns[position], walk.label, path[0], path, stopped)

    def paths(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """(label, path from its declared node) of every node a label reached."""
        for walk in self.walks.values():
            for position in walk.reached:
                yield walk.label, self.path(walk, int(position))

    def path(self, walk: LabelWalk, position: int) -> tuple[str, ...]:
        nodes = [position]
        while walk.dist[nodes[-1]] > 0:
            nodes.append(int(self.index.edge_source[walk.parent_edge[nodes[-1]]]))
        return tuple(self.index.urns[node] for node in reversed(nodes))

    def labels_of(self, node: str) -> set[str]:
        position = self.index.position(node)
        return {label for label, walk in self.walks.items() if walk.dist[position] > 0}

    def nodes_with(self, label: str) -> set[str]:
        walk = self.walks.get(label)
        return set() if walk is None else {self.index.urns[int(p)] for p in walk.reached}

    def count(self) -> int:
        return sum(len(walk.reached) for walk in self.walks.values())


def propagate(
    index: GraphIndex, declared: Mapping[str, Iterable[str]], rules: PropagationRules | None = None
) -> Propagation:
    """Labels inferred downstream of `declared` (node URN → its labels) under `rules`."""
    rules = rules or PropagationRules()
    flt = edge_filter(
        index,
        filters=TraversalFilters(min_confidence=rules.min_confidence, transformations=rules.transformations),
    )
    stop = _stop_mask(index, rules)
    starts_by_label: dict[str, list[int]] = {}
    for urn, labels in declared.items():
        position = index.position(urn)
        for label in labels:
            starts_by_label.setdefault(label, []).append(position)
    result = Propagation(index)
    for label in sorted(starts_by_label):
        starts = sorted_unique(np.asarray(starts_by_label[label], dtype=np.int64))
        dist, parent_edge = _walk(index, starts, flt, stop, rules.max_depth)
        reached = np.flatnonzero(dist > 0)
        reached = reached[np.argsort(dist[reached], kind="stable")]
        result.walks[label] = LabelWalk(label, reached, dist, parent_edge, stop)
    return result


def _stop_mask(index: GraphIndex, rules: PropagationRules) -> np.ndarray:
    """Nodes whose asset is of a stop kind or in a stop zone."""
    stop = np.zeros(index.n_nodes, dtype=bool)
    if rules.stop_kinds:
        stop |= index.kind_mask(set(rules.stop_kinds))[index.kind_codes]
    if rules.stop_zones:
        # the zone is a property of the asset: test each asset's URN once, then spread to its fields
        assets = np.flatnonzero(index.node_types == ASSET)
        zoned = np.zeros(index.n_nodes, dtype=bool)
        zones = tuple(rules.stop_zones)
        zoned[assets] = [index.urns[int(asset)].startswith(zones) for asset in assets]
        has_asset = index.asset_of >= 0
        stop[has_asset] |= zoned[index.asset_of[has_asset]]
    return stop


def _walk(
    index: GraphIndex, starts: np.ndarray, flt: EdgeFilter, stop: np.ndarray, max_depth: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """BFS downstream: hop distance (-1 unreached) and one incoming edge per reached node."""
    adjacency = index.downstream
    dist = np.full(index.n_nodes, -1, dtype=np.int32)
    parent_edge = np.full(index.n_nodes, -1, dtype=np.int64)
    dist[starts] = 0
    frontier, level = starts, 0
    while len(frontier) and (max_depth is None or level < max_depth):
        level += 1
        slots, _ = gather_slots(adjacency, frontier)
        slots = slots[flt.edge_mask(index, adjacency, slots)]
        neighbours, edges = adjacency.neighbours[slots], adjacency.edges[slots]
        new = dist[neighbours] < 0
        neighbours, edges = neighbours[new], edges[new]
        # several edges may reach a node on this level: keep the first, so paths are stable
        order = np.lexsort((edges, neighbours))
        neighbours, edges = neighbours[order], edges[order]
        first = np.r_[True, neighbours[1:] != neighbours[:-1]] if len(neighbours) else np.empty(0, bool)
        fresh = neighbours[first]
        parent_edge[fresh] = edges[first]
        dist[fresh] = level
        frontier = fresh[~stop[fresh]]
    return dist, parent_edge
