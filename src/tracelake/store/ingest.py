"""The one write path of the store: batches written in one transaction, idempotently.

Each batch is one observation of its processes at `observed_at`; a process whose edges are
unchanged only has its `last_seen` moved, one whose content changed gets a new version that
closes the old edges at that time. Observations may arrive out of order: a late one splits the
version that covered its time (`history.plan_history`). Nodes are locked in one order on
PostgreSQL, so that concurrent ingests wait for each other rather than deadlock.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import ChainMap, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model import (
    DECLARED_COLUMNS,
    Asset,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Problem,
    Process,
    Signal,
    Transformation,
    fingerprint,
    parse_urn,
)
from tracelake.model.names import openlineage_run_id
from tracelake.store import reads as asset_reads
from tracelake.store import schema as s
from tracelake.store.engine import (
    chunks,
    driver_execute,
    driver_insert,
    json_param,
    json_result,
    markers,
    rows_where_in,
)
from tracelake.store.history import HistoryPlan, StoredVersion, plan_history
from tracelake.store.records import IngestReport, edge_query
from tracelake.store.schema import to_micros


def write_batches(
    conn: sa.Connection, batches: list[LineageBatch], now_us: int, ids: dict[str, int]
) -> IngestReport:
    """Write `batches` in `conn`'s transaction, at `now_us`. `ids` holds the node ids learnt so
    far (URN → id), kept across transactions by the store: a caller whose transaction rolls back
    must clear it, since the ids minted inside it do not exist."""
    report = IngestReport()
    if conn.dialect.name == "sqlite":
        # The write lock from the start (waiting up to busy_timeout). Left to itself the driver
        # begins the transaction at the first write, and what the ingest read before it (which
        # nodes exist, their labels) another writer could change in between.
        driver_execute(conn, "BEGIN IMMEDIATE")
    writes = _Writes(ids)
    ids = writes.upsert_nodes(conn, batches, now_us, report)
    writes.write_versions(conn, batches, ids, now_us, report)
    writes.write_column_orders(conn, batches, ids, now_us)
    writes.write_runs(conn, batches, ids, report)
    writes.write_changes(conn, batches, ids)
    report.reads = asset_reads.write_reads(conn, batches, ids)
    writes.write_problems(conn, batches, now_us, report)
    writes.write_events(conn, batches, now_us)
    ((version,),) = driver_execute(conn, _BUMP_VERSION).fetchall()
    _log_changes(conn, version, writes.inserted, writes.versions)
    return report


def _log_changes(
    conn: sa.Connection, version: int, inserted: list[int], versions: set[tuple[int, int]]
) -> None:
    """Say in `graph_log` what this ingest, which made graph version `version`, changed: the ids
    of the nodes it inserted (as their range) and the process versions it inserted, retimed or
    deleted, for indexes to catch up from (`LineageStore.changes_since`). Edges are found by
    their version: SQLite gives a deleted edge's id to the next one."""
    rows = [(version, "nodes", min(inserted), max(inserted))] if inserted else []
    rows += [(version, "version", pid, valid_from) for pid, valid_from in sorted(versions)]
    if rows:
        driver_insert(conn, s.graph_log, ("version", "what", "a", "b"), rows)


# What a batch says of nodes that goes into width-bound columns (schema.py), and what stands in
# when a value is too long. PostgreSQL holds a value to its column: a longer one is left out with
# a problem saying so, rather than the whole ingest failing.
_NODE_WORDS: dict[type, dict[str, tuple[int, str | None]]] = {
    Asset: {"owner": (s.width(s.nodes.c.owner), None), "layer": (s.width(s.nodes.c.layer), None)},
    Field: {"data_type": (s.width(s.nodes.c.data_type), None)},
    Process: {"owner": (s.width(s.nodes.c.owner), None), "kind": (s.width(s.nodes.c.kind), "unknown")},
}


def within_columns(batch: LineageBatch) -> LineageBatch:
    """`batch`, or a copy leaving out what the node columns cannot hold, a problem for each."""
    left_out: list[Problem] = []

    def fitted(item: Asset | Field | Process) -> Any:
        replaced: dict[str, Any] = {}
        for name, (width, stand_in) in _NODE_WORDS[type(item)].items():
            value = getattr(item, name)
            if isinstance(value, str) and len(value) > width:
                replaced[name] = stand_in
                reason = (
                    f"its {name} of {len(value):,} characters is longer than the store's {width}; left out"
                )
                left_out.append(Problem(item.urn, reason))
        return dataclasses.replace(item, **replaced) if replaced else item

    assets = [fitted(asset) for asset in batch.assets]
    fields = [fitted(fld) for fld in batch.fields]
    processes = [fitted(process) for process in batch.processes]
    described = [fitted(process) for process in batch.described]
    if not left_out:
        return batch
    return dataclasses.replace(
        batch,
        assets=assets,
        fields=fields,
        processes=processes,
        described=described,
        problems=[*batch.problems, *left_out],
    )


def _fitted(text: str, width: int) -> str:
    """A problem's place, cut to its column: a message, where a shortened place still says where."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _observed_at(batch: LineageBatch, now_us: int) -> int:
    """When a batch's signal was true, in epoch µs: its `observed_at`, else the ingest's now."""
    return to_micros(batch.observed_at) if batch.observed_at else now_us


def _stored_event_type(value: Any) -> str | None:
    """The event type for the events table's column: as sent when it is one (the column holds 32
    characters, every RunState and more), else OTHER, as the collector took it (its problem says
    what was sent, and the body keeps it)."""
    if value is None or (isinstance(value, str) and len(value) <= s.width(s.openlineage_events.c.event_type)):
        return value
    return "OTHER"


def _unite_into(
    into: dict[tuple[str, str, str, str, str], FlowEdge],
    edges: dict[tuple[str, str, str, str, str], FlowEdge],
) -> None:
    """Add `edges` to `into`; an edge said twice keeps its strongest confidence (order-free)."""
    for key, edge in edges.items():
        known = into.get(key)
        if known is None or (edge.confidence.rank, edge.description or "") > (
            known.confidence.rank,
            known.description or "",
        ):
            into[key] = edge


def _content_hash(edges: Iterable[FlowEdge]) -> str:
    keys = sorted(f"{e.source}|{e.target}|{e.signal}|{e.confidence}|{e.transformation or ''}" for e in edges)
    return fingerprint(*keys)


def _merge_asset(old: Asset | None, new: Asset) -> Asset:
    if old is None:
        return new
    return Asset(
        new.urn,
        owner=new.owner or old.owner,
        layer=new.layer or old.layer,
        security_level=new.security_level if new.security_level is not None else old.security_level,
        labels=old.labels | new.labels,
        description=new.description or old.description,
        metadata={**old.metadata, **new.metadata},
    )


class _EdgeSets:
    """The edges behind each content hash of a process, for the versions an ingest inserts:
    from the batches, united at one instant, or read back from a stored version."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.by_hash: dict[tuple[int, str], list[FlowEdge]] = {}
        self.ids: dict[str, int] = {}  # node ids of edges read back

    def known(self, process_id: int, edges: list[FlowEdge]) -> str:
        content = _content_hash(edges)
        self.by_hash.setdefault((process_id, content), edges)
        return content

    def unite(self, process_id: int, first: str, second: str) -> str:
        merged: dict[tuple[str, str, str, str, str], FlowEdge] = {}
        for content in (first, second):
            _unite_into(merged, {e.key: e for e in self._edges(process_id, content)})
        return self.known(process_id, list(merged.values()))

    def of(self, process_id: int, version: StoredVersion) -> list[FlowEdge]:
        return self._edges(process_id, version.content_hash)

    def _edges(self, process_id: int, content: str) -> list[FlowEdge]:
        edges = self.by_hash.get((process_id, content))
        if edges is None:
            rows = self.conn.execute(_EDGES_OF_HASH, {"_pid": process_id, "_hash": content}).all()
            edges = []
            for row in rows:
                self.ids[row.source] = row.source_id
                self.ids[row.target] = row.target_id
                edges.append(
                    FlowEdge(
                        row.source,
                        row.target,
                        row.process,
                        Signal(row.signal),
                        Confidence(row.confidence),
                        Transformation(row.transformation) if row.transformation else None,
                        row.description,
                    )
                )
            self.by_hash[(process_id, content)] = edges
        return edges


class _Writes:
    """The writes of one ingest transaction, in the order `write_batches` makes them."""

    def __init__(self, ids: dict[str, int]) -> None:
        self._ids = ids
        self.versions: set[tuple[int, int]] = set()  # process versions written: (id, valid_from)
        self.inserted: list[int] = []  # ids of the nodes inserted

    def upsert_nodes(
        self, conn: sa.Connection, batches: list[LineageBatch], now_us: int, report: IngestReport
    ) -> dict[str, int]:
        assets: dict[str, Asset] = {}
        fields: dict[str, Field] = {}
        processes: dict[str, Process] = {}
        # processes only named by an edge or a run: a node, but nothing said of them to write
        unnamed: dict[str, Process] = {}
        for batch in batches:
            for asset in batch.assets:
                assets[asset.urn] = _merge_asset(assets.get(asset.urn), asset)
            for fld in batch.fields:
                fields[fld.urn] = fld
            for process in batch.processes:
                processes[process.urn] = process
            for process in batch.described:
                processes.setdefault(process.urn, process)
            # `in` tests rather than setdefault: building a default record per edge end (only to
            # throw it away) cost as much as the rest of this loop.
            for edge in batch.edges:
                for urn in (edge.source, edge.target):
                    if "#" in urn:
                        if urn not in fields:
                            fields[urn] = Field(urn)
                    elif urn not in assets:
                        assets[urn] = Asset(urn)
                if edge.process not in processes and edge.process not in unnamed:
                    unnamed[edge.process] = Process(edge.process, name=edge.process, kind="unknown")
            for run in batch.runs:
                if run.process not in processes and run.process not in unnamed:
                    unnamed[run.process] = Process(run.process, name=run.process, kind="unknown")
            for change in batch.changes:
                for named in (change.asset, change.previous):
                    if named is not None and named not in assets:
                        assets[named] = Asset(named)
                if change.process and change.process not in processes and change.process not in unnamed:
                    unnamed[change.process] = Process(change.process, name=change.process, kind="unknown")
            for read in batch.reads:
                if read.asset not in assets:
                    assets[read.asset] = Asset(read.asset)
                if read.process not in processes and read.process not in unnamed:
                    unnamed[read.process] = Process(read.process, name=read.process, kind="unknown")
        # Each field URN is parsed once (it was three times): parsing dominated column-heavy re-ingests.
        field_assets = {urn: parse_urn(urn) for urn in fields}
        for parsed in field_assets.values():
            asset_urn = parsed.asset
            if asset_urn not in assets:
                assets[asset_urn] = Asset(asset_urn)

        rows = [(urn, "asset", parse_urn(urn).asset_kind, None, now_us, now_us) for urn in assets]
        unnamed = {urn: process for urn, process in unnamed.items() if urn not in processes}
        rows += [
            (urn, "process", process.kind, None, now_us, now_us)
            for urn, process in itertools.chain(processes.items(), unnamed.items())
        ]
        self._insert_missing(conn, rows)
        ids = self._ids
        self._insert_missing(
            conn,
            [(urn, "field", p.asset_kind, ids[p.asset], now_us, now_us) for urn, p in field_assets.items()],
        )
        report.nodes = len(assets) + len(fields) + len(processes) + len(unnamed)
        if conn.dialect.name == "postgresql":
            # Every node this ingest writes (and every process whose versions it re-derives) is
            # locked here, in id order, before any is updated: concurrent ingests then wait for
            # each other in one order instead of deadlocking, and one reads a process's versions
            # only once another writing them has committed. FOR NO KEY UPDATE, as an UPDATE of
            # these columns would take: the foreign-key checks of other writers' edges and
            # fields (KEY SHARE) still pass. SQLite needs none: its writers take turns whole.
            touched = {ids[urn] for urn in itertools.chain(assets, fields, processes, unnamed)}
            driver_execute(conn, _LOCK_NODES, (sorted(touched),))
        self._update_node_properties(conn, assets.values(), fields.values(), processes.values(), now_us)
        _mark_seen(conn, [ids[urn] for urn in unnamed], now_us)
        return self._ids

    def _insert_missing(self, conn: sa.Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert nodes not yet in the store and learn the ids of all of them.

        `rows` are (urn, node_type, kind, parent_id, first_seen, last_seen).
        """
        if not rows:
            return
        self._resolve_ids(conn, [r[0] for r in rows])
        missing = [r for r in rows if r[0] not in self._ids]
        if not missing:
            return
        urns = [r[0] for r in missing]
        columns: tuple[str, ...] = ("urn", "node_type", "kind", "parent_id", "first_seen", "last_seen")
        if conn.dialect.name == "postgresql":
            # Inserted in URN order: writers inserting the same new nodes then wait for each
            # other (PostgreSQL holds a new key until its transaction ends) in one order, never
            # each for the other. Their ids are drawn first, in the order the nodes were seen,
            # so that ids still follow first sight, as on SQLite (whose writers take turns).
            drawn = sorted(node_id for (node_id,) in driver_execute(conn, _DRAW_NODE_IDS, (len(missing),)))
            missing = sorted(((i, *row) for i, row in zip(drawn, missing, strict=True)), key=lambda r: r[1])
            columns = ("id", *columns)
        driver_insert(conn, s.nodes, columns, missing, on_conflict="(urn) DO NOTHING")
        self._resolve_ids(conn, urns)
        self.inserted += [self._ids[urn] for urn in urns]

    def _resolve_ids(self, conn: sa.Connection, urns: Sequence[str]) -> None:
        unknown = [u for u in dict.fromkeys(urns) if u not in self._ids]
        for node_id, urn in rows_where_in(conn, "SELECT id, urn FROM nodes", "urn", unknown):
            self._ids[urn] = node_id

    def _update_node_properties(
        self,
        conn: sa.Connection,
        assets: Iterable[Asset],
        fields: Iterable[Field],
        processes: Iterable[Process],
        now_us: int,
    ) -> None:
        """Set what a batch says about a node; a property the batch leaves unset keeps its value.

        Only values that differ from the stored ones are written: every OpenLineage event
        re-sends its inputs' facets, and rewriting them unchanged was a quarter of an ingest.
        """
        ids = self._ids
        said: dict[int, dict[str, Any]] = {}
        for asset in assets:
            said[ids[asset.urn]] = {
                "owner": asset.owner,
                "layer": asset.layer,
                "security_level": asset.security_level,
                "labels": sorted(asset.labels) or None,
                "description": asset.description,
                # a declared column order is versioned in `column_orders`, not kept here as well
                "properties": {k: v for k, v in asset.metadata.items() if k != DECLARED_COLUMNS} or None,
            }
        for fld in fields:
            said[ids[fld.urn]] = {"data_type": fld.data_type, "labels": sorted(fld.labels) or None}
        for process in processes:
            said[ids[process.urn]] = {
                "owner": process.owner,
                "description": process.description,
                "properties": {"name": process.name, **process.metadata},
            }
        changes = {
            node_id: {k: v for k, v in props.items() if v is not None} for node_id, props in said.items()
        }
        with_values = [node_id for node_id, props in changes.items() if props]
        stored: dict[int, dict[str, Any]] = {}
        for node_id, *values in rows_where_in(conn, _NODE_VALUES, "id", with_values):
            row = stored[node_id] = dict(zip(_NODE_PROPERTIES, values, strict=True))
            row["labels"] = json_result(conn, row["labels"])
            row["properties"] = json_result(conn, row["properties"])
        updates: dict[tuple[str, ...], list[tuple[Any, ...]]] = defaultdict(list)
        for node_id in with_values:
            props, row = changes[node_id], stored[node_id]
            if "labels" in props:
                props["labels"] = sorted(set(row["labels"] or ()) | set(props["labels"]))
            if "properties" in props:
                props["properties"] = {**(row["properties"] or {}), **props["properties"]}
            differing = {k: v for k, v in props.items() if v != row[k]}
            if differing:
                columns = tuple(sorted(differing))
                assigned = (
                    json_param(differing[c]) if c in _JSON_PROPERTIES else differing[c] for c in columns
                )
                updates[columns].append((*assigned, node_id))
        for columns, rows in updates.items():
            assignments = ", ".join(f"{column} = ?" for column in columns)
            driver_execute(conn, f"UPDATE nodes SET {assignments} WHERE id = ?", rows, many=True)
        # One UPDATE … WHERE id IN (…) per chunk rather than one per node: on a re-ingest
        # nearly every node only has last_seen moved, and per-row executemany dominated.
        _mark_seen(conn, list(changes), now_us)

    def write_versions(
        self,
        conn: sa.Connection,
        batches: list[LineageBatch],
        ids: dict[str, int],
        now_us: int,
        report: IngestReport,
    ) -> None:
        """Record each batch as an observation of its processes, and re-derive their versions."""
        incoming: dict[int, dict[int, dict[tuple[str, str, str, str, str], FlowEdge]]] = {}
        for batch in batches:
            at = _observed_at(batch, now_us)
            by_process: dict[str, dict[tuple[str, str, str, str, str], FlowEdge]] = {
                # a process listed with no edges is a version with no edges
                process.urn: {}
                for process in batch.processes
            }
            for edge in batch.edges:
                by_process.setdefault(edge.process, {})[edge.key] = edge
            for process_urn, edge_map in by_process.items():
                slots = incoming.setdefault(ids[process_urn], {})
                if at in slots:  # two observations at one instant are one: their edges united
                    _unite_into(slots[at], edge_map)
                else:
                    slots[at] = edge_map
        if not incoming:
            return
        edges = _EdgeSets(conn)
        hashes_of = {
            process_id: {
                at: edges.known(process_id, list(edge_map.values())) for at, edge_map in by_at.items()
            }
            for process_id, by_at in incoming.items()
        }
        versions = self._load_versions(conn, set(incoming))
        observations = self._load_observations(conn, {pid: min(by_at) for pid, by_at in incoming.items()})
        plans: dict[int, HistoryPlan] = {}
        for process_id, hashes in hashes_of.items():
            plan = plan_history(
                versions[process_id],
                observations.get(process_id, {}),
                hashes,
                functools.partial(edges.unite, process_id),
            )
            for version in plan.insert:  # read before any version of the process is deleted
                edges.of(process_id, version)
            plans[process_id] = plan
            report.versions_unchanged += plan.unchanged
            report.versions_replaced += plan.replaced
            report.versions_added += len(plan.insert) - plan.replaced

        def params(kind: str, value: Any = None) -> list[tuple[Any, ...]]:
            """(value, process id, valid_from) of each version of `kind`: `value` a function of
            the version, or none."""
            return [
                (*(() if value is None else (value(v),)), pid, v.valid_from)
                for pid, plan in plans.items()
                for v in getattr(plan, kind)
            ]

        gone = params("delete")
        moved = params("retime", lambda v: v.valid_to)
        self.versions.update((pid, valid_from) for *_, pid, valid_from in (*gone, *moved))
        self.versions.update((pid, v.valid_from) for pid, plan in plans.items() for v in plan.insert)
        if gone:
            driver_execute(conn, f"DELETE FROM process_versions WHERE {_OF_VERSION}", gone, many=True)
            result = driver_execute(conn, f"DELETE FROM edges WHERE {_OF_VERSION}", gone, many=True)
            report.edges_replaced += max(result.rowcount, 0)
        if moved:
            close = f"SET valid_to = ? WHERE {_OF_VERSION}"
            driver_execute(conn, f"UPDATE process_versions {close}", moved, many=True)
            result = driver_execute(conn, f"UPDATE edges {close}", moved, many=True)
            report.edges_closed += max(result.rowcount, 0)
        seen = params("touch", lambda v: now_us)
        if seen:
            touch = f"SET last_seen = ? WHERE {_OF_VERSION}"
            driver_execute(conn, f"UPDATE process_versions {touch}", seen, many=True)
            driver_execute(conn, f"UPDATE edges {touch}", seen, many=True)
        changed = [
            (pid, at)
            for pid, plan in plans.items()
            for at in plan.observations
            if at in observations.get(pid, {})
        ]
        if changed:
            delete = "DELETE FROM process_observations WHERE process_id = ? AND at = ?"
            driver_execute(conn, delete, changed, many=True)
        observation_rows = [
            (pid, at, content, now_us)
            for pid, plan in plans.items()
            for at, content in plan.observations.items()
        ]
        if observation_rows:
            driver_insert(conn, s.process_observations, _OBSERVATION_COLUMNS, observation_rows)
        new = [(pid, v, edges.of(pid, v)) for pid, plan in plans.items() for v in plan.insert]
        if new:
            version_rows = [
                (pid, v.valid_from, v.valid_to, v.content_hash, len(flows), now_us, now_us)
                for pid, v, flows in new
            ]
            driver_insert(conn, s.process_versions, _VERSION_COLUMNS, version_rows)
            # the ingest's ids first, then those read back with the edges; not merged into one
            # dict: `ids` is the store's cache of every id it has learnt, a copy a transaction
            node_ids = ChainMap(ids, edges.ids)
            edge_rows = [
                (
                    node_ids[e.source],
                    node_ids[e.target],
                    pid,
                    str(e.signal),
                    str(e.confidence),
                    str(e.transformation) if e.transformation else None,
                    e.description,
                    v.valid_from,
                    v.valid_to,
                    now_us,
                    now_us,
                )
                for pid, v, flows in new
                for e in flows
            ]
            driver_insert(conn, s.edges, _EDGE_COLUMNS, edge_rows)
            report.edges_added += len(edge_rows)

    def _load_versions(self, conn: sa.Connection, process_ids: set[int]) -> dict[int, list[StoredVersion]]:
        versions: dict[int, list[StoredVersion]] = {pid: [] for pid in process_ids}
        select = "SELECT process_id, valid_from, valid_to, content_hash FROM process_versions"
        for pid, valid_from, valid_to, content_hash in rows_where_in(
            conn, select, "process_id", sorted(process_ids)
        ):
            versions[pid].append(StoredVersion(valid_from, valid_to, content_hash))
        return versions

    def _load_observations(self, conn: sa.Connection, since: dict[int, int]) -> dict[int, dict[int, str]]:
        """Each process's stored observations at or after its instant in `since`."""
        found: dict[int, dict[int, str]] = {}
        earliest = min(since.values())
        select = "SELECT process_id, at, content_hash FROM process_observations"
        for pid, at, content in rows_where_in(
            conn, select, "process_id", sorted(since), " AND at >= ?", earliest
        ):
            if at >= since[pid]:
                found.setdefault(pid, {})[at] = content
        return found

    def write_changes(self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int]) -> None:
        """Lifecycle changes, once each: the same change of an asset at the same instant is one."""
        rows = {
            (ids[c.asset], to_micros(c.at), str(c.change)): (
                ids[c.asset],
                to_micros(c.at),
                str(c.change),
                str(c.signal),
                ids[c.process] if c.process else None,
                c.run_id,
                json_param([list(column) for column in c.columns] if c.columns is not None else None),
                ids[c.previous] if c.previous else None,
            )
            for batch in batches
            for c in batch.changes
        }
        if not rows:
            return
        select = "SELECT asset_id, at, change FROM asset_changes"
        assets = sorted({asset for asset, _, _ in rows})
        known = {tuple(row) for row in rows_where_in(conn, select, "asset_id", assets)}
        fresh = [row for key, row in rows.items() if key not in known]
        if fresh:
            driver_insert(conn, s.asset_changes, _CHANGE_COLUMNS, fresh)

    def write_column_orders(
        self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int], now_us: int
    ) -> None:
        """Keep each declared column order (an asset's `columns`) under the batch's time."""
        declared: dict[tuple[int, int], list[str]] = {}
        for batch in batches:
            at = _observed_at(batch, now_us)
            for asset in batch.assets:
                columns = asset.metadata.get(DECLARED_COLUMNS)
                if isinstance(columns, list) and all(isinstance(c, str) for c in columns):
                    key = (ids[asset.urn], at)
                    # two at one instant: a fixed choice, whatever order they came in
                    declared[key] = max(declared.get(key, []), list(columns))
        if not declared:
            return
        stored: dict[tuple[int, int], list[str]] = {}
        select = "SELECT asset_id, at, columns FROM column_orders"
        for asset_id, at, columns in rows_where_in(
            conn, select, "asset_id", sorted({a for a, _ in declared})
        ):
            stored[(asset_id, at)] = json_result(conn, columns)
        changed = [
            (json_param(columns), *key)
            for key, columns in declared.items()
            if key in stored and max(stored[key], columns) != stored[key]
        ]
        if changed:
            update = "UPDATE column_orders SET columns = ? WHERE asset_id = ? AND at = ?"
            driver_execute(conn, update, changed, many=True)
        new = [
            (asset_id, at, json_param(columns), now_us)
            for (asset_id, at), columns in declared.items()
            if (asset_id, at) not in stored
        ]
        if new:
            driver_insert(conn, s.column_orders, ("asset_id", "at", "columns", "first_seen"), new)

    def write_runs(
        self, conn: sa.Connection, batches: list[LineageBatch], ids: dict[str, int], report: IngestReport
    ) -> None:
        # A run is reported in pieces (OpenLineage's START, then COMPLETE), possibly out of order:
        # each piece fills what it knows, and a run that has ended keeps its final status.
        rows: dict[str, dict[str, Any]] = {}
        for batch in batches:
            for run in batch.runs:
                row = {
                    "run_id": run.run_id,
                    "process_id": ids[run.process],
                    "job_id": run.job_id,
                    "user_name": run.user,
                    "started_at": to_micros(run.started_at) if run.started_at else None,
                    "ended_at": to_micros(run.ended_at) if run.ended_at else None,
                    "status": run.status,
                }
                known = rows.get(run.run_id)
                if known is not None:
                    final = known["status"] if known["ended_at"] and not row["ended_at"] else None
                    row = {k: v if v is not None else known[k] for k, v in row.items()}
                    row["status"] = final or row["status"]
                rows[run.run_id] = row
        if not rows:
            return
        driver_insert(
            conn,
            s.runs,
            _RUN_COLUMNS,
            [tuple(row[c] for c in _RUN_COLUMNS) for row in rows.values()],
            on_conflict=_RUN_MERGE,
        )
        report.runs = len(rows)

    def write_problems(
        self, conn: sa.Connection, batches: list[LineageBatch], now_us: int, report: IngestReport
    ) -> None:
        rows = [
            (
                _fitted(p.source, s.width(s.problems.c.source)),
                _fitted(p.location, s.width(s.problems.c.location)),
                p.reason,
                p.excerpt,
                now_us,
            )
            for batch in batches
            for p in batch.problems
        ]
        if rows:
            driver_insert(conn, s.problems, ("source", "location", "reason", "excerpt", "recorded_at"), rows)
        report.problems = len(rows)

    def write_events(self, conn: sa.Connection, batches: list[LineageBatch], now_us: int) -> None:
        """Keep the OpenLineage events the batches came from, as received, for Marquez's read API."""
        if not any(batch.events for batch in batches):
            return
        rows = []
        for batch in batches:
            for event in batch.events:
                run, job = event.get("run") or {}, event.get("job") or {}
                run_id = run.get("runId")
                if isinstance(run_id, str) and run_id:
                    run_id = openlineage_run_id(run_id)  # the runs table's form of the id
                try:
                    event_time = to_micros(datetime.fromisoformat(event["eventTime"]))
                except (KeyError, TypeError, ValueError, OverflowError):
                    event_time = now_us
                rows.append(
                    (
                        event_time,
                        _stored_event_type(event.get("eventType")),
                        run_id,
                        job.get("namespace"),
                        job.get("name"),
                        now_us,
                        json_param(event),
                    )
                )
        if rows:
            driver_insert(conn, s.openlineage_events, _EVENT_COLUMNS, rows)


# The statements of the ingest path, as driver SQL (written with `?`: `engine.driver_execute`):
# SQLAlchemy's own execution of a statement cost more than SQLite running it, and compiling
# each for a new engine (a tracked Spark job's one ingest) more still.
_NODE_PROPERTIES = ("owner", "layer", "security_level", "labels", "description", "properties", "data_type")
_JSON_PROPERTIES = frozenset({"labels", "properties"})
_NODE_VALUES = f"SELECT id, {', '.join(_NODE_PROPERTIES)} FROM nodes"
_DRAW_NODE_IDS = "SELECT nextval(pg_get_serial_sequence('nodes', 'id')) FROM generate_series(1, ?)"
# The ids as one array: as IN lists of 5,000 values, locking 60,000 nodes took 1.3 s, not 0.25 s.
_LOCK_NODES = "SELECT id FROM nodes WHERE id = ANY(?) ORDER BY id FOR NO KEY UPDATE"
# The rows of one process version, given per executemany row after any value set.
_OF_VERSION = "process_id = ? AND valid_from = ?"
_OBSERVATION_COLUMNS = ("process_id", "at", "content_hash", "first_seen")
_CHANGE_COLUMNS = ("asset_id", "at", "change", "signal", "process_id", "run_id", "columns", "previous_id")
_EVENT_COLUMNS = ("event_time", "event_type", "run_id", "job_namespace", "job_name", "received_at", "body")
_EDGES_OF_HASH = (
    edge_query()
    .add_columns(s.edges.c.source_id, s.edges.c.target_id)
    .where(
        s.edges.c.process_id == sa.bindparam("_pid"),
        s.edges.c.valid_from
        == (
            sa.select(sa.func.min(s.process_versions.c.valid_from))
            .where(
                s.process_versions.c.process_id == sa.bindparam("_pid"),
                s.process_versions.c.content_hash == sa.bindparam("_hash"),
            )
            .scalar_subquery()
        ),
    )
)


def _mark_seen(conn: sa.Connection, node_ids: Sequence[int], now_us: int) -> None:
    """Move the nodes' last_seen to now: one UPDATE … WHERE id IN (…) a chunk."""
    for chunk in chunks(node_ids):
        query = f"UPDATE nodes SET last_seen = ? WHERE id IN ({markers(len(chunk))})"
        driver_execute(conn, query, (now_us, *chunk))


# Driver SQL, the same text on SQLite and PostgreSQL; the run merge is `_write_runs`'s rule.
_RUN_COLUMNS = ("run_id", "process_id", "job_id", "user_name", "started_at", "ended_at", "status")
_RUN_MERGE = """(run_id) DO UPDATE SET
    started_at = coalesce(excluded.started_at, runs.started_at),
    ended_at = coalesce(excluded.ended_at, runs.ended_at),
    job_id = coalesce(excluded.job_id, runs.job_id),
    user_name = coalesce(excluded.user_name, runs.user_name),
    status = CASE
        WHEN excluded.ended_at IS NOT NULL OR runs.ended_at IS NULL
            THEN coalesce(excluded.status, runs.status)
        ELSE runs.status
    END"""
_BUMP_VERSION = (
    "INSERT INTO store_state (key, value) VALUES ('graph_version', 1) "
    "ON CONFLICT (key) DO UPDATE SET value = store_state.value + 1 RETURNING value"
)
_VERSION_COLUMNS = (
    "process_id",
    "valid_from",
    "valid_to",
    "content_hash",
    "edge_count",
    "first_seen",
    "last_seen",
)
_EDGE_COLUMNS = (
    "source_id",
    "target_id",
    "process_id",
    "signal",
    "confidence",
    "transformation",
    "description",
    "valid_from",
    "valid_to",
    "first_seen",
    "last_seen",
)
