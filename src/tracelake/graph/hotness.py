"""Asset hotness: PageRank over "depends on" — an asset is hot when hot assets read it.

Each table-level flow producer → consumer is read backwards, as the consumer's vote for the
producer, so a table that many important tables are built from ranks above a leaf report.
Power iteration with numpy over the open asset edges (each pair once); an asset that reads
nothing spreads its rank evenly (the usual treatment of dangling nodes). Scores sum to 1.
"""

from __future__ import annotations

import numpy as np

from tracelake.graph.index import ASSET, GraphIndex


def hotness(
    index: GraphIndex, *, damping: float = 0.85, tolerance: float = 1e-12, max_iterations: int = 500
) -> list[tuple[str, float]]:
    """Every asset with its score, hottest first."""
    assets = np.flatnonzero(index.node_types == ASSET)
    if len(assets) == 0:
        return []
    compact = np.full(index.n_nodes, -1, dtype=np.int64)
    compact[assets] = np.arange(len(assets))
    flows = index.asset_flows()
    voters, voted = compact[flows[:, 1]], compact[flows[:, 0]]  # the consumer votes for its producer
    n = len(assets)
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
    order = np.argsort(-rank, kind="stable")
    return [(index.urns[int(assets[i])], float(rank[i])) for i in order]
