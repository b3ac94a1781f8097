"""What coverage figures read besides the graph's flows: when nodes were first seen, the owners
and layers of assets, the assets read by runs that wrote nothing, and each observation's lag
(when its lineage reached the store, against when it was true). Columns come back as numpy
arrays: a lake has hundreds of thousands of columns, and records of them would cost seconds.
"""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore


def first_seen(store: LineageStore) -> tuple[np.ndarray, np.ndarray]:
    """(node ids, when each was first seen, epoch µs), by id."""
    n = s.nodes
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(n.c.id, n.c.first_seen).order_by(n.c.id)).all()
    found = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return found[:, 0], found[:, 1]


def asset_groups(store: LineageStore) -> dict[int, tuple[str | None, str | None]]:
    """Asset id → (owner, layer)."""
    n = s.nodes
    query = sa.select(n.c.id, n.c.owner, n.c.layer).where(n.c.node_type == "asset")
    with store.engine.connect() as conn:
        return {row.id: (row.owner, row.layer) for row in conn.execute(query)}


def first_reads(store: LineageStore) -> tuple[np.ndarray, np.ndarray]:
    """(asset ids, when a run first read each without writing from it, epoch µs)."""
    r = s.asset_reads
    query = sa.select(r.c.asset_id, sa.func.min(r.c.at)).group_by(r.c.asset_id)
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    found = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return found[:, 0], found[:, 1]


def observation_lags(store: LineageStore, since_us: int, until_us: int) -> tuple[np.ndarray, np.ndarray]:
    """(process ids, seconds from when each observation was true to when it was stored) of the
    observations true within [since_us, until_us]."""
    o = s.process_observations
    query = sa.select(o.c.process_id, o.c.first_seen - o.c.at).where(o.c.at.between(since_us, until_us))
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    found = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return found[:, 0], found[:, 1] / 1e6
