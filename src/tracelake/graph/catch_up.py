"""An index brought up to the store's graph version from what changed since its own, instead of
built again from every row (issue 21).

Each ingest says in the store's change log which node ids it inserted and which process
versions it inserted, retimed or deleted (`store.snapshots.read_changes`). Catching up reads only
those rows: the new nodes take the next positions, the edges of those versions and every re-read
edge leave the index, and the current rows come in, their assets' ends applied as a full read
applies them. The arrays and the two CSR copies are merged, not sorted again: a few passes over
the arrays in memory, which is what a catch-up costs besides the rows read.
The result answers exactly as an index built from the store at that version (a property test
compares them); a change the log cannot place — an id older than the index's newest node, which
a PostgreSQL writer that commits late can leave — returns None, and the caller builds instead.

The usual write only appends: new processes, their edges, new nodes. Those rows are not merged
in but `extended` after the index's arrays, each direction's entries grouped by node in an
`AdjacencyTail` that walks read beside the laid-out CSR: a few milliseconds whatever the size of
the index, whose arrays (a kept index's mapped files) are neither copied nor read. Past
`TAIL_SHARE` of the base, or at the first change that is not an append, the base is caught up
with everything since (the merge above) and the tail is gone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tracelake.graph.extended import extend, tail_after
from tracelake.graph.file_array import release
from tracelake.graph.index import (
    FIELD,
    Adjacency,
    AdjacencyTail,
    GraphIndex,
    UrnSequence,
    assets_of,
    positions_of,
)
from tracelake.graph.index_files import ADJACENCY_ARRAYS
from tracelake.store.records import OPEN_END, GraphChanges
from tracelake.store.snapshots import end_edges

if TYPE_CHECKING:
    from tracelake.store.sqlstore import LineageStore


# An appended tail is merged into its base once its nodes and edges pass this share of the
# base's (and `TAIL_MIN`): until then each walk reads it beside the base, a little more per
# level. The same share makes a cache keep the merged index (`cache.REKEEP`).
TAIL_SHARE = 0.05
TAIL_MIN = 10_000


def catch_up(index: GraphIndex, store: LineageStore) -> GraphIndex | None:
    """`index` at the store's graph version, from the changes since its own; None when they
    cannot be read (a log that does not reach back) or placed (see the module)."""
    changes = store.changes_since(index.version, index.ended)
    if changes is None:
        return None
    extended = appended(index, changes)
    if extended is not None:
        return extended
    if index.base is not None:  # a tail is not merged into: the base catches up with all since
        return catch_up(index.base, store)
    return caught_up(index, changes)


@dataclass(frozen=True, slots=True)
class _NewNodes:
    """The nodes of a snapshot an index lacks, at the positions after its own."""

    ids: np.ndarray
    urns: list[str]
    kinds: tuple[str, ...]  # the index's kinds, then those first seen here
    kind_codes: np.ndarray
    types: np.ndarray
    parents: np.ndarray  # store ids

    @classmethod
    def of(cls, index: GraphIndex, changes: GraphChanges) -> _NewNodes | None:
        """None when one is older than the index's newest: positions follow ids."""
        snap = changes.snapshot
        fresh = positions_of(index.node_ids, snap.node_ids) < 0  # id ranges may hold nodes the index has
        ids = snap.node_ids[fresh]
        if len(ids) and index.n_nodes and int(ids[0]) <= int(index.node_ids[-1]):
            return None
        new_kinds = [kind for kind, keep in zip(snap.node_kinds, fresh, strict=True) if keep]
        kinds = index.kinds + tuple(sorted(set(new_kinds) - set(index.kinds)))
        code_of = {kind: code for code, kind in enumerate(kinds)}
        return cls(
            ids=ids,
            urns=[urn for urn, keep in zip(snap.node_urns, fresh, strict=True) if keep],
            kinds=kinds,
            kind_codes=np.fromiter((code_of[k] for k in new_kinds), dtype=np.int32, count=len(new_kinds)),
            types=snap.node_types[fresh],
            parents=snap.node_parents[fresh],
        )

    def asset_of(self, node_ids: np.ndarray, first: int) -> np.ndarray:
        """Their assets' positions among `node_ids` (the index's, then theirs)."""
        return assets_of(self.types, positions_of(node_ids, self.parents), first=first)


def _edge_rows(
    changes: GraphChanges, node_ids: np.ndarray, node_types: np.ndarray, asset_of: np.ndarray
) -> dict[str, np.ndarray] | None:
    """The snapshot's edges as index rows (positions among `node_ids`, their assets' ends
    applied); None when one names a node the index would not have."""
    snap = changes.snapshot
    source = positions_of(node_ids, snap.edge_source)
    target = positions_of(node_ids, snap.edge_target)
    process = positions_of(node_ids, snap.edge_process)
    if len(source) and min(int(source.min()), int(target.min()), int(process.min())) < 0:
        return None

    def owners(positions: np.ndarray) -> np.ndarray:  # the store id of each node's asset, -1 for none
        assets = asset_of[positions]
        return np.where(assets >= 0, node_ids[np.maximum(assets, 0)], -1)

    return {
        "edge_ids": snap.edge_ids,
        "edge_source": source,
        "edge_target": target,
        "edge_process": process,
        "edge_signal": snap.edge_signal,
        "edge_confidence": snap.edge_confidence,
        "edge_transformation": snap.edge_transformation,
        "edge_valid_from": snap.edge_valid_from,
        "edge_valid_to": end_edges(
            snap.edge_valid_from, snap.edge_valid_to, owners(source), owners(target), snap.ended
        ),
        "edge_is_field": node_types[source] == FIELD,
    }


def appended(index: GraphIndex, changes: GraphChanges) -> GraphIndex | None:
    """`index` with `changes` appended after its base's arrays (see the module); None unless the
    changes only append: no end moved, every changed process version is of a process new here
    (so no row of the index is of one), every row newer than the index's, and the tail small."""
    snap, base = changes.snapshot, index.base or index
    if dict(snap.ended) != dict(index.ended):
        return None
    if index.n_edges and len(snap.edge_ids) and int(snap.edge_ids[0]) <= int(index.edge_ids[-1]):
        return None
    tail_edges = index.n_edges - base.n_edges + len(snap.edge_ids)
    tail_rows = tail_edges + index.n_nodes - base.n_nodes + len(snap.node_ids)  # node ids: at most new
    if tail_rows > max(TAIL_SHARE * (base.n_nodes + base.n_edges), TAIL_MIN):
        return None
    processes = np.array(sorted({pid for pid, _ in changes.versions}), dtype=np.int64)
    if bool((positions_of(index.node_ids, processes) >= 0).any()):
        return None
    nodes = _NewNodes.of(index, changes)
    if nodes is None:
        return None
    first = index.n_nodes

    def longer(name: str, new: np.ndarray) -> np.ndarray:
        """The base's array `name`, extended by the index's tail of it and then `new`."""
        kept = getattr(base, name)
        tail = tail_after(getattr(index, name), len(kept))
        return extend(kept, np.concatenate([tail, new.astype(kept.dtype, copy=False)]))

    node_ids = longer("node_ids", nodes.ids)
    node_types = longer("node_types", nodes.types)
    asset_of = longer("asset_of", nodes.asset_of(node_ids, first))
    rows = _edge_rows(changes, node_ids, node_types, asset_of)
    if rows is None:
        return None
    edges: dict[str, Any] = {name: longer(name, new) for name, new in rows.items()}
    n_edges_base = base.n_edges
    tail_positions = np.arange(n_edges_base, n_edges_base + tail_edges, dtype=np.int64)
    is_open = tail_after(edges["edge_valid_to"], n_edges_base) == OPEN_END
    source = tail_after(edges["edge_source"], n_edges_base)
    target = tail_after(edges["edge_target"], n_edges_base)
    n = len(node_ids)
    return GraphIndex(
        version=snap.version,
        urns=AppendedUrns.of(index.urns, nodes.urns),
        positions=AppendedPositions.of(index.positions, nodes.urns, first),
        node_ids=node_ids,
        node_types=node_types,
        kinds=nodes.kinds,
        kind_codes=longer("kind_codes", nodes.kind_codes),
        asset_of=asset_of,
        downstream=_with_tail(base.downstream, n, source, target, is_open, tail_positions),
        upstream=_with_tail(base.upstream, n, target, source, is_open, tail_positions),
        ended=index.ended,
        base=base,
        **edges,
    )


def _with_tail(
    laid_out: Adjacency,
    n_nodes: int,
    near: np.ndarray,
    far: np.ndarray,
    is_open: np.ndarray,
    positions: np.ndarray,
) -> Adjacency:
    """`laid_out` (a base's CSR) with the tail's entries (`near` → `far`, the edges at
    `positions`) grouped by node beside it; the nodes past the base have no laid-out entries."""
    order = np.lexsort((positions, near))
    nodes, counts = np.unique(near[order], return_counts=True)
    indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    added = n_nodes - len(laid_out.degrees)
    start = len(laid_out.edges)
    return Adjacency(
        indptr=extend(laid_out.indptr, np.full(added, laid_out.indptr[-1], dtype=np.int64)),
        degrees=extend(laid_out.degrees, np.zeros(added, dtype=np.int64)),
        edges=extend(laid_out.edges, positions[order]),
        neighbours=extend(laid_out.neighbours, far[order]),
        is_open=extend(laid_out.is_open, is_open[order]),
        tail=AdjacencyTail(nodes.astype(np.int64), indptr, start) if len(nodes) else None,
    )


def caught_up(index: GraphIndex, changes: GraphChanges) -> GraphIndex | None:
    """`index` with `changes` applied (see `catch_up`)."""
    snap = changes.snapshot
    old_edge_ids = index.edge_ids
    nodes = _NewNodes.of(index, changes)
    if nodes is None:
        return None  # positions follow ids: an older id would have to come between
    node_ids = joined(index.node_ids, nodes.ids)
    n = len(node_ids)
    kind_codes = joined(index.kind_codes, nodes.kind_codes)
    node_types = joined(index.node_types, nodes.types)
    asset_of = joined(index.asset_of, nodes.asset_of(node_ids, index.n_nodes))

    leaving = np.zeros(len(old_edge_ids), dtype=bool)
    read_again = positions_of(old_edge_ids, snap.edge_ids)  # both in id order: a search, not a scan
    leaving[read_again[read_again >= 0]] = True
    if changes.versions:
        changed = set(changes.versions)
        process_ids = np.array(sorted({pid for pid, _ in changed}), dtype=np.int64)
        candidates = np.flatnonzero(np.isin(index.edge_process, positions_of(node_ids, process_ids)))
        processes = node_ids[index.edge_process[candidates]].tolist()
        keys = zip(processes, index.edge_valid_from[candidates].tolist(), strict=True)
        leaving[candidates[np.array([key in changed for key in keys], dtype=bool)]] = True
    new_rows = _edge_rows(changes, node_ids, node_types, asset_of)
    if new_rows is None:
        return None  # an edge of a node the changes do not hold
    source, target = new_rows["edge_source"], new_rows["edge_target"]
    merge = _EdgeMerge(old_edge_ids, leaving, snap.edge_ids)
    edges: dict[str, Any] = {}
    for name, rows in new_rows.items():
        old = getattr(index, name)
        edges[name] = merge.rows(old, rows)
        release(old)  # the kept index's pages, read once to be copied, are not held as well as the copy
    is_new_open = new_rows["edge_valid_to"] == OPEN_END
    downstream = merge.adjacency(index.downstream, n, source, target, is_new_open)
    release(*_arrays_of(index.downstream))
    upstream = merge.adjacency(index.upstream, n, target, source, is_new_open)
    release(*_arrays_of(index.upstream), index.node_ids, index.node_types, index.kind_codes, index.asset_of)
    return GraphIndex(
        version=snap.version,
        urns=AppendedUrns.of(index.urns, nodes.urns),
        positions=AppendedPositions.of(index.positions, nodes.urns, index.n_nodes),
        node_ids=node_ids,
        node_types=node_types,
        kinds=nodes.kinds,
        kind_codes=kind_codes,
        asset_of=asset_of,
        downstream=downstream,
        upstream=upstream,
        ended=dict(snap.ended),
        **edges,
    )


def _arrays_of(adjacency: Adjacency) -> list[np.ndarray]:
    return [getattr(adjacency, name) for name in ADJACENCY_ARRAYS]


def joined(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """`old` then `new`, in `old`'s type."""
    return np.concatenate([old, new.astype(old.dtype, copy=False)])


class _EdgeMerge:
    """Where the index's staying edges and the rows read go: both in store-id order, merged so
    that the index stays in id order, as a build lays it out, without sorting every edge.

    When no edge leaves and every row read is newer than the index's newest (new processes, new
    runs: the usual write), the rows go at the end and each node's new entries at the end of
    its group (`np.concatenate`, `np.insert`: copies, no scatter).
    """

    def __init__(self, old_ids: np.ndarray, leaving: np.ndarray, new_ids: np.ndarray) -> None:
        self.appended = not leaving.any() and (
            len(old_ids) == 0 or len(new_ids) == 0 or int(new_ids[0]) > int(old_ids[-1])
        )
        self.n_old = len(old_ids)
        self.placed = np.arange(len(old_ids), len(old_ids) + len(new_ids), dtype=np.int64)
        if self.appended:
            return
        self.staying = np.flatnonzero(~leaving)
        staying_ids = old_ids[self.staying]
        self.total = len(self.staying) + len(new_ids)
        self.moved = np.full(len(old_ids), -1, dtype=np.int64)  # an old edge position → its new one
        self.moved[self.staying] = np.arange(len(self.staying)) + np.searchsorted(new_ids, staying_ids)
        self.placed = np.searchsorted(staying_ids, new_ids) + np.arange(len(new_ids))

    def rows(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        """An edge array with the staying rows of `old` and the rows read, `new`, in id order."""
        if self.appended:
            return joined(old, new)
        out = np.empty(self.total, dtype=old.dtype)
        out[self.moved[self.staying]] = old[self.staying]
        out[self.placed] = new
        return out

    def adjacency(
        self, old: Adjacency, n_nodes: int, near: np.ndarray, far: np.ndarray, is_open: np.ndarray
    ) -> Adjacency:
        """`old` with its entries of edges that left dropped, the rest renumbered, and the rows
        read (`near` → `far`) merged in: the layout `Adjacency.build` gives, grouped by node and
        by edge position within a node."""
        order = np.lexsort((self.placed, near))
        add_near, add_position = near[order], self.placed[order]
        added = np.bincount(add_near, minlength=n_nodes)
        if self.appended:
            # each new entry goes at the end of its node's group; a new node's, at the very end
            n_old = len(old.degrees)
            group_end = old.indptr[np.minimum(add_near + 1, n_old)]
            at = np.where(add_near < n_old, group_end, len(old.edges))
            edges = np.insert(old.edges, at, add_position)
            neighbours = np.insert(old.neighbours, at, far[order])
            opens = np.insert(old.is_open, at, is_open[order])
            degrees = np.zeros(n_nodes, dtype=np.int64)
            degrees[:n_old] = old.degrees
            degrees += added
        else:
            old_near = np.repeat(np.arange(len(old.degrees), dtype=np.int64), old.degrees)
            keep = self.moved[old.edges] >= 0
            kept_near, kept_position = old_near[keep], self.moved[old.edges[keep]]
            span = max(self.n_old, 1) + len(self.placed)  # a key orders by node, then edge position
            kept_key, add_key = kept_near * span + kept_position, add_near * span + add_position
            kept_at = np.arange(len(kept_key)) + np.searchsorted(add_key, kept_key)
            add_at = np.searchsorted(kept_key, add_key) + np.arange(len(add_key))

            def merged(kept: np.ndarray, new: np.ndarray) -> np.ndarray:
                out = np.empty(len(kept_key) + len(add_key), dtype=kept.dtype)
                out[kept_at] = kept
                out[add_at] = new
                return out

            edges = merged(kept_position, add_position)
            neighbours = merged(old.neighbours[keep], far[order])
            opens = merged(old.is_open[keep], is_open[order])
            degrees = np.bincount(kept_near, minlength=n_nodes) + added
        indptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(degrees, out=indptr[1:])
        return Adjacency(indptr, degrees.astype(np.int64), edges, neighbours, opens)


class AppendedUrns(UrnSequence):
    """An index's URNs by position: those of the index it caught up from, then the new ones
    (the old sequence is shared, not copied: a kept index's are read from its files)."""

    def __init__(self, base: Sequence[str], more: list[str]) -> None:
        self.base, self.more = base, more

    @classmethod
    def of(cls, urns: Sequence[str], more: list[str]) -> Sequence[str]:
        if not more:
            return urns
        if isinstance(urns, AppendedUrns):
            return cls(urns.base, urns.more + more)
        return cls(urns, more)

    def __len__(self) -> int:
        return len(self.base) + len(self.more)

    def urn(self, position: int) -> str:
        return self.base[position] if position < len(self.base) else self.more[position - len(self.base)]

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from self.more


class AppendedPositions(Mapping[str, int]):
    """Positions by URN: the index's it caught up from, then the new nodes'."""

    def __init__(self, base: Mapping[str, int], more: dict[str, int]) -> None:
        self.base, self.more = base, more

    @classmethod
    def of(cls, positions: Mapping[str, int], urns: list[str], first: int) -> Mapping[str, int]:
        if not urns:
            return positions
        more = dict(zip(urns, range(first, first + len(urns)), strict=True))
        if isinstance(positions, AppendedPositions):
            return cls(positions.base, {**positions.more, **more})
        return cls(positions, more)

    def __getitem__(self, urn: str) -> int:
        found = self.more.get(urn)
        return self.base[urn] if found is None else found

    def __contains__(self, urn: object) -> bool:
        return urn in self.more or urn in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from self.more

    def __len__(self) -> int:
        return len(self.base) + len(self.more)
