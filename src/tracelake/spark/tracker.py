"""The run tracker behind `tracelake.spark.track(spark, job="…")`: runtime lineage of PySpark jobs.

`track` attaches a `QueryExecutionListener` to the session — Java compiled in the driver's JVM
(`collect.spark_listener.CaptureJournal`; no jar to install) that journals each action's plan
the moment the action ends — and returns a `SparkTracker`: one Run of the Process
`spark.job/<job>` (`collect.spark_run.RunRecord`). Every action's analyzed plan becomes lineage
— datasets read, datasets written, typed column edges — accumulated over the run.

When lineage is durable: an action's journal line is written (one `write`, so it survives the
driver's death, SIGKILL included) as Spark tells its listeners, milliseconds after the action
ends, and synced to disk within about a second (`collect.spark_journal`). A background worker
reads the journal every 0.2 s, analyses what is new, and stores the run's cumulative batch every
`ingest_interval` seconds (ten) while it changes, and at the run's end; the job's own thread pays
nothing per action. A driver that dies before its run is stored leaves its journal beside the
store: the next tracked run or `tracelake` command of that store replays it (`recover`) and ends
the run ABORT, when it was last heard from.

The run ends at `stop()` (or leaving the `with` block), or where the job never says so
(`_EndHooks`): `SparkSession.stop()`, the interpreter's exit (an uncaught exception fails the run)
and SIGTERM (ABORT). Ending waits for the bus, detaches the listener, reads the journal to its
end and records how the run ended in it — FAIL with the error class when an exception ended it or
an action failed, even one the job caught. Then the job goes on while the worker stores the run,
removes the journal and tells the optional emitter (~10 ms a run, which the job's thread no
longer waits for): this process's next use of the store waits for that write (`store.owed`), and
so do the interpreter's exit and SIGTERM. A run the store would not take at its end keeps its
journal (and its outcome) for `recover`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from tracelake.collect import spark_journal
from tracelake.collect.spark_journal import RunHeader
from tracelake.collect.spark_listener import ActionFailure, CaptureJournal, ListenerQueue, parse_lines
from tracelake.collect.spark_run import (
    PROCESS_PREFIX,
    ActionRecord,
    RunRecord,
)
from tracelake.collect.tracked_runs import ABORT, COMPLETE, RUNNING, tell
from tracelake.model import LineageBatch, Run, names, utcnow
from tracelake.model.store_urls import store_label
from tracelake.store import LineageStore, leases, owed

if TYPE_CHECKING:  # the emitter brings in the OpenLineage client; only a run that emits needs it
    from tracelake.emit import LineageEmitter

logger = logging.getLogger("tracelake.spark")

_FLUSH_TIMEOUT = 60.0
# A running job's lineage reaches the store this often at most while it changes (each ingest
# costs CPU the job's executors share, ~8 ms): the journal, not the store, is what makes a
# finished action durable, so the store can be told less often.
INGEST_INTERVAL = 10.0
# The run's lease says its driver is alive to other hosts sharing the store (`leases.STALE`).
LEASE_RENEWAL = 30.0


# The runs going on in this process, latest last: code started inside one links to it
# (`tracelake.python`).
_running: list[SparkTracker] = []
_running_lock = threading.Lock()


def running() -> SparkTracker | None:
    """The latest tracked Spark run of this process still going, if any."""
    with _running_lock:
        return _running[-1] if _running else None


class SparkTracker:
    """One tracked run of a Spark job; see `track`."""

    def __init__(
        self,
        spark: Any,
        job: str,
        *,
        store: LineageStore | str | None = None,
        emitter: LineageEmitter | None = None,
        ingest_interval: float = INGEST_INTERVAL,
    ) -> None:
        if not job or not job.strip():
            raise ValueError("a tracked Spark job needs a name")
        self.job = job.strip()
        self.process_urn = PROCESS_PREFIX + self.job
        self.ingests = 0
        self.ingest_ms = 0.0
        self._spark = spark
        self._emitter = emitter
        self._owns_store = not isinstance(store, LineageStore)
        self._store = store if isinstance(store, LineageStore) else LineageStore(store)
        facts = _SessionFacts.of(spark)
        header = RunHeader(
            run_id=str(uuid.uuid4()),
            job=self.job,
            process_urn=self.process_urn,
            started_at=utcnow(),
            host=socket.gethostname(),
            pid=os.getpid(),
            store=store_label(self._store.url),
            application_id=facts.app_id,
            application_name=facts.app_name,
            user=facts.user,
            spark_version=facts.spark_version,
        )
        self._record = RunRecord(header)
        self._stopped = False
        self._stored_at_end = False
        self._leased = False
        self._reading = threading.Lock()  # one reader of the journal at a time, absorbing in order
        directory = _journal_directory(self._store, header)
        try:
            self._journal = CaptureJournal(spark, directory)
        except BaseException:
            spark_journal.let_go(header)
            spark_journal.discard(directory)  # no run began: nothing to recover
            if self._owns_store:
                self._store.close()
            raise
        self._worker = _Worker(self, ingest_interval)
        self._worker.start()  # its first act: sync the journal's header, recover what dead drivers left
        self._hooks = _EndHooks(self)
        with _running_lock:
            _running.append(self)
        self._emit("start")

    # -- public ---------------------------------------------------------------------------

    @property
    def run(self) -> Run:
        return self._record.run

    @property
    def actions(self) -> list[ActionRecord]:
        return self._record.actions

    @property
    def failures(self) -> list[ActionFailure]:
        return self._record.failures

    @property
    def analysis_errors(self) -> int:
        return self._record.analysis_errors

    def batch(self) -> LineageBatch:
        """The run's cumulative lineage so far, observed at the run's start."""
        return self._record.batch()

    def flush(self, timeout: float = _FLUSH_TIMEOUT) -> bool:
        """Wait until every finished action is analysed and ingested; False on timeout."""
        deadline = time.monotonic() + timeout
        self._drain_bus(timeout)
        self._worker.ingest_now()
        return self._worker.wait_idle(max(deadline - time.monotonic(), 0.0))

    def stop(self, error: BaseException | None = None, *, aborted: bool = False) -> None:
        """End the run: flush, detach, record how it ended, and hand it to the worker to store and
        emit. The run is FAIL with `error`'s class, or with the first failed action's when the job
        caught it and went on; ABORT when `aborted` (the driver is being terminated); else COMPLETE.

        Returns once the run's end is in its journal: the store write goes on beside the job
        (`wait_stored` waits for it), this process's next use of the store waits for it first
        (`store.owed`), and the interpreter's exit waits for it too."""
        if self._stopped:
            return
        self._stopped = True
        with _running_lock:
            if self in _running:
                _running.remove(self)
        self._hooks.remove()
        self._drain_bus(_FLUSH_TIMEOUT)
        self._journal.close()
        self._catch_up()
        record = self._record
        record.end(*record.outcome(error, aborted=aborted))
        spark_journal.write_ending(
            self._journal.directory, record.status, record.error_class, record.ended_at
        )
        owed.promise(self._store.url, self._worker)
        _ENDING.add(self)
        if not self._worker.end():  # no worker to hand it to (it cannot have died, but if it did)
            self._ingest()
            self._ended()

    def wait_stored(self, timeout: float = _FLUSH_TIMEOUT) -> bool:
        """Wait until the stopped run is stored (or, refused by the store, left in its journal
        for recovery) and emitted; False on timeout."""
        self._worker.join(timeout)
        return not self._worker.is_alive()

    def __enter__(self) -> SparkTracker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(exc)

    # -- on the worker thread -------------------------------------------------------------

    def _ended(self) -> None:
        """After the run's last ingest: drop its journal if it is stored, release its lease,
        tell the emitter, and say the write the run owed its store is made."""
        try:
            record = self._record
            spark_journal.let_go(record.header)
            if self._stored_at_end:
                # beside the store, a journal is put aside at once and its files removed later;
                # a private temporary one is removed now (nothing would sweep its folder)
                directory = self._journal.directory
                beside_store = directory.parent == spark_journal.journal_root(self._store.url)
                spark_journal.discard(directory, later=beside_store)
                if self._leased:
                    self._lease("released", leases.release)
            else:
                logger.warning(
                    "Spark run %s of %r not stored; its journal %s keeps it for the next tracelake command",
                    record.header.run_id,
                    self.job,
                    self._journal.directory,
                )
            self._emit("complete" if record.status == COMPLETE else "fail")
            if self._owns_store:
                self._store.close()
        finally:
            owed.kept(self._store.url, self._worker)
            _ENDING.discard(self)

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
                changed = self._record.absorb(item) or changed
        return changed

    def _emit(self, event: str) -> None:
        if self._emitter is not None:
            tell(self._emitter, event, self.run, self.batch(), self._record.error_class, logger)

    def _begin(self) -> None:
        """Sync the journal's header to disk and store what dead drivers left (off the job's
        thread: neither may delay its first action)."""
        spark_journal.sync_header(self._journal.directory)
        try:
            for found in recover(self._store):
                logger.warning("%s", found.describe())
        except Exception as error:
            logger.warning("runs of dead Spark drivers not recovered (%s)", type(error).__name__)

    def _take_lease(self) -> None:
        """Say this driver is alive, before the store first shows its run RUNNING: a run stored
        only at its end needs no lease (a dead driver's journal is found by its pid here)."""
        header = self._record.header
        self._lease(
            "taken",
            lambda store, run_id: leases.take(store, run_id, header.process_urn, now=header.started_at),
        )
        self._leased = True

    def _lease(self, done: str, act: Callable[[LineageStore, str], None]) -> None:
        """Take, renew or release the run's lease; a store that says no costs a warning."""
        run_id = self._record.header.run_id
        try:
            act(self._store, run_id)
        except Exception as error:
            logger.warning("lease of Spark run %s not %s (%s)", run_id, done, type(error).__name__)

    def _ingest(self) -> None:
        """Store the run as it stands; past the bound, drop the journal segments it holds."""
        started = time.perf_counter()
        read_below = self._journal.segment
        ended = self._record.status != RUNNING
        if not ended and not self._leased:
            self._take_lease()
        try:
            self._store.ingest(self._record.store_batch(self._store))
        except Exception as error:
            logger.warning("lineage of Spark job %r not stored (%s)", self.job, type(error).__name__)
        else:
            self._stored_at_end = ended
            if self._journal.trim(read_below):
                self._record.note("journal trimmed: a recovery replays only its newest segments")
        self.ingests += 1
        self.ingest_ms += (time.perf_counter() - started) * 1000


def _journal_directory(store: LineageStore, header: RunHeader) -> Path:
    """A new journal for the run beside the store, or a private temporary one (a store in memory,
    a place that cannot be written: such a run cannot be recovered, which is said)."""
    root = spark_journal.journal_root(store.url)
    try:
        return spark_journal.make_journal(root, header)
    except OSError as error:
        logger.warning(
            "Spark journal not kept beside the store (%s at %s): a killed driver's run cannot be recovered",
            type(error).__name__,
            root,
        )
        return spark_journal.make_journal(None, header)


# Runs stopped whose worker is still storing them: the interpreter's exit waits for each.
_ENDING: set[SparkTracker] = set()


@atexit.register
def _wait_for_ending_runs() -> None:
    for tracker in list(_ENDING):
        tracker.wait_stored()


@dataclass(frozen=True, slots=True)
class Recovered:
    """A run whose driver died before storing it, ended by `recover`."""

    run_id: str
    process_urn: str
    status: str
    host: str
    pid: int
    last_heard: datetime
    actions: int | None  # replayed from its journal; None when it left none here

    def describe(self) -> str:
        told = (
            f"run {self.run_id} of {self.process_urn} ended {self.status}: its driver (pid {self.pid} on "
            f"{self.host}) was last heard from at {self.last_heard.isoformat()}"
        )
        if self.actions is None:
            return told
        return f"{told}; {self.actions} action(s) stored from its journal"


def recover(store: LineageStore) -> list[Recovered]:
    """Store what drivers that died left, and end their runs.

    A journal beside the store whose driver (a process of this host) is gone is replayed into
    its run, which is stored: ABORT, ended when last heard from — or as the driver recorded its
    end, when it died storing it. Runs whose lease is given up (`leases.find_dead`) without a
    journal here (another host's) are ended ABORT with the lineage they had stored. One process
    recovers a journal (it claims it first); one that fails to store it leaves it for the next.
    """
    dead = {lease.run_id: lease for lease in leases.find_dead(store)}
    found: list[Recovered] = []
    root = spark_journal.journal_root(store.url)
    spark_journal.sweep(root)
    for directory, header in spark_journal.abandoned(root, store.url):
        claimed = spark_journal.claim(directory)
        if claimed is None:
            continue
        record = RunRecord(header)
        reader = spark_journal.SegmentReader(claimed, sync=False)
        items, errors = parse_lines(reader.read())
        for item in items:
            record.absorb(item)
        if errors:
            record.note(f"{errors} journalled action(s) unreadable")
        lease = dead.pop(header.run_id, None)
        last_heard = max(record.last_heard(), lease.heard_at if lease else header.started_at)
        ending = spark_journal.read_ending(claimed)
        if ending is None:
            record.end(ABORT, None, last_heard)
        else:
            record.end(*ending)
        try:
            store.ingest(record.store_batch(store))
            leases.release(store, header.run_id)
        except Exception as error:
            logger.warning("journal of Spark run %s not stored (%s)", header.run_id, type(error).__name__)
            continue
        spark_journal.discard(claimed)
        found.append(
            Recovered(
                header.run_id,
                header.process_urn,
                record.status,
                header.host,
                header.pid,
                last_heard,
                len(items),
            )
        )
    if dead:
        leases.abort(store, list(dead.values()))
        found.extend(
            Recovered(lease.run_id, lease.process_urn, ABORT, lease.host, lease.pid, lease.heard_at, None)
            for lease in dead.values()
        )
    return found


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
        # the store write is waited for by `_wait_for_ending_runs`: registered at import, it runs after
        self._tracker.stop(self._uncaught)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        before = self._sigterm_before
        self._tracker.stop(aborted=True)
        self._tracker.wait_stored()
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
        self._ending = False

    def ingest_now(self) -> None:
        with self._cond:
            self._dirty = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy and not self._dirty, timeout=timeout)

    def end(self) -> bool:
        """Ingest the ended run one last time, then run the tracker's end (`_ended`) and stop;
        False when the worker is not running to do it."""
        with self._cond:
            if not self.is_alive():
                return False
            self._dirty = True
            self._ending = True
            self._cond.notify_all()
        return True

    def _due(self) -> float:
        """Seconds until changed lineage must be ingested (the interval when nothing changed)."""
        if not self._changed:
            return self._interval
        return max(self._last_ingest + self._interval - time.monotonic(), 0.0)

    def _renewal_due(self) -> float:
        return max(self._last_renewal + LEASE_RENEWAL - time.monotonic(), 0.0)

    def run(self) -> None:
        self._tracker._begin()
        try:
            self._work()
        finally:
            if self._ending:
                self._tracker._ended()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._dirty or self._ending,
                    timeout=min(self.POLL, self._due(), self._renewal_due()),
                )
                if self._ending and not self._dirty:
                    return
                self._busy = True
            if self._renewal_due() == 0.0 and self._tracker._leased:
                self._tracker._lease("renewed", leases.renew)
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
    emitter: LineageEmitter | None = None,
    ingest_interval: float = INGEST_INTERVAL,
) -> SparkTracker:
    """Track the lineage of `spark`'s actions as one run of job `job` until `stop()`.

    `store`: a LineageStore, a database URL, or None for the default (`TRACELAKE_DB`).
    `ingest_interval`: while the run goes on, its lineage reaches the store at most this often
    (seconds); `flush()` and the run's end ingest at once.
    Use as `with track(spark, job="daily_features") as run: …` or call `stop()` yourself.
    """
    return SparkTracker(spark, job, store=store, emitter=emitter, ingest_interval=ingest_interval)
