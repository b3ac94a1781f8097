"""Lineage from OpenLineage events, as a Marquez-compatible `POST /api/v1/lineage` receives them
(parsed JSON), turned into a `LineageBatch` with signal `openlineage`.

Events are checked by hand against the spec; a malformed one raises `EventError` with the JSON path at
fault. The schemaURL's last segment names the kind (`…#/$defs/JobEvent`, as Marquez reads it), else
the shape does: `run` → RunEvent, `dataset` → DatasetEvent, `job` alone → JobEvent. A dataset's
(namespace, name) becomes an asset URN by inverting the emitter's `dataset_name`: a bare namespace is
the URN's system (`hive` → `hive.table/db.t` normalised as SQL names are, `kafka` → `kafka.topic/…`,
`jdbc` → `jdbc.table/…`, `web` → `web.endpoint/…`, others → `<namespace>.dataset/…`); `hive://` and
`kafka://` drop their host, as Tracelake's URNs (and so the SQL and Spark collectors' nodes) have
none; file systems (`file`, `file://host`, `hdfs://`, `s3://bucket`, `gs://`, `abfss://`, `dbfs://`…)
give `file.<format>/<path>` as the Spark collector names files, the format from the `storage` facet
(its Delta or Iceberg layer, else its file format, else `files`); another scheme keeps its authority
(`postgres://h:5432` + `db.s.t` → `postgres.dataset/h:5432/db.s.t`), and anything else
(`arn:aws:glue:…`) is `openlineage.dataset/<namespace>/<name>`. A job is the process
`openlineage.job/<namespace>/<name>`, of kind `jobType.jobType` lower-cased (else `openlineage`),
with asset edges from every input to every output and field edges from each output's `columnLineage`
(per-field `transformations`, or the older `transformationType`; the dataset-wide list reaches every
known field of the output). The store takes a batch that lists a process as an observation of all its
edges, so a process is listed only by an event that gives edges: a START with the datasets of its
COMPLETE observes the same version, and an event with none (a heartbeat, a START that does not know
its outputs yet) leaves the recorded edges alone. A RunEvent gives a Run (START opens it as RUNNING;
COMPLETE, FAIL, ABORT end it; the parent run is its job id), except an OTHER event or one without
eventType, which tell nothing of the run's lifecycle. Datasets give their `schema` fields (nested as
`a.b`), `ownership` and `documentation`. `events_to_batch` merges events, all or nothing, into one
observation at the latest event time: as the spec's accumulative events mean, a process's edges are
the union of its events'.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from openlineage.client.event_v2 import RunState

from tracelake.collect.spark_datasets import file_urn
from tracelake.emit.openlineage import SCHEME_ALIASES
from tracelake.model import (
    Asset,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Process,
    Run,
    Signal,
    Transformation,
    UrnError,
    as_utc,
    escape_hash,
    field_urn,
    resolve_node,
    unescape_hash,
)

__all__ = ["PROCESS_KIND", "EventError", "event_to_batch", "events_to_batch", "job_urn"]

PROCESS_KIND = "openlineage.job"
_DEFAULT_PROCESS_KIND = "openlineage"
_RUN_EVENT, _DATASET_EVENT, _JOB_EVENT = "RunEvent", "DatasetEvent", "JobEvent"

# The kinds of the systems Tracelake's URNs name (`dataset_name` keeps only the system).
_KINDS = {"hive": "table", "jdbc": "table", "kafka": "topic", "web": "endpoint"}
# Tracelake names these without a host, so `hive://metastore:9083` is the node the SQL collector made.
_HOSTLESS = frozenset({"hive", "kafka"})
# The spec's file-system namespaces (and Hadoop's), after `SCHEME_ALIASES` (s3a → s3).
_FILE_SCHEMES = frozenset({"file", "hdfs", "viewfs", "s3", "gs", "abfs", "abfss", "wasb", "wasbs", "dbfs"})
# Storage layers the Spark collector names files by (`file.delta/…`) rather than by their file format.
_FORMAT_LAYERS = frozenset({"delta", "iceberg"})
# A namespace usable as a URN system: a URI scheme (or `food_delivery`-style name) with no dot or colon.
_SYSTEM = re.compile(r"[a-z][a-z0-9_+-]*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]")
_MISSING: Any = object()

# How an input field feeds an output field: (kind, description), one per stated transformation.
_Kinds = list[tuple[Transformation | None, str | None]]


class EventError(ValueError):
    """A malformed OpenLineage event: where (a JSON path such as `$.run.runId`) and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def event_to_batch(event: Mapping[str, Any]) -> LineageBatch:
    """The lineage one RunEvent, DatasetEvent or JobEvent states; raises EventError if malformed."""
    builder = _Builder()
    _read_event(_At(event), builder)
    builder.events.append(dict(event))
    return builder.batch()


def job_urn(namespace: str, name: str) -> str:
    """The process URN of an OpenLineage job: `openlineage.job/<namespace>/<name>`."""
    return escape_hash(f"{PROCESS_KIND}/{namespace}/{name}")


def job_of(urn: str) -> tuple[str, str] | None:
    """The OpenLineage (namespace, name) of a process URN made by `job_urn`; None for others."""
    if not urn.startswith(PROCESS_KIND + "/"):
        return None
    namespace, _, name = urn[len(PROCESS_KIND) + 1 :].partition("/")
    return unescape_hash(namespace), unescape_hash(name)


def events_to_batch(events: Sequence[Mapping[str, Any]]) -> LineageBatch:
    """Many events as one batch, all or nothing: the first malformed one raises, its index in the path."""
    if not isinstance(events, Sequence) or isinstance(events, str | bytes):
        raise EventError("$", f"expected an array of events, got {_json_type(events)}")
    builder = _Builder()
    for index, event in enumerate(events):
        try:
            _read_event(_At(event), builder)
        except EventError as error:
            raise EventError(f"$[{index}]{error.path[1:]}", error.reason) from error
        builder.events.append(dict(event))
    return builder.batch()


# -- reading JSON with its path -------------------------------------------------------------------


@dataclass(slots=True)
class _At:
    """A JSON value and where it sits in the event, so every complaint names its path.

    The path is kept as a link to the parent and the step from it, and spelled out only when
    something fails: building it eagerly for every member read was a third of reading an event.
    """

    value: Any
    parent: _At | None = None
    step: str | int = ""  # a member's key, or an array element's index

    @property
    def path(self) -> str:
        steps: list[str] = []
        at: _At | None = self
        while at is not None and at.parent is not None:
            step = at.step
            if isinstance(step, int):
                steps.append(f"[{step}]")
            else:
                steps.append(f".{step}" if _IDENTIFIER.fullmatch(step) else f"[{json.dumps(step)}]")
            at = at.parent
        return "$" + "".join(reversed(steps))

    def fail(self, reason: str) -> EventError:
        return EventError(self.path, reason)

    def member(self, key: str) -> _At:
        """The member `key` of this object (call `obj()` first); `_MISSING` when absent."""
        return _At(self.value.get(key, _MISSING), self, key)

    def obj(self) -> _At:
        if self.value is _MISSING:
            raise self.fail("required")
        if not isinstance(self.value, Mapping):
            raise self.fail(f"expected an object, got {_json_type(self.value)}")
        return self

    def optional_obj(self) -> _At | None:
        # JSON null for an optional member means "not given", as the spec's generated clients write it
        return None if self.value is _MISSING or self.value is None else self.obj()

    def members(self) -> Iterator[tuple[str, _At]]:
        for key in self.value:
            yield key, self.member(key)

    def text(self) -> str:
        if self.value is _MISSING:
            raise self.fail("required")
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {_json_type(self.value)}")
        if not self.value.strip():
            raise self.fail("must not be empty")
        return self.value

    def optional_text(self) -> str | None:
        if self.value is _MISSING or self.value is None:
            return None
        if not isinstance(self.value, str):
            raise self.fail(f"expected a string, got {_json_type(self.value)}")
        return self.value

    def array(self, *, required: bool = False) -> list[_At]:
        if self.value is _MISSING or (self.value is None and not required):
            if required:
                raise self.fail("required")
            return []
        if not isinstance(self.value, list):
            raise self.fail(f"expected an array, got {_json_type(self.value)}")
        return [_At(item, self, index) for index, item in enumerate(self.value)]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array" if isinstance(value, list | tuple) else type(value).__name__


def _facet(holder: _At, name: str) -> _At | None:
    """A facet of a job, run or dataset; one marked `_deleted` is no facet."""
    facets = holder.member("facets").optional_obj()
    found = facets.member(name).optional_obj() if facets is not None else None
    if found is None or found.value.get("_deleted") is True:
        return None
    return found


def _uuid(at: _At) -> str:
    text = at.text()
    try:
        # the canonical lower-case form, so a START and its COMPLETE pair whatever case each used
        return str(uuid.UUID(text))
    except ValueError:
        raise at.fail(f"not a UUID: {text[:60]!r}") from None


# -- the events -----------------------------------------------------------------------------------


def _read_event(root_at: _At, builder: _Builder) -> None:
    root = root_at.obj()
    schema_url = root.member("schemaURL").text()
    root.member("producer").text()
    kind = _event_kind(root, schema_url)
    moment = _event_time(root.member("eventTime"))
    builder.observe(moment)
    if kind == _DATASET_EVENT:
        # a dataset's own facets: a columnLineage here has no job to hang edges on, so is not read
        _Event(builder).dataset(root.member("dataset"))
        return
    state = _event_type(root.member("eventType")) if kind == _RUN_EVENT else None
    run = root.member("run").obj() if kind == _RUN_EVENT else None
    job = root.member("job").obj()
    namespace, name = job.member("namespace").text(), job.member("name").text()
    process_urn = job_urn(namespace, name)
    run_record = _run(run, process_urn, state, moment) if run is not None else None
    process = _process(job, process_urn, namespace, name)

    event = _Event(builder)
    inputs = [event.dataset(at) for at in root.member("inputs").array()]
    outputs = [(event.dataset(at), at) for at in root.member("outputs").array()]
    edges = [
        FlowEdge(source, target, process_urn, Signal.OPENLINEAGE, Confidence.HIGH)
        for target, _ in outputs
        for source in inputs
        if source != target
    ]
    for target, at in outputs:
        edges.extend(event.column_edges(target, at, process_urn))
    if edges:
        builder.add_process(process)
        for edge in edges:
            builder.add_edge(edge)
    if run_record is not None:
        builder.add_run(run_record)


def _event_kind(root: _At, schema_url: str) -> str:
    named = schema_url.rpartition("/")[2]
    if named in (_RUN_EVENT, _DATASET_EVENT, _JOB_EVENT):
        return named
    for key, kind in (("run", _RUN_EVENT), ("dataset", _DATASET_EVENT), ("job", _JOB_EVENT)):
        if key in root.value:
            return kind
    raise root.fail(
        "not an OpenLineage event: a RunEvent has `run`, a DatasetEvent `dataset`, a JobEvent `job`"
    )


def _event_time(at: _At) -> datetime:
    text = at.text()
    try:
        if not _DATE_TIME.match(text):
            raise ValueError(text)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise at.fail(f"not an RFC 3339 date-time: {text[:60]!r}") from None
    # the spec wants an offset; a time without one is taken as UTC, as everywhere in Tracelake
    return as_utc(moment)


def _event_type(at: _At) -> RunState | None:
    text = at.optional_text()
    if text is None:
        return None
    try:
        return RunState(text)
    except ValueError:
        allowed = ", ".join(state.value for state in RunState)
        raise at.fail(f"expected one of {allowed}, got {text[:60]!r}") from None


def _run(at: _At, process_urn: str, state: RunState | None, moment: datetime) -> Run | None:
    run_id = _uuid(at.member("runId"))
    parent = _facet(at, "parent")
    job_id = _uuid(parent.member("run").obj().member("runId")) if parent is not None else None
    if state is None or state is RunState.OTHER:
        # no lifecycle news: a Run without times would overwrite the end the store has for it
        return None
    if state is RunState.START:
        return Run(run_id, process_urn, started_at=moment, status=RunState.RUNNING.value, job_id=job_id)
    if state is RunState.RUNNING:
        return Run(run_id, process_urn, status=state.value, job_id=job_id)
    return Run(run_id, process_urn, ended_at=moment, status=state.value, job_id=job_id)


def _process(job: _At, urn: str, namespace: str, name: str) -> Process:
    job_type = _facet(job, "jobType")
    kind = job_type.member("jobType").optional_text() if job_type is not None else None
    owner, owners, description = _about(job)
    return Process(
        urn,
        name=name,
        kind=kind.strip().lower() if kind and kind.strip() else _DEFAULT_PROCESS_KIND,
        owner=owner,
        description=description,
        metadata={"openlineage": {"namespace": namespace, "name": name}, **owners},
    )


def _about(holder: _At) -> tuple[str | None, dict[str, Any], str | None]:
    """(owner, {"owners": […]} when there are several, description) from ownership and documentation."""
    names: list[str] = []
    ownership = _facet(holder, "ownership")
    if ownership is not None:
        for owner_at in ownership.member("owners").array():
            names.append(owner_at.obj().member("name").text())
    documentation = _facet(holder, "documentation")
    description = documentation.member("description").text() if documentation is not None else None
    return (names[0] if names else None), ({"owners": names} if len(names) > 1 else {}), description


# -- datasets and their column lineage ------------------------------------------------------------


class _Event:
    """One event's datasets: their URNs by (namespace, name), which inputFields refer to."""

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder
        self.urns: dict[tuple[str, str], str] = {}
        self.fields: dict[str, dict[str, None]] = {}  # asset URN → its field URNs, for dataset-wide lineage

    def dataset(self, node: _At) -> str:
        at = node.obj()
        namespace, name = at.member("namespace").text(), at.member("name").text()
        storage = _facet(at, "storage")
        file_format = None
        if storage is not None:
            layer = storage.member("storageLayer").text().strip().lower()
            fmt = storage.member("fileFormat").optional_text()
            file_format = layer if layer in _FORMAT_LAYERS else fmt
        urn = _asset_urn(namespace, name, file_format)
        self.urns.setdefault((namespace, name), urn)
        owner, owners, description = _about(at)
        metadata = {"openlineage": {"namespace": namespace, "name": name}, **owners}
        self.builder.add_asset(Asset(urn, owner=owner, description=description, metadata=metadata))
        schema = _facet(at, "schema")
        for path, data_type in _schema_fields(schema.member("fields").array() if schema else [], ""):
            self._field(urn, path, data_type)
        return urn

    def column_edges(self, asset: str, output: _At, process: str) -> list[FlowEdge]:
        """Field edges into the output `asset` from its `columnLineage` facet."""
        facet = _facet(output, "columnLineage")
        if facet is None:
            return []
        edges: list[FlowEdge] = []

        def add(source: str, target: str, kinds: _Kinds) -> None:
            high = Confidence.HIGH
            edges.extend(FlowEdge(source, target, process, Signal.OPENLINEAGE, high, k, d) for k, d in kinds)

        for out_name, column_at in facet.member("fields").obj().members():
            column = column_at.obj()
            if not out_name.strip():
                raise column.fail("an output field needs a name")
            target = self._field(asset, out_name, None)
            # the older form: one kind and description for all of an output field's inputs
            old_kind = column.member("transformationType").optional_text()
            old_description = column.member("transformationDescription").optional_text()
            for input_at in column.member("inputFields").array(required=True):
                source = self._input_field(input_at)
                add(source, target, _transformations(input_at, old_kind, old_description))
        # the dataset-wide list (filters, joins, sorts…) influences every field of the output
        targets = list(self.fields.get(asset, ()))
        for input_at in facet.member("dataset").array():
            source, kinds = self._input_field(input_at), _transformations(input_at, None, None)
            for target in targets:
                add(source, target, kinds)
        return edges

    def _input_field(self, node: _At) -> str:
        at = node.obj()
        namespace, name = at.member("namespace").text(), at.member("name").text()
        path = at.member("field").text()
        asset = self.urns.get((namespace, name))
        if asset is None:
            # a dataset the event lists nowhere else: named without its facets (so no file format)
            asset = self.urns[(namespace, name)] = _asset_urn(namespace, name, None)
            metadata = {"openlineage": {"namespace": namespace, "name": name}}
            self.builder.add_asset(Asset(asset, metadata=metadata))
        return self._field(asset, path, None)

    def _field(self, asset: str, path: str, data_type: str | None) -> str:
        urn = field_urn(asset, path)
        self.fields.setdefault(asset, {})[urn] = None
        self.builder.add_field(Field(urn, data_type))
        return urn


def _schema_fields(items: list[_At], prefix: str) -> Iterator[tuple[str, str | None]]:
    """(path, type) of a schema facet's fields; a struct without a type is only the way to its fields."""
    for item_at in items:
        item = item_at.obj()
        name = item.member("name").text()
        path = f"{prefix}.{name}" if prefix else name
        data_type = item.member("type").optional_text()
        nested = item.member("fields").array()
        if data_type is not None or not nested:
            yield path, data_type
        yield from _schema_fields(nested, path)


def _transformations(input_at: _At, old_kind: str | None, old_description: str | None) -> _Kinds:
    """(kind, description) of each way an input field feeds its output field.

    The inverse of the emitter's `_transformation`: a known subtype is the kind. A DIRECT one
    without a (known) subtype is a TRANSFORMATION, since IDENTITY would claim the value is copied
    unchanged; an INDIRECT one has no kind in the vocabulary, so None. With no `transformations`,
    the older field-level `transformationType` says IDENTITY, or anything else (MASKED) computed.
    """
    found: _Kinds = []
    for item_at in input_at.member("transformations").array():
        item = item_at.obj()
        type_at = item.member("type")
        direction = type_at.text()
        if direction not in ("DIRECT", "INDIRECT"):
            raise type_at.fail(f"expected DIRECT or INDIRECT, got {direction[:60]!r}")
        subtype = item.member("subtype").optional_text()
        description = item.member("description").optional_text()
        kind = Transformation.__members__.get((subtype or "").upper())
        if kind is None or kind.openlineage_type != direction:
            kind = Transformation.TRANSFORMATION if direction == "DIRECT" else None
        found.append((kind, description))
    if not found:
        kind = Transformation.IDENTITY if old_kind == "IDENTITY" else Transformation.TRANSFORMATION
        found.append((kind, old_description))
    return found


def _asset_urn(namespace: str, name: str, file_format: str | None) -> str:
    """The asset URN of an OpenLineage dataset, the inverse of the emitter's `dataset_name`."""
    scheme, separator, authority = namespace.strip().partition("://")
    scheme = SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
    authority = authority.rstrip("/")
    if not _SYSTEM.fullmatch(scheme):
        return escape_hash(f"openlineage.dataset/{namespace}/{name}")
    if scheme == "file":
        # `file://host` is a remote file system; Tracelake's file URNs carry no host
        return escape_hash(file_urn(file_format or "", name))
    if separator and scheme in _FILE_SCHEMES:
        # object stores' names are keys without a leading slash; other file systems' are paths
        return escape_hash(file_urn(file_format or "", f"{scheme}://{authority}/{name.lstrip('/')}"))
    if scheme == "hive" and "/" not in name and "#" not in name:
        try:
            return resolve_node(name)
        except UrnError:
            pass  # more parts than catalog.db.table: kept as given below
    if separator and authority and scheme not in _HOSTLESS:
        # two servers' `db.schema.table` are two datasets
        name = f"{authority}/{name}"
    return escape_hash(f"{scheme}.{_KINDS.get(scheme, 'dataset')}/{name}")


# -- one batch out of many records ----------------------------------------------------------------


@dataclass
class _Builder:
    """A batch with one record per URN (and per edge key): what several events say, merged."""

    assets: dict[str, Asset] = field(default_factory=dict)
    fields: dict[str, Field] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    edges: dict[tuple[str, str, str, str, str], FlowEdge] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    observed_at: datetime | None = None

    def observe(self, moment: datetime) -> None:
        # the union of the events' edges is known true only once the latest of them happened
        if self.observed_at is None or moment > self.observed_at:
            self.observed_at = moment

    def add_asset(self, asset: Asset) -> None:
        old = self.assets.get(asset.urn)
        if old is not None:
            asset = Asset(
                asset.urn,
                owner=asset.owner or old.owner,
                description=asset.description or old.description,
                metadata={**old.metadata, **asset.metadata},
            )
        self.assets[asset.urn] = asset

    def add_field(self, fld: Field) -> None:
        old = self.fields.get(fld.urn)
        if old is None or (fld.data_type is not None and old.data_type is None):
            self.fields[fld.urn] = fld

    def add_process(self, process: Process) -> None:
        self.processes.setdefault(process.urn, process)

    def add_edge(self, edge: FlowEdge) -> None:
        self.edges.setdefault(edge.key, edge)

    def add_run(self, run: Run) -> None:
        old = self.runs.get(run.run_id)
        if old is not None:
            # events come in any order: the start of the START, the end and status of the last end
            later_end = run.ended_at is not None and (old.ended_at is None or run.ended_at >= old.ended_at)
            last = run if later_end else old
            run = Run(
                old.run_id,
                old.process,
                started_at=old.started_at or run.started_at,
                ended_at=last.ended_at,
                status=last.status,
                job_id=old.job_id or run.job_id,
            )
        self.runs[run.run_id] = run

    def batch(self) -> LineageBatch:
        return LineageBatch(
            assets=list(self.assets.values()),
            fields=list(self.fields.values()),
            processes=list(self.processes.values()),
            runs=list(self.runs.values()),
            edges=list(self.edges.values()),
            events=self.events,
            observed_at=self.observed_at,
        )
