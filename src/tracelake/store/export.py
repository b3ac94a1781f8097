"""The whole graph as Parquet tables a Spark job can read (`tracelake export`).

Four tables, each a file: `nodes` (assets, fields and processes with their properties),
`edges` (every edge version, with its validity: `valid_to` null while in force), `versions`
(every process version) and `runs`. Names are URNs, so the tables join without the store's ids;
times are UTC timestamps (µs). Rows are read and written in batches, so memory stays bounded
whatever the store's size, and the files are written beside the folder's and renamed into it
only once all are complete: an export that dies half way leaves the previous one whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa

from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore

BATCH_ROWS = 100_000
_TIME = pa.timestamp("us", tz="UTC")

_n, _e, _v, _r = s.nodes, s.edges, s.process_versions, s.runs
_parent, _source, _target, _process = (_n.alias(name) for name in ("parent", "source", "target", "process"))
_TEXT = pa.string()
Column = tuple[str, sa.ColumnElement[object], pa.DataType]


def _table(
    columns: list[Column], query: sa.Select[*tuple[Any, ...]]
) -> tuple[sa.Select[*tuple[Any, ...]], pa.Schema]:
    """The query selecting `columns` (name, expression, Arrow type) and the file's schema."""
    selected: sa.Select[*tuple[Any, ...]] = query.with_only_columns(
        *(expression for _, expression, _ in columns)
    )
    return selected, pa.schema([(name, kind) for name, _, kind in columns])


TABLES = {
    "nodes": _table(
        [
            ("urn", _n.c.urn, _TEXT),
            ("node_type", _n.c.node_type, _TEXT),
            ("kind", _n.c.kind, _TEXT),
            ("parent", _parent.c.urn, _TEXT),
            ("data_type", _n.c.data_type, _TEXT),
            ("owner", _n.c.owner, _TEXT),
            ("layer", _n.c.layer, _TEXT),
            ("security_level", _n.c.security_level, pa.int32()),
            ("labels", _n.c.labels, pa.list_(_TEXT)),
            ("description", _n.c.description, _TEXT),
            ("properties", _n.c.properties, _TEXT),
            ("first_seen", _n.c.first_seen, _TIME),
            ("last_seen", _n.c.last_seen, _TIME),
        ],
        sa.select(_n).outerjoin(_parent, _n.c.parent_id == _parent.c.id).order_by(_n.c.id),
    ),
    "edges": _table(
        [
            ("id", _e.c.id, pa.int64()),
            ("source", _source.c.urn, _TEXT),
            ("target", _target.c.urn, _TEXT),
            ("process", _process.c.urn, _TEXT),
            ("signal", _e.c.signal, _TEXT),
            ("confidence", _e.c.confidence, _TEXT),
            ("transformation", _e.c.transformation, _TEXT),
            ("valid_from", _e.c.valid_from, _TIME),
            ("valid_to", _e.c.valid_to, _TIME),  # null: in force
            ("first_seen", _e.c.first_seen, _TIME),
            ("last_seen", _e.c.last_seen, _TIME),
        ],
        sa.select(_e)
        .join(_source, _e.c.source_id == _source.c.id)
        .join(_target, _e.c.target_id == _target.c.id)
        .join(_process, _e.c.process_id == _process.c.id)
        .order_by(_e.c.id),
    ),
    "versions": _table(
        [
            ("process", _process.c.urn, _TEXT),
            ("valid_from", _v.c.valid_from, _TIME),
            ("valid_to", _v.c.valid_to, _TIME),
            ("content_hash", _v.c.content_hash, _TEXT),
            ("edge_count", _v.c.edge_count, pa.int32()),
        ],
        sa.select(_v)
        .join(_process, _v.c.process_id == _process.c.id)
        .order_by(_v.c.process_id, _v.c.valid_from),
    ),
    "runs": _table(
        [
            ("run_id", _r.c.run_id, _TEXT),
            ("process", _process.c.urn, _TEXT),
            ("job_id", _r.c.job_id, _TEXT),
            ("user", _r.c.user_name, _TEXT),
            ("started_at", _r.c.started_at, _TIME),
            ("ended_at", _r.c.ended_at, _TIME),
            ("status", _r.c.status, _TEXT),
        ],
        sa.select(_r).join(_process, _r.c.process_id == _process.c.id).order_by(_r.c.run_id),
    ),
}


def export_graph(store: LineageStore, folder: Path) -> dict[str, int]:
    """Write the four tables into `folder` (made if missing); rows written a table."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=folder))
    try:
        counts = {
            name: _write(store, query, schema, staging / f"{name}.parquet")
            for name, (query, schema) in TABLES.items()
        }
        for name in TABLES:
            os.replace(staging / f"{name}.parquet", folder / f"{name}.parquet")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


def _write(store: LineageStore, query: sa.Select[*tuple[Any, ...]], schema: pa.Schema, path: Path) -> int:
    written = 0
    with pq.ParquetWriter(path, schema) as writer, store.engine.connect() as conn:
        for rows in _batches(conn.execution_options(yield_per=BATCH_ROWS).execute(query)):
            columns = list(zip(*rows, strict=True))
            arrays = [_column(values, schema.field(i).type) for i, values in enumerate(columns)]
            writer.write_batch(pa.record_batch(arrays, schema=schema))
            written += len(rows)
    return written


def _batches(result: sa.Result[*tuple[Any, ...]]) -> Iterator[list[tuple[object, ...]]]:
    while rows := result.fetchmany(BATCH_ROWS):
        yield [tuple(row) for row in rows]


def _column(values: tuple[object, ...], kind: pa.DataType) -> pa.Array:
    if kind == _TIME:  # the store keeps µs since the epoch
        return pa.array(values, type=pa.int64()).cast(_TIME)
    if kind == pa.string():
        return pa.array([_text(value) for value in values], type=kind)
    return pa.array(values, type=kind)


def _text(value: object) -> str | None:
    """Text as it is; a JSON column (properties) as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)
