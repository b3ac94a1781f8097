"""Tracelake's lineage out as OpenLineage RunEvents, so Marquez, DataHub and friends can receive it.

`run_event` turns one `Run` and the `LineageBatch` it produced into a RunEvent built from the
openlineage-python client's models (START, COMPLETE or FAIL), with these facets:

- job `jobType` (BATCH, integration TRACELAKE);
- dataset `schema` on every input and output (fields and types from the batch, nested paths nested);
- `columnLineage` on outputs: each output field → the input fields it came from, each with
  `transformations` [{type: DIRECT|INDIRECT, subtype: IDENTITY|…|CONDITIONAL}] from the edge;
- dataset `lifecycleStateChange` on outputs the run created, altered, dropped, truncated,
  renamed (with `previousIdentifier`) or overwrote (the last change of each);
- run `errorMessage` on FAIL (the error class only), `processing_engine` when the process says
  which engine ran it (metadata "engine" / "engine_version"), and `parent` when it says which run
  it ran inside (metadata "parent": {"process", "run_id"}, as Python runs started inside a tracked
  Spark run or a request do): an `openlineage.job/…` process under its own namespace and name,
  any other as Tracelake names its jobs (this emitter's namespace, the name after the kind).

`OpenLineageEmitter` sends those events through the client's transports (console, file, HTTP or
any client you configure). A lineage sink must never break the job it watches, so transport
failures are logged (logger `tracelake.openlineage`) and swallowed; mistakes in building the
event (a malformed URN, an unknown event type) still raise, since they are bugs to fix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, RunEvent, RunState
from openlineage.client.event_v2 import Run as OpenLineageRun
from openlineage.client.facet_v2 import (
    DatasetFacet,
    JobFacet,
    RunFacet,
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    lifecycle_state_change_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
)
from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import (
    ApiKeyTokenProvider,
    HttpConfig,
    HttpTransport,
    TokenProvider,
)
from openlineage.client.transport.http_common import DEFAULT_RETRY_CONFIG

from tracelake.model import VERSION, AssetChange, FlowEdge, LineageBatch, Process, Run, as_utc, utcnow
from tracelake.model.names import dataset_of, job_of, openlineage_run_id

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_PRODUCER",
    "OpenLineageEmitter",
    "run_event",
]

log = logging.getLogger("tracelake.openlineage")

DEFAULT_NAMESPACE = "tracelake"
DEFAULT_PRODUCER = f"https://github.com/tracelake/tracelake/tree/{VERSION}"

# Hadoop's S3 connectors are one store to OpenLineage: its naming spec says `s3://{bucket}`.
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
# Object stores name a dataset by its object key, which has no leading slash.
_OBJECT_STORES = frozenset({"s3", "gs"})

_MAX_ERROR_CLASS = 256


def _split_field(urn: str) -> tuple[str, str]:
    asset, _, path = urn.partition("#")
    return asset, path


def _event_time(moment: datetime | None) -> str:
    # RFC 3339 in UTC, as the spec's date-time format requires an offset
    moment = as_utc(moment) if moment is not None else utcnow()
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error_class(error_class: str) -> str:
    """Only the class name goes out: a caller passing `str(exc)` must not ship record values."""
    text = error_class.strip().split(":", 1)[0].strip()
    text = text.split()[0] if text else ""
    return text[:_MAX_ERROR_CLASS] or "UnknownError"


def _job_name(run: Run, process: Process | None) -> str:
    if process is not None and process.name:
        return process.name
    _, slash, name = run.process.partition("/")
    return name if slash and name else run.process


def _reads(run: Run, process: Process | None) -> list[str]:
    """Assets read without a write ("reads" in run or process metadata), inputs all the same."""
    found: list[str] = []
    # Run has no metadata today; reading it defensively lets a collector add one without a change here
    for metadata in (getattr(run, "metadata", None), process.metadata if process is not None else None):
        if not metadata:
            continue
        reads = metadata.get("reads") or []
        if isinstance(reads, str):
            reads = [reads]
        found.extend(_split_field(str(urn))[0] for urn in reads)
    return found


@dataclass
class _DatasetView:
    """What the event says about one dataset: its fields (in first-seen order) with types."""

    urn: str
    namespace: str = field(init=False)
    name: str = field(init=False)
    fields: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.namespace, self.name = dataset_of(self.urn)

    def add_field(self, path: str, data_type: str | None) -> None:
        if data_type is not None or path not in self.fields:
            self.fields[path] = data_type or self.fields.get(path)

    def schema_facet(self, producer: str) -> schema_dataset.SchemaDatasetFacet | None:
        if not self.fields:
            return None
        roots: list[schema_dataset.SchemaDatasetFacetFields] = []
        nodes: dict[str, schema_dataset.SchemaDatasetFacetFields] = {}
        for path, data_type in self.fields.items():
            siblings, prefix = roots, ""
            node: schema_dataset.SchemaDatasetFacetFields | None = None
            # `address.city` is a nested field: the spec nests it under `address`
            for part in path.split("."):
                prefix = f"{prefix}.{part}" if prefix else part
                node = nodes.get(prefix)
                if node is None:
                    node = schema_dataset.SchemaDatasetFacetFields(name=part)
                    nodes[prefix] = node
                    siblings.append(node)
                siblings = node.fields  # type: ignore[assignment]  # the client types fields as a sequence; it is the list it built
            assert node is not None
            if data_type is not None:
                node.type = data_type
        for node in nodes.values():
            if not node.fields:
                # an empty list of nested fields would say "a struct with no fields"
                node.fields = None
        return schema_dataset.SchemaDatasetFacet(fields=roots, producer=producer)


def _transformation(edge: FlowEdge) -> column_lineage_dataset.Transformation | None:
    if edge.transformation is None:
        return None
    return column_lineage_dataset.Transformation(
        type=edge.transformation.openlineage_type,
        subtype=edge.transformation.value,
        description=edge.description,
    )


def _lifecycle_facet(
    change: AssetChange, producer: str
) -> lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet:
    previous = None
    if change.previous is not None:
        old = _DatasetView(change.previous)
        previous = lifecycle_state_change_dataset.PreviousIdentifier(name=old.name, namespace=old.namespace)
    return lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
        lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange(str(change.change)),
        previousIdentifier=previous,
        producer=producer,
    )


def _column_lineage(
    edges: Iterable[FlowEdge], datasets: dict[str, _DatasetView], producer: str
) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
    # target path → source field urn → transformations, all in first-seen order
    columns: dict[str, dict[str, list[column_lineage_dataset.Transformation]]] = {}
    for edge in edges:
        transformation = _transformation(edge)
        sources = columns.setdefault(_split_field(edge.target)[1], {})
        found = sources.setdefault(edge.source, [])
        if transformation is not None and transformation not in found:
            found.append(transformation)
    if not columns:
        return None
    fields: dict[str, column_lineage_dataset.Fields] = {}
    for target_path, sources in columns.items():
        input_fields = []
        for source, transformations in sources.items():
            asset, path = _split_field(source)
            view = datasets[asset]
            input_fields.append(
                column_lineage_dataset.InputField(
                    namespace=view.namespace, name=view.name, field=path, transformations=transformations
                )
            )
        fields[target_path] = column_lineage_dataset.Fields(inputFields=input_fields)
    # indirect sources are listed per output field (as the edges are), so no dataset-wide list
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, dataset=None, producer=producer)


def run_event(
    event_type: RunState | str,
    run: Run,
    batch: LineageBatch,
    *,
    namespace: str,
    producer: str,
    error_class: str | None = None,
) -> RunEvent:
    """The OpenLineage RunEvent of `run` at `event_type` (START, COMPLETE, FAIL…).

    Only the batch's edges through `run.process` count: a batch may hold several processes,
    and another process's edges are not this run's lineage. The event is timed at the run's
    start (START) or end (others), or now when the run has no such time. Raises ValueError on
    an unknown event type, an error class on anything but FAIL, or a malformed URN.
    """
    state = RunState(event_type)
    if error_class is not None and state is not RunState.FAIL:
        raise ValueError(f"an error class belongs on a FAIL event, not {state.value}")
    process = next((p for p in batch.processes if p.urn == run.process), None)
    edges = [edge for edge in batch.edges if edge.process == run.process]

    datasets: dict[str, _DatasetView] = {}

    def view(asset: str) -> _DatasetView:
        if asset not in datasets:
            datasets[asset] = _DatasetView(asset)
        return datasets[asset]

    inputs: dict[str, None] = {}
    outputs: dict[str, None] = {}
    field_edges: dict[str, list[FlowEdge]] = {}
    for edge in edges:
        source, source_path = _split_field(edge.source)
        target, target_path = _split_field(edge.target)
        inputs.setdefault(source)
        outputs.setdefault(target)
        if source_path:
            view(source).add_field(source_path, None)
        if target_path:
            view(target).add_field(target_path, None)
        if source_path and target_path:
            field_edges.setdefault(target, []).append(edge)
    for asset in _reads(run, process):
        inputs.setdefault(asset)
    # what the run did to datasets themselves (DDL): the last change of each, on it as an output
    changes = {c.asset: c for c in batch.changes if c.run_id == run.run_id}
    for asset in changes:
        outputs.setdefault(asset)
    for asset in (*inputs, *outputs):
        view(asset)
    # types come from the batch's fields; fields of assets this run does not touch are left out
    for field_ in batch.fields:
        asset, path = _split_field(field_.urn)
        if asset in datasets and path:
            datasets[asset].add_field(path, field_.data_type)

    def facets(asset: str, *, output: bool) -> dict[str, DatasetFacet]:
        found: dict[str, DatasetFacet] = {}
        schema = datasets[asset].schema_facet(producer)
        if schema is not None:
            found["schema"] = schema
        if output:
            lineage = _column_lineage(field_edges.get(asset, ()), datasets, producer)
            if lineage is not None:
                found["columnLineage"] = lineage
            if asset in changes:
                found["lifecycleStateChange"] = _lifecycle_facet(changes[asset], producer)
        return found

    run_facets: dict[str, RunFacet] = {}
    if error_class is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=_error_class(error_class), programmingLanguage="python", producer=producer
        )
    parent = _parent_facet(
        process.metadata.get("parent") if process is not None else None, namespace, producer
    )
    if parent is not None:
        run_facets["parent"] = parent
    engine = process.metadata.get("engine") if process is not None else None
    engine_version = process.metadata.get("engine_version") if process is not None else None
    if engine and engine_version:
        run_facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
            version=str(engine_version),
            name=str(engine),
            openlineageAdapterVersion=VERSION,
            producer=producer,
        )
    job_facets: dict[str, JobFacet] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH",
            integration="TRACELAKE",
            jobType="QUERY" if process is not None and process.kind == "sql" else "JOB",
            producer=producer,
        )
    }

    moment = run.started_at if state is RunState.START else run.ended_at
    return RunEvent(
        eventType=state,
        eventTime=_event_time(moment),
        run=OpenLineageRun(runId=openlineage_run_id(run.run_id), facets=run_facets),
        job=Job(namespace=namespace, name=_job_name(run, process), facets=job_facets),
        inputs=[
            InputDataset(datasets[a].namespace, datasets[a].name, facets=facets(a, output=False))
            for a in inputs
        ],
        outputs=[
            OutputDataset(datasets[a].namespace, datasets[a].name, facets=facets(a, output=True))
            for a in outputs
        ],
        producer=producer,
    )


def _parent_facet(parent: Any, namespace: str, producer: str) -> parent_run.ParentRunFacet | None:
    if not isinstance(parent, dict) or not parent.get("process") or not parent.get("run_id"):
        return None
    process = str(parent["process"])
    job = job_of(process)
    if job is None:
        _, slash, name = process.partition("/")
        job = (namespace, name if slash and name else process)
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=openlineage_run_id(str(parent["run_id"]))),
        job=parent_run.Job(namespace=job[0], name=job[1]),
        producer=producer,
    )


def _client(transport: Any) -> OpenLineageClient:
    return OpenLineageClient(transport=transport)


@dataclass
class OpenLineageEmitter:
    """Sends a run's lineage as OpenLineage START / COMPLETE / FAIL events through `client`.

    Build one from your own `OpenLineageClient` (any transport, filters, config), or with
    `console()`, `file(path)` or `http(url)`. Transport failures are logged, never raised.
    """

    client: OpenLineageClient
    namespace: str = DEFAULT_NAMESPACE
    producer: str = DEFAULT_PRODUCER

    @classmethod
    def console(
        cls, *, namespace: str = DEFAULT_NAMESPACE, producer: str = DEFAULT_PRODUCER
    ) -> OpenLineageEmitter:
        """Events logged as JSON at INFO on the client's `openlineage.client.transport.console` logger."""
        return cls(_client(ConsoleTransport(ConsoleConfig())), namespace, producer)

    @classmethod
    def file(
        cls,
        path: str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        producer: str = DEFAULT_PRODUCER,
    ) -> OpenLineageEmitter:
        """Events appended to `path`, one JSON document per line."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        transport = FileTransport(FileConfig(log_file_path=str(target), append=True))
        return cls(_client(transport), namespace, producer)

    @classmethod
    def http(
        cls,
        url: str,
        api_key: str | None = None,
        endpoint: str = "api/v1/lineage",
        *,
        timeout: float = 5.0,
        retries: int = 2,
        namespace: str = DEFAULT_NAMESPACE,
        producer: str = DEFAULT_PRODUCER,
    ) -> OpenLineageEmitter:
        """Events POSTed to `url`/`endpoint` (Marquez's default), with a bearer `api_key` if given.

        The client's default of 5 retries with backoff can hold a job for many seconds when the
        server is down; `retries` keeps that short, since the events are calls on the job's path.
        """
        auth = ApiKeyTokenProvider({"api_key": api_key}) if api_key else TokenProvider({})
        retry = {**DEFAULT_RETRY_CONFIG, "total": retries, "connect": retries, "read": retries}
        config = HttpConfig(url=url, endpoint=endpoint, timeout=timeout, auth=auth, retry=retry)
        return cls(_client(HttpTransport(config)), namespace, producer)

    def start(self, run: Run, batch: LineageBatch) -> None:
        self._emit(RunState.START, run, batch)

    def complete(self, run: Run, batch: LineageBatch) -> None:
        self._emit(RunState.COMPLETE, run, batch)

    def fail(self, run: Run, batch: LineageBatch, error_class: str) -> None:
        self._emit(RunState.FAIL, run, batch, error_class)

    def close(self, timeout: float = 5.0) -> None:
        """Flush transports that buffer; like emitting, never raises."""
        try:
            self.client.close(timeout)
        except Exception as error:
            log.warning("closing the OpenLineage client failed: %s: %s", type(error).__name__, error)

    def _emit(self, state: RunState, run: Run, batch: LineageBatch, error_class: str | None = None) -> None:
        event = run_event(
            state, run, batch, namespace=self.namespace, producer=self.producer, error_class=error_class
        )
        try:
            self.client.emit(event)
        except Exception as error:
            kind = getattr(self.client.transport, "kind", None) or type(self.client.transport).__name__
            log.warning(
                "could not send the OpenLineage %s event of run %s through the %s transport: %s: %s",
                state.value,
                run.run_id,
                kind,
                type(error).__name__,
                error,
            )
            log.debug("OpenLineage transport failure", exc_info=True)
