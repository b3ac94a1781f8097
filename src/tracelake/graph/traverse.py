"""Lineage traversal over a `GraphIndex`: upstream/downstream closure, impact, paths.

Pure functions, no I/O: the caller builds (or caches) the index and looks up whatever the
store knows about the nodes returned (owners, labels, edge evidence).

Every walk is a level-synchronous BFS from *all* start nodes at once (peers only take one
root per query). One level is a handful of numpy operations over the whole frontier:
gather the CSR slices of every frontier node (`np.repeat` + `arange`), mask the gathered
edges by the query's filters, and keep the neighbours not seen before. Python only loops
over levels, never over nodes or edges, so a closure over a million edges costs tens of
milliseconds.

Filters, all applied to edges while walking (a filtered-out edge is not crossed, so what
lies only behind it is not reached):

- `as_of`: edge versions valid at that moment (valid_from ≤ t < valid_to); None = now,
  i.e. open versions only.
- `min_confidence`: confidence rank ≥ the given one; LOW edges stop a MEDIUM walk.
- `signals`: only edges learnt from these signals.
- `asset_kinds`: only step onto nodes of these kinds (a field has its asset's kind); the
  starts themselves are always kept.
- `transformations` / `direct_only`: only field edges of these OpenLineage transformation
  types (direct = IDENTITY, TRANSFORMATION, AGGREGATION). Table-level edges carry no
  transformation and are never removed by these filters, so an asset walk still works with
  them set; a field edge whose transformation is unknown does not pass them.

Asset and field edges form separate subgraphs (asset→asset, field→field), so an asset
start walks table lineage and a field start walks column lineage, both in the same pass.
"""

from __future__ import annotations

import itertools
import mmap
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

import numpy as np

from tracelake.graph.index import FIELD, SIGNALS, TRANSFORMATIONS, Adjacency, GraphIndex, gather_slots
from tracelake.model import Confidence, Signal, Transformation, UnknownNodeError
from tracelake.store.records import OPEN_END
from tracelake.store.schema import to_micros

Direction = Literal["upstream", "downstream", "both"]
DIRECTIONS: tuple[Direction, ...] = ("upstream", "downstream", "both")
UPSTREAM, DOWNSTREAM = 1, 2  # bits of LineageResult.sides

# paths() enumerates with a Python DFS over the pruned subgraph; this caps its steps so a
# pathological graph (many simple paths of nearly the right length) stays interactive.
_PATH_STEP_BUDGET = 2_000_000

__all__ = [
    "DIRECTIONS",
    "DOWNSTREAM",
    "UPSTREAM",
    "Direction",
    "EdgeFilter",
    "ImpactedAsset",
    "LineageResult",
    "UnknownNodeError",
    "edge_filter",
    "impact",
    "lineage",
    "paths",
]


# ---------------------------------------------------------------------- filters


@dataclass(frozen=True, slots=True)
class EdgeFilter:
    """A query's edge and node filters, compiled to lookup tables over the index's codes.

    None means "no restriction" for every table, so the common query (lineage now, no
    filter) costs one bool gather per level.
    """

    as_of_us: int | None = None
    min_rank: int = 0
    signal_ok: np.ndarray | None = None  # bool over SIGNALS
    # bool over TRANSFORMATIONS plus one trailing slot that code -1 (none) indexes
    transformation_ok: np.ndarray | None = None
    kind_ok: np.ndarray | None = None  # bool over index.kinds

    def edge_mask(self, index: GraphIndex, adj: Adjacency, slots: np.ndarray) -> np.ndarray:
        """Which of the CSR slots `slots` of `adj` may be crossed (neighbour kind included)."""
        if self.as_of_us is None:
            keep = adj.is_open[slots]
            if not (self.min_rank or self.signal_ok is not None or self.transformation_ok is not None):
                return self._kind_mask(index, adj.neighbours[slots], keep)
            edges = adj.edges[slots]
        else:
            edges = adj.edges[slots]
            keep = (index.edge_valid_from[edges] <= self.as_of_us) & (
                self.as_of_us < index.edge_valid_to[edges]
            )
        return self._kind_mask(index, adj.neighbours[slots], keep & self.attribute_mask(index, edges))

    def attribute_mask(self, index: GraphIndex, edges: np.ndarray) -> np.ndarray | bool:
        """Confidence, signal and transformation filters for edge positions `edges`."""
        keep: np.ndarray | bool = True
        if self.min_rank:
            keep = index.edge_confidence[edges] >= self.min_rank
        if self.signal_ok is not None:
            keep = keep & self.signal_ok[index.edge_signal[edges]]
        if self.transformation_ok is not None:
            # Table-level edges have no transformation; only field edges are filtered by it.
            passes = self.transformation_ok[index.edge_transformation[edges]]
            keep = keep & (passes | ~index.edge_is_field[edges])
        return keep

    def valid_mask(self, index: GraphIndex, edges: np.ndarray) -> np.ndarray:
        """Validity at `as_of` plus the attribute filters, for arbitrary edge positions."""
        if self.as_of_us is None:
            keep = index.edge_valid_to[edges] == OPEN_END
        else:
            keep = (index.edge_valid_from[edges] <= self.as_of_us) & (
                self.as_of_us < index.edge_valid_to[edges]
            )
        return keep & self.attribute_mask(index, edges)

    def _kind_mask(self, index: GraphIndex, neighbours: np.ndarray, keep: np.ndarray) -> np.ndarray:
        if self.kind_ok is None:
            return keep
        return keep & self.kind_ok[index.kind_codes[neighbours]]


@dataclass(frozen=True, slots=True)
class TraversalFilters:
    """The knobs every traversal takes, as one value from the interfaces to the walk; None means
    "no filter". `depth` bounds the hops of `lineage` and `impact` (`paths` has `max_depth`)."""

    depth: int | None = None
    as_of: datetime | None = None
    min_confidence: Confidence | str | None = None
    signals: Iterable[Signal | str] | None = None
    asset_kinds: Iterable[str] | None = None
    transformations: Iterable[Transformation | str] | None = None
    direct_only: bool = False


NO_FILTERS = TraversalFilters()


def edge_filter(index: GraphIndex, filters: TraversalFilters = NO_FILTERS) -> EdgeFilter:
    """Compile the filters against one index."""
    as_of, min_confidence, signals = filters.as_of, filters.min_confidence, filters.signals
    asset_kinds, transformations, direct_only = (
        filters.asset_kinds,
        filters.transformations,
        filters.direct_only,
    )
    signal_ok = None
    if signals is not None:
        wanted = {Signal(s) for s in signals}
        signal_ok = np.array([s in wanted for s in SIGNALS], dtype=bool)
    transformation_ok = None
    if transformations is not None or direct_only:
        allowed = (
            set(TRANSFORMATIONS) if transformations is None else {Transformation(t) for t in transformations}
        )
        if direct_only:
            allowed = {t for t in allowed if t.is_direct}
        transformation_ok = np.array([t in allowed for t in TRANSFORMATIONS] + [False], dtype=bool)
    return EdgeFilter(
        as_of_us=to_micros(as_of) if as_of is not None else None,
        min_rank=Confidence(min_confidence).rank if min_confidence is not None else 0,
        signal_ok=signal_ok,
        transformation_ok=transformation_ok,
        kind_ok=index.kind_mask(set(asset_kinds)) if asset_kinds is not None else None,
    )


# ---------------------------------------------------------------------- the walk


@dataclass(slots=True, weakref_slot=True)
class _Walk:
    """What one BFS learnt: hop distance per node position (-1 = not reached), in level order.

    `dist` reads the walk's `_Scratch`, lent for as long as the walk lives: hold the walk.
    """

    dist: Distances
    nodes: np.ndarray  # reached positions, level by level (starts first)
    level_sizes: list[int]
    edges: np.ndarray  # edge positions crossed (filters passed), level by level
    sigma: np.ndarray | None  # shortest-route counts, when asked for


class Distances:
    """Hop distances by node position, -1 where the walk did not reach: a view of the walk's
    scratch, which holds distance + 1 so that the zeros of fresh memory mean "not reached"."""

    __slots__ = ("_plus_one",)

    def __init__(self, plus_one: np.ndarray) -> None:
        self._plus_one = plus_one

    def __getitem__(self, positions: Any) -> Any:
        return self._plus_one[positions] - 1


def _zeros(n: int, dtype: type[np.generic]) -> np.ndarray:
    """`n` zeros in memory mapped a page at a time. numpy asks for huge pages for large arrays:
    then every node a walk touches makes 2 MB resident, and a walk of a few hundred nodes over a
    10M-node graph made most of its 100 MB of scratch resident; here it makes a few hundred
    pages, and memory never written reads as zeros without being resident at all."""
    size = n * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(size, 1)), dtype=dtype, count=n)


class _Scratch:
    """The node-sized arrays a walk needs, kept between walks instead of made for each.

    Made per walk, filling `dist` and touching the others was 40% of a depth-5 query at ten
    million edges (~9 ms of ~22 ms, cProfile, 100 starts): the arrays are 100 MB at that size,
    whatever the few hundred nodes the walk reaches. A walk takes a set from the pool of its
    node count and gives it back when the walk is gone, with the entries it wrote reset: `level`
    (distance + 1) and `mark` all zero again (`stamp` is only read where just written).
    """

    KEPT: ClassVar[int] = 4  # sets kept per node count: concurrent walks beyond that make their own
    SIZES: ClassVar[int] = 2  # node counts kept (an index caught up has a new one): the oldest goes

    _pools: ClassVar[dict[int, list[_Scratch]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, n: int) -> None:
        self.level = _zeros(n, np.int32)
        self.stamp = _zeros(n, np.int64)
        self.mark = _zeros(n, np.bool_)

    @classmethod
    def take(cls, n: int) -> _Scratch:
        with cls._lock:
            pool = cls._pools.get(n)
            if pool:
                return pool.pop()
        return cls(n)

    @classmethod
    def give_back(cls, scratch: _Scratch, written: np.ndarray) -> None:
        scratch.level[written] = 0
        n = len(scratch.level)
        with cls._lock:
            pool = cls._pools.pop(n, [])  # re-inserted: the dict's order is recency
            if len(pool) < cls.KEPT:
                pool.append(scratch)
            cls._pools[n] = pool
            while len(cls._pools) > cls.SIZES:
                del cls._pools[next(iter(cls._pools))]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values. np.unique does the same, but numpy 2.4 routes integer arrays
    through a hash table that measured 20× slower than sorting at these sizes."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]]


def _dedupe(nodes: np.ndarray, stamp: np.ndarray, mark: np.ndarray) -> np.ndarray:
    """`nodes` without repeats, without sorting them.

    A large level goes through a bitmap: set, one pass over all nodes, clear; that also
    returns the level sorted, which makes the next level's CSR reads nearly sequential.
    A small level would pay that full pass for little, so it uses `stamp` instead:
    whichever write of a repeated node wins, exactly one occurrence reads its own index back.
    Both scratch arrays are left as they were found (`mark` all False; `stamp` is only ever
    read where it was just written).
    """
    if len(nodes) * 32 > len(mark):
        mark[nodes] = True
        unique = np.flatnonzero(mark)
        mark[unique] = False
        return unique
    order = np.arange(len(nodes), dtype=np.int64)
    stamp[nodes] = order
    return nodes[stamp[nodes] == order]


def _bfs(
    index: GraphIndex,
    adj: Adjacency,
    starts: np.ndarray,
    flt: EdgeFilter,
    depth: int | None,
    *,
    count_paths: bool = False,
) -> _Walk:
    n = index.n_nodes
    scratch = _Scratch.take(n)
    plus_one = scratch.level  # hop distance + 1; 0: not reached
    plus_one[starts] = 1
    # Scratch for deduplicating a level's new nodes (see `_dedupe`).
    stamp, mark = scratch.stamp, scratch.mark
    sigma = None
    if count_paths:
        # float64: route counts grow exponentially in layered graphs and would wrap int64;
        # above 2**53 they are approximate, which is fine for ranking impact.
        sigma = _zeros(n, np.float64)
        sigma[starts] = 1.0
    levels = [starts]
    edge_chunks: list[np.ndarray] = []
    frontier = starts
    level = 0
    while len(frontier) and (depth is None or level < depth):
        level += 1
        slots, counts = gather_slots(adj, frontier)
        if len(slots) == 0:
            break
        keep = flt.edge_mask(index, adj, slots)
        slots = slots[keep]
        neighbours = adj.neighbours[slots]
        edge_chunks.append(adj.edges[slots])
        fresh = _dedupe(neighbours[plus_one[neighbours] == 0], stamp, mark)
        plus_one[fresh] = level + 1
        if sigma is not None:
            near = np.repeat(frontier, counts)[keep]
            onto = plus_one[neighbours] == level + 1
            near, far = near[onto], neighbours[onto]
            # Parallel edges (two signals or processes for one pair) are one route, not two.
            pairs = sorted_unique(near * n + far)
            np.add.at(sigma, pairs % n, sigma[pairs // n])
        if len(fresh):
            levels.append(fresh)
        frontier = fresh
    nodes = np.concatenate(levels) if len(levels) > 1 else starts
    edges = np.concatenate(edge_chunks) if edge_chunks else np.empty(0, dtype=np.int64)
    walk = _Walk(Distances(plus_one), nodes, [len(x) for x in levels], edges, sigma)
    weakref.finalize(walk, _Scratch.give_back, scratch, nodes)
    return walk


def _start_positions(index: GraphIndex, starts: Sequence[str] | str) -> tuple[tuple[str, ...], np.ndarray]:
    """Start URNs (deduplicated, canonical) and their sorted positions.

    Exact URNs are looked up in one pass (a batch query may pass thousands of starts);
    only misses go through `index.position`, which resolves plain table names or raises.
    """
    if isinstance(starts, str):
        starts = [starts]
    names = list(dict.fromkeys(starts))
    if not names:
        raise ValueError("lineage needs at least one start node")
    get = index.positions.get
    found = [get(name, -1) for name in names]
    if -1 in found:
        for i, position in enumerate(found):
            if position < 0:
                found[i] = index.position(names[i])  # raises UnknownNodeError
                names[i] = index.urns[found[i]]
        names = list(dict.fromkeys(names))
    return tuple(names), sorted_unique(np.asarray(found, dtype=np.int64))


# ---------------------------------------------------------------------- lineage


@dataclass(frozen=True, slots=True, eq=False)
class LineageResult:
    """The nodes a lineage query reached and the edges it crossed.

    `nodes[i]` is a node position at hop distance `hops[i]` (0 for the starts), in BFS
    order; `sides[i]` says on which side of the starts it was found (UPSTREAM | DOWNSTREAM
    bits, 0 for a start). `edges` are edge positions in the index: every edge that passed the
    filters out of an expanded node, i.e. the whole lineage subgraph to draw, not only a
    spanning tree. Store ids are `edge_ids`; `index.edge(position)` resolves one for rendering.
    Arrays are for callers that post-process in bulk; the methods give plain Python values.
    """

    index: GraphIndex
    starts: tuple[str, ...]
    direction: Direction
    nodes: np.ndarray
    hops: np.ndarray
    sides: np.ndarray
    edges: np.ndarray

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, urn: object) -> bool:
        position = self.index.positions.get(urn) if isinstance(urn, str) else None
        return position is not None and bool(np.any(self.nodes == position))

    @property
    def urns(self) -> list[str]:
        urns = self.index.urns
        return [urns[p] for p in self.nodes.tolist()]

    def distances(self) -> dict[int, int]:
        """Node position → hop distance, in BFS order."""
        return dict(zip(self.nodes.tolist(), self.hops.tolist(), strict=True))

    def distance_by_urn(self) -> dict[str, int]:
        urns = self.index.urns
        return {urns[p]: d for p, d in zip(self.nodes.tolist(), self.hops.tolist(), strict=True)}

    def edge_positions(self) -> list[int]:
        return self.edges.tolist()

    @property
    def edge_ids(self) -> np.ndarray:
        return self.index.edge_ids[self.edges]

    def edge_pairs(self) -> set[tuple[str, str]]:
        """(source, target) URN pairs of the crossed edges, in the stored direction."""
        urns = self.index.urns
        sources = self.index.edge_source[self.edges].tolist()
        targets = self.index.edge_target[self.edges].tolist()
        return {(urns[s], urns[t]) for s, t in zip(sources, targets, strict=True)}


def lineage(
    index: GraphIndex,
    starts: Sequence[str] | str,
    direction: Direction = "downstream",
    filters: TraversalFilters = NO_FILTERS,
    *,
    include_fields: bool = False,
) -> LineageResult:
    """Upstream, downstream or both-ways lineage of many start nodes in one pass.

    With several starts the result is the union of their single-start results, each node at
    its smallest distance from any start. `depth` limits hops (None = the full closure).
    `include_fields` adds, for asset starts, the field edges that run alongside the asset
    edges crossed (and those fields as nodes, at their asset's distance).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    depth = filters.depth
    if depth is not None and depth < 0:
        raise ValueError("depth must be ≥ 0")
    names, start_pos = _start_positions(index, starts)
    flt = edge_filter(index, filters)
    walks: dict[int, _Walk] = {}
    if direction in ("upstream", "both"):
        walks[UPSTREAM] = _bfs(index, index.upstream, start_pos, flt, depth)
    if direction in ("downstream", "both"):
        walks[DOWNSTREAM] = _bfs(index, index.downstream, start_pos, flt, depth)

    if len(walks) == 1:
        side, walk = next(iter(walks.items()))
        nodes = walk.nodes
        hops = np.repeat(np.arange(len(walk.level_sizes), dtype=np.int32), walk.level_sizes)
        sides = np.where(hops > 0, side, 0).astype(np.int8)
        edges = walk.edges
    else:
        up, down = walks[UPSTREAM], walks[DOWNSTREAM]
        # Work over the reached nodes only, not all n: a small query on a big graph stays small.
        reached = sorted_unique(np.concatenate([up.nodes, down.nodes]))
        hops_up, hops_down = up.dist[reached], down.dist[reached]
        # A node found on both sides (only possible through a cycle) keeps the nearer hop count.
        both = np.where(
            (hops_up >= 0) & (hops_down >= 0), np.minimum(hops_up, hops_down), np.maximum(hops_up, hops_down)
        )
        order = np.argsort(both, kind="stable")
        nodes = reached[order]
        hops = both[order].astype(np.int32)
        sides = ((hops_up > 0) * UPSTREAM + (hops_down > 0) * DOWNSTREAM)[order].astype(np.int8)
        edges = sorted_unique(np.concatenate([walks[UPSTREAM].edges, walks[DOWNSTREAM].edges]))

    if include_fields:
        nodes, hops, sides, edges = _with_fields(index, flt, nodes, hops, sides, edges)
    return LineageResult(index, names, direction, nodes, hops, sides, edges)


def _with_fields(
    index: GraphIndex,
    flt: EdgeFilter,
    nodes: np.ndarray,
    distances: np.ndarray,
    sides: np.ndarray,
    edges: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Add the field edges whose asset pair is one of the asset edges crossed."""
    n = index.n_nodes
    asset_edges = edges[~index.edge_is_field[edges]]
    crossed = sorted_unique(index.edge_source[asset_edges] * n + index.edge_target[asset_edges])
    candidates = np.flatnonzero(index.edge_is_field)
    candidates = candidates[flt.valid_mask(index, candidates)]
    source_asset = index.asset_of[index.edge_source[candidates]]
    target_asset = index.asset_of[index.edge_target[candidates]]
    along = candidates[np.isin(source_asset * n + target_asset, crossed)]
    if len(along) == 0:
        return nodes, distances, sides, edges
    # Each field sits at its asset's distance and side; fields already present stay as they are.
    at = np.full(n, -1, dtype=np.int64)
    at[nodes] = np.arange(len(nodes))
    fields = sorted_unique(np.concatenate([index.edge_source[along], index.edge_target[along]]))
    fields = fields[at[fields] < 0]
    owner = at[index.asset_of[fields]]
    return (
        np.concatenate([nodes, fields]),
        np.concatenate([distances, distances[owner]]),
        np.concatenate([sides, sides[owner]]),
        np.concatenate([edges, along]),
    )


# ---------------------------------------------------------------------- impact


@dataclass(frozen=True, slots=True)
class ImpactedAsset:
    """A downstream asset: how far (hops) and over how many shortest routes.

    `via_fields` are the asset's fields reached by column lineage (from field starts); empty
    when the asset was reached by table lineage. Owners and other properties are the
    caller's to look up in the store.
    """

    asset: str
    kind: str
    distance: int
    paths: int
    via_fields: tuple[str, ...] = ()


def impact(
    index: GraphIndex,
    starts: Sequence[str] | str,
    filters: TraversalFilters = NO_FILTERS,
) -> list[ImpactedAsset]:
    """The assets downstream of `starts`, nearest first.

    An asset start walks table lineage; a field start walks column lineage and each field
    reached counts for its asset (so changing one column impacts only the tables that read
    that column). An asset's distance is the nearest of its nodes reached; `paths` counts
    the shortest routes to those nearest nodes. The starts' own assets are not listed.
    """
    _, start_pos = _start_positions(index, starts)
    flt = edge_filter(index, filters)
    walk = _bfs(index, index.downstream, start_pos, flt, filters.depth, count_paths=True)
    assert walk.sigma is not None
    nodes = walk.nodes
    distances = walk.dist[nodes]
    assets = index.asset_of[nodes]
    on_asset = assets >= 0
    nodes, distances, assets = nodes[on_asset], distances[on_asset], assets[on_asset]
    # Nearest node per asset: sort by (asset, distance) and take each asset's first row.
    order = np.lexsort((distances, assets))
    nodes, distances, assets = nodes[order], distances[order], assets[order]
    first = np.flatnonzero(np.r_[True, assets[1:] != assets[:-1]]) if len(assets) else np.empty(0, np.int64)
    nearest = np.repeat(distances[first], np.diff(np.r_[first, len(assets)]))
    at_nearest = distances == nearest

    # Shortest routes per asset: the route counts of its nodes at its nearest distance.
    routes = np.add.reduceat(np.where(at_nearest, walk.sigma[nodes], 0.0), first) if len(first) else first
    urns = index.urns
    fields: dict[int, list[str]] = defaultdict(list)
    is_field = index.node_types[nodes] == FIELD
    for node, asset in zip(nodes[is_field].tolist(), assets[is_field].tolist(), strict=True):
        fields[asset].append(urns[node])
    found = [
        ImpactedAsset(
            asset=urns[asset],
            kind=index.kind(asset),
            distance=distance,
            paths=round(count),
            via_fields=tuple(sorted(fields.get(asset, ()))),
        )
        for asset, distance, count in zip(
            assets[first].tolist(), distances[first].tolist(), routes.tolist(), strict=True
        )
        if distance > 0
    ]
    return sorted(found, key=lambda a: (a.distance, a.asset))


# ---------------------------------------------------------------------- paths


def paths(
    index: GraphIndex,
    source: str,
    target: str,
    filters: TraversalFilters = NO_FILTERS,
    *,
    max_depth: int = 10,
    max_paths: int = 100,
) -> list[list[int]]:
    """Simple downstream paths from `source` to `target`, shortest first, at most `max_paths`.

    A path is a list of edge positions (`index.edge(p)` resolves one). Paths are distinct
    node routes: where parallel edges join the same two nodes (two signals or processes
    recording one flow) the hop uses the surest of them (highest confidence, then lowest
    store id) instead of multiplying the paths by every combination of evidence.

    Two vectorised BFS walks (forward from source, backward from target) keep only nodes
    that lie on some route of at most `max_depth` hops; the enumeration then runs over that
    pruned subgraph and never steps where the target is out of reach in the hops left.
    """
    if max_depth < 0 or max_paths < 0:
        raise ValueError("max_depth and max_paths must be ≥ 0")
    s = index.position(source)
    t = index.position(target)
    if s == t or max_paths == 0:
        return []
    flt = edge_filter(index, filters)
    start = np.array([s], dtype=np.int64)
    forward = _bfs(index, index.downstream, start, flt, max_depth)
    if forward.dist[t] < 0:
        return []
    backward = _bfs(index, index.upstream, np.array([t], dtype=np.int64), flt, max_depth)
    to_target = backward.dist

    # Edges on some route short enough: dist(s, u) + 1 + dist(v, t) ≤ max_depth.
    edges = forward.edges
    u, v = index.edge_source[edges], index.edge_target[edges]
    useful = (to_target[v] >= 0) & (forward.dist[u] + 1 + to_target[v] <= max_depth)
    edges, u, v = edges[useful], u[useful], v[useful]
    # Sort by pair, surest first, so the first edge seen for a pair is its representative.
    order = np.lexsort((edges, -index.edge_confidence[edges].astype(np.int64), v, u))
    via: dict[tuple[int, int], int] = {}
    successors: dict[int, list[int]] = defaultdict(list)
    for e, a, b in zip(edges[order].tolist(), u[order].tolist(), v[order].tolist(), strict=True):
        if (a, b) not in via:
            via[(a, b)] = e
            successors[a].append(b)
    # hops to the target from each node a step can reach (every one reaches it: pruned above)
    hops_left = dict(zip(v.tolist(), to_target[v].tolist(), strict=True))

    found: list[list[int]] = []
    budget = _PATH_STEP_BUDGET
    # One DFS per exact length, so that shortest paths come first and a max_paths cut
    # keeps the shortest.
    for length in range(int(forward.dist[t]), max_depth + 1):
        path = [s]
        on_path = {s}
        stack = [iter(successors[s])]
        while stack and len(found) < max_paths and budget > 0:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            budget -= 1
            remaining = length - len(path)  # hops still to take after this one
            if step == t:
                if remaining == 0:
                    found.append([*path, t])
                continue
            if step in on_path or hops_left[step] < 0 or hops_left[step] > remaining:
                continue
            path.append(step)
            on_path.add(step)
            stack.append(iter(successors[step]))
        if len(found) >= max_paths or budget <= 0:
            break

    return [[via[(a, b)] for a, b in itertools.pairwise(route)] for route in found]
