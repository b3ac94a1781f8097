"""Tracelake's own HTTP API under `/api/tracelake/v1`: the CLI's questions over HTTP.

Lineage, impact and paths take many start nodes per call (`?node=a&node=b`, or a JSON body on
POST) and the same filters as the CLI: confidence, signal, transformation type, asset kind,
as-of time, depth, values only. Node names are resolved as the CLI resolves them (`db.table`,
`table#column` or a full URN). Collectors in other processes post whole `LineageBatch`es.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, Field

from tracelake.api.deps import READ, WRITE, Moment, RequestError, get_service
from tracelake.api.gate import GatedJsonBodyRoute
from tracelake.app.abstraction import lineage_at_level
from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.model import Confidence, Signal, Transformation
from tracelake.model.batch_json import batch_from_json

router = APIRouter(prefix="/api/tracelake/v1", tags=["tracelake"], route_class=GatedJsonBodyRoute)
Service = Annotated[Tracelake, Depends(get_service)]
Direction = Literal["upstream", "downstream", "both"]


class Filters(BaseModel):
    """The traversal knobs, shared by lineage and impact (query string or JSON body)."""

    depth: int | None = Field(None, ge=0, le=1000)
    as_of: Moment | None = None
    min_confidence: Confidence | None = None
    signal: list[Signal] = []
    transformation: list[Transformation] = []
    kind: list[str] = Field([], description="asset kinds, e.g. hive.table")
    direct_only: bool = False

    def traversal(self) -> TraversalFilters:
        return TraversalFilters(
            depth=self.depth,
            as_of=self.as_of,
            min_confidence=self.min_confidence,
            signals=frozenset(self.signal) or None,
            transformations=frozenset(self.transformation) or None,
            asset_kinds=frozenset(self.kind) or None,
            direct_only=self.direct_only,
        )


class LineageQuery(Filters):
    node: list[str] = Field(..., min_length=1, max_length=1000)
    direction: Direction = "both"


QueryFilters = Annotated[Filters, Query()]


@router.get("/lineage", dependencies=[READ])
def lineage(
    service: Service,
    filters: QueryFilters,
    node: Annotated[list[str], Query(min_length=1, max_length=1000)],
    direction: Direction = "both",
    label: Annotated[
        list[str] | None, Query(description="only tables carrying one (or a column that does)")
    ] = None,
    layer: Annotated[
        list[str] | None, Query(description="only tables in one of these layers (zones)")
    ] = None,
    group_by: Literal["owner", "layer", "kind", "domain", "team", "product"] | None = None,
) -> dict[str, Any]:
    """Upstream, downstream or both of one or many nodes; narrowed to labels or layers, or
    collapsed to groups (`group_by`: groups with their member tables, and flows counted between)."""
    view = lineage_at_level(
        service,
        node,
        direction,
        filters.traversal(),
        labels=label or (),
        layers=layer or (),
        group_by=group_by,
    )
    return view.to_json()


@router.post("/lineage", dependencies=[READ])
def lineage_many(service: Service, query: LineageQuery) -> dict[str, Any]:
    """The same as GET, for start lists too long for a URL."""
    return service.lineage(query.node, query.direction, query.traversal()).to_json()


@router.get("/impact", dependencies=[READ])
def impact(
    service: Service, filters: QueryFilters, node: Annotated[list[str], Query(min_length=1)]
) -> list[dict[str, Any]]:
    """Downstream assets of the nodes, nearest first, with owners: who a change affects."""
    return [view.to_json() for view in service.impact(node, filters.traversal())]


@router.get("/paths", dependencies=[READ])
def paths(
    service: Service,
    filters: QueryFilters,
    source: str,
    target: str,
    max_depth: Annotated[int, Query(ge=1, le=50)] = 10,
) -> list[list[dict[str, Any]]]:
    """Every flow path from `source` to `target`."""
    found = service.paths(source, target, max_depth=max_depth, filters=filters.traversal())
    return [[edge.to_json() for edge in path] for path in found]


@router.get("/nodes/{name:path}", dependencies=[READ])
def node(service: Service, name: str, as_of: Moment | None = None) -> dict[str, Any]:
    """One node: its properties, fields, and the edges into and out of it now (or at `as_of`)."""
    return service.show(name, as_of=as_of).to_json()


@router.get("/readers", dependencies=[READ])
def readers(
    service: Service,
    node: str,
    since: Moment | None = None,
    until: Moment | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> dict[str, Any]:
    """Who read a table without writing from it (SELECT-only queries, Spark counts): the reads
    newest first, and how many reading runs and readers in all. A query parameter, not a path
    below `nodes/`: a file dataset's name may itself end in `/readers`."""
    return service.readers(node, since=since, until=until, limit=limit).to_json()


@router.get("/kinds", dependencies=[READ])
def kinds(service: Service) -> dict[str, list[str]]:
    """The asset kinds in the graph: the values the `kind` filter takes."""
    return {"asset_kinds": service.index().asset_kinds()}


@router.get("/search", dependencies=[READ])
def search(
    service: Service,
    q: Annotated[str, Query(min_length=1, max_length=500)],
    node_type: Literal["asset", "field", "process"] | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> list[dict[str, Any]]:
    """Nodes whose URN contains `q`, shortest first."""
    return [view.to_json() for view in service.search(q, node_type=node_type, limit=limit)]


@router.get("/diff", dependencies=[READ])
def diff(service: Service, since: Moment, until: Moment | None = None) -> dict[str, Any]:
    """Edges added and removed between two moments."""
    changes = service.diff(since, until or datetime.now(since.tzinfo))
    return {
        "since": changes.since.isoformat(),
        "until": changes.until.isoformat(),
        "added": [e.to_json() for e in changes.added],
        "removed": [e.to_json() for e in changes.removed],
    }


@router.get("/problems", dependencies=[READ])
def problems(service: Service, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[dict[str, str]]:
    """Bad input the collectors recorded (unparseable SQL, malformed events), newest first."""
    return [dataclasses.asdict(problem) for problem in service.problems(limit)]


@router.post("/batches", dependencies=[WRITE], status_code=201)
async def ingest_batch(service: Service, document: Annotated[dict[str, Any], Body()]) -> dict[str, int]:
    """Ingest one `LineageBatch` (`tracelake.model.batch_json`), all or nothing."""
    batch = batch_from_json(document)
    if not batch.edges and not batch.assets and not batch.fields and not batch.processes:
        raise RequestError("the batch is empty", "$")
    await asyncio.wrap_future(service.submit([batch]))
    return {"edges": len(batch.edges), "processes": len(batch.processes), "problems": len(batch.problems)}
