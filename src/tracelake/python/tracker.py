"""The run tracker behind `tracelake.python.track(job="…")`: one run of a Python data or model
job, process `python.job/<job>`, signal `ai_runtime`.

While the run goes on, the I/O hooks (`hooks`) show it every dataset read or written through
pandas, pyarrow or a Spark hand-off, and every model saved or loaded; `collect.python_run`
joins them into lineage. The run knows what it was started inside (`RunContext`, innermost
first): a web request's scope (`Probes.request`, sampled or not), a tracked Spark run of this
process, an Airflow task (the `AIRFLOW_CTX_*` variables Airflow sets for a task's process). Its
Run's parent (`job_id`) is the innermost one's run; a web request's endpoint receives the models
the run loads.

The run ends at `stop()`, leaving the `with` block (an exception fails it), or the interpreter's
exit (an uncaught exception fails it). Its batch is then stored (or shipped, as probes ship:
`Shipper`) in one transaction; a run that did not complete keeps the job's stored edges next to
its own (`collect.tracked_runs`). Nothing here fails the user's code: a hook that cannot describe a
call, or a store that refuses the run, is logged by class — never a value — and the run's
`problems` say so.
"""

from __future__ import annotations

import atexit
import getpass
import logging
import os
import socket
import sys
import uuid
from collections.abc import Mapping
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING

from tracelake.collect.python_io import Call, Hook, Naming, location
from tracelake.collect.python_run import (
    SIGNAL,
    DataRead,
    DataWrite,
    NotDescribed,
    PythonRunRecord,
    RunContext,
    RunHeader,
)
from tracelake.collect.tracked_runs import COMPLETE, keeping, stored_edges, tell
from tracelake.model import LineageBatch, Problem, Run, names, utcnow
from tracelake.python import hooks

if TYPE_CHECKING:
    from tracelake.collect.probes import Shipper
    from tracelake.emit import LineageEmitter
    from tracelake.store import LineageStore

logger = logging.getLogger("tracelake.python")


class PythonTracker:
    """One tracked run of a Python job; see `track`."""

    def __init__(
        self,
        job: str,
        *,
        store: LineageStore | str | None = None,
        shipper: Shipper | None = None,
        models: Mapping[str, str] | None = None,
        emitter: LineageEmitter | None = None,
    ) -> None:
        if not job or not job.strip():
            raise ValueError("a tracked Python job needs a name")
        self.job = job.strip()
        self.stored = False
        self._store = store
        self._shipper = shipper
        self._emitter = emitter
        self._naming = Naming({_model_key(path): name for path, name in (models or {}).items()})
        header = RunHeader(
            run_id=str(uuid.uuid4()),
            job=self.job,
            started_at=utcnow(),
            user=_user(),
            host=socket.gethostname(),
            pid=os.getpid(),
            contexts=tuple(run_contexts()),
        )
        self._record = PythonRunRecord(header)
        self._stopped = False
        self._token: Token[hooks.Observer | None] | None = None
        self._uncaught: BaseException | None = None
        self._excepthook_before = sys.excepthook
        hooks.install()
        hooks.start(self)
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)
        self._emit("start")

    # -- public ---------------------------------------------------------------------------

    @property
    def process_urn(self) -> str:
        return self._record.process_urn

    @property
    def run(self) -> Run:
        return self._record.run

    @property
    def contexts(self) -> tuple[RunContext, ...]:
        return self._record.header.contexts

    @property
    def observed(self) -> list[DataRead | DataWrite]:
        """The distinct calls the run saw so far, in the order first seen."""
        return self._record.observed

    @property
    def calls(self) -> dict[str, int]:
        """How many calls of each kind the run saw (`pandas.read_parquet`: 1200)."""
        return dict(self._record.calls)

    @property
    def problems(self) -> list[Problem]:
        """A problem for each call, and reason, whose lineage the run could not tell."""
        return self._record.problems

    def batch(self) -> LineageBatch:
        """The run's lineage so far, with its problems."""
        return self._record.batch()

    def stop(self, error: BaseException | None = None) -> LineageBatch:
        """End the run (FAIL with `error`'s class, else COMPLETE) and store it. Returns its
        batch; never raises for a store that refuses it (see `stored` and the log)."""
        if self._stopped:
            return self.batch()
        self._stopped = True
        hooks.finish(self)
        if self._token is not None:
            hooks.leave(self._token)
            self._token = None
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._excepthook_before
        atexit.unregister(self._at_exit)
        self._record.end(error)
        batch = self.batch()
        try:
            self._deliver(batch)
            self.stored = True
        except Exception as failure:
            logger.warning(
                "lineage of Python run %s of job %r not stored (%s); the job is unaffected",
                self._record.header.run_id,
                self.job,
                type(failure).__name__,
            )
        self._emit("complete" if self._record.status == COMPLETE else "fail", batch)
        return batch

    def __enter__(self) -> PythonTracker:
        self._token = hooks.enter(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(exc)

    # -- from the hooks -------------------------------------------------------------------

    def saw(self, hook: Hook, call: Call) -> None:
        """A hooked call returned while this run was going: record what it read or wrote."""
        if self._stopped:
            return
        try:
            item = hook.describe(call, self._naming)
        except NotDescribed as unknown:
            self._failed(hook, str(unknown))
        except Exception as error:  # never the caller's problem; the class only, never a value
            self._failed(hook, f"the hook failed ({type(error).__name__})")
        else:
            if item is not None:
                self._record.observe(item)

    # -- inside ---------------------------------------------------------------------------

    def _failed(self, hook: Hook, reason: str) -> None:
        if self._record.not_recorded(hook.call, reason):
            logger.warning("Python run of job %r: %s: lineage not recorded: %s", self.job, hook.call, reason)

    def _deliver(self, batch: LineageBatch) -> None:
        if self._shipper is not None:
            self._shipper.ship(batch)
            return
        from tracelake.store import LineageStore

        store = self._store if isinstance(self._store, LineageStore) else LineageStore(self._store)
        try:
            if self._record.status != COMPLETE:
                batch = keeping(batch, stored_edges(store, self.process_urn, SIGNAL))
            store.ingest(batch)
        finally:
            if store is not self._store:
                store.close()

    def _emit(self, event: str, batch: LineageBatch | None = None) -> None:
        if self._emitter is not None:
            record = self._record
            tell(self._emitter, event, record.run, batch or record.batch(), record.error_class, logger)

    def _excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        self._uncaught = value
        self._excepthook_before(kind, value, tb)

    def _at_exit(self) -> None:
        self.stop(self._uncaught)


def track(
    job: str,
    *,
    store: LineageStore | str | None = None,
    shipper: Shipper | None = None,
    models: Mapping[str, str] | None = None,
    emitter: LineageEmitter | None = None,
) -> PythonTracker:
    """Track this process's data and model I/O as one run of `job`, from now until `stop()`,
    the end of a `with` block, or the interpreter's exit.

    `store`: a LineageStore or a URL (default: `TRACELAKE_DB`); or `shipper` to send the run
    elsewhere (`HttpShipper` to a Tracelake server). `models`: model files' locations → model
    names, so that a file is the model a config or a service names (`ai.model/<name>`);
    otherwise a model is named by its file's location. `emitter`: OpenLineage run events out
    (START now, COMPLETE or FAIL at the end), with the run it ran inside as their `parent`.
    """
    return PythonTracker(job, store=store, shipper=shipper, models=models, emitter=emitter)


def run_contexts() -> list[RunContext]:
    """What code running here runs inside, innermost first: a web request, a tracked Spark run,
    an Airflow task."""
    found: list[RunContext] = []
    probes = sys.modules.get("tracelake.collect.probes")
    request = probes.current_request() if probes is not None else None
    if request is not None:
        endpoint = request.endpoint or f"web.endpoint/{request.handler}"
        found.append(RunContext("web", f"web.handler/{request.handler}", request.trace_id or None, endpoint))
    spark = sys.modules.get("tracelake.spark.tracker")
    spark_run = spark.running() if spark is not None else None
    if spark_run is not None:
        found.append(RunContext("spark", spark_run.process_urn, spark_run.run.run_id))
    dag, task = os.environ.get("AIRFLOW_CTX_DAG_ID"), os.environ.get("AIRFLOW_CTX_TASK_ID")
    if dag and task:
        namespace = os.environ.get("OPENLINEAGE_NAMESPACE", "default")
        dag_run = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID", "")
        attempt = os.environ.get("AIRFLOW_CTX_TRY_NUMBER", "")
        run_id = f"airflow:{dag}/{task}/{dag_run}/{attempt}" if dag_run else None
        found.append(RunContext("airflow", names.job_urn(namespace, f"{dag}.{task}"), run_id))
    return found


def _model_key(path: str) -> str:
    """A `models=` key as the hooks will see the file: a location, absolute when local."""
    return location(path) or path


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        return None
