"""Upstream of a node within a time window, and which of its inputs appeared or vanished then.

The graph half of root cause (`app.root_cause`). The walk goes upstream level by level over
every edge version in force at some moment of [since, until], so an input that vanished in the
window is walked too, and remembers for each node the edge that first reached it: one shortest
route back to the start. What the index itself says changed is read off the same edges: a
(source, target) pair present at `until` but not at `since` is an input that appeared, the
other way round one that vanished. An asset start walks table lineage, a field start column
lineage, as every walk does (`traverse`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelake.graph.index import GraphIndex, gather_slots


@dataclass(frozen=True, slots=True)
class InputChange:
    """A flow into a node of the walk that began (`appeared`) or ended in the window."""

    source: int  # node positions
    target: int
    process: int  # the process of the edge version that began, or of the last one that ended
    at_us: int
    appeared: bool


@dataclass(frozen=True, slots=True)
class UpstreamWindow:
    index: GraphIndex
    start: int
    distance: dict[int, int]  # node position → hops from the start (the start: 0)
    reached_by: dict[int, int]  # node position → the edge position the walk first reached it by
    writes: dict[int, int]  # process position → the nearest node of the walk it writes
    input_changes: list[InputChange]

    def route(self, node: int) -> list[int]:
        """Edge positions from `node` down to the start: one shortest route."""
        edges = []
        while node != self.start:
            edge = self.reached_by[node]
            edges.append(edge)
            node = int(self.index.edge_target[edge])
        return edges


def upstream_window(
    index: GraphIndex, start: int, since_us: int, until_us: int, depth: int | None = None
) -> UpstreamWindow:
    """The walk upstream of node position `start` over the edges in force within the window."""
    adj = index.upstream
    seen = np.zeros(index.n_nodes, dtype=bool)
    seen[start] = True
    distance = {start: 0}
    reached_by: dict[int, int] = {}
    levels, crossed = [np.array([start], dtype=np.int64)], []
    frontier = levels[0]
    while len(frontier) and (depth is None or len(levels) <= depth):
        slots, _ = gather_slots(adj, frontier)
        edges = adj.edges[slots]
        keep = _in_force(index, edges, since_us, until_us)
        slots, edges = slots[keep], edges[keep]
        crossed.append(edges)
        neighbours = adj.neighbours[slots]
        new = ~seen[neighbours]
        # the first edge (lowest slot) to each new node is the one its route goes through
        fresh, first = np.unique(neighbours[new], return_index=True)
        seen[fresh] = True
        hops = len(levels)
        distance.update(dict.fromkeys(fresh.tolist(), hops))
        reached_by.update(zip(fresh.tolist(), edges[new][first].tolist(), strict=True))
        if len(fresh):
            levels.append(fresh)
        frontier = fresh
    walked = np.concatenate(crossed) if crossed else np.empty(0, dtype=np.int64)
    writes: dict[int, int] = {}
    targets = index.edge_target[walked].tolist()
    for process, target in zip(index.edge_process[walked].tolist(), targets, strict=True):
        if process not in writes or distance[target] < distance[writes[process]]:
            writes[process] = target
    reached = np.concatenate(levels)
    return UpstreamWindow(
        index,
        start,
        distance,
        reached_by,
        writes,
        _input_changes(index, reached, since_us, until_us),
    )


def _input_changes(index: GraphIndex, reached: np.ndarray, since_us: int, until_us: int) -> list[InputChange]:
    """The pairs into `reached` whose presence differs between `since` and `until`."""
    slots, _ = gather_slots(index.upstream, reached)
    edges = index.upstream.edges[slots]
    if len(edges) == 0:
        return []
    source, target = index.edge_source[edges], index.edge_target[edges]
    at_since = _in_force(index, edges, since_us, since_us)
    at_until = _in_force(index, edges, until_us, until_us)
    keys = target * index.n_nodes + source
    order = np.argsort(keys, kind="stable")
    keys, at_since, at_until = keys[order], at_since[order], at_until[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    was = np.logical_or.reduceat(at_since, first)
    now = np.logical_or.reduceat(at_until, first)
    changes = []
    bounds = np.r_[first, len(keys)]
    for k in np.flatnonzero(was != now).tolist():
        versions = edges[order[bounds[k] : bounds[k + 1]]]
        if now[k]:  # appeared: the first version that began in the window
            began = versions[(index.edge_valid_from[versions] > since_us)]
            edge = int(began[np.argmin(index.edge_valid_from[began])])
            at = int(index.edge_valid_from[edge])
        else:  # vanished: the last version that ended in the window
            ended = versions[index.edge_valid_to[versions] <= until_us]
            edge = int(ended[np.argmax(index.edge_valid_to[ended])])
            at = int(index.edge_valid_to[edge])
        changes.append(
            InputChange(
                int(index.edge_source[edge]),
                int(index.edge_target[edge]),
                int(index.edge_process[edge]),
                at,
                bool(now[k]),
            )
        )
    return changes


def flows_into(index: GraphIndex, node: int, since_us: int, until_us: int) -> list[tuple[int, int]]:
    """(source, process) of every flow into `node` in force at some moment of [since, until]."""
    slots, _ = gather_slots(index.upstream, np.array([node], dtype=np.int64))
    edges = index.upstream.edges[slots]
    edges = edges[_in_force(index, edges, since_us, until_us)]
    pairs = zip(index.edge_source[edges].tolist(), index.edge_process[edges].tolist(), strict=True)
    return list(dict.fromkeys(pairs))


def _in_force(index: GraphIndex, edges: np.ndarray, since_us: int, until_us: int) -> np.ndarray:
    """Which edge versions were in force at some moment of [since, until] (at one moment when the
    two are equal)."""
    return (index.edge_valid_from[edges] <= until_us) & (index.edge_valid_to[edges] > since_us)
