"""Operations over HTTP under `/api/tracelake/v1`: time-partitioned entities (status, taint
plans, applying them) and privacy requests (submit, status, audit trail).

These routes call what the CLI's commands call (`app.entities.EntityOperations`,
`app.privacy.PrivacyOperations`). A privacy request is only queued here; `tracelake privacy run`
(on Spark) carries it out. Its user ids are never returned: a request shows their count and
fingerprint. A request may name datasets only inside the lake folders the server was started
with (`--lake`); without them, it covers every privacy target. Airflow tasks are cleared by the
CLI (`tracelake taint --apply --airflow-url …`), which holds Airflow's credentials; the API
marks the status table only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from tracelake.api.deps import READ, WRITE, Moment, RequestError, actor_of, get_service
from tracelake.api.gate import GatedJsonBodyRoute
from tracelake.app.entities import EntityOperations, status_json
from tracelake.app.privacy import PrivacyOperations, PrivacyRequestError, audit_json, request_json
from tracelake.app.service import Tracelake

if TYPE_CHECKING:
    pass

router = APIRouter(
    prefix="/api/tracelake/v1", tags=["entities and privacy requests"], route_class=GatedJsonBodyRoute
)
Service = Annotated[Tracelake, Depends(get_service)]
Actor = Annotated[str, Depends(actor_of)]


class TaintRequest(BaseModel):
    start: str = Field(..., alias="from", description="start of the wrong data (ISO; local to the entity)")
    end: str = Field(..., alias="to", description="end of the wrong data, exclusive")
    reason: str = Field(..., min_length=1)
    until: Moment | None = None
    apply: bool = False


class Submission(BaseModel):
    kind: Literal["access", "delete"]
    ids: list[str] = Field(..., min_length=1, max_length=100_000)
    datasets: list[str] = []


# ---------------------------------------------------------------- entities


@router.get("/entities", dependencies=[READ])
def entities(service: Service) -> list[dict[str, Any]]:
    graph = EntityOperations(service).graph()
    return [graph.entities[name].to_dict() for name in graph.order]


@router.get("/entities/{name}/status", dependencies=[READ])
def status(
    service: Service,
    name: str,
    start: Annotated[str | None, Query(alias="from")] = None,
    end: Annotated[str | None, Query(alias="to")] = None,
    at: Moment | None = None,
) -> list[dict[str, Any]]:
    """Instances starting in [from, to): states, valid or tainted, why, by whom, when."""
    entity, rows = EntityOperations(service).status(name, start=start, end=end, at=at)
    return [status_json(entity, row) for row in rows]


@router.post("/entities/{name}/taint", dependencies=[WRITE])
def taint(service: Service, actor: Actor, name: str, body: TaintRequest) -> dict[str, Any]:
    """Every downstream instance to rebuild (or downgrade) after wrong data in [from, to);
    `apply` marks them in the status table."""
    done = EntityOperations(service).taint(
        name, body.start, body.end, reason=body.reason, until=body.until, apply=body.apply, actor=actor
    )
    applied = done.applied
    return {
        "steps": done.plan.to_json(),
        "static_reached": list(done.plan.static_reached),
        "applied": None
        if applied is None
        else {"instances": applied.instances, "rebuilt": applied.rebuilt, "downgraded": applied.downgraded},
    }


# ---------------------------------------------------------------- privacy requests


@router.post("/privacy/requests", dependencies=[WRITE], status_code=201)
def submit(service: Service, actor: Actor, request: Request, body: Submission) -> dict[str, Any]:
    """Queue an access or delete request for one user or many."""
    roots: tuple[Path, ...] = tuple(root.resolve() for root in request.app.state.settings.lake_roots)
    for number, dataset in enumerate(body.datasets):
        folder = Path(dataset).resolve()
        if not any(folder.is_relative_to(root) for root in roots):
            raise RequestError(
                f"{dataset} is not inside the server's lake folders", f"$.datasets[{number}]", 403
            )
    try:
        queued = PrivacyOperations(service).submit(
            body.kind, body.ids, requester=actor, datasets=body.datasets or None
        )
    except PrivacyRequestError as error:
        raise RequestError(str(error), "$") from None
    return request_json(queued)


@router.get("/privacy/requests", dependencies=[READ])
def requests_list(
    service: Service, status: str | None = None, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[dict[str, Any]]:
    return [request_json(r) for r in PrivacyOperations(service).requests(status=status, limit=limit)]


@router.get("/privacy/requests/{request_id}", dependencies=[READ])
def request_status(service: Service, request_id: str) -> dict[str, Any]:
    try:
        return request_json(PrivacyOperations(service).request(request_id))
    except PrivacyRequestError as error:
        raise RequestError(str(error), status=404) from None


@router.get("/privacy/requests/{request_id}/audit", dependencies=[READ])
def audit(service: Service, request_id: str) -> list[dict[str, Any]]:
    """The request's trail: submitted, started, finished or failed, with counts only."""
    return [
        {key: value for key, value in audit_json(event).items() if key != "request"}
        for event in PrivacyOperations(service).audit(request_id)
    ]
