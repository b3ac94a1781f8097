"""One run of a tracked Spark job as a record: its captured actions folded into lineage, its
outcome, and the `LineageBatch` that stores it.

A live tracker (`tracelake.spark.SparkTracker`) feeds it actions as the journal yields them; a
dead driver's journal is replayed into one the same way (`tracelake.spark.recover`), so a run
is recorded alike whether its driver ended it or the next command found it dead.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracelake.collect.spark_datasets import Dataset, TableChange
from tracelake.collect.spark_journal import RunHeader
from tracelake.collect.spark_lineage import (
    ActionLineage,
    EdgeKey,
    RddOrigins,
    analyze_action,
    analyze_rdd_action,
)
from tracelake.collect.spark_listener import ActionFailure, Captured, RddAction, RddOrigin
from tracelake.collect.sql_relation import Deps, add_dep, column_urn
from tracelake.collect.tracked_runs import ABORT, COMPLETE, FAIL, RUNNING, EdgeSource, keeping, stored_edges
from tracelake.model import (
    DECLARED_COLUMNS,
    Asset,
    AssetChange,
    AssetRead,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Process,
    Run,
    Signal,
    utcnow,
)

logger = logging.getLogger("tracelake.spark")

PROCESS_PREFIX = "spark.job/"
# Failures of analysis (reading a path that does not exist, as existence checks do) are no action
# that ran: caught by the job, they do not fail its run.
_NOT_ACTIONS = frozenset({"analyze"})


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action of the run as the tracker saw it."""

    func_name: str
    at: datetime
    duration_ms: float  # the action itself, as Spark timed it
    listener_ms: float  # capturing its plan, on the listener bus thread
    analysis_ms: float  # turning the plan into lineage, on the worker thread
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass
class _RunLineage:
    """Everything the run's actions have shown so far, merged."""

    datasets: dict[str, Dataset] = field(default_factory=dict)
    reads: dict[str, None] = field(default_factory=dict)
    # datasets read by actions that wrote nothing (count, collect), with the columns they read
    read_only: dict[str, set[str]] = field(default_factory=dict)
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[EdgeKey, Confidence] = field(default_factory=dict)
    in_memory: set[tuple[int, ...]] = field(default_factory=set)
    notes: dict[str, None] = field(default_factory=dict)
    memory: dict[int, Deps] = field(default_factory=dict)  # exprId → Deps, across actions
    origins: RddOrigins = field(default_factory=dict)  # what `df.rdd` RDDs hold, by RDD id
    descriptions: dict[EdgeKey, str] = field(default_factory=dict)
    changes: list[tuple[TableChange, datetime]] = field(default_factory=list)  # DDL, in order

    def absorb(self, lineage: ActionLineage, at: datetime) -> bool:
        """Merge one action's lineage (the action ended `at`); True when the run's lineage changed."""
        before = self._size()
        for urn, dataset in (*lineage.reads.items(), *lineage.writes.items()):
            known = self.datasets.get(urn)
            if known is None:
                self.datasets[urn] = Dataset(urn, dataset.kind, dict(dataset.metadata), list(dataset.columns))
                continue
            known.metadata.update(dataset.metadata)
            names = {name for name, _ in known.columns}
            known.columns.extend(c for c in dataset.columns if c[0] not in names)
        for urn in lineage.reads:
            self.reads.setdefault(urn)
        for urn, dataset in lineage.writes.items():
            self.writes[urn] = {"dataset": urn, **dataset.metadata}
        for key, confidence in lineage.edges.items():
            add_dep(self.edges, key, confidence)
            if self.edges[key] == confidence:  # this action's view of the edge is the surest
                described = lineage.descriptions.get(key)
                if described:
                    self.descriptions[key] = described
                else:
                    self.descriptions.pop(key, None)
        self.in_memory |= lineage.in_memory
        for note in lineage.notes:
            self.notes.setdefault(note)
        self.changes.extend((change, at) for change in lineage.changes)
        if not lineage.writes:
            self._absorb_reads(lineage)
        return self._size() != before or bool(lineage.changes)

    def _absorb_reads(self, lineage: ActionLineage) -> None:
        """An action that wrote nothing: what it read is a read of the run, with its columns."""
        for urn in lineage.reads:
            self.read_only.setdefault(urn, set())
        for column in lineage.read_columns:
            asset, _, path = column.partition("#")
            if path and asset in self.read_only and asset in lineage.reads:
                self.read_only[asset].add(path)

    def _size(self) -> tuple[int, ...]:
        """Grows whenever the run's lineage does (what `absorb` reports as a change)."""
        read_columns = sum(len(columns) for columns in self.read_only.values())
        return (
            len(self.datasets),
            len(self.edges),
            len(self.in_memory),
            len(self.notes),
            len(self.writes),
            len(self.read_only),
            read_columns,
        )


class RunRecord:
    """A run of `header.job`: the actions folded in so far (`absorb`), and how it ended (`end`).

    Thread-safe: one thread folds actions in while others read the run or its batch.
    """

    def __init__(self, header: RunHeader) -> None:
        self.header = header
        self.process_urn = header.process_urn
        self.failures: list[ActionFailure] = []
        self.actions: list[ActionRecord] = []
        self.analysis_errors = 0
        self.ended_at: datetime | None = None
        self.status = RUNNING
        self.error_class: str | None = None
        self._lineage = _RunLineage()
        self._lock = threading.Lock()
        self._edges_before: list[FlowEdge] | None = None  # the job's lineage besides this run

    @property
    def run(self) -> Run:
        return Run(
            self.header.run_id,
            self.process_urn,
            started_at=self.header.started_at,
            ended_at=self.ended_at,
            status=self.status,
            job_id=self.header.application_id,
            user=self.header.user,
        )

    def note(self, text: str) -> None:
        with self._lock:
            self._lineage.notes.setdefault(text)

    def absorb(self, item: Captured) -> bool:
        """Fold one captured action into the run; True if the run's lineage changed."""
        if isinstance(item, ActionFailure):
            with self._lock:
                self.failures.append(item)
            return False
        started = time.perf_counter()
        state = self._lineage
        try:
            if isinstance(item, RddOrigin):
                reads = analyze_action("rdd", item.plan, item.details, state.memory, state.origins).reads
                state.origins[item.rdd_id] = list(reads.values())
                return False
            if isinstance(item, RddAction):
                lineage = analyze_rdd_action(
                    item.func_name, item.path, item.file_format, item.sources, state.origins
                )
            else:
                lineage = analyze_action(item.func_name, item.plan, item.details, state.memory, state.origins)
        except Exception as error:
            self.analysis_errors += 1
            action = "df.rdd" if isinstance(item, RddOrigin) else item.func_name
            logger.warning("lineage of Spark action %r not analysed (%s)", action, type(error).__name__)
            return False
        record = ActionRecord(
            item.func_name,
            item.at,
            item.duration_ms,
            item.listener_ms,
            (time.perf_counter() - started) * 1000,
            tuple(lineage.reads),
            tuple(lineage.writes),
        )
        with self._lock:
            self.actions.append(record)
            return self._lineage.absorb(lineage, item.at)

    def outcome(self, error: BaseException | None = None, *, aborted: bool = False) -> tuple[str, str | None]:
        """How the run ends: FAIL with `error`'s class, or with the first failed action's when
        the job caught it and went on; ABORT when `aborted` (the driver is being terminated);
        else COMPLETE. With the error class, if any."""
        with self._lock:
            failed = [f for f in self.failures if f.func_name not in _NOT_ACTIONS]
        if aborted:
            return ABORT, type(error).__name__ if error is not None else None
        if error is not None:
            return FAIL, type(error).__name__
        if failed:
            return FAIL, failed[0].error_class
        return COMPLETE, None

    def end(self, status: str, error_class: str | None, at: datetime | None = None) -> None:
        with self._lock:
            self.status, self.error_class, self.ended_at = status, error_class, at or utcnow()

    def last_heard(self) -> datetime:
        """When the run last showed a sign of life: its last action's end, else its start."""
        with self._lock:
            times = [a.at for a in self.actions] + [f.at for f in self.failures]
        return max(times, default=self.header.started_at)

    # -- the batch ------------------------------------------------------------------------

    def batch(self) -> LineageBatch:
        """The run's cumulative lineage so far, observed at the run's start."""
        with self._lock:
            return self._build_batch()

    def store_batch(self, store: EdgeSource) -> LineageBatch:
        """The run's batch, as the store should see it.

        A completed run's lineage is the job's lineage: it replaces the version before it. A
        run still going, or one that failed or was aborted, may not have reached some of the
        job's writes (yet, or at all), which is no evidence that the job stopped making them:
        the job's edges in the store stay, next to what the run showed.
        """
        with self._lock:
            batch = self._build_batch()
            complete = self.status == COMPLETE
        if complete or not batch.processes:
            return batch
        if self._edges_before is None:
            self._edges_before = stored_edges(store, self.process_urn, Signal.SPARK_RUNTIME)
        return keeping(batch, self._edges_before)

    def _build_batch(self) -> LineageBatch:
        state = self._lineage
        edges = [
            FlowEdge(
                source,
                target,
                self.process_urn,
                Signal.SPARK_RUNTIME,
                confidence,
                kind,
                state.descriptions.get((source, target, kind)),
            )
            for (source, target, kind), confidence in state.edges.items()
        ]
        assets = [Asset(urn, metadata=_asset_metadata(d)) for urn, d in state.datasets.items()]
        fields: dict[str, str | None] = {}
        for urn, dataset in state.datasets.items():
            for name, data_type in dataset.columns:
                fields.setdefault(column_urn(urn, name.lower()), data_type)
        for edge in edges:
            for node in (edge.source, edge.target):
                if "#" in node:
                    fields.setdefault(node, None)
        processes = [Process(self.process_urn, name=self.header.job, kind="spark", metadata=self._metadata())]
        if self.status == FAIL and not self.actions:
            processes = []  # a run that did nothing observable must not close the job's lineage
        header = self.header
        changes = [
            AssetChange(
                c.urn,
                c.change,
                at,
                Signal.SPARK_RUNTIME,
                self.process_urn,
                header.run_id,
                c.columns,
                c.previous,
            )
            for c, at in state.changes
        ]
        reads = [
            AssetRead(
                urn,
                header.run_id,
                self.process_urn,
                header.started_at,
                header.user,
                Signal.SPARK_RUNTIME,
                tuple(sorted(columns)),
            )
            for urn, columns in state.read_only.items()
        ]
        return LineageBatch(
            assets=assets,
            fields=[Field(urn, data_type=t) for urn, t in fields.items()],
            processes=processes,
            runs=[self.run],
            edges=edges,
            changes=changes,
            reads=reads,
            observed_at=header.started_at,
        )

    def _metadata(self) -> dict[str, Any]:
        state, header = self._lineage, self.header
        metadata: dict[str, Any] = {
            "application_id": header.application_id,
            "application_name": header.application_name,
            "spark_version": header.spark_version,
            "run_id": header.run_id,
            "status": self.status,
            "started_at": header.started_at.isoformat(),
            "actions": len(self.actions),
            "reads": list(state.reads),
            "writes": list(state.writes.values()),
            "in_memory_inputs": len(state.in_memory),
        }
        if self.ended_at is not None:
            metadata["ended_at"] = self.ended_at.isoformat()
            metadata["duration_ms"] = round((self.ended_at - header.started_at).total_seconds() * 1000, 3)
        if self.error_class is not None:
            metadata["error_class"] = self.error_class
        if self.failures:
            metadata["failed_actions"] = [
                {"action": f.func_name, "error_class": f.error_class} for f in self.failures
            ]
        if state.notes:
            metadata["notes"] = list(state.notes)
        if state.changes:
            metadata["changes"] = [
                {"dataset": c.urn, "change": str(c.change), "at": at.isoformat()} for c, at in state.changes
            ]
        return metadata


def _asset_metadata(dataset: Dataset) -> dict[str, Any]:
    """What describes the dataset itself (not one write of it: the mode is the run's)."""
    keep = {
        k: v
        for k, v in dataset.metadata.items()
        if k in ("format", "type", "partitioned_by", "url", DECLARED_COLUMNS)
    }
    return {"storage": dataset.kind, **keep}
