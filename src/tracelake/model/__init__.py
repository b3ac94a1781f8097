"""The lineage graph model: the typed records every collector produces and the store keeps.

A collector turns a signal (a SQL log, a Spark plan, an OpenLineage event…) into a
`LineageBatch` of assets, fields, processes, runs and flow edges; `store.ingest` writes it.
Nodes are named by URNs: an asset is `<system>.<kind>/<name>` (`hive.table/dating.users`),
a field is `<asset urn>#<path>` (`hive.table/dating.users#address.city`). `tracelake.model.names` makes
them, so that one dataset written many ways is one node.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

VERSION: str  # Tracelake's, as producers and the API report it; read when first used


def __getattr__(name: str) -> Any:
    """`VERSION` from the installed distribution's metadata, read once, when first asked for
    (importlib.metadata costs a tenth of a second: more than the rest of `tracelake --help`); a
    source tree on PYTHONPATH (as Airflow's workers import Tracelake) has none, and says so."""
    if name != "VERSION":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("tracelake")
    except metadata.PackageNotFoundError:
        version = "0+source"
    globals()["VERSION"] = version
    return version


class Signal(StrEnum):
    """Where an edge was learnt; edges from different signals are kept apart."""

    SQL_STATIC = "sql_static"
    SPARK_RUNTIME = "spark_runtime"
    OPENLINEAGE = "openlineage"
    CONFIG = "config"
    PROBE = "probe"
    MANUAL = "manual"
    # Python data and model code as it ran (`tracelake.python`). Last: stored codes are positions.
    AI_RUNTIME = "ai_runtime"


class Confidence(StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"

    @property
    def rank(self) -> int:
        """Higher is surer: LOW=1, MEDIUM=2, HIGH=3, so filters can compare."""
        return _CONFIDENCE_RANK[self]


_CONFIDENCE_RANK = {Confidence.LOW: 1, Confidence.MEDIUM: 2, Confidence.HIGH: 3}


class Transformation(StrEnum):
    """The OpenLineage column-lineage vocabulary (DIRECT and INDIRECT subtypes)."""

    IDENTITY = "IDENTITY"
    TRANSFORMATION = "TRANSFORMATION"
    AGGREGATION = "AGGREGATION"
    FILTER = "FILTER"
    JOIN = "JOIN"
    GROUP_BY = "GROUP_BY"
    SORT = "SORT"
    WINDOW = "WINDOW"
    CONDITIONAL = "CONDITIONAL"

    @property
    def is_direct(self) -> bool:
        """Direct edges copy or compute the value; indirect ones only influence which rows."""
        return self in _DIRECT

    @property
    def openlineage_type(self) -> str:
        return "DIRECT" if self.is_direct else "INDIRECT"


_DIRECT = frozenset({Transformation.IDENTITY, Transformation.TRANSFORMATION, Transformation.AGGREGATION})


class InputError(ValueError):
    """A mistake in what a user gave Tracelake (a file, a name, an option, a request): the
    interfaces say it in one line (the CLI exits 2, the API answers 4xx), never as a traceback."""


class UrnError(InputError):
    """A string that is not a node URN nor a table name we can resolve."""


class UnknownNodeError(InputError, KeyError):
    """A start or end node that the graph does not hold; `suggestions` are near matches."""

    def __init__(self, urn: str, suggestions: tuple[str, ...] = ()) -> None:
        super().__init__(urn)
        self.urn = urn
        self.suggestions = suggestions

    def __str__(self) -> str:
        # KeyError's own __str__ repr()s its argument; a CLI wants a sentence.
        text = f"unknown node {self.urn!r}"
        if self.suggestions:
            text += "; did you mean: " + ", ".join(self.suggestions)
        return text


@dataclass(frozen=True, slots=True)
class Urn:
    """A parsed node URN. `path` is set for fields and empty for assets."""

    system: str
    kind: str
    name: str
    path: str = ""

    @property
    def asset(self) -> str:
        return f"{self.system}.{self.kind}/{self.name}"

    @property
    def asset_kind(self) -> str:
        return f"{self.system}.{self.kind}"

    @property
    def is_field(self) -> bool:
        return bool(self.path)

    def __str__(self) -> str:
        return f"{self.asset}#{self.path}" if self.path else self.asset


# The store keys nodes by URN in a VARCHAR(2000) with a unique index; PostgreSQL's index entries
# must stay under ~2,700 bytes. A longer name is refused where it is made, with its reason.
MAX_URN_BYTES = 2000
MAX_KIND_CHARS = 200  # `system.kind`, kept as the node's kind (VARCHAR(200))


def bounded_urn(urn: str) -> str:
    """`urn` itself, or a UrnError when it is longer than the store can key a node by."""
    size = len(urn.encode("utf-8", "surrogatepass"))
    if size > MAX_URN_BYTES:
        raise UrnError(f"a name of {size:,} bytes is over the {MAX_URN_BYTES:,}-byte limit ({urn[:60]}…)")
    kind = urn.partition("/")[0]
    if len(kind) > MAX_KIND_CHARS:
        raise UrnError(
            f"a kind of {len(kind):,} characters is over the {MAX_KIND_CHARS}-character limit ({kind[:60]}…)"
        )
    return urn


def parse_urn(text: str) -> Urn:
    """Parse `system.kind/name[#path]`; raises UrnError with the reason."""
    bounded_urn(text)
    asset_part, _, path = text.strip().partition("#")
    head, slash, name = asset_part.partition("/")
    system, dot, kind = head.partition(".")
    if not slash or not name or not dot or not system or not kind:
        raise UrnError(f"{text!r} is not a URN of the form <system>.<kind>/<name>[#<field path>]")
    return Urn(system, kind, name, path)


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC, so times from logs and users compare."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def shifted(moment: datetime, delta: timedelta) -> datetime:
    """`moment + delta`, or an `InputError` when that falls outside the years 1 to 9999 (a
    window or a history asked about reaching past what a date can hold)."""
    try:
        return moment + delta
    except OverflowError:
        sign = "+" if delta >= timedelta(0) else "-"
        raise InputError(
            f"{moment.isoformat()} {sign} {abs(delta)} is not a date (years 1 to 9999)"
        ) from None


def fingerprint(*parts: str) -> str:
    """A short stable hash; used to name processes and record payloads without their values."""
    digest = hashlib.sha256("\x1f".join(parts).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Asset:
    urn: str
    owner: str | None = None
    layer: str | None = None
    security_level: int | None = None
    labels: frozenset[str] = frozenset()
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def kind(self) -> str:
        return parse_urn(self.urn).asset_kind


@dataclass(frozen=True, slots=True)
class Field:
    urn: str
    data_type: str | None = None
    labels: frozenset[str] = frozenset()

    @property
    def asset(self) -> str:
        return parse_urn(self.urn).asset

    @property
    def path(self) -> str:
        return parse_urn(self.urn).path


@dataclass(frozen=True, slots=True)
class Process:
    """What moves data. Its edges form one version: registering new content replaces them."""

    urn: str
    name: str
    kind: str = "sql"
    owner: str | None = None
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    process: str
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: str | None = None
    job_id: str | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class FlowEdge:
    """source → target through a process; asset→asset or field→field."""

    source: str
    target: str
    process: str
    signal: Signal
    confidence: Confidence = Confidence.HIGH
    transformation: Transformation | None = None
    description: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.source, self.target, self.process, self.signal, self.transformation or "")


@dataclass(frozen=True, slots=True)
class EdgeVersion:
    """A `FlowEdge` as the graph holds it: in force from `valid_from` until `valid_to` (None: in
    force now). The graph's index returns it, the store's edge rows wrap it (`EdgeRecord`), and
    every interface renders it."""

    source: str
    target: str
    process: str
    signal: Signal
    confidence: Confidence
    transformation: Transformation | None
    valid_from: datetime
    valid_to: datetime | None

    @property
    def direct(self) -> bool | None:
        """None for an asset edge; True when the value flows, False when it only influences."""
        return None if self.transformation is None else self.transformation.is_direct

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "process": self.process,
            "signal": str(self.signal),
            "confidence": str(self.confidence),
            "transformation": str(self.transformation) if self.transformation else None,
            "direct": self.direct,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
        }


# The asset metadata key under which a collector declares a table's column order (DDL, a
# CREATE … AS SELECT, a table write); the store keeps each declaration with its time.
DECLARED_COLUMNS = "columns"


@dataclass(frozen=True, slots=True)
class Problem:
    """Bad input found while collecting: what, where, and why, recorded rather than raised."""

    source: str
    reason: str
    location: str = ""
    excerpt: str = ""

    def __str__(self) -> str:
        where = f"{self.source}:{self.location}" if self.location else self.source
        return f"{where}: {self.reason}"


class Lifecycle(StrEnum):
    """What happened to a dataset itself, as OpenLineage's `lifecycleStateChange` facet names it."""

    CREATE = "CREATE"
    ALTER = "ALTER"
    DROP = "DROP"
    TRUNCATE = "TRUNCATE"
    RENAME = "RENAME"
    OVERWRITE = "OVERWRITE"


@dataclass(frozen=True, slots=True)
class AssetChange:
    """A dataset created, altered, dropped, truncated, renamed or overwritten: no flow of data,
    a change in the dataset's own life. A RENAME is recorded on the new name, `previous` the old.

    `columns`: the schema after a CREATE or ALTER, as (name, type) in declared order.
    """

    asset: str
    change: Lifecycle
    at: datetime
    signal: Signal
    process: str | None = None
    run_id: str | None = None
    columns: tuple[tuple[str, str | None], ...] | None = None
    previous: str | None = None


@dataclass(frozen=True, slots=True)
class AssetRead:
    """A run that read an asset and wrote nothing from it: a query that only selects, a Spark
    `count()` or `collect()`. No flow of data into the graph, but who reads a table (for privacy
    review) and how much (for hotness). One per asset and run.

    `user`: who ran it, when the signal says; the process is the job. `at`: when the run read it,
    as the signal tells (a SQL or Spark run's start, an OpenLineage run's completion). `columns`:
    the paths read from the asset, sorted; empty when not known.
    """

    asset: str
    run_id: str
    process: str
    at: datetime
    user: str | None
    signal: Signal
    columns: tuple[str, ...] = ()


@dataclass(slots=True)
class LineageBatch:
    """Everything one collection produced; `store.ingest` writes it in one transaction.

    `observed_at` says when the signal was true (a log line's timestamp), which is when
    the edges' versions start; None means "now" at ingest.
    """

    assets: list[Asset] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    edges: list[FlowEdge] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # Processes the batch says something about without observing what they do (an OpenLineage
    # event that names no flow): their node and properties are written, their edges left alone.
    described: list[Process] = field(default_factory=list)
    # OpenLineage events as received (already checked), kept for Marquez's read API: run and job
    # facets, the lineage events listing. Other collectors leave it empty.
    events: list[dict[str, Any]] = field(default_factory=list)
    changes: list[AssetChange] = field(default_factory=list)
    reads: list[AssetRead] = field(default_factory=list)  # runs that read assets and wrote nothing
    observed_at: datetime | None = None

    def extend(self, other: LineageBatch) -> None:
        self.assets.extend(other.assets)
        self.fields.extend(other.fields)
        self.processes.extend(other.processes)
        self.runs.extend(other.runs)
        self.edges.extend(other.edges)
        self.problems.extend(other.problems)
        self.described.extend(other.described)
        self.events.extend(other.events)
        self.changes.extend(other.changes)
        self.reads.extend(other.reads)


def _pickled_by_listed_fields(cls: type) -> None:
    """Pickle `cls` (a slotted dataclass) by its fields' names listed once. Python 3.11 makes a
    slotted dataclass's `__getstate__` and `__setstate__` list its fields again for every object:
    a batch travels pickled to the server's writer process (`store.writer_process`), and an
    OpenLineage event's (~18 records) took ~100 µs to pickle and ~200 µs to read back, more than
    the writer's share of its transaction."""
    names = tuple(f.name for f in dataclasses.fields(cls))

    def getstate(self: Any) -> tuple[Any, ...]:
        return tuple(map(self.__getattribute__, names))

    def setstate(self: Any, state: tuple[Any, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    setattr(cls, "__getstate__", getstate)  # noqa: B010 - mypy allows no method assignment
    setattr(cls, "__setstate__", setstate)  # noqa: B010


# every record of this module: one added later pickles fast without being listed
for _record in [
    value
    for value in list(globals().values())
    if isinstance(value, type) and value.__module__ == __name__ and dataclasses.is_dataclass(value)
]:
    _pickled_by_listed_fields(_record)
