"""Runtime lineage of PySpark jobs in one line: `tracelake.spark.track(spark, job="…")`.

`track` attaches a `QueryExecutionListener` to the session — Java compiled in the driver's JVM
(`collect.spark_listener.CaptureJournal`; no jar to install) that journals each action's plan —
and returns a `SparkTracker`: one Run of the Process `spark.job/<job>`. Every action's analyzed
plan becomes lineage — datasets read, datasets written, typed column edges — accumulated over
the run. A single background worker reads the journal every 0.2 s, analyses what is new and, at
most every `ingest_interval` seconds (one) while the lineage changes, hands the run's cumulative
`LineageBatch` (observed at the run's start, so each re-observation replaces the run's version in
the store) to `store.ingest`; the job's own thread pays nothing per action. So a finished action
is durable within about a second whatever becomes of the driver.

The run ends at `stop()` (or leaving the `with` block), or where the job never says so
(`_EndHooks`): `SparkSession.stop()`, the interpreter's exit (an uncaught exception fails the run)
and SIGTERM (ABORT). Ending waits for the bus, detaches the listener, reads the journal to its
end, records the run — FAIL with the error class when an exception ended it or an action failed,
even one the job caught — ingests it and tells the optional emitter. The run holds a lease in the
store (`store.leases`), renewed every second, so a driver killed outright is found gone by the
next tracked run or `tracelake` command and its run ended ABORT.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from tracelake import names
from tracelake.collect.spark_datasets import Dataset
from tracelake.collect.spark_lineage import ActionLineage, EdgeKey, analyze_action
from tracelake.collect.spark_listener import ActionCapture, ActionFailure, CaptureJournal, ListenerQueue
from tracelake.collect.sql_relation import Deps, add_dep, column_urn
from tracelake.model import (
    DECLARED_COLUMNS,
    Asset,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Process,
    Run,
    Signal,
    Transformation,
    utcnow,
)
from tracelake.store import LineageStore, leases

logger = logging.getLogger("tracelake.spark")

RUNNING, COMPLETE, FAIL, ABORT = "RUNNING", "COMPLETE", "FAIL", leases.ABORT
PROCESS_PREFIX = "spark.job/"
_FLUSH_TIMEOUT = 60.0
# A finished action's lineage is in the store within about this long, whatever becomes of the
# driver: one ingest of the run's cumulative batch a second at most (each costs CPU the job's
# executors share, ~8 ms), however many actions end in it. The run's lease is renewed as often.
INGEST_INTERVAL = 1.0
# Failures of analysis (reading a path that does not exist, as existence checks do) are no action
# that ran: caught by the job, they do not fail its run.
_NOT_ACTIONS = frozenset({"analyze"})


class RunEventSink(Protocol):
    """Where run events go besides the store (the OpenLineage emitter implements this)."""

    def start(self, run: Run, batch: LineageBatch) -> None: ...

    def complete(self, run: Run, batch: LineageBatch) -> None: ...

    def fail(self, run: Run, batch: LineageBatch, error_class: str) -> None: ...


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
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[EdgeKey, Confidence] = field(default_factory=dict)
    in_memory: set[tuple[int, ...]] = field(default_factory=set)
    notes: dict[str, None] = field(default_factory=dict)
    memory: dict[int, Deps] = field(default_factory=dict)  # exprId → Deps, across actions

    def absorb(self, lineage: ActionLineage) -> bool:
        """Merge one action's lineage; True when the run's lineage changed."""
        before = (len(self.datasets), len(self.edges), len(self.in_memory), len(self.notes), len(self.writes))
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
        self.in_memory |= lineage.in_memory
        for note in lineage.notes:
            self.notes.setdefault(note)
        after = (len(self.datasets), len(self.edges), len(self.in_memory), len(self.notes), len(self.writes))
        return after != before


class SparkTracker:
    """One tracked run of a Spark job; see `track`."""

    def __init__(
        self,
        spark: Any,
        job: str,
        *,
        store: LineageStore | str | None = None,
        emitter: RunEventSink | None = None,
        ingest_interval: float = INGEST_INTERVAL,
    ) -> None:
        if not job or not job.strip():
            raise ValueError("a tracked Spark job needs a name")
        self.job = job.strip()
        self.process_urn = PROCESS_PREFIX + self.job
        self.failures: list[ActionFailure] = []
        self.actions: list[ActionRecord] = []
        self.analysis_errors = 0
        self.ingests = 0
        self.ingest_ms = 0.0
        self._spark = spark
        self._emitter = emitter
        self._owns_store = not isinstance(store, LineageStore)
        self._store = store if isinstance(store, LineageStore) else LineageStore(store)
        self._lineage = _RunLineage()
        self._lock = threading.Lock()
        self._run_id = str(uuid.uuid4())
        self._started_at = utcnow()
        self._ended_at: datetime | None = None
        self._status = RUNNING
        self._error_class: str | None = None
        facts = _SessionFacts.of(spark)
        self._app_id, self._app_name, self._user, self._spark_version = facts
        self._stopped = False
        self._edges_before: list[FlowEdge] | None = None  # the job's lineage before this run
        self._reading = threading.Lock()  # one reader of the journal at a time, absorbing in order
        try:
            self._journal = CaptureJournal(spark)
        except BaseException:
            if self._owns_store:
                self._store.close()
            raise
        self._worker = _Worker(self, ingest_interval)
        self._worker.start()  # its first act: reap the leases of dead drivers, take this run's
        self._hooks = _EndHooks(self)
        self._emit("start")

    # -- public ---------------------------------------------------------------------------

    @property
    def run(self) -> Run:
        return Run(
            self._run_id,
            self.process_urn,
            started_at=self._started_at,
            ended_at=self._ended_at,
            status=self._status,
            job_id=self._app_id,
            user=self._user,
        )

    def batch(self) -> LineageBatch:
        """The run's cumulative lineage so far, observed at the run's start."""
        with self._lock:
            return self._build_batch()

    def flush(self, timeout: float = _FLUSH_TIMEOUT) -> bool:
        """Wait until every finished action is analysed and ingested; False on timeout."""
        deadline = time.monotonic() + timeout
        self._drain_bus(timeout)
        self._worker.ingest_now()
        return self._worker.wait_idle(max(deadline - time.monotonic(), 0.0))

    def stop(self, error: BaseException | None = None, *, aborted: bool = False) -> None:
        """End the run: flush, detach, record it, emit. The run is FAIL with `error`'s class, or
        with the first failed action's when the job caught it and went on; ABORT when `aborted`
        (the driver is being terminated); else COMPLETE."""
        if self._stopped:
            return
        self._stopped = True
        self._hooks.remove()
        self._drain_bus(_FLUSH_TIMEOUT)
        self._journal.close()
        self._catch_up()
        with self._lock:
            failed = [f for f in self.failures if f.func_name not in _NOT_ACTIONS]
            self._ended_at = utcnow()
            if aborted:
                self._status, self._error_class = ABORT, type(error).__name__ if error is not None else None
            elif error is not None:
                self._status, self._error_class = FAIL, type(error).__name__
            elif failed:
                self._status, self._error_class = FAIL, failed[0].error_class
            else:
                self._status, self._error_class = COMPLETE, None
        self._worker.ingest_now()
        self._journal.discard()  # while the worker ingests
        self._worker.close(_FLUSH_TIMEOUT)
        try:
            leases.release(self._store, self._run_id)
        except Exception as problem:
            logger.warning("lease of Spark run %s not released (%s)", self._run_id, type(problem).__name__)
        self._emit("complete" if self._status == COMPLETE else "fail")
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> SparkTracker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(exc)

    # -- listener -------------------------------------------------------------------------

    def _drain_bus(self, timeout: float) -> None:
        """Wait until Spark has told the listener of every finished action."""
        try:
            ListenerQueue.of(self._spark.sparkContext).wait_until_empty(timeout)
        except Exception as error:
            logger.warning("Spark listener bus not drained (%s)", type(error).__name__)

    def _catch_up(self) -> bool:
        """Fold every journalled action into the run; True if the lineage changed."""
        changed = False
        with self._reading:
            for item in self._journal.read():
                changed = self._absorb(item) or changed
        return changed

    def _absorb(self, item: ActionCapture | ActionFailure) -> bool:
        """Fold one captured action into the run (on the worker thread); True if lineage changed."""
        if isinstance(item, ActionFailure):
            with self._lock:
                self.failures.append(item)
            return False
        started = time.perf_counter()
        try:
            lineage = analyze_action(item.func_name, item.plan, item.details, self._lineage.memory)
        except Exception as error:
            self.analysis_errors += 1
            logger.warning(
                "lineage of Spark action %r not analysed (%s)", item.func_name, type(error).__name__
            )
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
            return self._lineage.absorb(lineage)

    def _emit(self, event: str) -> None:
        if self._emitter is None:
            return
        try:
            run, batch = self.run, self.batch()
            if event == "start":
                self._emitter.start(run, batch)
            elif event == "complete":
                self._emitter.complete(run, batch)
            else:
                self._emitter.fail(run, batch, self._error_class or "Exception")
        except Exception as error:
            logger.warning("run event %s not emitted (%s)", event, type(error).__name__)

    def _take_lease(self) -> None:
        """End the runs of drivers found dead and say this one is alive (on the worker thread)."""
        try:
            leases.reap(self._store)
            leases.take(self._store, self._run_id, self.process_urn, now=self._started_at)
        except Exception as error:
            logger.warning("lease of Spark run %s not taken (%s)", self._run_id, type(error).__name__)

    def _renew_lease(self) -> None:
        """Say the driver is alive (on the worker thread), so its run is not taken for dead."""
        try:
            leases.renew(self._store, self._run_id)
        except Exception as error:
            logger.warning("lease of Spark run %s not renewed (%s)", self._run_id, type(error).__name__)

    def _ingest(self) -> None:
        """Store the run as it stands (on the worker thread)."""
        started = time.perf_counter()
        try:
            self._store.ingest(self._store_batch())
        except Exception as error:
            logger.warning("lineage of Spark job %r not stored (%s)", self.job, type(error).__name__)
        self.ingests += 1
        self.ingest_ms += (time.perf_counter() - started) * 1000

    # -- the batch ------------------------------------------------------------------------

    def _store_batch(self) -> LineageBatch:
        """The run's batch, as the store should see it.

        A completed run's lineage is the job's lineage: it replaces the version before it. A
        run still going, or one that failed, may not have reached some of the job's writes
        (yet, or at all), which is no evidence that the job stopped making them: the job's
        edges from before the run stay, next to what the run showed.
        """
        with self._lock:
            batch = self._build_batch()
            complete = self._status == COMPLETE
        if complete or not batch.processes:
            return batch
        if self._edges_before is None:
            just_before = self._started_at - timedelta(microseconds=1)
            self._edges_before = [
                FlowEdge(
                    e.source,
                    e.target,
                    e.process,
                    Signal.SPARK_RUNTIME,
                    Confidence(e.confidence),
                    Transformation(e.transformation) if e.transformation else None,
                )
                for e in self._store.edges(as_of=just_before, process=self.process_urn)
                if e.signal == Signal.SPARK_RUNTIME
            ]
        seen = {edge.key for edge in batch.edges}
        kept = [edge for edge in self._edges_before if edge.key not in seen]
        return replace(batch, edges=[*batch.edges, *kept])

    def _build_batch(self) -> LineageBatch:
        state = self._lineage
        edges = [
            FlowEdge(source, target, self.process_urn, Signal.SPARK_RUNTIME, confidence, kind)
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
        failed = self._status == FAIL
        processes = [Process(self.process_urn, name=self.job, kind="spark", metadata=self._metadata())]
        if failed and not self.actions:
            processes = []  # a run that did nothing observable must not close the job's lineage
        return LineageBatch(
            assets=assets,
            fields=[Field(urn, data_type=t) for urn, t in fields.items()],
            processes=processes,
            runs=[self.run],
            edges=edges,
            observed_at=self._started_at,
        )

    def _metadata(self) -> dict[str, Any]:
        state = self._lineage
        ended = self._ended_at
        metadata: dict[str, Any] = {
            "application_id": self._app_id,
            "application_name": self._app_name,
            "spark_version": self._spark_version,
            "run_id": self._run_id,
            "status": self._status,
            "started_at": self._started_at.isoformat(),
            "actions": len(self.actions),
            "reads": list(state.reads),
            "writes": list(state.writes.values()),
            "in_memory_inputs": len(state.in_memory),
        }
        if ended is not None:
            metadata["ended_at"] = ended.isoformat()
            metadata["duration_ms"] = round((ended - self._started_at).total_seconds() * 1000, 3)
        if self._error_class is not None:
            metadata["error_class"] = self._error_class
        if self.failures:
            metadata["failed_actions"] = [
                {"action": f.func_name, "error_class": f.error_class} for f in self.failures
            ]
        if state.notes:
            metadata["notes"] = list(state.notes)
        return metadata


def _asset_metadata(dataset: Dataset) -> dict[str, Any]:
    """What describes the dataset itself (not one write of it: the mode is the run's)."""
    keep = {
        k: v
        for k, v in dataset.metadata.items()
        if k in ("format", "type", "partitioned_by", "url", DECLARED_COLUMNS)
    }
    return {"storage": dataset.kind, **keep}


class _EndHooks:
    """Where a run ends when the job never says so: `SparkSession.stop()`, the interpreter's exit
    (normal, or by an uncaught exception, which fails the run) and SIGTERM (the run is ABORT, then
    the signal does what it did before). Each stops the tracker first, so the run's last lineage is
    stored while the session still answers. `remove` puts everything back as it was."""

    def __init__(self, tracker: SparkTracker) -> None:
        self._tracker = tracker
        self._spark = tracker._spark
        self._uncaught: BaseException | None = None
        self._stop_before = vars(self._spark).get("stop")  # another wrapper on this session, if any
        session_stop = self._spark.stop

        def stop_session(*args: Any, **kwargs: Any) -> Any:
            tracker.stop()
            return session_stop(*args, **kwargs)

        self._session_stop = stop_session
        self._spark.stop = stop_session
        self._excepthook_before = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)
        self._sigterm_before: Any = None
        self._on_sigterm_installed = False
        if threading.current_thread() is threading.main_thread():
            self._sigterm_before = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._on_sigterm_installed = True

    def remove(self) -> None:
        if vars(self._spark).get("stop") is self._session_stop:
            if self._stop_before is None:
                del self._spark.stop
            else:
                self._spark.stop = self._stop_before
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._excepthook_before
        atexit.unregister(self._at_exit)
        if self._on_sigterm_installed and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._sigterm_before)

    def _excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        self._uncaught = value
        self._excepthook_before(kind, value, tb)

    def _at_exit(self) -> None:
        self._tracker.stop(self._uncaught)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        before = self._sigterm_before
        self._tracker.stop(aborted=True)
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


class _Worker(threading.Thread):
    """Reads the journal, analyses what it holds and ingests the run's batch, off the job's thread.

    It looks at the journal every `POLL` seconds; lineage that changed is ingested once
    `interval` seconds have passed since the last ingest (or the run's start), or at once when
    asked (`ingest_now`: a flush, the run's end); all the actions in between fold into one
    ingest of the latest cumulative batch.
    """

    POLL = 0.2

    def __init__(self, tracker: SparkTracker, interval: float) -> None:
        super().__init__(name=f"tracelake-spark-{tracker.job}", daemon=True)
        self._tracker = tracker
        self._interval = interval
        self._cond = threading.Condition()
        self._busy = False
        self._dirty = False  # an ingest was asked for
        self._changed = False  # lineage changed since the last ingest
        self._last_ingest = time.monotonic()
        self._last_renewal = time.monotonic()
        self._closing = False

    def ingest_now(self) -> None:
        with self._cond:
            self._dirty = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy and not self._dirty, timeout=timeout)

    def close(self, timeout: float) -> None:
        self.wait_idle(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.join(timeout)

    def _due(self) -> float:
        """Seconds until changed lineage must be ingested (the interval when nothing changed)."""
        if not self._changed:
            return self._interval
        return max(self._last_ingest + self._interval - time.monotonic(), 0.0)

    def _renewal_due(self) -> float:
        return max(self._last_renewal + self._interval - time.monotonic(), 0.0)

    def run(self) -> None:
        self._tracker._take_lease()
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._dirty or self._closing,
                    timeout=min(self.POLL, self._due(), self._renewal_due()),
                )
                if self._closing and not self._dirty:
                    return
                self._busy = True
            if self._renewal_due() == 0.0:
                self._tracker._renew_lease()
                self._last_renewal = time.monotonic()
            try:
                changed = self._tracker._catch_up()
                with self._cond:
                    self._changed = self._changed or changed
                    ingest = self._dirty or (self._changed and self._due() == 0.0)
                    self._dirty = False
                    if ingest:
                        self._changed = False
                if ingest:
                    self._tracker._ingest()
                    self._last_ingest = time.monotonic()
            except Exception as error:  # the worker must outlive any one bad action
                logger.warning("Spark lineage worker error (%s)", type(error).__name__)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


class _SessionFacts(NamedTuple):
    """What a run records of its Spark application, asked of the JVM once per SparkContext."""

    app_id: str
    app_name: str
    user: str
    spark_version: str

    @classmethod
    def of(cls, spark: Any) -> _SessionFacts:
        context = spark.sparkContext
        known = _SESSION_FACTS.get(id(context))
        if known is None or known[0] is not context:
            _learn_home_metastore(spark)
            facts = cls(
                str(context.applicationId), str(context.appName), str(context.sparkUser()), str(spark.version)
            )
            known = _SESSION_FACTS[id(context)] = (context, facts)
        return known[1]


_SESSION_FACTS: dict[int, tuple[Any, _SessionFacts]] = {}


def _learn_home_metastore(spark: Any) -> None:
    """A Hive session's metastore is the home of its `db.table` names: OpenLineage events sent of
    them (the emitter's) then name them `hive://host:port` + `db.table`, as Spark's own agent does.
    A namespace set already (`TRACELAKE_HIVE_NAMESPACE`) wins."""
    if names.hive_namespace() is not None:
        return
    try:
        if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
            return
        uris = spark.conf.get("spark.hadoop.hive.metastore.uris", None) or spark.conf.get(
            "hive.metastore.uris", None
        )
    except Exception:  # a session without a readable conf still runs tracked
        return
    home = names.hive_namespace_from_uris(uris) if uris else None
    if home is not None:
        names.set_hive_namespace(home)


def track(
    spark: Any,
    job: str,
    *,
    store: LineageStore | str | None = None,
    emitter: RunEventSink | None = None,
    ingest_interval: float = INGEST_INTERVAL,
) -> SparkTracker:
    """Track the lineage of `spark`'s actions as one run of job `job` until `stop()`.

    `store`: a LineageStore, a database URL, or None for the default (`TRACELAKE_DB`).
    `ingest_interval`: while the run goes on, its lineage reaches the store at most this often
    (seconds); `flush()` and the run's end ingest at once.
    Use as `with track(spark, job="daily_features") as run: …` or call `stop()` yourself.
    """
    return SparkTracker(spark, job, store=store, emitter=emitter, ingest_interval=ingest_interval)
