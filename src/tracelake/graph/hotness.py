"""Asset hotness: PageRank over "depends on" — an asset is hot when hot assets, or readers, read it.

Each table-level flow producer → consumer is read backwards, as the consumer's vote for the
producer, so a table that many important tables are built from ranks above a leaf report.
Power iteration with numpy over the open asset edges (each pair once); an asset that reads
nothing spreads its rank evenly (the usual treatment of dangling nodes).

Reads count as votes too. A process that read tables without writing from them (a SELECT-only
query, a Spark `count()`: `LineageStore.read_counts`) joins the graph as one more node, voting
for each table it read as a consumer table votes for its producers: once per (process, table)
pair, however many runs. Nothing votes for a reader, so it holds the least rank a node can and
hands it all to the tables it read: a table only read, never built from, outranks one nobody
reads, and a table read by many jobs outranks one read by few. Readers are not listed. Without
reads the ranking is the plain PageRank of the assets and their scores sum to 1; with reads, the
readers keep their small share and the assets' scores sum to less.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tracelake.graph.index import ASSET, GraphIndex


def hotness(
    index: GraphIndex,
    *,
    reads: Iterable[tuple[str, str]] = (),
    damping: float = 0.85,
    tolerance: float = 1e-12,
    max_iterations: int = 500,
) -> list[tuple[str, float]]:
    """Every asset with its score, hottest first. `reads`: (process, asset) pairs, each the
    process's vote for an asset it read; assets the index does not hold are left out."""
    assets = np.flatnonzero(index.node_types == ASSET)
    if len(assets) == 0:
        return []
    compact = np.full(index.n_nodes, -1, dtype=np.int64)
    compact[assets] = np.arange(len(assets))
    flows = index.asset_flows()
    readers, read = _read_votes(index, compact, reads, first=len(assets))
    # the consumer votes for its producer; a reader for what it read
    voters = np.concatenate([compact[flows[:, 1]], readers])
    voted = np.concatenate([compact[flows[:, 0]], read])
    n = len(assets) + len(np.unique(readers))
    out_degree = np.bincount(voters, minlength=n).astype(np.float64)
    dangling = out_degree == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iterations):
        share = np.where(dangling, 0.0, rank / np.where(dangling, 1.0, out_degree))
        spread = np.bincount(voted, weights=share[voters], minlength=n)
        new = (1.0 - damping) / n + damping * (spread + rank[dangling].sum() / n)
        converged = np.abs(new - rank).sum() < tolerance
        rank = new
        if converged:
            break
    asset_rank = rank[: len(assets)]
    order = np.argsort(-asset_rank, kind="stable")
    return [(index.urns[int(assets[i])], float(asset_rank[i])) for i in order]


def _read_votes(
    index: GraphIndex, compact: np.ndarray, reads: Iterable[tuple[str, str]], *, first: int
) -> tuple[np.ndarray, np.ndarray]:
    """(voter, voted) arrays for the reads: readers numbered from `first` on, assets compact."""
    numbers: dict[str, int] = {}
    pairs: set[tuple[int, int]] = set()
    for process, asset in reads:
        position = index.positions.get(asset)
        if position is None or compact[position] < 0:
            continue  # not an asset the graph holds
        reader = numbers.setdefault(process, first + len(numbers))
        pairs.add((reader, int(compact[position])))
    ordered = sorted(pairs)
    voters = np.array([reader for reader, _ in ordered], dtype=np.int64)
    voted = np.array([asset for _, asset in ordered], dtype=np.int64)
    return voters, voted
