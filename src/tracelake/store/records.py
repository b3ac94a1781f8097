"""What the store's reads return: node and edge records (with the query and row converters that
make them), a diff, an ingest's report, and the whole graph as arrays for the in-memory index
(`GraphSnapshot`, with the codes its columns use)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa

from tracelake.model import Confidence, EdgeVersion, Signal, Transformation
from tracelake.store import schema as s
from tracelake.store.schema import from_micros

OPEN_END = np.iinfo(np.int64).max  # valid_to of an open version, in loaded arrays
SIGNAL_CODES = {signal: code for code, signal in enumerate(Signal)}
TRANSFORMATION_CODES = {t: code for code, t in enumerate(Transformation)}
NODE_TYPES = ("asset", "field", "process")


@dataclass(frozen=True, slots=True)
class NodeRecord:
    id: int
    urn: str
    node_type: str
    kind: str
    parent_id: int | None
    data_type: str | None
    owner: str | None
    layer: str | None
    security_level: int | None
    labels: tuple[str, ...]
    description: str | None
    properties: dict[str, Any]
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class EdgeRecord:
    id: int
    source: str
    target: str
    process: str
    signal: str
    confidence: str
    transformation: str | None
    description: str | None
    valid_from: datetime
    valid_to: datetime | None
    first_seen: datetime
    last_seen: datetime

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.source, self.target, self.process, self.signal, self.transformation or "")

    def version(self) -> EdgeVersion:
        """The edge as the graph and the interfaces hold it."""
        return EdgeVersion(
            self.source,
            self.target,
            self.process,
            Signal(self.signal),
            Confidence(self.confidence),
            Transformation(self.transformation) if self.transformation else None,
            self.valid_from,
            self.valid_to,
        )


@dataclass(slots=True)
class GraphDiff:
    added: list[EdgeRecord]
    removed: list[EdgeRecord]


@dataclass(slots=True)
class IngestReport:
    nodes: int = 0
    edges_added: int = 0
    edges_closed: int = 0
    versions_added: int = 0
    versions_unchanged: int = 0
    versions_replaced: int = 0
    edges_replaced: int = 0
    runs: int = 0
    problems: int = 0
    reads: int = 0  # reads of assets by runs that wrote nothing, new to the store


@dataclass(slots=True)
class GraphSnapshot:
    """Every node and edge version as columns of numpy arrays, for the in-memory index.

    Node arrays are indexed by position; `node_ids[i]` is the store id. Edge endpoints are
    store ids. Codes: signal → `list(Signal)`, transformation → `list(Transformation)` or -1,
    confidence → `Confidence.rank`. Open versions have `edge_valid_to == OPEN_END`.
    """

    version: int
    node_ids: np.ndarray
    node_urns: list[str]
    node_types: np.ndarray
    node_kinds: list[str]
    node_parents: np.ndarray
    edge_ids: np.ndarray
    edge_source: np.ndarray
    edge_target: np.ndarray
    edge_process: np.ndarray
    edge_signal: np.ndarray
    edge_confidence: np.ndarray
    edge_transformation: np.ndarray
    edge_valid_from: np.ndarray
    edge_valid_to: np.ndarray
    # the ends of ended assets, applied to `edge_valid_to` (store id → µs): a catch-up starts from them
    ended: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GraphChanges:
    """What changed in the graph since an index's version (`LineageStore.changes_since`).

    `snapshot` is at the store's version: the nodes inserted since, and the current rows of every
    edge to put in the index again, by id, as stored (ends of assets not applied; `ended` holds
    them all). `versions` are the process versions (process id, valid_from) inserted, retimed or
    deleted since: the index drops its rows of them before putting the current ones.
    """

    snapshot: GraphSnapshot
    versions: list[tuple[int, int]]


def node_record(row: Any) -> NodeRecord:
    return NodeRecord(
        id=row.id,
        urn=row.urn,
        node_type=row.node_type,
        kind=row.kind,
        parent_id=row.parent_id,
        data_type=row.data_type,
        owner=row.owner,
        layer=row.layer,
        security_level=row.security_level,
        labels=tuple(row.labels or ()),
        description=row.description,
        properties=dict(row.properties or {}),
        first_seen=from_micros(row.first_seen),
        last_seen=from_micros(row.last_seen),
    )


def edge_record(row: Any) -> EdgeRecord:
    return EdgeRecord(
        id=row.id,
        source=row.source,
        target=row.target,
        process=row.process,
        signal=row.signal,
        confidence=row.confidence,
        transformation=row.transformation,
        description=row.description,
        valid_from=from_micros(row.valid_from),
        valid_to=from_micros(row.valid_to) if row.valid_to is not None else None,
        first_seen=from_micros(row.first_seen),
        last_seen=from_micros(row.last_seen),
    )


def edge_query() -> sa.Select[Any]:
    """Edge versions with their ends and process by URN, as `edge_record` reads them."""
    e = s.edges
    src, dst, proc = s.nodes.alias("src"), s.nodes.alias("dst"), s.nodes.alias("proc")
    return (
        sa.select(
            e.c.id,
            src.c.urn.label("source"),
            dst.c.urn.label("target"),
            proc.c.urn.label("process"),
            e.c.signal,
            e.c.confidence,
            e.c.transformation,
            e.c.description,
            e.c.valid_from,
            e.c.valid_to,
            e.c.first_seen,
            e.c.last_seen,
        )
        .join(src, e.c.source_id == src.c.id)
        .join(dst, e.c.target_id == dst.c.id)
        .join(proc, e.c.process_id == proc.c.id)
    )
