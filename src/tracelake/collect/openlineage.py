"""Lineage from OpenLineage events, as a Marquez-compatible `POST /api/v1/lineage` receives them
(parsed JSON), turned into a `LineageBatch` with signal `openlineage`.

As liberal as Marquez in what it accepts: an event is refused (`EventError`, with the JSON path at
fault) only where Marquez refuses it — not an object, no `eventTime` or `producer`, a `job` or
dataset without namespace and name, `inputs` that are not an array. Where an event breaks the spec
in a part that can be left out, that part is left out and the rest kept, with a `Problem` naming
its path: a missing `schemaURL` (the kind is then read from the shape), a `runId` that is no UUID
(kept under a stable UUID made from it, as Marquez does), an unknown `eventType` (taken as OTHER),
a malformed facet (the facet dropped; an owner without a name dropped from its ownership).

The schemaURL's last segment names the kind (`…#/$defs/JobEvent`, as Marquez reads it), else the
shape: `run` → RunEvent, `dataset` → DatasetEvent, `job` alone → JobEvent. A dataset is its
(namespace, name) as sent, named as every collector names datasets (`tracelake.model.names`); its
`storage` facet's layer and file format are properties of the asset, never part of its name. A job
is the process `names.job_urn(namespace, name)`, of kind `jobType.jobType` lower-cased (else
`openlineage`), with asset edges from every input to every output and field edges from each
output's `columnLineage` (per-field `transformations`, or the older `transformationType`; the
dataset-wide list reaches every known field of the output).

The store takes a batch that lists a process as an observation of all its edges, so a process is
listed so only by an event that gives edges: a START with the datasets of its COMPLETE observes the
same version, and an event with none (a heartbeat, a START that does not know its outputs yet)
leaves the recorded edges alone. Every job is still written as a node (`LineageBatch.described`),
with the datasets its latest events named kept as its `datasets` property: a job that only writes,
only reads, or rewrites what it reads is found with its datasets though no edge joins them.

A RunEvent gives a Run (START opens it as RUNNING; COMPLETE, FAIL, ABORT end it; the parent run is
its job id), except an OTHER event or one without eventType, which tell nothing of the run's
lifecycle. Datasets give their `schema` fields (nested as `a.b`), `ownership` and `documentation`;
a `lifecycleStateChange` facet (on a COMPLETE run's outputs, or in a DatasetEvent) is a change of
the dataset's own life (`AssetChange`: a DROP ends its edges), not a flow. A run that completed
without writing anything (no event of it in the batch names an output) read its COMPLETE events'
inputs: each is an `AssetRead` at the completion, with no user. The collector sees one batch at a
time: a COMPLETE that names inputs and no outputs, sent apart from the events that named the
run's outputs, is taken as a read.
`events_to_batch` merges events, all or nothing, into one observation at the latest event time: as
the spec's accumulative events mean, a process's edges are the union of its events'. Each event is
kept as received in `LineageBatch.events`, for Marquez's read API.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from tracelake.model import (
    Asset,
    AssetChange,
    AssetRead,
    Confidence,
    Field,
    FlowEdge,
    InputError,
    Lifecycle,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    Transformation,
    as_utc,
)
from tracelake.model.json_values import refusal
from tracelake.model.names import asset_urn, field_urn, job_urn, openlineage_run_id

__all__ = ["JOB_DATASETS", "PROCESSING_TYPE", "EventError", "event_to_batch", "events_to_batch"]

# The process property under which a job's datasets (as URNs) are kept, whether or not an edge
# joins them: {"inputs": […], "outputs": […]} from its latest events that named any.
JOB_DATASETS = "datasets"
# The process property keeping a job's jobType `processingType` (BATCH, STREAMING), upper-cased.
PROCESSING_TYPE = "processing_type"
T = TypeVar("T")


class RunState(StrEnum):
    """A RunEvent's `eventType`, as the spec lists them (`OpenLineage.json`, `RunEvent.eventType`):
    the client's own enum would cost reading events half a second of imports."""

    START = "START"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ABORT = "ABORT"
    FAIL = "FAIL"
    OTHER = "OTHER"


D = TypeVar("D")  # a default, which may be narrower than what a facet gives ([] for a list[str])

_DEFAULT_PROCESS_KIND = "openlineage"
_RUN_EVENT, _DATASET_EVENT, _JOB_EVENT = "RunEvent", "DatasetEvent", "JobEvent"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]")
_MISSING: Any = object()

# How an input field feeds an output field: (kind, description), one per stated transformation.
_Kinds = list[tuple[Transformation | None, str | None]]


class EventError(InputError):
    """A malformed OpenLineage event: where (a JSON path such as `$.run.runId`) and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def event_to_batch(event: Mapping[str, Any]) -> LineageBatch:
    """The lineage one RunEvent, DatasetEvent or JobEvent states; raises EventError if it cannot be
    read, and records a problem for each part it had to leave out."""
    _refuse_unstorable(event)
    builder = _Builder()
    _read_event(_At(event), builder)
    builder.events.append(dict(event))
    return builder.batch()


def events_to_batch(events: object) -> LineageBatch:
    """Many events as one batch, all or nothing: the first malformed one raises, its index in the path."""
    if not isinstance(events, Sequence) or isinstance(events, str | bytes):
        raise EventError("$", f"expected an array of events, got {_json_type(events)}")
    _refuse_unstorable(events)
    builder = _Builder()
    root = _At(events)
    for index, event in enumerate(events):
        _read_event(_At(event, root, index), builder)
        builder.events.append(dict(event))
    return builder.batch()


def _refuse_unstorable(document: object) -> None:
    """An event the store could not hold, nor an answer carry (`json_values.refusal`: too deep, a
    NUL character, a lone surrogate, a number that is not finite), is refused whole, wherever it
    came from (a request's body, a line of a file)."""
    refused = refusal(document)
    if refused is not None:
        reason, path = refused
        raise EventError(path, reason)


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


def _read_facet(builder: _Builder, holder: _At, name: str, read: Callable[[_At], T], default: D) -> T | D:
    """What `read` makes of a facet, or `default` when it is absent; a facet that breaks the spec is
    left out with a problem naming where, as Marquez keeps an event whatever its facets hold."""
    try:
        found = _facet(holder, name)
        return default if found is None else read(found)
    except EventError as error:
        builder.warn(error.path, f"{error.reason}; the {name} facet is left out")
        return default


def _run_id(at: _At, builder: _Builder) -> str:
    """The run's UUID; another id is kept through a stable UUID made from it, as Marquez does."""
    text = at.text()
    try:
        # the canonical lower-case form, so a START and its COMPLETE pair whatever case each used
        return str(uuid.UUID(text))
    except ValueError:
        builder.warn(at.path, f"not a UUID: {text[:60]!r}; the run is kept under a UUID made from it")
        return openlineage_run_id(text)


# -- the events -----------------------------------------------------------------------------------


def _read_event(root_at: _At, builder: _Builder) -> None:
    root = root_at.obj()
    schema_url_at = root.member("schemaURL")
    schema_url = schema_url_at.optional_text()
    if schema_url is None:
        builder.warn(schema_url_at.path, "missing; the kind of event is taken from its shape")
    root.member("producer").text()
    kind = _event_kind(root, schema_url or "")
    moment = _event_time(root.member("eventTime"))
    builder.observe(moment)
    if kind == _DATASET_EVENT:
        # a dataset's own facets: a columnLineage here has no job to hang edges on, so is not read
        dataset_at = root.member("dataset")
        _lifecycle(builder, _Event(builder).dataset(dataset_at), dataset_at, moment, None, None)
        return
    state = _event_type(root.member("eventType"), builder) if kind == _RUN_EVENT else None
    run = root.member("run").obj() if kind == _RUN_EVENT else None
    job = root.member("job").obj()
    namespace, name = job.member("namespace").text(), job.member("name").text()
    process_urn = job_urn(namespace, name)
    run_id, run_record = _run(run, process_urn, state, moment, builder) if run is not None else (None, None)
    process = _process(job, process_urn, name, builder)

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
        # a lifecycle change is a fact once the run that made it completed
        if state is RunState.COMPLETE and run_record is not None:
            _lifecycle(builder, target, at, moment, process_urn, run_record.run_id)
    for edge in edges:
        builder.add_edge(edge)
    # the job is known whatever it moved; the datasets it names are kept with it, so a job that
    # only writes, only reads or rewrites its input is found with them though no edge says so
    builder.add_process(process, observed=bool(edges))
    builder.add_job_datasets(process_urn, inputs, [target for target, _ in outputs])
    if run_record is not None:
        builder.add_run(run_record)
    if run_id is not None:
        # what a run that wrote nothing read; only a COMPLETE says the reading happened
        read = inputs if state is RunState.COMPLETE else []
        builder.add_run_datasets(run_id, process_urn, read, bool(outputs), moment)


def _lifecycle(
    builder: _Builder, urn: str, dataset: _At, moment: datetime, process: str | None, run_id: str | None
) -> None:
    """A dataset's `lifecycleStateChange` facet (CREATE, DROP, RENAME with its previous name…),
    as a change of the dataset's own life."""

    def read(facet: _At) -> AssetChange:
        value = facet.member("lifecycleStateChange")
        try:
            change = Lifecycle(value.text())
        except ValueError:
            raise value.fail(f"not a lifecycle state ({', '.join(Lifecycle)})") from None
        previous = facet.member("previousIdentifier").optional_obj()
        previous_urn = None
        if previous is not None:
            previous_urn = asset_urn(previous.member("namespace").text(), previous.member("name").text())
        return AssetChange(urn, change, moment, Signal.OPENLINEAGE, process, run_id, previous=previous_urn)

    found = _read_facet(builder, dataset.obj(), "lifecycleStateChange", read, None)
    if found is not None:
        builder.changes.append(found)


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
    try:
        return as_utc(moment)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is past the last UTC date Python has
        raise at.fail(f"not a date-time UTC can hold: {text[:60]!r}") from None


def _event_type(at: _At, builder: _Builder) -> RunState | None:
    try:
        text = at.optional_text()
        return None if text is None else RunState(text)
    except EventError as error:
        builder.warn(error.path, f"{error.reason}; the event says nothing of the run's state")
    except ValueError:
        allowed = ", ".join(state.value for state in RunState)
        builder.warn(at.path, f"expected one of {allowed}, got {str(at.value)[:60]!r}; taken as OTHER")
    return None


def _run(
    at: _At, process_urn: str, state: RunState | None, moment: datetime, builder: _Builder
) -> tuple[str, Run | None]:
    """The event's run id, and the Run it reports (None when it tells nothing of its lifecycle)."""
    run_id = _run_id(at.member("runId"), builder)

    def parent_run(parent: _At) -> str:
        return _run_id(parent.member("run").obj().member("runId"), builder)

    job_id = _read_facet(builder, at, "parent", parent_run, None)
    if state is None or state is RunState.OTHER:
        # no lifecycle news: a Run without times would overwrite the end the store has for it
        return run_id, None
    if state is RunState.START:
        running = RunState.RUNNING.value
        return run_id, Run(run_id, process_urn, started_at=moment, status=running, job_id=job_id)
    if state is RunState.RUNNING:
        return run_id, Run(run_id, process_urn, status=state.value, job_id=job_id)
    return run_id, Run(run_id, process_urn, ended_at=moment, status=state.value, job_id=job_id)


def _process(job: _At, urn: str, name: str, builder: _Builder) -> Process:
    def job_type(facet: _At) -> tuple[str | None, str | None]:
        return facet.member("jobType").optional_text(), facet.member("processingType").optional_text()

    kind, processing = _read_facet(builder, job, "jobType", job_type, (None, None))
    owner, owners, description = _about(job, builder)
    if processing and processing.strip():
        owners = {**owners, PROCESSING_TYPE: processing.strip().upper()}
    return Process(
        urn,
        name=name,
        kind=kind.strip().lower() if kind and kind.strip() else _DEFAULT_PROCESS_KIND,
        owner=owner,
        description=description,
        metadata=owners,
    )


def _about(holder: _At, builder: _Builder) -> tuple[str | None, dict[str, Any], str | None]:
    """(owner, {"owners": […]} when there are several, description) from ownership and documentation."""

    def owner_names(facet: _At) -> list[str]:
        names: list[str] = []
        for owner_at in facet.member("owners").array():
            try:
                names.append(owner_at.obj().member("name").text())
            except EventError as error:
                builder.warn(error.path, f"{error.reason}; this owner is left out")
        return names

    def description_of(facet: _At) -> str | None:
        return facet.member("description").text()

    names = _read_facet(builder, holder, "ownership", owner_names, [])
    description = _read_facet(builder, holder, "documentation", description_of, None)
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
        urn = asset_urn(namespace, name)
        self.urns.setdefault((namespace, name), urn)
        owner, owners, description = _about(at, self.builder)
        # how the files are kept is a property of the dataset: a reader without the facet names
        # the same node
        storage = _read_facet(self.builder, at, "storage", _storage, {})
        metadata = {**owners, **storage}
        self.builder.add_asset(Asset(urn, owner=owner, description=description, metadata=metadata))

        def schema_fields(facet: _At) -> list[tuple[str, str | None]]:
            return list(_schema_fields(facet.member("fields").array(), ""))

        for path, data_type in _read_facet(self.builder, at, "schema", schema_fields, []):
            self._field(urn, path, data_type)
        return urn

    def column_edges(self, asset: str, output: _At, process: str) -> list[FlowEdge]:
        """Field edges into the output `asset` from its `columnLineage` facet. The facet is read
        whole before anything of it is added, so one left out leaves no field behind either."""
        columns, dataset_wide = _read_facet(self.builder, output, "columnLineage", _column_lineage, ([], []))
        edges: list[FlowEdge] = []

        def add(source: str, target: str, kinds: _Kinds) -> None:
            high = Confidence.HIGH
            edges.extend(FlowEdge(source, target, process, Signal.OPENLINEAGE, high, k, d) for k, d in kinds)

        for out_name, inputs in columns:
            target = self._field(asset, out_name, None)
            for source_field, kinds in inputs:
                add(self._input_field(source_field), target, kinds)
        # the dataset-wide list (filters, joins, sorts…) influences every field of the output
        targets = list(self.fields.get(asset, ()))
        for source_field, kinds in dataset_wide:
            source = self._input_field(source_field)
            for target in targets:
                add(source, target, kinds)
        return edges

    def _input_field(self, source: tuple[str, str, str]) -> str:
        namespace, name, path = source
        asset = self.urns.get((namespace, name))
        if asset is None:
            # a dataset the event lists nowhere else
            asset = self.urns[(namespace, name)] = asset_urn(namespace, name)
            self.builder.add_asset(Asset(asset))
        return self._field(asset, path, None)

    def _field(self, asset: str, path: str, data_type: str | None) -> str:
        urn = field_urn(asset, path)
        self.fields.setdefault(asset, {})[urn] = None
        self.builder.add_field(Field(urn, data_type))
        return urn


# An input field (namespace, dataset name, field) and how it feeds its output field.
_InputField = tuple[tuple[str, str, str], _Kinds]


def _column_lineage(facet: _At) -> tuple[list[tuple[str, list[_InputField]]], list[_InputField]]:
    """A columnLineage facet read: each output field with its inputs, and the dataset-wide inputs."""
    columns: list[tuple[str, list[_InputField]]] = []
    for out_name, column_at in facet.member("fields").obj().members():
        column = column_at.obj()
        if not out_name.strip():
            raise column.fail("an output field needs a name")
        # the older form: one kind and description for all of an output field's inputs
        old_kind = column.member("transformationType").optional_text()
        old_description = column.member("transformationDescription").optional_text()
        inputs = [
            (_field_ref(input_at), _transformations(input_at, old_kind, old_description))
            for input_at in column.member("inputFields").array(required=True)
        ]
        columns.append((out_name, inputs))
    dataset_wide = [
        (_field_ref(input_at), _transformations(input_at, None, None))
        for input_at in facet.member("dataset").array()
    ]
    return columns, dataset_wide


def _field_ref(node: _At) -> tuple[str, str, str]:
    at = node.obj()
    return at.member("namespace").text(), at.member("name").text(), at.member("field").text()


def _storage(facet: _At) -> dict[str, str]:
    found = {"storage_layer": facet.member("storageLayer").text().strip().lower()}
    file_format = facet.member("fileFormat").optional_text()
    if file_format and file_format.strip():
        found["format"] = file_format.strip().lower()
    return found


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


# -- one batch out of many records ----------------------------------------------------------------


@dataclass
class _Builder:
    """A batch with one record per URN (and per edge key): what several events say, merged."""

    assets: dict[str, Asset] = field(default_factory=dict)
    fields: dict[str, Field] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    observed: set[str] = field(default_factory=set)  # processes whose edges the batch observes
    job_datasets: dict[str, tuple[dict[str, None], dict[str, None]]] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    edges: dict[tuple[str, str, str, str, str], FlowEdge] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    changes: list[AssetChange] = field(default_factory=list)
    # per run id: (its process, the inputs its COMPLETE events named and when, whether any of its
    # events named outputs)
    run_reads: dict[str, tuple[str, dict[str, None], datetime | None, bool]] = field(default_factory=dict)
    observed_at: datetime | None = None

    def observe(self, moment: datetime) -> None:
        # the union of the events' edges is known true only once the latest of them happened
        if self.observed_at is None or moment > self.observed_at:
            self.observed_at = moment

    def warn(self, path: str, reason: str) -> None:
        """A part of an event left out: recorded (where and why, never its values), the rest kept."""
        self.problems.append(Problem("openlineage", reason, path))

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

    def add_process(self, process: Process, *, observed: bool) -> None:
        self.processes.setdefault(process.urn, process)
        if observed:
            self.observed.add(process.urn)

    def add_job_datasets(self, process: str, inputs: list[str], outputs: list[str]) -> None:
        if not inputs and not outputs:
            return  # a heartbeat, or a START that does not know its datasets yet: nothing new
        reads, writes = self.job_datasets.setdefault(process, ({}, {}))
        reads.update(dict.fromkeys(inputs))
        writes.update(dict.fromkeys(outputs))

    def add_run_datasets(
        self, run_id: str, process: str, completed_inputs: list[str], writes: bool, moment: datetime
    ) -> None:
        """Remember, for `reads`, the inputs a COMPLETE event of the run named and whether any
        of its events named outputs."""
        known_process, read, at, wrote = self.run_reads.get(run_id, (process, {}, None, False))
        if completed_inputs:
            read.update(dict.fromkeys(completed_inputs))
            at = moment if at is None else min(at, moment)
        self.run_reads[run_id] = (known_process, read, at, wrote or writes)

    def reads(self) -> list[AssetRead]:
        """The inputs of runs that completed without writing anything (in the events at hand)."""
        return [
            AssetRead(urn, run_id, process, at, None, Signal.OPENLINEAGE)
            for run_id, (process, read, at, wrote) in self.run_reads.items()
            if not wrote and at is not None
            for urn in read
        ]

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
        processes = []
        for urn, process in self.processes.items():
            datasets = self.job_datasets.get(urn)
            if datasets is not None:
                inputs, outputs = (sorted(d) for d in datasets)
                metadata = {**process.metadata, JOB_DATASETS: {"inputs": inputs, "outputs": outputs}}
                process = dataclasses.replace(process, metadata=metadata)
            processes.append(process)
        return LineageBatch(
            assets=list(self.assets.values()),
            fields=list(self.fields.values()),
            processes=[p for p in processes if p.urn in self.observed],
            described=[p for p in processes if p.urn not in self.observed],
            runs=list(self.runs.values()),
            edges=list(self.edges.values()),
            problems=self.problems,
            events=self.events,
            changes=self.changes,
            reads=self.reads(),
            observed_at=self.observed_at,
        )
