"""Marquez's read routes over Tracelake's store, for tools built on Marquez's API (its web UI,
its clients, catalogs that sync from it): namespaces, sources, datasets and their versions, jobs
with their runs and versions, runs and their facets, search, tags and the raw events listing.

Responses take the shapes of Marquez's OpenAPI document and its behaviour (defaults, ordering,
`totalCount` where Marquez gives one; absent values left out rather than null, as its JSON is
written). What they hold is read by `app.marquez.MarquezCatalog`, whose docstring says how the
store maps to Marquez's datasets, jobs, runs and versions; runs' states are given in Marquez's
words (COMPLETE → COMPLETED, FAIL → FAILED, ABORT → ABORTED).

Names in paths hold `/` and `:` (`postgres://db:5432`), which clients send percent-encoded; the
server decodes `%2F` before routing, so these routes match on the path as sent (`_EncodedNames`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote, unquote_to_bytes

from fastapi import APIRouter, Depends, Query
from starlette.routing import Match
from starlette.types import Scope

from tracelake.api.deps import READ, Moment, RequestError, get_service
from tracelake.api.gate import GatedRoute
from tracelake.api.marquez import _dataset_id, _job_id
from tracelake.app.marquez import (
    DatasetVersion,
    MarquezCatalog,
    NodeRecord,
    ProcessVersion,
    RunRecord,
    dataset_type,
    job_name,
    job_type,
    job_version_id,
    named_datasets,
    process_of_job,
    version_id,
)
from tracelake.app.service import Tracelake
from tracelake.model.names import asset_urn, dataset_of


class _EncodedNames(GatedRoute):
    """A route matched on the path as the client sent it, so that an encoded slash (`%2F`) stays
    inside its path parameter rather than splitting it: each segment is decoded on its own and its
    `%` and `/` escaped again for matching, then the parameters are decoded."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        raw = scope.get("raw_path")
        # behind a proxy's root path the raw path no longer lines up with the routes' paths
        if scope["type"] != "http" or not raw or scope.get("root_path"):
            return super().matches(scope)
        segments = (unquote_to_bytes(part).decode("utf-8", "replace") for part in raw.split(b"/"))
        path = "/".join(part.replace("%", "%25").replace("/", "%2F") for part in segments)
        match, child = super().matches({**scope, "path": path})
        if match is not Match.NONE:
            child["path_params"] = {
                key: unquote(value) if isinstance(value, str) else value
                for key, value in child.get("path_params", {}).items()
            }
        return match, child


T = TypeVar("T")
router = APIRouter(prefix="/api/v1", tags=["marquez-compatible"], route_class=_EncodedNames)
Service = Annotated[Tracelake, Depends(get_service)]
# Marquez's paging: 100 from the first, unless asked otherwise
Limit = Annotated[int, Query(ge=0)]
Offset = Annotated[int, Query(ge=0)]

# Marquez writes the owner of namespaces that OpenLineage events created as `anonymous`.
_ANONYMOUS = "anonymous"
_LATEST_RUNS = 10  # how many a job lists under latestRuns, as Marquez does
_STATES = {"COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED", "START": "RUNNING"}
_MARQUEZ_STATES = frozenset({"NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED"})


# ---------------------------------------------------------------- namespaces and sources


@router.get("/namespaces", dependencies=[READ])
def list_namespaces(service: Service, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """Every namespace of a dataset or a job, by name."""
    catalog = _Catalog(service)
    names = sorted(catalog.namespaces)
    return {"namespaces": [catalog.namespace(name) for name in names[offset : offset + limit]]}


@router.get("/namespaces/{namespace}", dependencies=[READ])
def get_namespace(service: Service, namespace: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    catalog.require_namespace(namespace)
    return catalog.namespace(namespace)


@router.get("/sources", dependencies=[READ])
def list_sources(service: Service, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """Every dataset namespace, as Marquez makes one source of each."""
    catalog = _Catalog(service)
    names = sorted(catalog.dataset_namespaces)
    return {"sources": [catalog.source(name) for name in names[offset : offset + limit]]}


@router.get("/sources/{source}", dependencies=[READ])
def get_source(service: Service, source: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    if source not in catalog.dataset_namespaces:
        raise _not_found("source", source)
    return catalog.source(source)


# ---------------------------------------------------------------- datasets


@router.get("/namespaces/{namespace}/datasets", dependencies=[READ])
def list_datasets(service: Service, namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """The namespace's datasets by name, with how many there are in all."""
    catalog = _Catalog(service)
    catalog.require_namespace(namespace)
    urns = sorted(
        (urn for urn, named in catalog.dataset_names.items() if named.namespace == namespace),
        key=lambda urn: catalog.dataset_names[urn].name,
    )
    return _page("datasets", urns, catalog.dataset, limit, offset)


@router.get("/namespaces/{namespace}/datasets/{dataset}", dependencies=[READ])
def get_dataset(service: Service, namespace: str, dataset: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    return catalog.dataset(catalog.require_dataset(namespace, dataset))


@router.get("/namespaces/{namespace}/datasets/{dataset}/versions", dependencies=[READ])
def list_dataset_versions(
    service: Service, namespace: str, dataset: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """The dataset's versions, the latest first: each run that wrote it."""
    catalog = _Catalog(service)
    urn = catalog.require_dataset(namespace, dataset)
    versions = catalog.dataset_versions(urn)
    return _page("versions", versions, lambda v: catalog.dataset_version(urn, v), limit, offset)


@router.get("/namespaces/{namespace}/datasets/{dataset}/versions/{version}", dependencies=[READ])
def get_dataset_version(service: Service, namespace: str, dataset: str, version: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    urn = catalog.require_dataset(namespace, dataset)
    for found in catalog.dataset_versions(urn):
        if found.version == version.lower():
            return catalog.dataset_version(urn, found)
    raise _not_found("dataset version", version)


# ---------------------------------------------------------------- jobs and runs


@router.get("/jobs", dependencies=[READ])
def list_all_jobs(service: Service, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """Every job, by namespace and name."""
    catalog = _Catalog(service)
    urns = sorted(catalog.job_names, key=lambda urn: catalog.job_names[urn])
    return _page("jobs", urns, catalog.job, limit, offset)


@router.get("/namespaces/{namespace}/jobs", dependencies=[READ])
def list_jobs(service: Service, namespace: str, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """The namespace's jobs by name, with how many there are in all."""
    catalog = _Catalog(service)
    catalog.require_namespace(namespace)
    urns = sorted(
        (urn for urn, (ns, _) in catalog.job_names.items() if ns == namespace),
        key=lambda urn: catalog.job_names[urn],
    )
    return _page("jobs", urns, catalog.job, limit, offset)


@router.get("/namespaces/{namespace}/jobs/{job}", dependencies=[READ])
def get_job(service: Service, namespace: str, job: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    return catalog.job(catalog.require_job(namespace, job))


@router.get("/namespaces/{namespace}/jobs/{job}/runs", dependencies=[READ])
def list_runs(
    service: Service, namespace: str, job: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """The job's runs, the latest started first, with how many there are in all."""
    catalog = _Catalog(service)
    urn = catalog.require_job(namespace, job)
    runs = catalog.runs_of(urn)
    return _page("runs", runs, catalog.run, limit, offset)


@router.get("/namespaces/{namespace}/jobs/{job}/versions", dependencies=[READ])
def list_job_versions(
    service: Service, namespace: str, job: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """The job's versions, the latest first: each set of datasets it read and wrote."""
    catalog = _Catalog(service)
    urn = catalog.require_job(namespace, job)
    versions = catalog.versions_of(urn)
    return _page("versions", versions, catalog.job_version, limit, offset)


@router.get("/namespaces/{namespace}/jobs/{job}/versions/{version}", dependencies=[READ])
def get_job_version(service: Service, namespace: str, job: str, version: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    urn = catalog.require_job(namespace, job)
    for found in catalog.versions_of(urn):
        if job_version_id(found) == version.lower():
            return catalog.job_version(found)
    raise _not_found("job version", version)


@router.get("/jobs/runs/{id}", dependencies=[READ])
def get_run(service: Service, id: str) -> dict[str, Any]:
    catalog = _Catalog(service)
    return catalog.run(catalog.require_run(id))


@router.get("/jobs/runs/{id}/facets", dependencies=[READ])
def get_run_facets(
    service: Service,
    id: str,
    type: Literal["run", "job"],
) -> dict[str, Any]:
    """The run's facets, or its job's, as the run's events gave them."""
    catalog = _Catalog(service)
    run = catalog.require_run(id)
    read = catalog.reads.run_facets if type == "run" else catalog.reads.job_facets_of_run
    return {"runId": run.run_id, "facets": read(run.run_id)}


# ---------------------------------------------------------------- search, tags, events


@router.get("/search", dependencies=[READ])
def search(
    service: Service,
    q: Annotated[str, Query(min_length=1)],
    filter: str | None = None,
    sort: str = "NAME",
    limit: Limit = 10,
    namespace: str | None = None,
    before: str | None = None,
    after: str | None = None,
) -> dict[str, Any]:
    """Datasets and jobs whose name matches `q` (case-insensitive; `%` any text, `_` one
    character, as in Marquez's SQL LIKE), by name or the latest updated first; `totalCount` is
    how many are returned, as in Marquez."""
    if not q.strip():
        raise RequestError("q must not be blank", "q")
    kinds = {"DATASET", "JOB"} if filter is None else {_choice(filter, ("DATASET", "JOB"), "filter")}
    order = _choice(sort, ("NAME", "UPDATE_AT", "UPDATED_AT"), "sort")
    since, until = _day(after, "after"), _day(before, "before")
    pattern = _like(q.strip())
    catalog = _Catalog(service)
    found: list[dict[str, Any]] = []
    candidates: list[tuple[str, str, str, NodeRecord, str]] = []
    if "DATASET" in kinds:
        for urn, named in catalog.dataset_names.items():
            candidates.append(("DATASET", named.namespace, named.name, catalog.assets[urn], _dataset_id(urn)))
    if "JOB" in kinds:
        for urn, (ns, name) in catalog.job_names.items():
            candidates.append(("JOB", ns, name, catalog.processes[urn], _job_id(urn)))
    for kind, ns, name, record, node_id in candidates:
        updated = record.last_seen
        if namespace is not None and ns != namespace:
            continue
        if (
            not pattern.search(name)
            or (since and updated.date() < since)
            or (until and updated.date() >= until)
        ):
            continue
        found.append(
            {"type": kind, "name": name, "updatedAt": _iso(updated), "namespace": ns, "nodeId": node_id}
        )
    if order == "NAME":
        found.sort(key=lambda r: (r["name"], r["namespace"], r["type"]))
    else:
        found.sort(key=lambda r: (r["updatedAt"], r["name"]), reverse=True)
    results = found[:limit]
    return {"totalCount": len(results), "results": results}


@router.get("/tags", dependencies=[READ])
def list_tags(service: Service, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    """Every label declared on a dataset, field or job, by name."""
    labels = MarquezCatalog(service).tags()
    return {"tags": [{"name": label} for label in labels[offset : offset + limit]]}


@router.get("/events/lineage", dependencies=[READ])
def list_lineage_events(
    service: Service,
    before: Moment | None = None,
    after: Moment | None = None,
    sort_direction: Annotated[str, Query(alias="sortDirection")] = "desc",
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The RunEvents received, as they were sent, with `after <= eventTime < before`; the latest
    first unless `sortDirection=asc`."""
    direction = _choice(sort_direction, ("ASC", "DESC"), "sortDirection")
    events, total = MarquezCatalog(service).events(
        after=after,
        before=before,
        descending=direction == "DESC",
        limit=limit,
        offset=offset,
    )
    return {"events": events, "totalCount": total}


# ---------------------------------------------------------------- Marquez's bodies


class _Catalog:
    """Marquez's bodies of the store's datasets, jobs and runs, from what `MarquezCatalog` reads."""

    def __init__(self, service: Tracelake) -> None:
        self.service = service
        self.reads = MarquezCatalog(service)
        names = self.reads.names
        self.assets, self.processes = names.assets, names.processes
        self.dataset_names, self.job_names = names.dataset_names, names.job_names
        self.dataset_namespaces, self.namespaces = names.dataset_namespaces, names.namespaces
        self.runs_of, self.versions_of = self.reads.runs_of, self.reads.versions_of
        self.dataset_versions = self.reads.dataset_versions

    # -- names

    def require_namespace(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise _not_found("namespace", namespace)

    def require_dataset(self, namespace: str, name: str) -> str:
        self.require_namespace(namespace)
        try:
            urn = asset_urn(namespace, name)
        except ValueError:
            urn = ""
        if urn not in self.assets:
            urn = self.reads.names.dataset_named(namespace, name) or ""
        if urn not in self.assets:
            raise _not_found("dataset", name)
        return urn

    def require_job(self, namespace: str, name: str) -> str:
        self.require_namespace(namespace)
        urn = process_of_job(namespace, name)
        if urn not in self.processes:
            raise _not_found("job", name)
        return urn

    def require_run(self, run_id: str) -> RunRecord:
        found = self.reads.run(run_id)
        if found is None:
            raise _not_found("run", run_id)
        return found

    def _dataset_id(self, urn: str) -> dict[str, str]:
        named = self.dataset_names.get(urn) or dataset_of(urn)
        return {"namespace": named.namespace, "name": named.name}

    # -- namespaces and sources

    def namespace(self, name: str) -> dict[str, Any]:
        records = self.namespaces[name]
        return {
            "name": name,
            "createdAt": _iso(min(r.first_seen for r in records)),
            "updatedAt": _iso(max(r.last_seen for r in records)),
            "ownerName": _ANONYMOUS,
            "isHidden": False,
        }

    def source(self, name: str) -> dict[str, Any]:
        records = self.dataset_namespaces[name]
        scheme, separator, _ = name.partition("://")
        return _present(
            {
                "type": (scheme if separator else name).upper(),
                "name": name,
                "createdAt": _iso(min(r.first_seen for r in records)),
                "updatedAt": _iso(max(r.last_seen for r in records)),
                "connectionUrl": name if separator else None,
            }
        )

    # -- datasets

    def dataset(self, urn: str) -> dict[str, Any]:
        record, named = self.assets[urn], self.dataset_names[urn]
        facets = self.reads.dataset_facets(urn, named.name)
        versions = self.dataset_versions(urn)
        modified = [v.created_at for v in versions if v.run is not None and _state(v.run) == "COMPLETED"]
        lifecycle = facets.get("lifecycleStateChange")
        return _present(
            {
                "id": {"namespace": named.namespace, "name": named.name},
                "type": dataset_type(urn),
                "name": named.name,
                "physicalName": named.name,
                "createdAt": _iso(record.first_seen),
                "updatedAt": _iso(record.last_seen),
                "namespace": named.namespace,
                "sourceName": named.namespace,
                "fields": self.fields(urn, facets),
                "tags": list(record.labels),
                "lastModifiedAt": _iso(max(modified)) if modified else None,
                "lastLifecycleState": lifecycle.get("lifecycleStateChange")
                if isinstance(lifecycle, dict)
                else None,
                "description": record.description,
                "facets": facets,
                "currentVersion": versions[0].version if versions else None,
                "deleted": False,
                "tracelake": _present({"urn": urn, "owner": record.owner, "layer": record.layer}),
            }
        )

    def fields(self, urn: str, facets: dict[str, Any]) -> list[dict[str, Any]]:
        """The dataset's fields in the order its schema facet lists them, else as declared."""
        records = self.reads.fields(urn)
        schema = facets.get("schema")
        listed = schema.get("fields") if isinstance(schema, dict) else None
        names = [f.get("name") for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
        place = {name: position for position, name in enumerate(names) if isinstance(name, str)}
        if place:
            records = sorted(
                records, key=lambda r: place.get(r.urn.partition("#")[2].split(".")[0], len(place))
            )
        return [
            _present(
                {
                    "name": record.urn.partition("#")[2],
                    # Marquez's own word for a field whose type nobody gave
                    "type": record.data_type or "UNKNOWN",
                    "tags": list(record.labels),
                    "description": record.description,
                }
            )
            for record in records
        ]

    def dataset_version(self, urn: str, version: DatasetVersion) -> dict[str, Any]:
        body = self.dataset(urn)
        return _present(
            {
                "id": {**body["id"], "version": version.version},
                "type": body["type"],
                "name": body["name"],
                "physicalName": body["physicalName"],
                "createdAt": _iso(version.created_at),
                "version": version.version,
                "namespace": body["namespace"],
                "sourceName": body["sourceName"],
                # the fields as they stand: the store keeps no history of a dataset's schema
                "fields": body["fields"],
                "tags": body["tags"],
                "description": body.get("description"),
                "lifecycleState": body.get("lastLifecycleState"),
                "createdByRun": self.run(version.run) if version.run is not None else None,
                # what the run's events said of the dataset; the latest event's for the dataset itself
                "facets": self.reads.dataset_facets(
                    urn, body["name"], run_id=version.run.run_id if version.run else None
                ),
            }
        )

    # -- jobs and runs

    def job(self, urn: str) -> dict[str, Any]:
        record, (namespace, name) = self.processes[urn], self.job_names[urn]
        flows = [e for e in self.reads.edges_of(urn) if e.source in self.assets and e.target in self.assets]
        facets = self.reads.job_facets(namespace, name)  # none but OpenLineage jobs have any
        # what its events named, though no edge joins them (a job that only writes…)
        reads, writes = (set(d) & self.assets.keys() for d in named_datasets(record.properties))
        current = next((v for v in self.versions_of(urn) if v.valid_to is None), None)
        runs = self.runs_of(urn)
        location = facets.get("sourceCodeLocation")
        return _present(
            {
                "id": {"namespace": namespace, "name": name},
                "type": job_type(record.kind, record.properties),
                "name": name,
                "simpleName": name,
                "createdAt": _iso(record.first_seen),
                "updatedAt": _iso(record.last_seen),
                "namespace": namespace,
                "inputs": [self._dataset_id(u) for u in sorted({e.source for e in flows} | reads)],
                "outputs": [self._dataset_id(u) for u in sorted({e.target for e in flows} | writes)],
                "location": location.get("url") if isinstance(location, dict) else None,
                "description": record.description,
                "latestRun": self.run(runs[0]) if runs else None,
                "latestRuns": [self.run(run) for run in runs[:_LATEST_RUNS]],
                "facets": facets,
                "currentVersion": job_version_id(current) if current is not None else None,
                "tags": list(record.labels),
                "tracelake": _present({"urn": urn, "kind": record.kind, "owner": record.owner}),
            }
        )

    def job_version(self, version: ProcessVersion) -> dict[str, Any]:
        namespace, name = self.job_names[version.process]
        runs = [r for r in self.runs_of(version.process) if r.moment is not None and version.holds(r.moment)]
        ident = job_version_id(version)
        return _present(
            {
                "id": {"namespace": namespace, "name": name, "version": ident},
                "name": name,
                "version": ident,
                "createdAt": _iso(version.valid_from),
                "namespace": namespace,
                "inputs": [self._dataset_id(u) for u in sorted({s for s, _ in version.flows})],
                "outputs": [self._dataset_id(u) for u in sorted({t for _, t in version.flows})],
                "latestRun": self.run(runs[0]) if runs else None,
            }
        )

    def run(self, run: RunRecord) -> dict[str, Any]:
        namespace, name = self.job_names.get(run.process) or job_name(run.process)
        moment = run.moment
        version = next((v for v in self.versions_of(run.process) if moment and v.holds(moment)), None)
        facets = self.reads.run_facets(run.run_id)
        found = facets.get("nominalTime")
        nominal: dict[str, Any] = found if isinstance(found, dict) else {}
        started, ended = run.started_at, run.ended_at
        body: dict[str, Any] = {
            "id": run.run_id,
            "createdAt": _iso(started or ended),
            "updatedAt": _iso(ended or started),
            "nominalStartTime": nominal.get("nominalStartTime"),
            "nominalEndTime": nominal.get("nominalEndTime"),
            "state": _state(run),
            "startedAt": _iso(started),
            "endedAt": _iso(ended),
            "durationMs": round((ended - started).total_seconds() * 1000) if started and ended else None,
            "args": {},
            "facets": facets,
        }
        if version is not None:
            body["jobVersion"] = {"namespace": namespace, "name": name, "version": job_version_id(version)}
            body["inputDatasetVersions"] = [
                self._io_version(urn, moment) for urn in sorted({s for s, _ in version.flows})
            ]
            body["outputDatasetVersions"] = [
                self._io_version(urn, moment, run) for urn in sorted({t for _, t in version.flows})
            ]
        return _present(body)

    def _io_version(self, urn: str, moment: datetime | None, run: RunRecord | None = None) -> dict[str, Any]:
        """The version of a dataset a run read (the latest made by its time) or wrote (its own)."""
        versions = self.dataset_versions(urn)
        if run is not None:
            version = version_id("dataset", urn, run.run_id)
        elif versions:
            made = [v for v in versions if moment is None or v.created_at <= moment]
            version = (made or versions)[0].version
        else:
            version = version_id("dataset", urn)
        return {"datasetVersionId": {**self._dataset_id(urn), "version": version}, "facets": {}}


# ---------------------------------------------------------------- helpers


def _page(
    key: str, items: Sequence[T], render: Callable[[T], Any], limit: int, offset: int
) -> dict[str, Any]:
    """One page of a listing, with how many there are in all, as Marquez counts them."""
    return {key: [render(item) for item in items[offset : offset + limit]], "totalCount": len(items)}


def _not_found(kind: str, name: str) -> RequestError:
    return RequestError(f"{kind} {name!r} not found", status=404)


def _present(body: dict[str, Any]) -> dict[str, Any]:
    """The members that have a value: Marquez leaves absent ones out rather than writing null."""
    return {key: value for key, value in body.items() if value is not None}


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment is not None else None


def _state(run: RunRecord) -> str:
    status = (run.status or "").upper()
    if status in _MARQUEZ_STATES:
        return status
    if status in _STATES:
        return _STATES[status]
    # no lifecycle news (a run seen in a query log): ended is done; otherwise nothing is known yet
    return "COMPLETED" if run.ended_at is not None else "NEW"


def _choice(value: str, allowed: Sequence[str], parameter: str) -> str:
    chosen = value.strip().upper()
    if chosen not in allowed:
        raise RequestError(f"{parameter} must be one of {', '.join(allowed)}, got {value!r}", parameter)
    return chosen


def _day(value: str | None, parameter: str) -> date | None:
    if value is None or not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise RequestError(f"{parameter} must be a date, YYYY-MM-DD; got {value!r}", parameter) from None


def _like(query: str) -> re.Pattern[str]:
    """Marquez's `ILIKE '%' || q || '%'` as a regular expression."""
    wildcards = {"%": ".*", "_": "."}
    text = "".join(wildcards.get(char, re.escape(char)) for char in query)
    return re.compile(text, re.IGNORECASE | re.DOTALL)
