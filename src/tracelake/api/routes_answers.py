"""The everyday questions over HTTP, under `/api/tracelake/v1`: why a table looks wrong (what
changed upstream of it in a window), which runs decided when it became ready on a day, and which
deadlines were met.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from tracelake.api.deps import READ, Moment, RequestError, get_service
from tracelake.api.gate import GatedJsonBodyRoute
from tracelake.app.coverage import coverage as measure_coverage
from tracelake.app.critical_path import critical_path as find_path
from tracelake.app.deadlines import DeadlineOperations
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


@router.get("/critical-path", dependencies=[READ])
def critical_path(
    service: Service, node: str, day: Annotated[date, Query(alias="date")], timezone: str = "UTC"
) -> dict[str, Any]:
    """The chain of upstream runs that decided when a table became ready on a day (in
    `timezone`), upstream first, each beside its usual length and lateness."""
    return find_path(service, node, day, timezone).to_json()


@router.get("/deadlines", dependencies=[READ])
def deadlines(
    service: Service,
    since: Annotated[date, Query(alias="from")],
    until: Annotated[date | None, Query(alias="to")] = None,
    margin_minutes: Annotated[int, Query(ge=0, le=24 * 60)] = 30,
) -> dict[str, Any]:
    """Each stored deadline on each day of [from, to]: met, at risk, missed, pending, with the
    upstream runs that put it at risk."""
    if until is not None and until < since:
        raise RequestError("`to` is before `from`")
    checks = DeadlineOperations(service).check(since, until, margin=timedelta(minutes=margin_minutes))
    return {"checks": [check.to_json() for check in checks]}


@router.get("/coverage", dependencies=[READ])
def coverage(
    service: Service,
    at: Moment | None = None,
    history: Annotated[int, Query(ge=0, le=60)] = 0,
    every_days: Annotated[int, Query(ge=1, le=366)] = 7,
) -> dict[str, Any]:
    """How much of the lake lineage covers at `at` (default now), with `history` earlier points
    `every_days` apart: the JSON a dashboard plots."""
    return measure_coverage(service, at=at, points=history, every=timedelta(days=every_days)).to_json()
