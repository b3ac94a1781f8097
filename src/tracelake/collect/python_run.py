"""Lineage of one run of Python data or model code (signal `ai_runtime`): datasets to models.

The tracker (`tracelake.python`) tells a `PythonRunRecord` what each I/O call did, in the order
the calls returned: a `DataRead` (what was read, and each column of the result by name with the
source columns it holds) or a `DataWrite` (the asset written, with the frame's column names or
the model's feature names). Between those calls Python code moves values in ways no hook sees,
so a run's reads and writes are joined by the run itself, as Meta's lineage joins the reads and
writes of one job or trace:

- **Into every write, from every asset read before it** in the run, an asset edge. It is HIGH
  when a column of the write is found by name among the columns read from that asset alone (the
  data itself says where it came from), else MEDIUM (the run read it first: nothing more is
  known).
- **A written column** (a frame's column, a model's feature) **named as a column read before**
  gets field edges from the source columns that name held, TRANSFORMATION (the code may have
  changed the values under the name): HIGH when one read alone offered the name, MEDIUM for each
  when several did. Names compare case-insensitively, as Spark's do.
- **A run serving a web request** (`RunContext.endpoint`): each model it loaded flows into the
  request's endpoint, MEDIUM (the model answers the endpoint's requests).
- An asset read that flows into nothing the run wrote is an `AssetRead`.

An asset read and then written by the same run (a file updated in place) gets no edge into
itself. The record is plain data and pure: the tracker owns hooks, threads and the store.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracelake.collect.sql_relation import column_urn
from tracelake.collect.tracked_runs import COMPLETE, FAIL, RUNNING
from tracelake.model import (
    Asset,
    AssetRead,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    Transformation,
    utcnow,
)

PROCESS_PREFIX = "python.job/"
SIGNAL = Signal.AI_RUNTIME


class NotDescribed(Exception):
    """A call that moved data whose lineage cannot be told (the tracker records it as a problem)."""


@dataclass(frozen=True, slots=True)
class DataRead:
    """One call that read data: `assets` (a Spark hand-off reads several), and each column of
    what it returned by name → the source columns (field URNs) it holds."""

    call: str  # the function called, e.g. `pandas.read_parquet`
    assets: tuple[str, ...]
    columns: Mapping[str, frozenset[str]] = field(default_factory=dict)
    model: bool = False  # the assets are models (a load), not datasets
    facts: Mapping[str, Any] = field(default_factory=dict)  # of the assets: format, location…


@dataclass(frozen=True, slots=True)
class DataWrite:
    """One call that wrote `asset`: a frame's columns, or a model's features, by name."""

    call: str
    asset: str
    columns: tuple[str, ...] = ()
    model: bool = False
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the run was started inside: a tracked Spark job's run, an Airflow task, a web
    request. `process` and `run_id` name it; `endpoint` is a web request's endpoint asset."""

    kind: str  # spark | airflow | web
    process: str
    run_id: str | None = None
    endpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        found = {"kind": self.kind, "process": self.process, "run_id": self.run_id}
        return found | ({"endpoint": self.endpoint} if self.endpoint else {})


@dataclass
class RunHeader:
    run_id: str
    job: str
    started_at: datetime
    user: str | None = None
    host: str | None = None
    pid: int | None = None
    contexts: tuple[RunContext, ...] = ()  # innermost first

    @property
    def process_urn(self) -> str:
        return PROCESS_PREFIX + self.job

    @property
    def parent(self) -> RunContext | None:
        return self.contexts[0] if self.contexts else None


Edges = dict[tuple[str, str, Transformation | None], tuple[Confidence, str]]


class PythonRunRecord:
    """The observations of one run and the batch they make (see the module docstring).

    Each call is folded in as it comes, so the batch costs what the run's distinct calls do, not
    its length: a read seen before adds nothing (it was read before every later write already),
    and a write is joined again only when something new was read since its last join. A training
    loop that reads the same shards and writes the same checkpoint a thousand times is a few
    observations and their counts. Calls may come from any thread of the process."""

    def __init__(self, header: RunHeader) -> None:
        self.header = header
        self.status = RUNNING
        self.ended_at: datetime | None = None
        self.error_class: str | None = None
        self.calls: dict[str, int] = {}
        self.unrecorded: dict[tuple[str, str], int] = {}  # (call, why its lineage is not told) → times
        self._lock = threading.Lock()
        self._observed: dict[tuple[Any, ...], DataRead | DataWrite] = {}  # distinct, first seen first
        self._joined: dict[tuple[Any, ...], int] = {}  # a write → how many reads it was last joined with
        self._reads_folded = 0  # distinct reads folded in so far
        self._folded: set[int] = set()  # ids of the reads folded in (held in _observed)
        self._offered: dict[str, set[frozenset[str]]] = {}  # a column name → the source sets read
        self._read: dict[str, set[str]] = {}  # an asset read → the paths read from it
        self._models_read: dict[str, None] = {}
        self._facts: dict[str, dict[str, Any]] = {}  # every asset touched → what calls said of it
        self._edges: Edges = {}

    @property
    def process_urn(self) -> str:
        return self.header.process_urn

    def observe(self, item: DataRead | DataWrite) -> None:
        with self._lock:
            self.calls[item.call] = self.calls.get(item.call, 0) + 1
            if isinstance(item, DataRead) and id(item) in self._folded:
                return  # this very read (a description remembered) is folded in already
            if isinstance(item, DataRead):
                key: tuple[Any, ...] = (item.call, item.assets, item.model, tuple(item.columns.items()))
                if key in self._observed:
                    return
                self._observed[key] = item  # kept: the id in _folded stays its own
                self._folded.add(id(item))
                self._fold_read(item)
            else:
                key = (item.call, item.asset, item.model, item.columns)
                self._observed.setdefault(key, item)
                self._facts.setdefault(item.asset, {}).update(item.facts)
                if self._joined.get(key) != self._reads_folded:
                    self._joined[key] = self._reads_folded
                    _join(self._offered, self._read, item, self._edges)

    def _fold_read(self, read: DataRead) -> None:
        self._reads_folded += 1
        for name, sources in read.columns.items():
            if sources:
                self._offered.setdefault(name.lower(), set()).add(sources)
        for asset in read.assets:
            self._read.setdefault(asset, set()).update(_paths(read, asset))
            self._facts.setdefault(asset, {}).update(read.facts)
            if read.model:
                self._models_read[asset] = None

    def not_recorded(self, call: str, reason: str) -> bool:
        """A call whose lineage cannot be told, and why; True the first time for that call and reason."""
        with self._lock:
            seen = self.unrecorded.get((call, reason), 0)
            self.unrecorded[call, reason] = seen + 1
            return seen == 0

    @property
    def problems(self) -> list[Problem]:
        """One for each call and reason whose lineage was not told, with how many times."""
        with self._lock:
            unrecorded = dict(self.unrecorded)
        return [
            Problem(
                self.process_urn,
                f"{call}: lineage not recorded: {reason}" + (f" ({times} calls)" if times > 1 else ""),
            )
            for (call, reason), times in unrecorded.items()
        ]

    def end(self, error: BaseException | None = None, at: datetime | None = None) -> None:
        with self._lock:
            self.ended_at = at or utcnow()
            self.status = COMPLETE if error is None else FAIL
            self.error_class = None if error is None else type(error).__name__

    @property
    def observed(self) -> list[DataRead | DataWrite]:
        """The distinct calls seen, in the order first seen (repeats are counted in `calls`)."""
        with self._lock:
            return list(self._observed.values())

    @property
    def run(self) -> Run:
        header = self.header
        parent = header.parent
        return Run(
            header.run_id,
            self.process_urn,
            started_at=header.started_at,
            ended_at=self.ended_at,
            status=self.status,
            job_id=parent.run_id if parent else None,
            user=header.user,
        )

    # -- the batch ------------------------------------------------------------------------

    def batch(self) -> LineageBatch:
        """The run's lineage so far, observed at the run's start."""
        header = self.header
        endpoint = header.parent.endpoint if header.parent else None
        with self._lock:
            edges = dict(self._edges)
            read = {asset: set(paths) for asset, paths in self._read.items()}
            facts = {asset: dict(found) for asset, found in self._facts.items()}
            offered = [source for sets in self._offered.values() for sources in sets for source in sources]
            models_read = list(self._models_read)
            metadata = self._metadata()  # its counts move while other threads' calls come in
        if endpoint:
            facts.setdefault(endpoint, {})
            for model in models_read:
                _add(
                    edges,
                    (model, endpoint, None),
                    Confidence.MEDIUM,
                    f"loaded by a run serving requests to {endpoint}",
                )
        flow_edges = [
            FlowEdge(source, target, self.process_urn, SIGNAL, confidence, kind, why)
            for (source, target, kind), (confidence, why) in edges.items()
        ]
        fields = dict.fromkeys(
            [*offered, *(node for edge in flow_edges for node in (edge.source, edge.target) if "#" in node)]
        )
        feeding = {edge.source for edge in flow_edges if edge.transformation is None}
        return LineageBatch(
            assets=[Asset(urn, metadata=found) for urn, found in facts.items()],
            fields=[Field(urn) for urn in fields],
            processes=[Process(self.process_urn, name=header.job, kind="python", metadata=metadata)],
            runs=[self.run],
            edges=flow_edges,
            problems=self.problems,
            reads=[
                AssetRead(
                    asset,
                    header.run_id,
                    self.process_urn,
                    header.started_at,
                    header.user,
                    SIGNAL,
                    tuple(sorted(paths)),
                )
                for asset, paths in read.items()
                if asset not in feeding
            ],
            observed_at=header.started_at,
        )

    def _metadata(self) -> dict[str, Any]:
        """The process's properties; called holding the lock."""
        header = self.header
        metadata: dict[str, Any] = {
            "run_id": header.run_id,
            "status": self.status,
            "started_at": header.started_at.isoformat(),
            "host": header.host,
            "pid": header.pid,
            "calls": dict(self.calls),
            "contexts": [context.to_json() for context in header.contexts],
            "reads": sorted(self._read),
        }
        parent = header.parent
        if parent is not None and parent.run_id:
            metadata["parent"] = {"process": parent.process, "run_id": parent.run_id}
        if self.ended_at is not None:
            metadata["ended_at"] = self.ended_at.isoformat()
            metadata["duration_ms"] = round((self.ended_at - header.started_at).total_seconds() * 1000, 3)
        if self.error_class is not None:
            metadata["error_class"] = self.error_class
        if self.unrecorded:
            metadata["not_recorded"] = sum(self.unrecorded.values())
        return metadata


def _join(
    offered: dict[str, set[frozenset[str]]], read: Mapping[str, object], write: DataWrite, edges: Edges
) -> None:
    """The edges into `write` from what was read before it: `offered`, each column name read
    with the source sets read under it; `read`, the assets read."""
    evidence: set[str] = set()  # assets whose columns the write holds by a name they alone offered
    for name in dict.fromkeys(column.lower() for column in write.columns):
        holders = offered.get(name)
        if not holders:
            continue
        target = column_urn(write.asset, name)
        sure = len(holders) == 1
        confidence = Confidence.HIGH if sure else Confidence.MEDIUM
        why = "" if sure else f"{len(holders)} reads of the run offered a column named {name!r}"
        for sources in holders:
            for source in sources:
                asset = source.partition("#")[0]
                if asset != write.asset:
                    _add(edges, (source, target, Transformation.TRANSFORMATION), confidence, why)
                    if sure:
                        evidence.add(asset)
    for asset in read:
        if asset == write.asset:
            continue
        if asset in evidence:
            _add(edges, (asset, write.asset, None), Confidence.HIGH, "")
        else:
            why = "read earlier in the same run; no column written is named as one read from it alone"
            _add(edges, (asset, write.asset, None), Confidence.MEDIUM, why)


def _add(
    edges: Edges,
    key: tuple[str, str, Transformation | None],
    confidence: Confidence,
    why: str,
) -> None:
    """Keep the surest confidence said of an edge (a sure edge needs no description)."""
    known = edges.get(key)
    if known is None or confidence.rank > known[0].rank:
        edges[key] = (confidence, why)


def _paths(read: DataRead, asset: str) -> set[str]:
    """The paths of `asset`'s columns that `read` returned."""
    prefix = asset + "#"
    return {
        source.removeprefix(prefix)
        for sources in read.columns.values()
        for source in sources
        if source.startswith(prefix)
    }
