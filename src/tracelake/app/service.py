"""The operations every interface offers, in one place: the CLI, the HTTP API and Python callers
all go through `Tracelake`, so no command or route holds logic of its own.

It ties the parts together: collectors produce batches, the store ingests them, the graph
index (rebuilt only when the store changed) answers traversals, and the results come back
as the plain views of `tracelake.app.views`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from tracelake.app.views import GraphView, ImpactView, NodeView
from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.configs import ConfigCollection, collect_configs, load_shapes
from tracelake.collect.openlineage import EventError, event_to_batch, events_to_batch
from tracelake.collect.openlineage_log import batches_from_log, log_lines
from tracelake.graph import traverse
from tracelake.graph.cache import IndexCache
from tracelake.graph.index import GraphIndex
from tracelake.graph.traverse import Direction
from tracelake.graph.traverse import TraversalFilters as TraversalFilters  # the app's vocabulary
from tracelake.model import (
    AssetChange,
    AssetRead,
    EdgeVersion,
    LineageBatch,
    Problem,
    UnknownNodeError,
    UrnError,
    parse_urn,
)
from tracelake.model.names import resolve_node
from tracelake.spark import recover as recover_spark_runs
from tracelake.store import LineageStore
from tracelake.store.group_commit import Writer, WriterStats
from tracelake.store.reads import NO_READS, ReadCounts
from tracelake.store.records import IngestReport, NodeRecord
from tracelake.store.writer_process import writer_for

if TYPE_CHECKING:
    from tracelake.collect.sql import SqlCollection
    from tracelake.store.lake import LakeExport

# OpenLineage events from a log written a transaction at a time: a commit per event is mostly commit
EVENTS_A_TRANSACTION = 500
# How many of an asset's reads `show` lists, newest first (the counts cover them all)
READERS_SHOWN = 20

T = TypeVar("T")


@dataclass(slots=True)
class SqlIngestSummary:
    statements: int
    parsed: int
    failed: int
    edges: int
    problems: list[Problem]
    report: IngestReport
    outcomes: dict[str, int] = field(default_factory=dict)  # statements by what they came to


@dataclass(slots=True)
class EventsIngestSummary:
    events: int = 0  # events read (accepted or refused)
    refused: int = 0
    edges: int = 0
    problems: list[Problem] = field(default_factory=list)


@dataclass(slots=True)
class NodeDetails:
    node: NodeRecord
    fields: list[NodeRecord]
    inputs: list[EdgeVersion]
    outputs: list[EdgeVersion]
    changes: list[AssetChange] = field(default_factory=list)  # its lifecycle, oldest first
    readers: list[AssetRead] = field(default_factory=list)  # its latest reads, newest first
    reads: ReadCounts = NO_READS  # all its reads, counted

    def to_json(self) -> dict[str, Any]:
        """The shape `tracelake show --format json` prints and `GET /nodes/{urn}` answers."""
        record = self.node
        return {
            "id": record.urn,
            "kind": record.node_type,
            "type": record.kind,
            "owner": record.owner,
            "layer": record.layer,
            "security_level": record.security_level,
            "labels": list(record.labels),
            "description": record.description,
            "data_type": record.data_type,
            "properties": record.properties,
            "first_seen": record.first_seen.isoformat(),
            "last_seen": record.last_seen.isoformat(),
            "fields": [
                {"id": f.urn, "data_type": f.data_type, "labels": list(f.labels)} for f in self.fields
            ],
            "inputs": [e.to_json() for e in self.inputs],
            "outputs": [e.to_json() for e in self.outputs],
            "changes": [_change_json(c) for c in self.changes],
            "reads": {"runs": self.reads.runs, "readers": self.reads.readers},
            "readers": [read_json(r) for r in self.readers],
        }


@dataclass(slots=True)
class ReadersView:
    """Who read an asset without writing from it: the reads newest first, and all of them counted."""

    asset: str
    reads: list[AssetRead]
    counts: ReadCounts

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "runs": self.counts.runs,
            "readers": self.counts.readers,
            "reads": [read_json(r) for r in self.reads],
        }


def read_json(read: AssetRead) -> dict[str, Any]:
    """One read of an asset: who (the user, and the process that is the job), when, which columns."""
    return {
        "user": read.user,
        "process": read.process,
        "run_id": read.run_id,
        "at": read.at.isoformat(),
        "signal": str(read.signal),
        "columns": list(read.columns),
    }


def _change_json(change: AssetChange) -> dict[str, Any]:
    return {
        "dataset": change.asset,
        "change": str(change.change),
        "at": change.at.isoformat(),
        "signal": str(change.signal),
        "process": change.process,
        "run_id": change.run_id,
        "columns": [{"name": name, "data_type": data_type} for name, data_type in change.columns or ()],
        "previous": change.previous,
    }


@dataclass(slots=True)
class DiffView:
    since: datetime
    until: datetime
    added: list[EdgeVersion] = field(default_factory=list)
    removed: list[EdgeVersion] = field(default_factory=list)


class Tracelake:
    """Tracelake's operations on one store: the front door of the lineage graph.

    The workflows built on it take it whole: `Review(service)`, `EntityOperations(service)`,
    `PrivacyOperations(service)`, `Subscriptions(service)`.
    """

    def __init__(self, store: LineageStore | None = None) -> None:
        self.store = store or LineageStore()
        self._indexes = IndexCache(self.store)
        self._writer: Writer | None = None
        self._writer_lock = threading.Lock()
        self._derived: dict[str, tuple[GraphIndex, float, Any]] = {}
        self._derived_lock = threading.Lock()

    @classmethod
    def open(cls, db: str | None = None, *, recovered: Callable[[str], None] | None = None) -> Tracelake:
        """The store at `db` (a URL or SQLite file; default `.tracelake/lineage.db`), once the runs
        whose Spark driver died before storing them are stored and ended; `recovered` is told of each."""
        store = LineageStore(db)
        for found in recover_spark_runs(store):
            if recovered is not None:
                recovered(found.describe())
        return cls(store)

    def close(self) -> None:
        self.close_writer()
        self.store.close()

    # ------------------------------------------------------------------ group commit

    def submit(self, batches: Sequence[LineageBatch]) -> Future[None]:
        """Queue `batches` and return at once: the future is done once they are committed, in one
        transaction with those of every concurrent caller (the HTTP API's ingest routes), by a
        process of its own for a store other processes can open (`store.writer_process`)."""
        with self._writer_lock:
            if self._writer is None:
                self._writer = writer_for(self.store)
            writer = self._writer
        return writer.submit(batches)

    def submit_openlineage(self, document: Any) -> Future[None]:
        """Queue one OpenLineage event, or an array of them (all or nothing), as `submit` does. One
        that cannot be read is recorded as a problem of the store (where and why, not its values),
        and the future fails with its `EventError` once that is committed."""
        try:
            batch = events_to_batch(document) if isinstance(document, list) else event_to_batch(document)
        except EventError as error:
            unreadable = error  # `error` is unbound once the except clause ends
        else:
            return self.submit([batch])
        refused: Future[None] = Future()

        def settle(recorded: Future[None]) -> None:
            refused.set_exception(recorded.exception() or unreadable)

        problem = Problem("openlineage", unreadable.reason, unreadable.path)
        self.submit([LineageBatch(problems=[problem])]).add_done_callback(settle)
        return refused

    @property
    def writer_stats(self) -> WriterStats:
        """Groups the writer has committed and the CPU they took (zero before the first submit)."""
        return self._writer.stats if self._writer is not None else WriterStats()

    def close_writer(self) -> None:
        """Return once everything submitted is committed, with the writer stopped (its figures
        kept; a later submit starts it again)."""
        with self._writer_lock:
            writer = self._writer
        if writer is not None:
            writer.close()

    # ------------------------------------------------------------------ collect

    def ingest_sql(
        self,
        path: Path,
        *,
        dialect: str = "spark",
        schema_file: Path | None = None,
        default_db: str = "default",
        progress: Callable[[int], None] | None = None,
        variables: Mapping[str, str] | None = None,
    ) -> SqlIngestSummary:
        """Collect lineage from SQL files or a query log and ingest it in one transaction.

        `SELECT *` is expanded from the schema file when given, and otherwise (and for tables
        the file does not name) from the columns the store has already seen; an INSERT without
        a column list is mapped by position only onto a declared order (the schema file's, or
        one the store keeps from DDL), never onto the order columns were first seen in.
        """
        from tracelake.collect.sql import collect_path  # the SQL parser: not for a query's command

        # Columns the store has seen are names only (the order they were first seen in is no
        # table's order); orders declared by DDL or a write, and the schema file's, are orders.
        schema = SchemaCatalog.from_mapping(self.store.known_columns(), default_db=default_db, ordered=False)
        for table, versions in self.store.declared_columns().items():
            for declared_at, columns in versions:
                schema.declare(table, columns, declared_at)
        if schema_file is not None:
            for table in (from_file := SchemaCatalog.from_file(schema_file, default_db=default_db)).tables():
                schema.replace(table, from_file.columns(table) or [])
        collection: SqlCollection = collect_path(
            path,
            dialect=dialect,
            schema=schema,
            default_db=default_db,
            progress=progress,
            variables=variables,
        )
        batches = list(collection.batches)
        if collection.problems:
            batches[:0] = [LineageBatch(problems=list(collection.problems))]
        report = self.store.ingest(batches)
        return SqlIngestSummary(
            statements=collection.statements,
            parsed=collection.parsed,
            failed=collection.failed,
            edges=collection.edges,
            problems=collection.problems,
            report=report,
            outcomes={str(outcome): count for outcome, count in collection.outcomes.items()},
        )

    def ingest_openlineage(
        self, log: BinaryIO, *, source: str, chunk: int = EVENTS_A_TRANSACTION
    ) -> EventsIngestSummary:
        """Ingest OpenLineage events from a log (JSON lines, an array, or Marquez's page) named
        `source`, streamed: each event stands alone as over HTTP, so they are written `chunk` to a
        transaction, and an event (or a line) that cannot be read is a problem while the others land."""
        summary = EventsIngestSummary()
        pending: list[LineageBatch] = []
        for batch in batches_from_log(log_lines(log, source), source):
            summary.events += 1
            if not batch.events:
                summary.refused += 1
            summary.edges += len(batch.edges)
            summary.problems.extend(batch.problems)
            pending.append(batch)
            if len(pending) >= chunk:
                self.store.ingest(pending)
                pending = []
        if pending:
            self.store.ingest(pending)
        return summary

    def ingest_configs(self, paths: Sequence[Path], *, shapes_file: Path | None = None) -> ConfigCollection:
        """Collect lineage from ML configs (training jobs, inference services) and ingest it."""
        shapes = load_shapes(shapes_file) if shapes_file is not None else []
        collection = collect_configs(paths, shapes)
        batch = collection.batch
        batch.problems.extend(collection.problems)
        self.store.ingest(batch)
        return collection

    # ------------------------------------------------------------------ explore

    def index(self) -> GraphIndex:
        return self._indexes.get()

    @property
    def index_loaded(self) -> bool:
        """Whether an index is in memory (of whatever version): `index()` then only catches up."""
        return self._indexes.loaded

    def per_graph_version(self, key: str, build: Callable[[], T], *, max_age: float | None = None) -> T:
        """`build()`'s value, made once per version of the graph (and at most `max_age` seconds
        old) and shared by every caller: what an interface derives from the whole store is not read
        again for each request. Concurrent callers wait for one build."""
        index = self.index()
        with self._derived_lock:
            held = self._derived.get(key)
            now = time.monotonic()
            if held is None or held[0] is not index or (max_age is not None and now - held[1] > max_age):
                held = self._derived[key] = (index, now, build())
            value: T = held[2]
            return value

    def resolve(self, names: Sequence[str], index: GraphIndex | None = None) -> list[str]:
        """Canonical URNs for what a user typed: a URN, `db.tbl`, `tbl#col`…

        A name resolved against the default database that the graph does not hold is
        matched by suffix (`safety_training_tbl#target_religion` finds it in any database)
        when exactly one node matches; otherwise UnknownNodeError names the candidates.
        `index`: the one the caller answers from (asking for it again costs a version check).
        """
        index = index if index is not None else self.index()
        urns = []
        for name in names:
            try:
                urn = resolve_node(name)
            except UrnError as exc:
                raise UnknownNodeError(name) from exc
            if urn not in index.positions:
                urn = self._match_suffix(name, urn, index)
            urns.append(urn)
        return urns

    def _match_suffix(self, typed: str, urn: str, index: GraphIndex) -> str:
        parsed = parse_urn(urn)
        typed_table = typed.partition("#")[0]
        if parsed.kind == "table" and "/" not in typed_table and typed_table.count(".") == 0:
            suffix = "." + urn.partition("/")[2].split(".", 1)[1]
            candidates = self.store.find_urns(suffix)
            if len(candidates) == 1:
                return candidates[0]
            if candidates:
                raise UnknownNodeError(typed, tuple(candidates[:5]))
        raise UnknownNodeError(typed, index.near_matches(urn))

    def lineage(
        self, names: Sequence[str], direction: Direction = "both", filters: TraversalFilters | None = None
    ) -> GraphView:
        """Upstream and/or downstream of many nodes at once, as nodes with distances and edges."""
        filters = filters or TraversalFilters()
        index = self.index()
        starts = self.resolve(names, index)
        result = traverse.lineage(index, starts, direction, _unset_when_empty(filters))
        as_of = filters.as_of
        distances = {
            index.urns[p]: d
            for p, d in result.distances().items()
            # a start node is shown as of a time only if it was in the graph then
            if d > 0 or as_of is None or index.existed_at(p, as_of)
        }
        records = self.store.nodes(distances)
        nodes = [_node_view(urn, records.get(urn), index, distance) for urn, distance in distances.items()]
        nodes.sort(key=lambda n: (n.distance or 0, n.id))
        edges = sorted(index.edges(result.edge_positions()), key=_edge_order)
        return GraphView(nodes=nodes, edges=edges)

    def impact(self, names: Sequence[str], filters: TraversalFilters | None = None) -> list[ImpactView]:
        """Downstream assets of the given nodes, nearest first, with their owners."""
        filters = filters or TraversalFilters()
        index = self.index()
        starts = self.resolve(names, index)
        impacted = traverse.impact(index, starts, _unset_when_empty(filters))
        records = self.store.nodes(i.asset for i in impacted)
        views = []
        for item in impacted:
            record = records.get(item.asset)
            views.append(
                ImpactView(
                    asset=item.asset,
                    type=parse_urn(item.asset).asset_kind,
                    distance=item.distance,
                    owner=record.owner if record else None,
                    layer=record.layer if record else None,
                    via_fields=tuple(item.via_fields),
                )
            )
        return views

    def paths(
        self, source: str, target: str, *, max_depth: int = 10, filters: TraversalFilters | None = None
    ) -> list[list[EdgeVersion]]:
        filters = filters or TraversalFilters()
        index = self.index()
        start, end = self.resolve([source, target], index)
        found = traverse.paths(index, start, end, _unset_when_empty(filters), max_depth=max_depth)
        return [index.edges(path) for path in found]

    def show(self, name: str, *, as_of: datetime | None = None) -> NodeDetails:
        """One node with its fields and the edges that enter and leave it now (or at `as_of`); an
        asset's lifecycle and its latest readers too."""
        (urn,) = self.resolve([name])
        node = self.store.node(urn)
        if node is None:  # the index knew it but the store no longer does: a race with a reset
            raise UnknownNodeError(name)
        edges = [e.version() for e in self.store.edges(touching=urn, as_of=as_of)]
        details = NodeDetails(
            node=node,
            fields=self.store.fields_of(urn, self._declared(urn, as_of)) if node.node_type == "asset" else [],
            inputs=sorted((e for e in edges if e.target == urn), key=_edge_order),
            outputs=sorted((e for e in edges if e.source == urn), key=_edge_order),
            changes=self.store.changes(urn, until=as_of) if node.node_type == "asset" else [],
        )
        if node.node_type == "asset":
            details.readers = self.store.readers(urn, until=as_of, limit=READERS_SHOWN)
            details.reads = self.store.read_counts(asset=urn, until=as_of).get(urn, NO_READS)
        return details

    def readers(
        self, name: str, *, since: datetime | None = None, until: datetime | None = None, limit: int = 100
    ) -> ReadersView:
        """Who read a table without writing from it within [since, until]: at most `limit` reads,
        newest first, and the count of them all."""
        (urn,) = self.resolve([name])
        counts = self.store.read_counts(asset=urn, since=since, until=until).get(urn, NO_READS)
        return ReadersView(urn, self.store.readers(urn, since=since, until=until, limit=limit), counts)

    def _declared(self, urn: str, as_of: datetime | None) -> list[str]:
        """The asset's column order declared last (by `as_of`), or none."""
        catalog = SchemaCatalog()
        for at, columns in self.store.declared_columns(urn).get(urn, []):
            catalog.declare(urn, columns, at)
        return catalog.declared_order(urn, as_of) or []

    def diff(self, since: datetime, until: datetime) -> DiffView:
        changes = self.store.diff(since, until)
        return DiffView(
            since=since,
            until=until,
            added=sorted((e.version() for e in changes.added), key=_edge_order),
            removed=sorted((e.version() for e in changes.removed), key=_edge_order),
        )

    def problems(self, limit: int = 100) -> list[Problem]:
        return self.store.problems(limit)

    def export(self, folder: Path, *, full: bool = False) -> LakeExport:
        """The graph as lake tables in `folder` (`tracelake.store.lake`): what changed since the
        last export appended, or everything written again when `full` (or compaction is due)."""
        from tracelake.store.lake import export_lake  # pyarrow: only for the export itself

        return export_lake(self.store, folder, full=full)

    def search(self, text: str, *, node_type: str | None = None, limit: int = 20) -> list[NodeView]:
        """Nodes whose URN contains `text` (case-insensitive), assets before their fields."""
        index = self.index()
        urns = self.store.search_urns(text, node_type=node_type, limit=limit)
        records = self.store.nodes(urns)
        return [_node_view(urn, records.get(urn), index, None) for urn in urns if urn in index.positions]


def _unset_when_empty(filters: TraversalFilters) -> TraversalFilters:
    """An interface's empty list of signals, kinds or transformations means "no filter", as an
    option not given does; to the walk, an empty set would let no edge through."""
    return dataclasses.replace(
        filters,
        signals=filters.signals or None,
        asset_kinds=filters.asset_kinds or None,
        transformations=filters.transformations or None,
    )


def _node_view(urn: str, record: NodeRecord | None, index: GraphIndex, distance: int | None) -> NodeView:
    position = index.positions[urn]
    if record is None:
        return NodeView(urn, index.node_type(position), index.kind(position), distance)
    return NodeView(
        id=urn,
        kind=record.node_type,
        type=record.kind,
        distance=distance,
        owner=record.owner,
        layer=record.layer,
        labels=record.labels,
        data_type=record.data_type,
    )


def _edge_order(edge: EdgeVersion) -> tuple[str, str, str, str]:
    return (edge.source, edge.target, edge.transformation or "", edge.signal)
