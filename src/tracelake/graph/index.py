"""The in-memory adjacency index that every graph analysis runs on.

`GraphIndex` is built from one `GraphSnapshot` of the store: nodes get dense positions
0..n-1 (URN ↔ position), edge endpoints are translated from store ids to positions, and
the edges are laid out twice in CSR form (compressed sparse rows), once grouped by source
for downstream walks and once by target for upstream walks. Everything is built with numpy
(argsort, searchsorted, bincount), never a Python loop over edges, so a million edges index
in well under a second once the snapshot is loaded.

The index holds every edge *version*, not only the open ones: analyses filter by validity
at query time, which is what makes lineage "as of" a past date as cheap as lineage now.
An index is immutable; `cache.IndexCache` swaps in a new one when the store's `graph_version()`
moved (caught up from the changes since, `catch_up`, or built again), and reuses the old one
otherwise.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, overload

import numpy as np

from tracelake.model import Confidence, EdgeVersion, Signal, Transformation, UnknownNodeError, UrnError
from tracelake.model.names import resolve_node
from tracelake.store.records import NODE_TYPES, OPEN_END, GraphSnapshot
from tracelake.store.schema import from_micros, to_micros

if TYPE_CHECKING:
    from tracelake.store.sqlstore import LineageStore

ASSET, FIELD, PROCESS = (NODE_TYPES.index(name) for name in ("asset", "field", "process"))
SIGNALS: tuple[Signal, ...] = tuple(Signal)
TRANSFORMATIONS: tuple[Transformation, ...] = tuple(Transformation)
CONFIDENCE_BY_RANK: dict[int, Confidence] = {c.rank: c for c in Confidence}


class UrnSequence(Sequence[str]):
    """URNs by position, each found when asked for: a kept index's (read from its files), or a
    caught-up index's (its base's, then the new ones). `urn` and `__len__` say how."""

    def urn(self, position: int) -> str:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self.urn(p) for p in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self.urn(index % len(self))


@dataclass(frozen=True, slots=True)
class AdjacencyTail:
    """Entries appended after a CSR was laid out (`catch_up`: edges of new processes), grouped by
    node apart from it: node `nodes[k]`'s are the slots `start + indptr[k]` … `start +
    indptr[k + 1] - 1` of the adjacency's arrays, after those its row pointers give."""

    nodes: np.ndarray  # int64 node positions, sorted, each with at least one entry
    indptr: np.ndarray  # int64, len(nodes) + 1
    start: int  # the first slot past the laid-out CSR


@dataclass(frozen=True, slots=True)
class Adjacency:
    """One direction of the graph in CSR form.

    The edges leaving (or, for the upstream copy, entering) node `v` are
    `edges[indptr[v]:indptr[v + 1]]`, then those of `tail` (a caught-up index's), and the nodes
    at their other end are `neighbours[…]` over the same slots: `gather_slots` finds them.
    `is_open` is `valid_to == OPEN_END` in the same order: "lineage now" is the common query, and
    a bool gather in CSR order saves a second indirection.
    """

    indptr: np.ndarray  # int64, n_nodes + 1
    degrees: np.ndarray  # int64, n_nodes: indptr[v + 1] - indptr[v], kept to save a gather per level
    edges: np.ndarray  # int64 edge positions, grouped by node
    neighbours: np.ndarray  # int64 node positions at the far end of each edge
    is_open: np.ndarray  # bool
    tail: AdjacencyTail | None = None

    @classmethod
    def build(cls, n_nodes: int, near: np.ndarray, far: np.ndarray, is_open: np.ndarray) -> Adjacency:
        # A stable sort keeps each node's edges in store-id order, so results are deterministic.
        order = np.argsort(near, kind="stable")
        degrees = np.bincount(near, minlength=n_nodes).astype(np.int64)
        indptr = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(degrees, out=indptr[1:])
        return cls(indptr, degrees, order.astype(np.int64), far[order], is_open[order])


def gather_slots(adj: Adjacency, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slots of every edge of every frontier node, each node's together and in frontier
    order, and the count per node."""
    lo = adj.indptr[frontier]
    counts = adj.degrees[frontier]
    tail = adj.tail
    if tail is not None and len(frontier):
        k = np.minimum(np.searchsorted(tail.nodes, frontier), len(tail.nodes) - 1)
        more = np.where(tail.nodes[k] == frontier, tail.indptr[k + 1] - tail.indptr[k], 0)
        if more.any():
            # two runs a node, the laid-out entries then the tail's
            run_lo = np.stack([lo, tail.start + tail.indptr[k]], axis=1).ravel()
            runs = _runs(run_lo, np.stack([counts, more], axis=1).ravel())
            return runs, counts + more
    return _runs(lo, counts), counts


def _runs(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """concat(arange(lo[i], lo[i] + counts[i])) without a Python loop: one arange over the
    total, shifted per run by (lo - where its run starts)."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    run_starts = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) + np.repeat(lo - run_starts, counts)


@dataclass(frozen=True, slots=True, eq=False)
class GraphIndex:
    """Nodes and edge versions of one store version, indexed for vectorised traversal.

    Node arrays are indexed by position; edge arrays by edge position (the snapshot order,
    i.e. store edge id order). `asset_of[v]` is the asset of a field, the node itself for an
    asset and -1 for a process. `kind_codes[v]` indexes `kinds` (a field carries its asset's
    kind, a process its own kind).
    """

    version: int
    urns: Sequence[str]  # a list, or the URNs of a kept index read when asked for (`index_files`)
    positions: Mapping[str, int]
    node_ids: np.ndarray
    node_types: np.ndarray  # int8: ASSET, FIELD, PROCESS
    kinds: tuple[str, ...]
    kind_codes: np.ndarray  # int32 index into `kinds`
    asset_of: np.ndarray  # int64
    edge_ids: np.ndarray
    edge_source: np.ndarray  # int64 node positions
    edge_target: np.ndarray
    edge_process: np.ndarray
    edge_signal: np.ndarray  # int8 index into SIGNALS
    edge_confidence: np.ndarray  # int8 Confidence.rank
    edge_transformation: np.ndarray  # int8 index into TRANSFORMATIONS, -1 for none
    edge_valid_from: np.ndarray  # int64 epoch µs
    edge_valid_to: np.ndarray  # int64 epoch µs, OPEN_END when open
    edge_is_field: np.ndarray  # bool: a field→field edge (else asset→asset)
    downstream: Adjacency  # grouped by source
    upstream: Adjacency  # grouped by target
    ended: Mapping[int, int]  # ends of ended assets applied to edge_valid_to: store id → µs (catch_up)
    # the index this one extends by appended rows, its arrays `extended` (catch_up); None: laid out
    base: GraphIndex | None = None

    # ------------------------------------------------------------------ building

    @classmethod
    def from_snapshot(cls, snap: GraphSnapshot) -> GraphIndex:
        n = len(snap.node_ids)
        node_ids = np.asarray(snap.node_ids, dtype=np.int64)
        # The snapshot orders nodes by id, which `positions_of` relies on to map ids to positions.
        if n > 1 and not bool(np.all(node_ids[1:] > node_ids[:-1])):
            raise ValueError("snapshot nodes must be ordered by store id")
        positions = dict(zip(snap.node_urns, range(n), strict=True))
        # coded through a dict, not a numpy string array: that is as wide as the longest kind for
        # every node, and one kind of 500,000 characters (an event's jobType) cost gigabytes
        kinds = sorted(set(snap.node_kinds))
        code_of = {kind: code for code, kind in enumerate(kinds)}
        kind_codes = np.fromiter((code_of[kind] for kind in snap.node_kinds), dtype=np.int32, count=n)
        node_types = np.asarray(snap.node_types, dtype=np.int8)
        parents = positions_of(node_ids, np.asarray(snap.node_parents, dtype=np.int64))
        asset_of = assets_of(node_types, parents)

        source = positions_of(node_ids, np.asarray(snap.edge_source, dtype=np.int64))
        target = positions_of(node_ids, np.asarray(snap.edge_target, dtype=np.int64))
        process = positions_of(node_ids, np.asarray(snap.edge_process, dtype=np.int64))
        if len(source) and (source.min() < 0 or target.min() < 0):
            raise ValueError("snapshot has edges whose endpoints are not among its nodes")
        valid_to = np.asarray(snap.edge_valid_to, dtype=np.int64)
        is_open = valid_to == OPEN_END
        return cls(
            version=snap.version,
            urns=list(snap.node_urns),
            positions=positions,
            node_ids=node_ids,
            node_types=node_types,
            kinds=tuple(kinds),
            kind_codes=kind_codes,
            asset_of=asset_of,
            edge_ids=np.asarray(snap.edge_ids, dtype=np.int64),
            edge_source=source,
            edge_target=target,
            edge_process=process,
            edge_signal=np.asarray(snap.edge_signal, dtype=np.int8),
            edge_confidence=np.asarray(snap.edge_confidence, dtype=np.int8),
            edge_transformation=np.asarray(snap.edge_transformation, dtype=np.int8),
            edge_valid_from=np.asarray(snap.edge_valid_from, dtype=np.int64),
            edge_valid_to=valid_to,
            edge_is_field=node_types[source] == FIELD,
            downstream=Adjacency.build(n, source, target, is_open),
            upstream=Adjacency.build(n, target, source, is_open),
            ended=dict(snap.ended),
        )

    @classmethod
    def from_store(cls, store: LineageStore) -> GraphIndex:
        return cls.from_snapshot(store.snapshot())

    # ------------------------------------------------------------------ sizes and lookups

    @property
    def n_nodes(self) -> int:
        return len(self.urns)

    @property
    def n_edges(self) -> int:
        return len(self.edge_ids)

    def existed_at(self, position: int, moment: datetime) -> bool:
        """Whether an edge into or out of the node was in force at `moment`: a node is in the
        graph as of a time only through the lineage it had then."""
        at = to_micros(moment)
        for adjacency in (self.downstream, self.upstream):
            slots, _ = gather_slots(adjacency, np.array([position], dtype=np.int64))
            edges = adjacency.edges[slots]
            if bool(np.any((self.edge_valid_from[edges] <= at) & (at < self.edge_valid_to[edges]))):
                return True
        return False

    def position(self, urn: str) -> int:
        """The position of a node, also accepting a plain table name (`db.tbl`, `db.tbl#col`)."""
        found = self.positions.get(urn)
        if found is not None:
            return found
        try:
            found = self.positions.get(resolve_node(urn))
        except UrnError:
            found = None
        if found is None:
            raise UnknownNodeError(urn, self.near_matches(urn))
        return found

    def node_type(self, position: int) -> str:
        return NODE_TYPES[int(self.node_types[position])]

    def kind(self, position: int) -> str:
        return self.kinds[int(self.kind_codes[position])]

    def asset_urn(self, position: int) -> str | None:
        """The asset a node belongs to (itself for an asset); None for a process."""
        asset = int(self.asset_of[position])
        return self.urns[asset] if asset >= 0 else None

    def asset_kinds(self) -> list[str]:
        """The kinds of the assets the graph holds (`hive.table`, `ai.model`…), sorted."""
        codes = np.unique(self.kind_codes[self.node_types == ASSET])
        return sorted(self.kinds[int(code)] for code in codes)

    def kind_mask(self, kinds: set[str]) -> np.ndarray:
        """A bool table over `kinds` codes; kinds the index has never seen simply match nothing."""
        return np.array([kind in kinds for kind in self.kinds], dtype=bool)

    def asset_flows(self) -> np.ndarray:
        """Open table-level flows as unique (source, target) position pairs, without self-loops."""
        table_edges = (~self.edge_is_field) & (self.edge_valid_to == OPEN_END)
        pairs = np.stack([self.edge_source[table_edges], self.edge_target[table_edges]], axis=1)
        pairs = np.unique(pairs, axis=0) if len(pairs) else pairs.reshape(0, 2)
        return pairs[pairs[:, 0] != pairs[:, 1]]

    def edge(self, position: int) -> EdgeVersion:
        return self.edges([position])[0]

    def edges(self, positions: Sequence[int]) -> list[EdgeVersion]:
        """The edge versions at `positions`, in their order: one gather an array, not one read
        an edge and array (a walk's answer renders hundreds)."""
        at = np.asarray(positions, dtype=np.int64)
        columns = zip(
            self.edge_source[at].tolist(),
            self.edge_target[at].tolist(),
            self.edge_process[at].tolist(),
            self.edge_signal[at].tolist(),
            self.edge_confidence[at].tolist(),
            self.edge_transformation[at].tolist(),
            self.edge_valid_from[at].tolist(),
            self.edge_valid_to[at].tolist(),
            strict=True,
        )
        return [
            EdgeVersion(
                source=self.urns[source],
                target=self.urns[target],
                process=self.urns[process],
                signal=SIGNALS[signal],
                confidence=CONFIDENCE_BY_RANK[confidence],
                transformation=TRANSFORMATIONS[transformation] if transformation >= 0 else None,
                valid_from=from_micros(valid_from),
                valid_to=None if valid_to == OPEN_END else from_micros(valid_to),
            )
            for source, target, process, signal, confidence, transformation, valid_from, valid_to in columns
        ]

    def near_matches(self, text: str, limit: int = 5) -> tuple[str, ...]:
        """URNs that look like what a user typed: same last name part first, then spelling.

        Only runs on the error path, so a pass over the URNs is acceptable; difflib is
        confined to a candidate pool because it is quadratic-ish per string.
        """
        needle = text.strip().lower()
        if not needle or not self.urns:
            return ()
        tail = needle.replace("#", ".").replace("/", ".").rsplit(".", 1)[-1]
        pool = [u for u in self.urns if tail and tail in u.lower()]
        if len(pool) > 2_000:
            # A common tail (`id`, `c5`) matches half the lake; difflib over that takes seconds.
            ending = [u for u in pool if u.lower().endswith(tail)]
            pool = sorted(ending or pool, key=len)[:2_000]
        if not pool:
            # Nothing shares the last name part: look among the siblings, i.e. the other fields
            # of the same asset, or the other assets of the same database.
            asset, hash_, _ = needle.partition("#")
            prefix = asset if hash_ else asset.rsplit(".", 1)[0] + "."
            pool = [u for u in self.urns if u.lower().startswith(prefix) and ("#" in u) == bool(hash_)]
            pool = pool[:5_000]
        if not pool and len(self.urns) <= 50_000:
            pool = list(self.urns)
        ranked = difflib.get_close_matches(text, pool, n=limit, cutoff=0.5)
        if len(ranked) < limit:
            ranked += [u for u in sorted(pool, key=len) if u not in ranked][: limit - len(ranked)]
        return tuple(ranked[:limit])


def assets_of(node_types: np.ndarray, parents: np.ndarray, first: int = 0) -> np.ndarray:
    """The asset position of nodes at positions `first`, `first + 1`…: a field's parent, an
    asset itself, -1 for a process."""
    own = np.arange(first, first + len(node_types), dtype=np.int64)
    return np.where(node_types == FIELD, parents, np.where(node_types == ASSET, own, -1)).astype(np.int64)


def positions_of(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Store ids → positions in `sorted_ids`; ids that are absent (or -1) map to -1."""
    if len(sorted_ids) == 0:
        return np.full(len(ids), -1, dtype=np.int64)
    top = int(sorted_ids[-1])
    if int(sorted_ids[0]) >= 0 and top < 4 * len(sorted_ids) + 1024 and len(ids) * 16 > len(sorted_ids):
        # Autoincrement ids are nearly dense: a lookup table beats a binary search per id, when
        # there are enough ids to pay for the table (a catch-up's few do not).
        table = np.full(top + 2, -1, dtype=np.int64)  # the last slot answers every unknown id
        table[sorted_ids] = np.arange(len(sorted_ids), dtype=np.int64)
        return table[np.where((ids >= 0) & (ids <= top), ids, top + 1)]
    found = sorted_ids.searchsorted(ids)  # the method: an `Extended` array searches its parts
    clipped = np.minimum(found, len(sorted_ids) - 1)
    return np.where(sorted_ids[clipped] == ids, clipped, -1).astype(np.int64)
