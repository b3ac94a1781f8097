"""The graph read whole for an in-memory index (`read_snapshot`), or only what changed since an
index's version (`read_changes`, from the `graph_log` each ingest writes), and when assets ended
(`ended_assets`), which closes the edges of a dropped or renamed table in both.

Rows are read from the driver's cursor straight into numpy, with codes computed by the database:
at a million edges, building SQLAlchemy rows and decoding values in Python took most of the
time of an index build.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from tracelake.model import Confidence, Lifecycle
from tracelake.store import schema as s
from tracelake.store.engine import chunks
from tracelake.store.records import (
    NODE_TYPES,
    OPEN_END,
    SIGNAL_CODES,
    TRANSFORMATION_CODES,
    GraphChanges,
    GraphSnapshot,
)

# A catch-up reads id ranges from the log as one OR of BETWEENs; past this many (writers
# interleaving on PostgreSQL) it reads the one range from the lowest to the highest instead.
_MAX_RANGES = 64


def read_snapshot(conn: sa.Connection) -> GraphSnapshot:
    """All nodes and edge versions as arrays, the ends of ended assets applied (`conn` in one
    transaction: one consistent read)."""
    version = graph_version(conn)
    node_rows = _fetch_raw(conn, _node_query().order_by(s.nodes.c.id))
    edge_rows = _fetch_raw(conn, _edge_query().order_by(s.edges.c.id))
    ended = asset_ends(conn)
    nodes = _node_arrays(node_rows)
    edges = _edge_arrays(edge_rows)
    if ended:
        # a field's asset is its parent; nodes are in id order, so an id's row is found by search
        owners = np.where(nodes["node_parents"] >= 0, nodes["node_parents"], nodes["node_ids"])
        source_owner = owners[np.searchsorted(nodes["node_ids"], edges["edge_source"])]
        target_owner = owners[np.searchsorted(nodes["node_ids"], edges["edge_target"])]
        edges["edge_valid_to"] = end_edges(
            edges["edge_valid_from"], edges["edge_valid_to"], source_owner, target_owner, ended
        )
    return GraphSnapshot(version=version, ended=ended, **nodes, **edges)


def read_changes(conn: sa.Connection, version: int, ended: Mapping[int, int]) -> GraphChanges | None:
    """What changed after graph version `version`, for an index of it whose assets' ends were
    `ended` to catch up (`conn` in one transaction); None when the log does not reach back to it.

    The snapshot holds the nodes inserted since and the current rows of every edge the index
    must put again: of a process version inserted, retimed or deleted since (the index drops its
    rows of those versions first, `GraphChanges.versions`), or of an asset (or a field of one)
    whose end moved. Its edges are as stored: the index applies the ends, knowing every node's asset."""
    logged = _logged_since(conn, version)
    if logged is None:
        return None
    node_ranges, logged_versions = logged
    versions = sorted(logged_versions)
    now = graph_version(conn)
    n = s.nodes
    node_rows = _fetch_raw(conn, _node_query().where(in_ranges(n.c.id, node_ranges)).order_by(n.c.id))
    edge_rows: dict[int, tuple[Any, ...]] = {}

    def put(rows: Iterable[tuple[Any, ...]]) -> None:
        for row in rows:
            edge_rows[int(row[0])] = row

    for of_versions in version_rows(versions):
        put(_fetch_raw(conn, _edge_query().where(of_versions)))
    now_ended = asset_ends(conn)
    for touching in _touching_moved_ends(ended, now_ended):
        put(_fetch_raw(conn, _edge_query().where(touching)))
    snapshot = GraphSnapshot(
        version=now,
        ended=now_ended,
        **_node_arrays(node_rows),
        **_edge_arrays([edge_rows[i] for i in sorted(edge_rows)]),
    )
    return GraphChanges(snapshot=snapshot, versions=versions)


def changed_since(conn: sa.Connection, version: int, ended: Mapping[int, int]) -> Logged | None:
    """What changed after graph version `version` for a copy of the graph whose assets' ends were
    `ended` (the lake's exports): the id ranges of the nodes inserted since, and every process
    version (process id, valid_from) whose edge rows are not what they were: inserted, retimed or
    deleted, or holding an edge whose end moved with an asset's. None when the log does not reach
    back to `version`."""
    logged = _logged_since(conn, version)
    if logged is None:
        return None
    node_ranges, versions = logged
    e = s.edges
    for touching in _touching_moved_ends(ended, asset_ends(conn)):
        found = conn.execute(sa.select(e.c.process_id, e.c.valid_from).where(touching).distinct())
        versions.update((int(process), int(at)) for process, at in found)
    return node_ranges, versions


Logged = tuple[list[tuple[int, int]], set[tuple[int, int]]]  # inserted nodes' id ranges, process versions


def _logged_since(conn: sa.Connection, version: int) -> Logged | None:
    """The log after `version`: inserted nodes' id ranges and the process versions inserted,
    retimed or deleted; None when it does not reach back to `version`."""
    since = _log_since(conn)
    if since is None or version < since:
        return None
    g = s.graph_log
    log = conn.execute(sa.select(g.c.what, g.c.a, g.c.b).where(g.c.version > version)).all()
    node_ranges = [(int(a), int(b)) for what, a, b in log if what == "nodes"]
    return node_ranges, {(int(a), int(b)) for what, a, b in log if what == "version"}


def _touching_moved_ends(
    before: Mapping[int, int], now: Mapping[int, int]
) -> Iterator[sa.ColumnElement[bool]]:
    """Conditions (a chunk of assets each) matching the edges into or out of an asset, or a field of
    one, whose end is not what it was."""
    e, n = s.edges, s.nodes
    moved = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    for chunk in chunks(moved):
        owned = sa.select(n.c.id).where(sa.or_(n.c.id.in_(chunk), n.c.parent_id.in_(chunk)))
        yield sa.or_(e.c.source_id.in_(owned.scalar_subquery()), e.c.target_id.in_(owned.scalar_subquery()))


def version_rows(versions: Sequence[tuple[int, int]]) -> Iterator[sa.ColumnElement[bool]]:
    """Conditions (500 versions each) matching the edge rows of process versions (process id,
    valid_from). One equality pair a version, OR-ed: SQLite looks each up in ix_edges_version, where
    a row-value IN list, `(process_id, valid_from) IN (VALUES …)`, scanned the whole index (~100 ms
    at a million edges, most of what a server's catch-up took)."""
    e = s.edges
    for chunk in chunks(sorted(versions), 500):
        yield sa.or_(*(sa.and_(e.c.process_id == pid, e.c.valid_from == at) for pid, at in chunk))


def end_edges(
    valid_from: np.ndarray,
    valid_to: np.ndarray,
    source_owner: np.ndarray,
    target_owner: np.ndarray,
    ended: Mapping[int, int],
) -> np.ndarray:
    """`valid_to` with the ends of ended assets applied: an edge one of whose ends is an asset
    (or a field of an asset, by `*_owner`: the asset's store id) that ended after the edge began
    is over at that end, if that is sooner."""
    if not ended or len(valid_to) == 0:
        return valid_to
    ended_ids = np.array(sorted(ended), dtype=np.int64)
    ended_at = np.array([ended[int(i)] for i in ended_ids], dtype=np.int64)
    closest = valid_to
    for owner in (source_owner, target_owner):
        at = np.clip(np.searchsorted(ended_ids, owner), 0, len(ended_ids) - 1)
        side_end = np.where(ended_ids[at] == owner, ended_at[at], OPEN_END)
        side_end = np.where(valid_from < side_end, side_end, OPEN_END)  # an end before it began is none
        closest = np.minimum(closest, side_end)
    return closest


def ended_assets(conn: sa.Connection) -> dict[int, tuple[str, int]]:
    """Assets whose last change ended them (DROP, or RENAMEd away): id → (urn, when in µs).

    Only assets ever dropped or renamed away can have ended, so only their changes (and the
    renames) are read: the many OVERWRITEs of tables that never ended are not, whatever their
    number, on every `edges` call and index load."""
    a, n = s.asset_changes, s.nodes
    owner, previous = n.alias("owner"), n.alias("previous")
    ever_ended = sa.union(
        sa.select(a.c.asset_id).where(a.c.change == str(Lifecycle.DROP)),
        sa.select(a.c.previous_id).where(a.c.previous_id.is_not(None)),
    )
    query = (
        sa.select(a.c.asset_id, owner.c.urn, a.c.at, a.c.change, a.c.previous_id, previous.c.urn)
        .join(owner, owner.c.id == a.c.asset_id)
        .outerjoin(previous, previous.c.id == a.c.previous_id)
        .where(sa.or_(a.c.asset_id.in_(ever_ended.scalar_subquery()), a.c.change == str(Lifecycle.RENAME)))
        .order_by(a.c.at, a.c.change, a.c.asset_id)
    )
    ends: dict[int, tuple[str, int]] = {}
    for asset_id, urn, at, change, previous_id, previous_urn in conn.execute(query):
        if change == Lifecycle.DROP:
            ends[asset_id] = (urn, at)
        else:
            ends.pop(asset_id, None)
        if change == Lifecycle.RENAME and previous_id is not None:
            ends[previous_id] = (previous_urn, at)
    return ends


def _edge_query() -> sa.Select[Any]:
    e = s.edges
    return sa.select(
        e.c.id,
        e.c.source_id,
        e.c.target_id,
        e.c.process_id,
        _coded(e.c.signal, {str(k): v for k, v in SIGNAL_CODES.items()}),
        _coded(e.c.confidence, {str(c): c.rank for c in Confidence}),
        _coded(e.c.transformation, {str(k): v for k, v in TRANSFORMATION_CODES.items()}),
        e.c.valid_from,
        sa.func.coalesce(e.c.valid_to, OPEN_END),
    )


def _node_query() -> sa.Select[Any]:
    n = s.nodes
    return sa.select(
        n.c.id,
        _coded(n.c.node_type, {name: code for code, name in enumerate(NODE_TYPES)}),
        sa.func.coalesce(n.c.parent_id, -1),
        n.c.urn,
        n.c.kind,
    )


def _edge_arrays(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    columns = np.array(rows, dtype=np.int64).reshape(-1, 9).T
    return {
        "edge_ids": columns[0].copy(),
        "edge_source": columns[1].copy(),
        "edge_target": columns[2].copy(),
        "edge_process": columns[3].copy(),
        "edge_signal": columns[4].astype(np.int8),
        "edge_confidence": columns[5].astype(np.int8),
        "edge_transformation": columns[6].astype(np.int8),
        "edge_valid_from": columns[7].copy(),
        "edge_valid_to": columns[8].copy(),
    }


def _node_arrays(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    numbers = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3).T
    return {
        "node_ids": numbers[0].copy(),
        "node_urns": [r[3] for r in rows],
        "node_types": numbers[1].astype(np.int8),
        "node_kinds": [r[4] for r in rows],
        "node_parents": numbers[2].copy(),
    }


def in_ranges(column: sa.ColumnElement[Any], ranges: list[tuple[int, int]]) -> sa.ColumnElement[bool]:
    """`column` within one of the id `ranges` (adjacent ones merged); false for none."""
    if not ranges:
        return sa.false()
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    if len(merged) > _MAX_RANGES:
        merged = [[merged[0][0], max(high for _, high in merged)]]
    return sa.or_(*(column.between(low, high) for low, high in merged))


def graph_version(conn: sa.Connection) -> int:
    """Grows with every ingest (`ingest.write_batches`): what a snapshot or an index is of."""
    return int(conn.execute(_STATE.where(s.store_state.c.key == "graph_version")).scalar() or 0)


def asset_ends(conn: sa.Connection) -> dict[int, int]:
    """When each ended asset ended (store id → µs)."""
    return {node_id: at for node_id, (_, at) in ended_assets(conn).items()}


def _log_since(conn: sa.Connection) -> int | None:
    """The graph version the store's change log begins at (None: a store that keeps none)."""
    found = conn.execute(_STATE.where(s.store_state.c.key == "graph_log_since")).scalar()
    return None if found is None else int(found)


def _coded(column: sa.ColumnElement[Any], codes: dict[str, int]) -> sa.ColumnElement[int]:
    """A text column as its small-integer code, computed in SQL (NULL and unknown text → -1)."""
    return sa.case(codes, value=column, else_=-1)


def _fetch_raw(conn: sa.Connection, query: sa.Select[Any]) -> list[tuple[Any, ...]]:
    """All rows of a query as the driver's own tuples, with constants inlined."""
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # a checked-out connection has its DBAPI connection
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


_STATE = sa.select(s.store_state.c.value)
