"""The Marquez-compatible routes: OpenLineage events in, Marquez-shaped lineage out.

`POST /api/v1/lineage` takes what every OpenLineage producer configured for Marquez sends — one
RunEvent, DatasetEvent or JobEvent per request — or an array of them (all or nothing), turns it
into a `LineageBatch` (`collect.openlineage`) and answers 201 once it is committed (group
commit: concurrent events share a transaction). A malformed event is a 400 naming the JSON path
at fault, and is recorded as a problem of the store without its values.

`GET /api/v1/lineage?nodeId=dataset:<namespace>:<name>&depth=N` and
`GET /api/v1/column-lineage?nodeId=datasetField:<namespace>:<name>:<field>` answer in Marquez's
response shape (`{"graph": [{id, type, data, inEdges, outEdges}]}`: datasets and jobs
alternating; fields with their input fields), for tools built on Marquez. Node ids are Marquez's:
datasets are named after OpenLineage's naming spec (`emit.openlineage.dataset_name`), jobs after
their OpenLineage namespace and name, or `tracelake:<process URN>` for lineage from other signals.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, Query, Request, Response

from tracelake.api.app import READ, WRITE, RequestError, get_commits, get_service
from tracelake.collect.openlineage import EventError, event_to_batch, events_to_batch, job_of, job_urn
from tracelake.emit.openlineage import dataset_name
from tracelake.graph.index import ASSET, GraphIndex, UnknownNodeError
from tracelake.model import LineageBatch, Problem, parse_urn
from tracelake.service import Tracelake, TraversalFilters
from tracelake.store.group_commit import Writer
from tracelake.views import EdgeView, NodeView

router = APIRouter(prefix="/api/v1", tags=["marquez-compatible"])
Service = Annotated[Tracelake, Depends(get_service)]
Commits = Annotated[Writer, Depends(get_commits)]
TRACELAKE_NAMESPACE = "tracelake"


@router.post("/lineage", dependencies=[WRITE], status_code=201, response_class=Response)
async def post_lineage(request: Request, commits: Commits) -> Response:
    """Ingest one OpenLineage event, or an array of them (all or nothing)."""
    try:
        document = json.loads(await request.body())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(f"the body is not JSON: {error}", "$") from None
    try:
        batch = events_to_batch(document) if isinstance(document, list) else event_to_batch(document)
    except EventError as error:
        problem = Problem("openlineage", error.reason, error.path)
        await asyncio.wrap_future(commits.submit([LineageBatch(problems=[problem])]))
        raise RequestError(error.reason, error.path) from None
    await asyncio.wrap_future(commits.submit([batch]))
    return Response(status_code=201)


@router.get("/lineage", dependencies=[READ])
def get_lineage(
    service: Service,
    node_id: Annotated[str, Query(alias="nodeId")],
    depth: Annotated[int, Query(ge=0, le=100)] = 20,
) -> dict[str, Any]:
    """Datasets and jobs around a dataset, `depth` jobs away both ways, or around a job: its
    datasets and `depth` jobs beyond them (Marquez's shape)."""
    kind, parts = _node_id(node_id)
    if kind == "job":
        # a job is not a node of the graph but the edges between datasets: start from those it
        # reads and writes now
        job = _job_urn(service, parts)
        starts = sorted({end for e in service.store.edges(process=job) for end in (e.source, e.target)})
        starts = [urn for urn in starts if "#" not in urn]
        if not starts:
            return {"graph": []}
    elif kind == "dataset":
        starts = [_dataset_urn(service, parts, fields=0)]
    else:
        raise RequestError("nodeId must name a dataset or a job (dataset:<ns>:<name>)", "nodeId")
    view = service.lineage(starts, "both", TraversalFilters(depth=depth))
    return {"graph": _dataset_job_graph(view.nodes, view.edges)}


@router.get("/column-lineage", dependencies=[READ])
def get_column_lineage(
    service: Service,
    node_id: Annotated[str, Query(alias="nodeId")],
    depth: Annotated[int, Query(ge=0, le=100)] = 20,
    with_downstream: Annotated[bool, Query(alias="withDownstream")] = False,
) -> dict[str, Any]:
    """The upstream (and with `withDownstream`, downstream) fields of a field or of a dataset's."""
    kind, parts = _node_id(node_id)
    if kind == "datasetField":
        starts = [_dataset_urn(service, parts, fields=1)]
    elif kind == "dataset":
        asset = _dataset_urn(service, parts, fields=0)
        starts = [f.urn for f in service.show(asset).fields]
        if not starts:
            return {"graph": []}
    else:
        raise RequestError(
            "nodeId must name a dataset or a field (datasetField:<ns>:<name>:<field>)", "nodeId"
        )
    view = service.lineage(starts, "both" if with_downstream else "upstream", TraversalFilters(depth=depth))
    return {"graph": _field_graph(view.nodes, view.edges)}


# ---------------------------------------------------------------- node ids


def _node_id(node_id: str) -> tuple[str, str]:
    kind, colon, rest = node_id.partition(":")
    if not colon or not rest or kind not in ("dataset", "job", "datasetField"):
        raise RequestError(
            f"{node_id!r} is not a Marquez node id (dataset:…, job:…, datasetField:…)", "nodeId"
        )
    return kind, rest


def _splits(text: str, pieces: int) -> list[list[str]]:
    """Every way to cut `text` at colons into `pieces` non-empty parts; namespaces hold colons
    (`postgres://db:5432`), so the right cut is the one that names a node."""
    if pieces == 1:
        return [[text]] if text else []
    found = []
    for at, char in enumerate(text):
        if char == ":" and at > 0:
            for rest in _splits(text[at + 1 :], pieces - 1):
                found.append([text[:at], *rest])
    return found


def _dataset_urn(service: Tracelake, rest: str, *, fields: int) -> str:
    index = service.index()
    named = _assets_by_name(index)
    for parts in _splits(rest, 2 + fields):
        urn = named.get((parts[0], parts[1]))
        if urn is not None and fields:
            urn = f"{urn}#{parts[2]}"
        if urn is not None and urn in index.positions:
            return urn
    raise UnknownNodeError(rest)


_names_cache: tuple[GraphIndex, dict[tuple[str, str], str]] | None = None


def _assets_by_name(index: GraphIndex) -> dict[tuple[str, str], str]:
    """(namespace, name) → asset URN for one index: the emitter's naming, looked up backwards;
    kept until the index is replaced."""
    global _names_cache
    if _names_cache is not None and _names_cache[0] is index:
        return _names_cache[1]
    assets = np.flatnonzero(index.node_types == ASSET)
    named = {dataset_name(index.urns[position]): index.urns[position] for position in assets}
    _names_cache = (index, named)
    return named


def _job_urn(service: Tracelake, rest: str) -> str:
    positions = service.index().positions
    namespace, _, name = rest.partition(":")
    if namespace == TRACELAKE_NAMESPACE and name in positions:
        return name
    for namespace, name in _splits(rest, 2):
        urn = job_urn(namespace, name)
        if urn in positions:
            return urn
    raise UnknownNodeError(rest)


def _job_name(process: str) -> tuple[str, str]:
    return job_of(process) or (TRACELAKE_NAMESPACE, process)


def _dataset_id(urn: str) -> str:
    return "dataset:{}:{}".format(*dataset_name(urn))


def _job_id(process: str) -> str:
    return "job:{}:{}".format(*_job_name(process))


def _field_id(urn: str) -> str:
    asset, _, path = urn.partition("#")
    return "datasetField:{}:{}:{}".format(*dataset_name(asset), path)


# ---------------------------------------------------------------- graphs in Marquez's shape


def _dataset_job_graph(nodes: list[NodeView], edges: list[EdgeView]) -> list[dict[str, Any]]:
    datasets = {n.id: n for n in nodes if n.kind == "asset"}
    inputs: dict[str, set[str]] = defaultdict(set)  # job → datasets it reads
    outputs: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        if edge.source in datasets and edge.target in datasets:
            inputs[edge.process].add(edge.source)
            outputs[edge.process].add(edge.target)
    graph = []
    for urn, node in sorted(datasets.items()):
        namespace, name = dataset_name(urn)
        reads = sorted(job for job, targets in outputs.items() if urn in targets)
        feeds = sorted(job for job, sources in inputs.items() if urn in sources)
        graph.append(
            {
                "id": _dataset_id(urn),
                "type": "DATASET",
                "data": {
                    "id": {"namespace": namespace, "name": name},
                    "type": "DB_TABLE" if parse_urn(urn).kind == "table" else "DATASET",
                    "name": name,
                    "physicalName": name,
                    "namespace": namespace,
                    "tags": list(node.labels),
                    "tracelake": {"urn": urn, "owner": node.owner, "layer": node.layer},
                },
                "inEdges": [{"origin": _job_id(j), "destination": _dataset_id(urn)} for j in reads],
                "outEdges": [{"origin": _dataset_id(urn), "destination": _job_id(j)} for j in feeds],
            }
        )
    for job in sorted(set(inputs) | set(outputs)):
        namespace, name = _job_name(job)
        graph.append(
            {
                "id": _job_id(job),
                "type": "JOB",
                "data": {
                    "id": {"namespace": namespace, "name": name},
                    "type": "BATCH",
                    "name": name,
                    "simpleName": name,
                    "namespace": namespace,
                    "inputs": [
                        dict(zip(("namespace", "name"), dataset_name(d), strict=True))
                        for d in sorted(inputs[job])
                    ],
                    "outputs": [
                        dict(zip(("namespace", "name"), dataset_name(d), strict=True))
                        for d in sorted(outputs[job])
                    ],
                    "tracelake": {"urn": job},
                },
                "inEdges": [
                    {"origin": _dataset_id(d), "destination": _job_id(job)} for d in sorted(inputs[job])
                ],
                "outEdges": [
                    {"origin": _job_id(job), "destination": _dataset_id(d)} for d in sorted(outputs[job])
                ],
            }
        )
    return graph


def _field_graph(nodes: list[NodeView], edges: list[EdgeView]) -> list[dict[str, Any]]:
    fields = {n.id: n for n in nodes if n.kind == "field"}
    into: dict[str, list[EdgeView]] = defaultdict(list)
    out_of: dict[str, list[EdgeView]] = defaultdict(list)
    for edge in edges:
        if edge.source in fields and edge.target in fields:
            into[edge.target].append(edge)
            out_of[edge.source].append(edge)
    graph = []
    for urn, node in sorted(fields.items()):
        asset, _, path = urn.partition("#")
        namespace, name = dataset_name(asset)
        graph.append(
            {
                "id": _field_id(urn),
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": namespace,
                    "dataset": name,
                    "field": path,
                    "fieldType": node.data_type,
                    "inputFields": [_input_field(edge) for edge in into[urn]],
                    "tracelake": {"urn": urn, "labels": list(node.labels)},
                },
                "inEdges": [
                    {"origin": _field_id(e.source), "destination": _field_id(urn)} for e in into[urn]
                ],
                "outEdges": [
                    {"origin": _field_id(urn), "destination": _field_id(e.target)} for e in out_of[urn]
                ],
            }
        )
    return graph


def _input_field(edge: EdgeView) -> dict[str, Any]:
    asset, _, path = edge.source.partition("#")
    namespace, name = dataset_name(asset)
    kind: Literal["DIRECT", "INDIRECT"] = "DIRECT" if edge.direct else "INDIRECT"
    return {
        "namespace": namespace,
        "dataset": name,
        "field": path,
        "transformationDescription": None,
        "transformationType": kind,
        "transformations": [{"type": kind, "subtype": edge.transformation}],
        "tracelake": {"signal": edge.signal, "confidence": edge.confidence, "process": edge.process},
    }
