"""The graph as lake tables: Parquet a Spark job reads, brought up to date by appending what changed.

A lake is a folder of tables, one folder each, and a manifest (`_lake.json`) saying which of
their snapshots a reader reads. Each export writes snapshot `seq=N` of the tables it touches and
then replaces the manifest, so a reader of the manifest sees one export whole or the one before;
an export that dies half way leaves files no manifest names, which the next one removes.

- `nodes`: every node's id, URN, type, kind and asset. These never change once a node is stored,
  so an export appends the nodes inserted since the last one.
- `edges`: every edge version (ids of its nodes and process, signal, confidence, transformation,
  validity with the ends of ended assets applied: `valid_to` null while in force). An export
  appends the rows of every process version that changed since the last one (inserted, retimed,
  deleted, or an edge's end moved with its asset's), and lists those versions in `edge_deletes`:
  a row whose version a later snapshot lists is replaced by that snapshot's rows (Iceberg's
  equality deletes, on the key (process_id, valid_from)). `tracelake.graph.spark.lake` reads the
  current rows so.
- `assets` (owner, layer, security level, labels as ingested), `labels` (declared, inferred and
  confirmed), `reads` (which process read which asset), `versions` and `runs` change in place in
  the store and are written whole each time, the newest snapshot alone kept.

Once the appended edge rows pass a quarter of the last full snapshot's (or the store is another,
or its change log no longer reaches back), the export is a full one again: compaction.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from tracelake.model import InputError, utcnow
from tracelake.store import schema as s
from tracelake.store.records import OPEN_END
from tracelake.store.snapshots import (
    asset_ends,
    changed_since,
    end_edges,
    graph_version,
    in_ranges,
    version_rows,
)
from tracelake.store.sqlstore import LineageStore

MANIFEST = "_lake.json"
LOCK = ".export.lock"
FORMAT = 1
BATCH_ROWS = 200_000
FILE_ROWS = 4_000_000  # a file a few hundred MB at most: Spark splits the work by file and row group
COMPACT_SHARE = 0.25  # appended edge rows past this share of the full snapshot's: write all again
APPENDED = ("nodes", "edges", "edge_deletes")
WHOLE = ("assets", "labels", "reads", "versions", "runs")
TABLES = APPENDED + WHOLE

_TIME = pa.timestamp("us", tz="UTC")
_TEXT = pa.string()
_n, _e, _v, _r = s.nodes, s.edges, s.process_versions, s.runs
_parent, _source, _target, _process, _asset = (
    _n.alias(name) for name in ("parent", "source", "target", "process", "asset")
)


class LakeError(InputError):
    """A folder that is not a lake this version can read or write, said in one line."""


@dataclass
class Manifest:
    """What a lake holds: the store and graph version it is of, and each table's live snapshots."""

    store: int
    graph_version: int
    ends: dict[int, int]  # the ended assets' ends the edges were written with (store id → µs)
    tables: dict[str, list[int]]  # table → its live snapshot numbers, oldest first
    full_edges: int  # edge rows of the last full snapshot
    appended_edges: int  # edge rows appended since it
    history: list[dict[str, Any]] = field(default_factory=list)  # the exports, newest last

    @property
    def seq(self) -> int:
        return max((n for seqs in self.tables.values() for n in seqs), default=-1)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "store": self.store,
            "graph_version": self.graph_version,
            "ends": {str(k): v for k, v in sorted(self.ends.items())},
            "tables": self.tables,
            "full_edges": self.full_edges,
            "appended_edges": self.appended_edges,
            "history": self.history[-50:],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Manifest:
        return cls(
            store=int(data["store"]),
            graph_version=int(data["graph_version"]),
            ends={int(k): int(v) for k, v in data["ends"].items()},
            tables={name: [int(n) for n in seqs] for name, seqs in data["tables"].items()},
            full_edges=int(data["full_edges"]),
            appended_edges=int(data["appended_edges"]),
            history=list(data.get("history", [])),
        )


@dataclass(frozen=True)
class LakeExport:
    """What one export wrote."""

    folder: Path
    seq: int
    full: bool
    graph_version: int
    rows: dict[str, int]  # rows written a table in this snapshot


def read_manifest(folder: Path) -> Manifest | None:
    """The lake's manifest; None when the folder holds no lake. A manifest this version cannot
    read is a `LakeError`."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise LakeError(f"{path}: lake format {data.get('format')!r}, this version reads {FORMAT}")
        return Manifest.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise LakeError(f"{path}: not a lake manifest ({type(error).__name__}: {error})") from None


def snapshot_paths(folder: Path, manifest: Manifest, table: str) -> list[Path]:
    """The folders of a table's live snapshots (`seq=N`), for a reader."""
    return [folder / table / f"seq={n}" for n in manifest.tables.get(table, [])]


def export_lake(store: LineageStore, folder: Path, *, full: bool = False) -> LakeExport:
    """Bring the lake in `folder` (made if missing) up to the store's graph: what changed since the
    last export, or everything when `full`, the first time, or when compaction is due. Exports
    into one lake take turns (a lock file in it): two would write the same snapshot."""
    if folder.exists() and not folder.is_dir():
        raise LakeError(f"{folder} is a file, not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        return _export(store, folder, full)


def _export(store: LineageStore, folder: Path, full: bool) -> LakeExport:
    before = read_manifest(folder)
    seq = (before.seq if before is not None else -1) + 1  # numbers never reused: readers hold old ones
    identity = store.identity()
    if before is not None and before.store != identity:
        before = None  # another store's lake: written again whole
    for table in TABLES:
        shutil.rmtree(folder / table / f"seq={seq}", ignore_errors=True)  # left by an export that died
    with store.engine.connect() as conn, conn.begin():  # one consistent read
        version = graph_version(conn)
        ends = asset_ends(conn)
        changed = None if full or before is None else changed_since(conn, before.graph_version, before.ends)
        writer = _SnapshotWriter(folder, seq)
        if before is not None and changed is not None and not _compaction_due(before, conn, changed):
            node_ranges, versions = changed
            writer.write("nodes", _nodes(conn, in_ranges(_n.c.id, node_ranges)))
            edge_rows = (
                batch
                for condition in version_rows(sorted(versions))
                for batch in _edges(conn, ends, condition)
            )
            writer.write("edges", edge_rows)
            writer.write("edge_deletes", [_deletes(versions)])
            is_full = False
        else:
            writer.write("nodes", _nodes(conn, sa.true()), empty_too=True)
            writer.write("edges", _edges(conn, ends, sa.true()), empty_too=True)
            writer.write("edge_deletes", [_deletes(())], empty_too=True)
            is_full = True
        for table in WHOLE:
            writer.write(table, _whole(conn, table), empty_too=True)
    manifest = _next_manifest(before, identity, version, ends, writer, is_full)
    _replace_manifest(folder, manifest)
    _remove_dead(folder, manifest)
    return LakeExport(folder, seq, is_full, version, writer.rows)


def _compaction_due(before: Manifest, conn: sa.Connection, changed: tuple[Any, set[tuple[int, int]]]) -> bool:
    """Whether the rows this export would append, with those appended already, pass
    `COMPACT_SHARE` of the full snapshot's (counted, not guessed: a count per version chunk)."""
    _, versions = changed
    coming = sum(
        int(conn.execute(sa.select(sa.func.count()).select_from(_e).where(condition)).scalar_one())
        for condition in version_rows(sorted(versions))
    )
    return before.appended_edges + coming > COMPACT_SHARE * max(before.full_edges, 1) and coming > 0


def _next_manifest(
    before: Manifest | None,
    identity: int,
    version: int,
    ends: dict[int, int],
    writer: _SnapshotWriter,
    full: bool,
) -> Manifest:
    seq, rows = writer.seq, writer.rows
    if full or before is None:
        tables = {table: [seq] for table in TABLES}
        full_edges, appended = rows.get("edges", 0), 0
        history: list[dict[str, Any]] = [] if before is None else before.history
    else:
        tables = {table: list(before.tables.get(table, [])) for table in APPENDED}
        for table in APPENDED:
            if rows.get(table, 0):  # a table this export appended nothing to keeps its snapshots
                tables[table].append(seq)
        tables.update({table: [seq] for table in WHOLE})
        full_edges, appended = before.full_edges, before.appended_edges + rows.get("edges", 0)
        history = before.history
    entry = {"seq": seq, "full": full, "graph_version": version, "at": utcnow().isoformat(), "rows": rows}
    return Manifest(identity, version, ends, tables, full_edges, appended, [*history, entry])


def _replace_manifest(folder: Path, manifest: Manifest) -> None:
    staged = folder / f".{MANIFEST}.tmp"
    staged.write_text(json.dumps(manifest.to_json(), indent=1))
    os.replace(staged, folder / MANIFEST)


def _remove_dead(folder: Path, manifest: Manifest) -> None:
    """Remove the snapshots the manifest no longer names (a compaction's, a whole table's older)."""
    for table in TABLES:
        live = {f"seq={n}" for n in manifest.tables.get(table, [])}
        for path in (folder / table).glob("seq=*"):
            if path.name not in live:
                shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- writing a snapshot


class _SnapshotWriter:
    """Writes tables' Arrow batches as `TABLE/seq=N/part-K.parquet`, a new part every `FILE_ROWS`."""

    def __init__(self, folder: Path, seq: int) -> None:
        self.folder, self.seq = folder, seq
        self.rows: dict[str, int] = {}

    def write(self, table: str, batches: Iterable[pa.RecordBatch], *, empty_too: bool = False) -> None:
        schema = SCHEMAS[table]
        target = self.folder / table / f"seq={self.seq}"
        writer: pq.ParquetWriter | None = None
        part = in_part = total = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if writer is None or in_part >= FILE_ROWS:
                    if writer is not None:
                        writer.close()
                        part += 1
                    target.mkdir(parents=True, exist_ok=True)
                    writer, in_part = pq.ParquetWriter(target / f"part-{part:05d}.parquet", schema), 0
                writer.write_batch(batch)
                in_part += batch.num_rows
                total += batch.num_rows
            if writer is None and empty_too:
                target.mkdir(parents=True, exist_ok=True)
                pq.write_table(schema.empty_table(), target / "part-00000.parquet")
        finally:
            if writer is not None:
                writer.close()
        self.rows[table] = total


# ---------------------------------------------------------------------- the tables' rows

SCHEMAS: dict[str, pa.Schema] = {
    "nodes": pa.schema(
        [
            ("id", pa.int64()),
            ("urn", _TEXT),
            ("node_type", _TEXT),  # asset | field | process
            ("kind", _TEXT),
            ("asset_id", pa.int64()),  # the node's asset: itself for an asset, null for a process
        ]
    ),
    "edges": pa.schema(
        [
            ("id", pa.int64()),
            ("source_id", pa.int64()),
            ("target_id", pa.int64()),
            ("process_id", pa.int64()),
            ("signal", _TEXT),
            ("confidence", _TEXT),
            ("transformation", _TEXT),  # null on an asset → asset edge
            ("is_field", pa.bool_()),  # a field → field edge
            ("valid_from", _TIME),
            ("valid_to", _TIME),  # null while in force
        ]
    ),
    "edge_deletes": pa.schema([("process_id", pa.int64()), ("valid_from", _TIME)]),
    "assets": pa.schema(
        [
            ("id", pa.int64()),
            ("urn", _TEXT),
            ("owner", _TEXT),
            ("layer", _TEXT),
            ("security_level", pa.int32()),
            ("labels", pa.list_(_TEXT)),
            ("description", _TEXT),
            ("properties", _TEXT),  # JSON
        ]
    ),
    "labels": pa.schema(
        [
            ("urn", _TEXT),
            ("label", _TEXT),
            ("provenance", _TEXT),
            ("source", _TEXT),
            ("path", pa.list_(_TEXT)),
        ]
    ),
    "reads": pa.schema([("process_id", pa.int64()), ("asset_id", pa.int64())]),
    "versions": pa.schema(
        [
            ("process", _TEXT),
            ("valid_from", _TIME),
            ("valid_to", _TIME),
            ("content_hash", _TEXT),
            ("edge_count", pa.int32()),
        ]
    ),
    "runs": pa.schema(
        [
            ("run_id", _TEXT),
            ("process", _TEXT),
            ("job_id", _TEXT),
            ("user", _TEXT),
            ("started_at", _TIME),
            ("ended_at", _TIME),
            ("status", _TEXT),
        ]
    ),
}


def _nodes(conn: sa.Connection, where: sa.ColumnElement[bool]) -> Iterator[pa.RecordBatch]:
    asset_id = sa.case((_n.c.node_type == "asset", _n.c.id), else_=_n.c.parent_id)
    query = sa.select(_n.c.id, _n.c.urn, _n.c.node_type, _n.c.kind, asset_id).where(where).order_by(_n.c.id)
    return _batches(conn, query, SCHEMAS["nodes"])


def _edges(
    conn: sa.Connection, ends: Mapping[int, int], where: sa.ColumnElement[bool]
) -> Iterator[pa.RecordBatch]:
    """Edge rows with the ends of ended assets applied to `valid_to`, as the graph index has them."""
    query = (
        sa.select(
            _e.c.id,
            _e.c.source_id,
            _e.c.target_id,
            _e.c.process_id,
            _e.c.signal,
            _e.c.confidence,
            _e.c.transformation,
            _source.c.node_type == "field",
            _e.c.valid_from,
            sa.func.coalesce(_e.c.valid_to, OPEN_END),
            sa.func.coalesce(_source.c.parent_id, _source.c.id),
            sa.func.coalesce(_target.c.parent_id, _target.c.id),
        )
        .join(_source, _e.c.source_id == _source.c.id)
        .join(_target, _e.c.target_id == _target.c.id)
        .where(where)
        .order_by(_e.c.id)
    )
    schema = SCHEMAS["edges"]
    for rows in _row_batches(conn, query):
        columns = list(zip(*rows, strict=True))
        valid_from = np.asarray(columns[8], dtype=np.int64)
        valid_to = end_edges(
            valid_from,
            np.asarray(columns[9], dtype=np.int64),
            np.asarray(columns[10], dtype=np.int64),
            np.asarray(columns[11], dtype=np.int64),
            ends,
        )
        arrays = [_array(columns[i], schema.field(i).type) for i in range(8)]
        arrays.append(pa.array(valid_from).cast(_TIME))
        arrays.append(pa.array(valid_to, mask=valid_to == OPEN_END).cast(_TIME))
        yield pa.record_batch(arrays, schema=schema)


def _deletes(versions: Iterable[tuple[int, int]]) -> pa.RecordBatch:
    ordered = sorted(versions)
    return pa.record_batch(
        [
            pa.array([process for process, _ in ordered], type=pa.int64()),
            pa.array([at for _, at in ordered], type=pa.int64()).cast(_TIME),
        ],
        schema=SCHEMAS["edge_deletes"],
    )


def _whole(conn: sa.Connection, table: str) -> Iterator[pa.RecordBatch]:
    yield from _batches(conn, _WHOLE_QUERIES[table](), SCHEMAS[table])
    if table == "labels":
        yield from _batches(conn, _declared_query(), SCHEMAS[table], rows=_declared_rows)


def _assets_query() -> sa.Select[Any]:
    columns = [_n.c[column.name] for column in SCHEMAS["assets"]]  # named as in the store
    return sa.select(*columns).where(_n.c.node_type == "asset").order_by(_n.c.id)


def _labels_query() -> sa.Select[Any]:
    """Labels assigned by propagation and discovery; the declared ones follow (`_declared_rows`)."""
    a = s.label_assignments
    return sa.select(a.c.urn, a.c.label, a.c.provenance, a.c.source, a.c.path).order_by(
        a.c.label, a.c.provenance, a.c.urn
    )


def _declared_query() -> sa.Select[Any]:
    return sa.select(_n.c.urn, _n.c.labels).where(_n.c.labels.is_not(None)).order_by(_n.c.id)


def _declared_rows(rows: Sequence[Any]) -> list[tuple[Any, ...]]:
    """A node's declared labels, a row each, in the assigned labels' shape: from itself."""
    return [(urn, label, "declared", urn, [urn]) for urn, labels in rows for label in _listed(labels) or ()]


def _reads_query() -> sa.Select[Any]:
    r = s.asset_reads
    return sa.select(r.c.process_id, r.c.asset_id).distinct().order_by(r.c.process_id, r.c.asset_id)


def _versions_query() -> sa.Select[Any]:
    columns = (_process.c.urn, _v.c.valid_from, _v.c.valid_to, _v.c.content_hash, _v.c.edge_count)
    query = sa.select(*columns).join(_process, _v.c.process_id == _process.c.id)
    return query.order_by(_v.c.process_id, _v.c.valid_from)


def _runs_query() -> sa.Select[Any]:
    r = _r
    columns = (
        r.c.run_id,
        _process.c.urn,
        r.c.job_id,
        r.c.user_name,
        r.c.started_at,
        r.c.ended_at,
        r.c.status,
    )
    return sa.select(*columns).join(_process, r.c.process_id == _process.c.id).order_by(r.c.run_id)


_WHOLE_QUERIES = {
    "assets": _assets_query,
    "labels": _labels_query,
    "reads": _reads_query,
    "versions": _versions_query,
    "runs": _runs_query,
}


def _batches(
    conn: sa.Connection,
    query: sa.Select[Any],
    schema: pa.Schema,
    rows: Callable[[Sequence[Any]], Sequence[Sequence[Any]]] = lambda rows: rows,
) -> Iterator[pa.RecordBatch]:
    """The query's rows (made into the table's by `rows`) as Arrow batches of `schema`."""
    for fetched in _row_batches(conn, query):
        columns = list(zip(*rows(fetched), strict=True))
        if columns:
            arrays = [_array(values, schema.field(i).type) for i, values in enumerate(columns)]
            yield pa.record_batch(arrays, schema=schema)


def _row_batches(conn: sa.Connection, query: sa.Select[Any]) -> Iterator[Sequence[Any]]:
    result = conn.execution_options(yield_per=BATCH_ROWS).execute(query)
    while rows := result.fetchmany(BATCH_ROWS):
        yield rows


def _array(values: Sequence[object], kind: pa.DataType) -> pa.Array:
    if kind == _TIME:  # the store keeps µs since the epoch
        return pa.array(values, type=pa.int64()).cast(_TIME)
    if kind == _TEXT:
        return pa.array([_text(value) for value in values], type=kind)
    if pa.types.is_list(kind):
        return pa.array([_listed(value) for value in values], type=kind)
    return pa.array(values, type=kind)


def _text(value: object) -> str | None:
    """Text as it is; a JSON column (properties) as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _listed(value: object) -> list[str] | None:
    if isinstance(value, str):  # a JSON column a driver handed back as text
        value = json.loads(value)
    return None if value is None else [str(item) for item in value]  # type: ignore[attr-defined]
