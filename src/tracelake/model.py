"""The lineage graph model: the typed records every collector produces and the store keeps.

A collector turns a signal (a SQL log, a Spark plan, an OpenLineage event…) into a
`LineageBatch` of assets, fields, processes, runs and flow edges; `store.ingest` writes it.
Nodes are named by URNs: an asset is `<system>.<kind>/<name>` (`hive.table/dating.users`),
a field is `<asset urn>#<path>` (`hive.table/dating.users#address.city`). The helpers here
normalise names the way SQL engines compare them, so that one table written two ways
(`Dating.Users`, `` `dating`.`users` ``, `spark_catalog.dating.users`) is one node.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

DEFAULT_SYSTEM = "hive"
DEFAULT_DATABASE = "default"
# Catalog names that mean "the session's default catalog" in Spark and Hive.
DEFAULT_CATALOGS = frozenset({"spark_catalog", "hive", "hive_metastore"})


class Signal(StrEnum):
    """Where an edge was learnt; edges from different signals are kept apart."""

    SQL_STATIC = "sql_static"
    SPARK_RUNTIME = "spark_runtime"
    OPENLINEAGE = "openlineage"
    CONFIG = "config"
    PROBE = "probe"
    MANUAL = "manual"


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


class UrnError(ValueError):
    """A string that is not a node URN nor a table name we can resolve."""


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


def parse_urn(text: str) -> Urn:
    """Parse `system.kind/name[#path]`; raises UrnError with the reason."""
    asset_part, _, path = text.strip().partition("#")
    head, slash, name = asset_part.partition("/")
    system, dot, kind = head.partition(".")
    if not slash or not name or not dot or not system or not kind:
        raise UrnError(f"{text!r} is not a URN of the form <system>.<kind>/<name>[#<field path>]")
    return Urn(system, kind, name, path)


def _clean_identifier(part: str) -> str:
    """SQL identifier rules for Spark/Hive: unquote, and compare case-insensitively."""
    part = part.strip()
    if len(part) >= 2 and part[0] == part[-1] and part[0] in '`"':
        part = part[1:-1]
    return part.lower()


def split_qualified_name(name: str) -> list[str]:
    """Split `a.b.c` on dots outside quotes, unquoting each part."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for char in name:
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in '`"':
            quote = char
            current.append(char)
        elif char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [_clean_identifier(p) for p in parts]


def table_name(
    table: str, db: str | None = None, catalog: str | None = None, *, default_db: str = DEFAULT_DATABASE
) -> str:
    """The canonical `db.table` (or `catalog.db.table` for a non-default catalog)."""
    catalog_name = _clean_identifier(catalog) if catalog else ""
    db_name = _clean_identifier(db) if db else _clean_identifier(default_db)
    name = f"{db_name}.{_clean_identifier(table)}"
    if catalog_name and catalog_name not in DEFAULT_CATALOGS:
        name = f"{catalog_name}.{name}"
    return name


def table_urn(
    table: str,
    db: str | None = None,
    catalog: str | None = None,
    *,
    default_db: str = DEFAULT_DATABASE,
    system: str = DEFAULT_SYSTEM,
) -> str:
    return f"{system}.table/{table_name(table, db, catalog, default_db=default_db)}"


def escape_hash(name: str) -> str:
    """A name (of a dataset or a job named elsewhere) made safe inside a URN, where `#` starts
    a field path: `#` becomes `%23`. `unescape_hash` gives the name back."""
    return name.replace("#", "%23")


def unescape_hash(text: str) -> str:
    return text.replace("%23", "#")


def field_urn(asset_urn: str, path: str) -> str:
    """A field URN; the path is lower-cased since Spark resolves columns case-insensitively."""
    return f"{asset_urn}#{'.'.join(_clean_identifier(p) for p in split_qualified_name(path))}"


def resolve_node(text: str, *, default_db: str = DEFAULT_DATABASE, system: str = DEFAULT_SYSTEM) -> str:
    """Turn what a user typed into a canonical node URN.

    Accepts a URN (`hive.table/db.tbl#col`) or a plain table name (`tbl`, `db.tbl`,
    `catalog.db.tbl`, optionally followed by `#col`), normalised with SQL identifier rules.
    """
    text = text.strip()
    if not text:
        raise UrnError("an empty name is not a node")
    head = text.partition("#")[0]
    if "/" in head:
        urn = parse_urn(text)
        if urn.kind == "table":
            parts = split_qualified_name(urn.name)
            asset = _table_urn_from_parts(parts, default_db, urn.system)
            return field_urn(asset, urn.path) if urn.path else asset
        return str(urn)
    name, _, path = text.partition("#")
    asset = _table_urn_from_parts(split_qualified_name(name), default_db, system)
    return field_urn(asset, path) if path else asset


def _table_urn_from_parts(parts: list[str], default_db: str, system: str) -> str:
    if len(parts) == 1:
        return table_urn(parts[0], default_db=default_db, system=system)
    if len(parts) == 2:
        return table_urn(parts[1], parts[0], system=system)
    if len(parts) == 3:
        return table_urn(parts[2], parts[1], parts[0], system=system)
    raise UrnError(f"{'.'.join(parts)!r} has more parts than catalog.database.table")


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC, so times from logs and users compare."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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
    # OpenLineage events as received (already checked), kept for Marquez's read API: run and job
    # facets, the lineage events listing. Other collectors leave it empty.
    events: list[dict[str, Any]] = field(default_factory=list)
    observed_at: datetime | None = None

    def extend(self, other: LineageBatch) -> None:
        self.assets.extend(other.assets)
        self.fields.extend(other.fields)
        self.processes.extend(other.processes)
        self.runs.extend(other.runs)
        self.edges.extend(other.edges)
        self.problems.extend(other.problems)
        self.events.extend(other.events)
