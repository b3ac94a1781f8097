"""The everyday questions over HTTP, under `/api/tracelake/v1`: why an asset looks wrong (what
changed upstream of it in a window).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from tracelake.api.deps import READ, Moment, get_service
from tracelake.api.gate import GatedJsonBodyRoute
from tracelake.app.root_cause import why as root_cause
from tracelake.app.service import Tracelake

router = APIRouter(prefix="/api/tracelake/v1", tags=["tracelake"], route_class=GatedJsonBodyRoute)
Service = Annotated[Tracelake, Depends(get_service)]


@router.get("/why", dependencies=[READ])
def why(
    service: Service,
    node: str,
    since: Moment | None = None,
    until: Moment | None = None,
    depth: Annotated[int | None, Query(ge=0, le=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
) -> dict[str, Any]:
    """What changed upstream of a table or column within [since, until] (default: the last 7
    days), ranked: failed and slow runs, replaced process versions, schema changes, inputs that
    appeared or vanished, tainted instances; each with its time, distance and route."""
    return root_cause(service, node, since=since, until=until, depth=depth, limit=limit).to_json()
