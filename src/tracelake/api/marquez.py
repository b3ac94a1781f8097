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
from collections import defaultdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from tracelake.api.deps import READ, WRITE, RequestError, get_service
from tracelake.api.gate import GatedRoute
from tracelake.api.json_bodies import json_body
from tracelake.app.marquez import JobDatasets, MarquezCatalog, dataset_type, job_name, process_of_job
from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.app.views import NodeView
from tracelake.model import EdgeVersion, UnknownNodeError
from tracelake.model.names import asset_urn, dataset_of, field_urn

router = APIRouter(prefix="/api/v1", tags=["marquez-compatible"], route_class=GatedRoute)
Service = Annotated[Tracelake, Depends(get_service)]


# The route reads its body itself (one event or an array of them), so the document says so here.
_EVENTS_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "description": "an OpenLineage RunEvent, DatasetEvent or JobEvent, or an array of them",
                "oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}],
            }
        }
    },
}


@router.post(
    "/lineage",
    dependencies=[WRITE],
    status_code=201,
    response_class=Response,
    openapi_extra={"requestBody": _EVENTS_BODY},
)
async def post_lineage(request: Request, service: Service) -> Response:
    """Ingest one OpenLineage event, or an array of them (all or nothing); a malformed one is a 400
    naming the JSON path at fault (`EventError`, an InputError)."""
    document = await json_body(request, check=False)  # the event reader checks what it stores
    await asyncio.wrap_future(service.submit_openlineage(document))
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
    catalog = MarquezCatalog(service)
    if kind == "job":
        # a job is not a node of the graph but the edges between datasets: start from those it
        # reads and writes now, and those its events named
        job = _job_urn(catalog, parts)
        ends = {end for e in catalog.edges_of(job) for end in (e.source, e.target)}
        inputs, outputs = catalog.jobs().datasets.get(job, (set(), set()))
        starts = sorted({urn for urn in ends if "#" not in urn} | inputs | outputs)
        if not starts:
            return {"graph": [_job_node(job, [], [], catalog.job_type(job))]}
    elif kind == "dataset":
        starts = [_dataset_urn(catalog, parts, fields=0)]
    else:
        raise RequestError("nodeId must name a dataset or a job (dataset:<ns>:<name>)", "nodeId")
    view = service.lineage(starts, "both", TraversalFilters(depth=depth))
    return {"graph": _dataset_job_graph(view.nodes, view.edges, catalog)}


@router.get("/column-lineage", dependencies=[READ])
def get_column_lineage(
    service: Service,
    node_id: Annotated[str, Query(alias="nodeId")],
    depth: Annotated[int, Query(ge=0, le=100)] = 20,
    with_downstream: Annotated[bool, Query(alias="withDownstream")] = False,
) -> dict[str, Any]:
    """The upstream (and with `withDownstream`, downstream) fields of a field or of a dataset's."""
    kind, parts = _node_id(node_id)
    catalog = MarquezCatalog(service)
    if kind == "datasetField":
        starts = [_dataset_urn(catalog, parts, fields=1)]
    elif kind == "dataset":
        asset = _dataset_urn(catalog, parts, fields=0)
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


def _dataset_urn(catalog: MarquezCatalog, rest: str, *, fields: int) -> str:
    """The node a Marquez id names: its namespace and name (and field) named as at ingest."""
    for parts in _splits(rest, 2 + fields):
        urn = asset_urn(parts[0], parts[1])
        if fields:
            urn = field_urn(urn, parts[2])
        if catalog.holds(urn):
            return urn
    raise UnknownNodeError(rest)


def _job_urn(catalog: MarquezCatalog, rest: str) -> str:
    for namespace, name in _splits(rest, 2):
        urn = process_of_job(namespace, name)
        if catalog.holds(urn):
            return urn
    raise UnknownNodeError(rest)


def _dataset_id(urn: str) -> str:
    return "dataset:{}:{}".format(*dataset_of(urn))


def _job_id(process: str) -> str:
    return "job:{}:{}".format(*job_name(process))


def _field_id(urn: str) -> str:
    asset, _, path = urn.partition("#")
    return "datasetField:{}:{}:{}".format(*dataset_of(asset), path)


# ---------------------------------------------------------------- graphs in Marquez's shape


def _dataset_job_graph(
    nodes: list[NodeView], edges: list[EdgeVersion], catalog: MarquezCatalog
) -> list[dict[str, Any]]:
    jobs: JobDatasets = catalog.jobs()
    datasets = {n.id: n for n in nodes if n.kind == "asset"}
    inputs: dict[str, set[str]] = defaultdict(set)  # job → datasets it reads
    outputs: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        if edge.source in datasets and edge.target in datasets:
            inputs[edge.process].add(edge.source)
            outputs[edge.process].add(edge.target)
    named = set(inputs) | set(outputs)
    for dataset in datasets:
        named |= jobs.by_dataset.get(dataset, set())
    for job in named & jobs.datasets.keys():
        reads, writes = jobs.datasets[job]
        inputs[job].update(reads)
        outputs[job].update(writes)
    every_dataset = sorted(set(datasets).union(*inputs.values(), *outputs.values()))
    graph = []
    for urn in every_dataset:
        node = datasets.get(urn)
        namespace, name = dataset_of(urn)
        written_by = sorted(job for job, targets in outputs.items() if urn in targets)
        read_by = sorted(job for job, sources in inputs.items() if urn in sources)
        graph.append(
            {
                "id": _dataset_id(urn),
                "type": "DATASET",
                "data": {
                    "id": {"namespace": namespace, "name": name},
                    "type": dataset_type(urn),
                    "name": name,
                    "physicalName": name,
                    "namespace": namespace,
                    "tags": list(node.labels) if node else [],
                    "tracelake": {
                        "urn": urn,
                        "owner": node.owner if node else None,
                        "layer": node.layer if node else None,
                    },
                },
                "inEdges": [{"origin": _job_id(j), "destination": _dataset_id(urn)} for j in written_by],
                "outEdges": [{"origin": _dataset_id(urn), "destination": _job_id(j)} for j in read_by],
            }
        )
    for job in sorted(set(inputs) | set(outputs)):
        graph.append(_job_node(job, sorted(inputs[job]), sorted(outputs[job]), catalog.job_type(job)))
    return graph


def _job_node(job: str, inputs: list[str], outputs: list[str], processing: str) -> dict[str, Any]:
    namespace, name = job_name(job)
    return {
        "id": _job_id(job),
        "type": "JOB",
        "data": {
            "id": {"namespace": namespace, "name": name},
            "type": processing,
            "name": name,
            "simpleName": name,
            "namespace": namespace,
            "inputs": [dict(zip(("namespace", "name"), dataset_of(d), strict=True)) for d in inputs],
            "outputs": [dict(zip(("namespace", "name"), dataset_of(d), strict=True)) for d in outputs],
            "tracelake": {"urn": job},
        },
        "inEdges": [{"origin": _dataset_id(d), "destination": _job_id(job)} for d in inputs],
        "outEdges": [{"origin": _job_id(job), "destination": _dataset_id(d)} for d in outputs],
    }


def _field_graph(nodes: list[NodeView], edges: list[EdgeVersion]) -> list[dict[str, Any]]:
    fields = {n.id: n for n in nodes if n.kind == "field"}
    # an input field reaches its output once, whatever number of transformations it went through
    into: dict[str, dict[str, list[EdgeVersion]]] = defaultdict(lambda: defaultdict(list))
    out_of: dict[str, dict[str, None]] = defaultdict(dict)
    for edge in edges:
        if edge.source in fields and edge.target in fields:
            into[edge.target][edge.source].append(edge)
            out_of[edge.source][edge.target] = None
    graph = []
    for urn, node in sorted(fields.items()):
        asset, _, path = urn.partition("#")
        namespace, name = dataset_of(asset)
        graph.append(
            {
                "id": _field_id(urn),
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": namespace,
                    "dataset": name,
                    "field": path,
                    "fieldType": node.data_type,
                    "inputFields": [_input_field(source, ways) for source, ways in into[urn].items()],
                    "tracelake": {"urn": urn, "labels": list(node.labels)},
                },
                "inEdges": [
                    {"origin": _field_id(source), "destination": _field_id(urn)} for source in into[urn]
                ],
                "outEdges": [
                    {"origin": _field_id(urn), "destination": _field_id(target)} for target in out_of[urn]
                ],
            }
        )
    return graph


def _input_field(source: str, ways: list[EdgeVersion]) -> dict[str, Any]:
    """One input field of an output field, with every way it feeds it (Marquez's `transformations`)."""
    asset, _, path = source.partition("#")
    namespace, name = dataset_of(asset)
    kinds: list[Literal["DIRECT", "INDIRECT"]] = ["DIRECT" if edge.direct else "INDIRECT" for edge in ways]
    return {
        "namespace": namespace,
        "dataset": name,
        "field": path,
        "transformationDescription": None,
        "transformationType": "DIRECT" if "DIRECT" in kinds else "INDIRECT",
        "transformations": [
            {"type": kind, "subtype": edge.transformation} for kind, edge in zip(kinds, ways, strict=True)
        ],
        "tracelake": [{"signal": e.signal, "confidence": e.confidence, "process": e.process} for e in ways],
    }
