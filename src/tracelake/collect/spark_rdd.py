"""PySpark's RDD actions and `df.rdd`, told to the JVM listener: no QueryExecutionListener hears
of them, so without this an RDD job (`sc.textFile(a).map(…).saveAsTextFile(b)`) leaves nothing.

`install` wraps, once per process, the RDD methods that write files (`saveAsTextFile`,
`saveAsPickleFile`, `saveAsSequenceFile`, `saveAsHadoopFile`, `saveAsNewAPIHadoopFile`), those
that run a job and write nothing (`collect`, `count`, `take`… and `SparkContext.runJob`), and the
`DataFrame.rdd` property. A wrapper does nothing more than the original unless a tracker's
listener is attached to the RDD's SparkContext (`attach`); then, after the call, it hands the
listener the RDD (one py4j call), which walks the RDD's ancestors in the JVM and journals the
action, what it wrote and its Hadoop inputs — or, for `df.rdd`, the DataFrame's plan, so that an
RDD made from a DataFrame leads back to the DataFrame's sources. A wrapper never fails the
user's call: its own errors are logged by their class.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("tracelake.spark")

# The RDD methods that write files (each takes the path first) → the files' format.
RDD_SAVES = {
    "saveAsTextFile": "text",
    "saveAsPickleFile": "sequencefile",
    "saveAsSequenceFile": "sequencefile",
    "saveAsHadoopFile": "hadoop",
    "saveAsNewAPIHadoopFile": "hadoop",
}

# RDD actions that run a job and write nothing, by the name the user called; any other comes
# down to one of these or to `SparkContext.runJob`, and one made of others is told once.
RDD_READS = (
    "collect",
    "count",
    "take",
    "first",
    "reduce",
    "fold",
    "aggregate",
    "foreach",
    "foreachPartition",
    "toLocalIterator",
    "countByKey",
    "countByValue",
    "isEmpty",
    "sum",
    "max",
    "min",
    "mean",
    "stats",
)

_attached: dict[int, list[Any]] = {}  # id(SparkContext) → JVM listeners
_inside = threading.local()  # within a wrapped read action (of this thread)
_lock = threading.Lock()
_installed = False


def attach(context: Any, listener: Any) -> None:
    """Tell `listener` (a JVM TracelakeCapture) of the RDD writes of `context`."""
    install()
    with _lock:
        _attached.setdefault(id(context), []).append(listener)


def detach(context: Any, listener: Any) -> None:
    with _lock:
        # by identity: a py4j object's == asks the JVM
        listeners = [known for known in _attached.get(id(context), ()) if known is not listener]
        if listeners:
            _attached[id(context)] = listeners
        else:
            _attached.pop(id(context), None)


def _listeners(context: Any) -> list[Any]:
    if context is None:
        return []
    with _lock:
        return list(_attached.get(id(context), ()))


def install() -> None:
    """Wrap PySpark's RDD writes and `DataFrame.rdd`, once."""
    global _installed
    with _lock:
        if _installed:
            return
        from pyspark.core.context import SparkContext
        from pyspark.core.rdd import RDD
        from pyspark.sql.classic.dataframe import DataFrame

        for name, file_format in RDD_SAVES.items():
            setattr(RDD, name, _wrap_save(getattr(RDD, name), file_format))
        for name in RDD_READS:
            setattr(RDD, name, _wrap_read(getattr(RDD, name), name))
        SparkContext.runJob = _wrap_read(SparkContext.runJob, "runJob")
        made = _wrap_rdd_property(DataFrame.rdd.func)
        made.__set_name__(DataFrame, "rdd")
        DataFrame.rdd = made
        _installed = True


def _wrap_save(original: Callable[..., Any], file_format: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def save(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        listeners = _listeners(self.ctx)
        if not listeners:
            return original(self, path, *args, **kwargs)
        started = time.perf_counter_ns()
        try:
            result = original(self, path, *args, **kwargs)
        except BaseException as error:
            _tell(listeners, original.__name__, path, file_format, self, 0, _error_class(error))
            raise
        duration = time.perf_counter_ns() - started
        _tell(listeners, original.__name__, path, file_format, self, duration, "")
        return result

    return save


def _wrap_read(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An action that runs a job over an RDD and writes nothing: `rdd` is its first argument
    after `self` for `SparkContext.runJob`, `self` otherwise."""

    @functools.wraps(original)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        rdd = args[0] if name == "runJob" and args else self
        listeners = _listeners(getattr(rdd, "ctx", None))
        if not listeners or getattr(_inside, "active", False):
            return original(self, *args, **kwargs)
        started = time.perf_counter_ns()
        _inside.active = True  # an action made of others (count → sum → collect) is one
        try:
            result = original(self, *args, **kwargs)
        except BaseException as error:
            _tell(listeners, name, "", "", rdd, 0, _error_class(error))
            raise
        finally:
            _inside.active = False
        _tell(listeners, name, "", "", rdd, time.perf_counter_ns() - started, "")
        return result

    return read


def _tell(
    listeners: list[Any], name: str, path: str, file_format: str, rdd: Any, duration_ns: int, error: str
) -> None:
    """Hand the listeners an RDD action (`path` empty for one that writes nothing)."""
    try:
        jvm_rdd = rdd._jrdd.rdd()
        for listener in listeners:
            listener.rddAction(name, str(path), file_format, jvm_rdd, duration_ns, error)
    except Exception as problem:
        logger.warning("lineage of RDD action %s not captured (%s)", name, type(problem).__name__)


def _wrap_rdd_property(original: Callable[[Any], Any]) -> functools.cached_property[Any]:
    @functools.wraps(original)
    def rdd(self: Any) -> Any:
        made = original(self)
        listeners = _listeners(made.ctx)
        if listeners:
            try:
                rdd_id = made._jrdd.rdd().id()
                for listener in listeners:
                    listener.rddOrigin(self._jdf, rdd_id)
            except Exception as problem:
                logger.warning("lineage of df.rdd not captured (%s)", type(problem).__name__)
        return made

    return functools.cached_property(rdd)


def _error_class(error: BaseException) -> str:
    """A failed write's error class: the JVM exception's, when it failed there."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return str(java.getClass().getName())
    return type(error).__name__
