"""The store as Marquez's API sees it: datasets and jobs under their Marquez names, the datasets
OpenLineage events named for each job, runs, job and dataset versions, facets and the events as
received. The HTTP API's Marquez-compatible routes render these in Marquez's shapes; what they
read of the store, they read here.

A dataset is an asset, under its OpenLineage (namespace, name) (`names.dataset_of`); a job is a
process, under its OpenLineage name, or `tracelake` and its URN for lineage from other signals. A
dataset version is a run that wrote the dataset (a dataset no run wrote has one version, itself
as it stands); version ids are UUIDs made from what the version is, so they are stable across
requests. What is read of the whole store (the names, the jobs' datasets) is read once per graph
version and shared by every request (`Tracelake.per_graph_version`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tracelake.collect.openlineage import JOB_DATASETS, PROCESSING_TYPE
from tracelake.model import UnknownNodeError, parse_urn
from tracelake.model.names import JOB_KIND, DatasetName, dataset_of, job_of, job_urn
from tracelake.store import events as stored
from tracelake.store.events import ProcessVersion as ProcessVersion
from tracelake.store.events import RunRecord as RunRecord
from tracelake.store.records import EdgeRecord as EdgeRecord
from tracelake.store.records import NodeRecord as NodeRecord

if TYPE_CHECKING:
    from tracelake.app.service import Tracelake

TRACELAKE_NAMESPACE = "tracelake"
# Tags and owners change without a new graph version: the names are read again this often at most.
NAMES_FOR = 10.0
_VERSIONS = uuid.uuid5(uuid.NAMESPACE_URL, "https://tracelake.dev/marquez/versions")


# ---------------------------------------------------------------- names


def process_of_job(namespace: str, name: str) -> str:
    """The process a Marquez job names: the inverse of `job_name`."""
    return name if namespace == TRACELAKE_NAMESPACE else job_urn(namespace, name)


def job_name(process: str) -> tuple[str, str]:
    """A process's Marquez (namespace, name)."""
    return job_of(process) or (TRACELAKE_NAMESPACE, process)


def named_datasets(properties: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The (inputs, outputs) a job's events named, from its properties (see `JOB_DATASETS`)."""
    datasets = properties.get(JOB_DATASETS)
    if not isinstance(datasets, dict):
        return set(), set()
    return set(datasets.get("inputs") or ()), set(datasets.get("outputs") or ())


def job_type(kind: str, properties: dict[str, Any]) -> str:
    """Marquez's job type: the jobType facet's processingType, else STREAMING for a streaming kind."""
    processing = properties.get(PROCESSING_TYPE)
    if processing in ("BATCH", "STREAMING"):
        return str(processing)
    return "STREAMING" if "stream" in kind.lower() else "BATCH"


def dataset_type(urn: str) -> str:
    """Marquez's dataset types: a stream's topic is a STREAM, anything else a DB_TABLE."""
    return "STREAM" if parse_urn(urn).kind == "topic" else "DB_TABLE"


def version_id(kind: str, *parts: str) -> str:
    return str(uuid.uuid5(_VERSIONS, "\x1f".join((kind, *parts))))


def job_version_id(version: ProcessVersion) -> str:
    return version_id("job", version.process, str(int(version.valid_from.timestamp() * 1_000_000)))


class MarquezNames:
    """The store's datasets and jobs under their Marquez names (reading the store's nodes: ~3 s on
    a million-edge store)."""

    def __init__(self, service: Tracelake) -> None:
        store = service.store
        self.assets = {record.urn: record for record in stored.nodes_of_type(store, "asset")}
        self.processes = {record.urn: record for record in stored.nodes_of_type(store, "process")}
        self.dataset_names = {urn: dataset_of(urn) for urn in self.assets}
        self.job_names = {urn: job_name(urn) for urn in self.processes}

    @cached_property
    def dataset_namespaces(self) -> dict[str, list[NodeRecord]]:
        found: dict[str, list[NodeRecord]] = {}
        for urn, named in self.dataset_names.items():
            found.setdefault(named.namespace, []).append(self.assets[urn])
        return found

    @cached_property
    def namespaces(self) -> dict[str, list[NodeRecord]]:
        found = {ns: list(records) for ns, records in self.dataset_namespaces.items()}
        for urn, (ns, _) in self.job_names.items():
            found.setdefault(ns, []).append(self.processes[urn])
        return found

    def dataset_named(self, namespace: str, name: str) -> str | None:
        """The dataset listed under (namespace, name), for a spelling the naming rules do not map
        back exactly."""
        wanted = DatasetName(namespace, name)
        return next((urn for urn, named in self.dataset_names.items() if named == wanted), None)


@dataclass
class JobDatasets:
    """What the graph does not hold of OpenLineage jobs: the datasets their latest events named (a
    job that only writes, only reads, or rewrites what it reads has them though no edge joins
    them) and their processing types."""

    datasets: dict[str, tuple[set[str], set[str]]]
    processing: dict[str, str]

    @classmethod
    def read(cls, service: Tracelake) -> JobDatasets:
        store = service.store
        found = store.property_of(JOB_DATASETS, urn_prefix=f"{JOB_KIND}/")
        return cls(
            {job: named_datasets({JOB_DATASETS: datasets}) for job, datasets in found.items()},
            store.property_of(PROCESSING_TYPE, urn_prefix=f"{JOB_KIND}/"),
        )

    @cached_property
    def by_dataset(self) -> dict[str, set[str]]:
        """The jobs whose events named each dataset."""
        found: dict[str, set[str]] = defaultdict(set)
        for job, (reads, writes) in self.datasets.items():
            for dataset in (*reads, *writes):
                found[dataset].add(job)
        return found


@dataclass(frozen=True, slots=True)
class DatasetVersion:
    version: str
    created_at: datetime
    run: RunRecord | None  # the run that wrote it; None: the dataset as it stands, no run known


class MarquezCatalog:
    """What one request reads of the store under Marquez's names, with what it reads more than
    once kept (runs, versions)."""

    def __init__(self, service: Tracelake) -> None:
        self._service = service
        self._store = service.store
        self._index = service.index()
        self._runs: dict[str, list[RunRecord]] = {}
        self._versions: dict[str, list[ProcessVersion]] = {}
        self._dataset_versions: dict[str, list[DatasetVersion]] = {}

    @cached_property
    def names(self) -> MarquezNames:
        """Every dataset and job under its Marquez name: read when a route first needs them (the
        lineage routes do not), then shared by the requests of this graph version."""
        service = self._service
        return service.per_graph_version("marquez.names", lambda: MarquezNames(service), max_age=NAMES_FOR)

    # -- the graph

    def jobs(self) -> JobDatasets:
        return self._service.per_graph_version("marquez.jobs", lambda: JobDatasets.read(self._service))

    def holds(self, urn: str) -> bool:
        """Whether the graph has the node `urn`."""
        return urn in self._index.positions

    def job_type(self, job: str) -> str:
        position = self._index.positions.get(job)
        kind = self._index.kind(position) if position is not None else ""
        return job_type(kind, {PROCESSING_TYPE: self.jobs().processing.get(job)})

    def edges_of(self, process: str) -> list[EdgeRecord]:
        """The process's edges in force now."""
        return self._store.edges(process=process)

    def fields(self, urn: str) -> list[NodeRecord]:
        """The dataset's fields, in their declared order."""
        try:
            return self._service.show(urn).fields
        except UnknownNodeError:  # the index lags the newest writes on a large store
            return self._store.fields_of(urn)

    def tags(self) -> list[str]:
        """Every label declared on a dataset, field or job, by name."""
        return sorted({label for held in self._store.labelled("").values() for label in held})

    # -- runs and versions

    def run(self, run_id: str) -> RunRecord | None:
        with contextlib.suppress(ValueError):
            run_id = str(uuid.UUID(run_id))  # the runs table's form of a UUID
        found = stored.runs(self._store, run_id=run_id)
        return found[0] if found else None

    def runs_of(self, process: str) -> list[RunRecord]:
        """The process's runs, the latest started first."""
        if process not in self._runs:
            self._runs[process] = stored.runs(self._store, process=process)
        return self._runs[process]

    def versions_of(self, process: str) -> list[ProcessVersion]:
        """The process's versions, the latest first."""
        if process not in self._versions:
            self._versions[process] = stored.process_versions(self._store, process)
        return self._versions[process]

    def dataset_versions(self, urn: str) -> list[DatasetVersion]:
        """Each run that wrote the dataset (a run of a process whose version in force at the run's
        time has an edge into it), the latest first; or the dataset itself if no run did."""
        if urn in self._dataset_versions:
            return self._dataset_versions[urn]
        spans: dict[str, list[tuple[datetime, datetime | None]]] = {}
        for process, start, end in stored.writers_of(self._store, urn):
            spans.setdefault(process, []).append((start, end))
        versions = []
        for process, held in spans.items():
            for run in self.runs_of(process):
                moment = run.moment
                if moment is not None and any(s <= moment and (e is None or moment < e) for s, e in held):
                    versions.append(DatasetVersion(version_id("dataset", urn, run.run_id), moment, run))
        versions.sort(key=lambda v: (v.created_at, v.version), reverse=True)
        if not versions and urn in self.names.assets:
            versions = [DatasetVersion(version_id("dataset", urn), self.names.assets[urn].first_seen, None)]
        self._dataset_versions[urn] = versions
        return versions

    # -- facets and events, as the OpenLineage events gave them

    def dataset_facets(self, urn: str, name: str, *, run_id: str | None = None) -> dict[str, Any]:
        return stored.dataset_facets(self._store, urn, name, run_id=run_id)

    def job_facets(self, namespace: str, name: str) -> dict[str, Any]:
        return stored.job_facets(self._store, namespace, name)

    def run_facets(self, run_id: str) -> dict[str, Any]:
        return stored.run_facets(self._store, run_id)

    def job_facets_of_run(self, run_id: str) -> dict[str, Any]:
        return stored.job_facets_of_run(self._store, run_id)

    def events(
        self,
        *,
        after: datetime | None,
        before: datetime | None,
        descending: bool,
        limit: int,
        offset: int,
    ) -> tuple[list[dict[str, Any]], int]:
        """The RunEvents received, as they were sent, with `after <= eventTime < before`, and how
        many there are in all."""
        return stored.list_events(
            self._store, after=after, before=before, descending=descending, limit=limit, offset=offset
        )
