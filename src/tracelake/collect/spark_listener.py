"""The py4j `QueryExecutionListener` that captures each Spark action's analyzed plan.

Thin on purpose: on the listener bus's thread it takes the plan's JSON, asks the JVM for the
few facts the JSON leaves null (a relation's files, a write's path, format and mode, JDBC
options) with a handful of targeted calls, and hands an `ActionCapture` to its sink. Relation
facts are cached by the relation's exprIds, so a DataFrame reused by many actions is asked
about once; JSON comes through a file rather than the socket (see `JsonChannel`). Nothing here
may fail the user's job: every error is logged — the action and the error class only, never a
message that could hold record values — and swallowed.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from tracelake.collect.spark_lineage import NESTED_WRITE, Details, detail_requests, worth_capturing
from tracelake.collect.spark_plan import NodeRef, PlanNode, Unit, parse_plan, relation_key
from tracelake.model import utcnow

logger = logging.getLogger("tracelake.spark")

LISTENER_INTERFACE = "org.apache.spark.sql.util.QueryExecutionListener"
_CACHE_LIMIT = 10_000


@dataclass(slots=True)
class ActionCapture:
    """One successful action: its name, its parsed plan and the JVM details it needed."""

    func_name: str
    plan: PlanNode
    details: Details
    duration_ms: float  # the action's own time, as Spark measured it
    listener_ms: float  # what capturing it cost on the listener thread
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class ActionFailure:
    """One failed action: its name and the JVM exception's class."""

    func_name: str
    error_class: str
    at: datetime = field(default_factory=utcnow)


Sink = Callable[[ActionCapture | ActionFailure], None]
JsonOf = Callable[[Any, str], str]


class JsonChannel:
    """Moves a JVM object's JSON to Python through a file, in two py4j calls.

    py4j writes a reply longer than 8 KB in pieces, and Nagle's algorithm on the JVM's side
    meeting delayed ACKs on ours stalls each such reply by about 40 ms (measured here: a 13 KB
    plan took 44 ms through `toJSON()`, one of 3 KB 0.3 ms). So Jackson writes the object's
    json4s value straight into a file of this channel's own, which Python reads: two round
    trips (`jsonValue()`, `writeValue`) whatever the size. One channel serves every listener on
    a JVM (`JsonChannel.of`): listeners run on the listener bus, one at a time, and the lock
    keeps it so whatever calls them.
    """

    _shared: ClassVar[dict[int, JsonChannel]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, gateway: Any) -> None:
        jvm = gateway.jvm
        self._dir = tempfile.mkdtemp(prefix="tracelake-spark-")
        self._path = os.path.join(self._dir, "value.json")
        self._mapper = getattr(getattr(jvm.org.json4s.jackson, "JsonMethods$"), "MODULE$").mapper()
        self._file = jvm.java.io.File(self._path)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, gateway: Any) -> JsonChannel:
        """The JVM's shared channel, made on first use and removed when Python exits."""
        with cls._shared_lock:
            channel = cls._shared.get(id(gateway))
            if channel is None:
                channel = cls._shared[id(gateway)] = cls(gateway)
                atexit.register(channel.close)
            return channel

    def read(self, value: Any) -> str:
        """The JSON text of a json4s `JValue` living in the JVM."""
        with self._lock:
            self._mapper.writeValue(self._file, value)
            with open(self._path, encoding="utf-8") as handle:
                return handle.read()

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class ListenerQueue:
    """Waits for Spark to have told the QueryExecutionListeners of every finished action.

    They run on the listener bus's `shared` queue. `LiveListenerBus.waitUntilEmpty` would wait
    for every queue (the UI's status store is often behind by many task events) and polls in
    10 ms sleeps; asking the shared queue alone, without a JVM-side sleep, usually answers in
    one round trip. Found once per SparkContext (`ListenerQueue.of`), after a listener is
    registered: Spark makes the shared queue for the first one.
    """

    _known: ClassVar[dict[int, ListenerQueue]] = {}

    def __init__(self, jvm_context: Any) -> None:
        self._bus = jvm_context.listenerBus()
        self._queue: Any = None
        try:
            queues = self._bus.queues().iterator()
            while queues.hasNext():
                queue = queues.next()
                if str(queue.name()) == "shared":
                    self._queue = queue
        except Exception as error:  # another Spark's internals: wait for the whole bus
            logger.debug("listener bus queues not reachable (%s)", type(error).__name__)

    @classmethod
    def of(cls, context: Any) -> ListenerQueue:
        """The queue of `context` (a pyspark SparkContext), looked up on first use."""
        found = cls._known.get(id(context))
        if found is None or found._queue is None:
            found = cls._known[id(context)] = cls(context._jsc.sc())
        return found

    def wait_until_empty(self, timeout: float) -> bool:
        if self._queue is None:
            return bool(self._bus.waitUntilEmpty(max(int(timeout * 1000), 1)))
        deadline = time.monotonic() + timeout
        pause = 0.0005
        # a deadline in the past makes the JVM answer at once instead of sleeping 10 ms a turn
        while not self._queue.waitUntilEmpty(0):
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return True


class LineageListener:
    """Implements Spark's QueryExecutionListener over py4j; hands captures to `sink`."""

    def __init__(self, sink: Sink, name: str = "tracelake", gateway: Any = None) -> None:
        self._sink = sink
        self._name = name
        self._relations: dict[tuple[int, ...], dict[str, str]] = {}
        self._channel: JsonChannel | None = None
        if gateway is not None:
            try:
                self._channel = JsonChannel.of(gateway)
            except Exception as error:
                logger.warning("plans will come through the py4j socket (%s)", type(error).__name__)
        self.errors = 0

    # -- QueryExecutionListener -----------------------------------------------------------

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        started = time.perf_counter()
        try:
            capture = self._capture(str(funcName), qe, int(durationNs))
            if capture is not None:
                capture.listener_ms = (time.perf_counter() - started) * 1000
                self._sink(capture)
        except Exception as error:  # never into Spark: the action has succeeded
            self.errors += 1
            logger.warning(
                "lineage of Spark action %r not captured (%s); the action is unaffected",
                str(funcName),
                type(error).__name__,
            )

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        try:
            error_class = str(exception.getClass().getName())
            self._sink(ActionFailure(str(funcName), error_class))
        except Exception as error:
            self.errors += 1
            logger.warning(
                "failure of Spark action %r not recorded (%s)", str(funcName), type(error).__name__
            )

    # py4j forwards these to Python too: `unregister` compares listeners with equals
    def equals(self, other: Any) -> bool:
        return other is self

    def hashCode(self) -> int:
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:
        return f"TracelakeListener({self._name})"

    class Java:
        implements: ClassVar[list[str]] = [LISTENER_INTERFACE]

    # -- capture --------------------------------------------------------------------------

    def _capture(self, func_name: str, qe: Any, duration_ns: int) -> ActionCapture | None:
        if func_name == NESTED_WRITE:
            return None  # the command that ran it reports the same write, naming its table
        analyzed = qe.analyzed()
        if not worth_capturing(func_name, str(analyzed.nodeName())):
            return None
        plan = parse_plan(json.loads(self._json(analyzed, "toJSON")))
        requests = detail_requests(func_name, plan)
        details: Details = {}
        if requests:
            navigator = _Navigator(analyzed)
            for node, kind in requests:
                found = self._details(navigator, node, kind)
                if found:
                    details[node.ref] = found
        return ActionCapture(func_name, plan, details, duration_ns / 1e6, 0.0)

    def _details(self, navigator: _Navigator, node: PlanNode, kind: str) -> dict[str, str]:
        key = relation_key(node) if kind in ("relation", "v2_relation") else None
        if key is not None and key in self._relations:
            return self._relations[key]
        try:
            found = _FETCHERS[kind](navigator.node(node.ref), self._json)
        except Exception as error:
            # one node's details missing costs that node's name, not the action's lineage
            logger.warning("Spark plan detail %s not fetched (%s)", kind, type(error).__name__)
            return {}
        if key is not None:
            if len(self._relations) >= _CACHE_LIMIT:
                self._relations.clear()
            self._relations[key] = found
        return found

    def _json(self, value: Any, fallback: str) -> str:
        """`value`'s JSON (a plan or a data type): through the channel, else its `fallback` method."""
        channel = self._channel
        if channel is not None:
            try:
                return channel.read(value.jsonValue())
            except Exception as error:
                logger.warning("plans will come through the py4j socket (%s)", type(error).__name__)
                self._channel = None
        return str(getattr(value, fallback)())


class _Navigator:
    """Reaches plan nodes on the JVM by `NodeRef`, remembering units and leaf lists on the way."""

    def __init__(self, analyzed: Any) -> None:
        self._units: dict[Unit, Any] = {Unit(): analyzed}
        self._leaves: dict[Unit, Any] = {}

    def unit(self, unit: Unit) -> Any:
        found = self._units.get(unit)
        if found is None:
            if unit.field is not None and unit.owner is not None:
                found = getattr(self.node(unit.owner), unit.field)()
            elif unit.parent is not None and unit.subquery is not None:
                found = self.unit(unit.parent).subqueriesAll().apply(unit.subquery)
            else:
                raise LookupError("a plan unit with no way to reach it")
            self._units[unit] = found
        return found

    def node(self, ref: NodeRef) -> Any:
        root = self.unit(ref.unit)
        if not ref.path:
            return root
        if ref.leaf is not None:
            leaves = self._leaves.get(ref.unit)
            if leaves is None:
                leaves = self._leaves[ref.unit] = root.collectLeaves()
            return leaves.apply(ref.leaf)
        node = root
        for index in ref.path:
            node = node.children().apply(index)
        return node


# -- what to ask the JVM, per kind of node -------------------------------------------------


def _relation(node: Any, _json: JsonOf) -> dict[str, str]:
    relation = node.relation()
    cls = str(relation.getClass().getName())
    if cls.endswith(".HadoopFsRelation"):
        # HadoopFsRelation prints as its format's short name (`parquet`)
        return {
            "type": "files",
            "format": str(relation.toString()),
            "paths": str(relation.location().rootPaths().mkString("\n")),
        }
    if cls.endswith(".JDBCRelation"):
        options = relation.jdbcOptions()
        return {"type": "jdbc", "url": str(options.url()), "table": str(options.tableOrQuery())}
    return {"type": "other", "class": cls}


def _v2_relation(node: Any, _json: JsonOf) -> dict[str, str]:
    """A DataSource V2 table: files (`useV1SourceList` emptied) or a catalog's table by name."""
    table = node.table()
    found = {"type": "v2", "class": str(table.getClass().getName()), "name": str(table.name())}
    if ".datasources.v2." in found["class"]:  # Spark's own FileTables (ParquetTable, CSVTable…)
        try:
            found["paths"] = str(table.paths().mkString("\n"))
            found["format"] = str(table.formatName()).lower()
            found["type"] = "files"
        except Exception:  # not a FileTable after all: keep its name
            pass
    return found


def _written(node: Any, json_of: JsonOf) -> dict[str, str]:
    """What every write has: its mode and the schema of what it writes."""
    return {"mode": str(node.mode().toString()), "schema": json_of(node.query().schema(), "json")}


def _short_name(source: Any) -> str:
    try:
        return str(source.shortName())
    except Exception:  # a format that is no DataSourceRegister
        return str(source.toString()).lower()


def _fs_write(node: Any, json_of: JsonOf) -> dict[str, str]:
    return {
        **_written(node, json_of),
        "path": str(node.outputPath().toString()),
        "format": _short_name(node.fileFormat()),
    }


def _datasource_write(node: Any, json_of: JsonOf) -> dict[str, str]:
    source = node.dataSource()
    found = {
        **_written(node, json_of),
        "provider": str(source.getClass().getName()),
        "format": _short_name(source),
    }
    options = node.options()
    # only the options that name the target; credentials are never read
    for key in ("url", "dbtable", "path"):
        value = options.get(key)
        if value.isDefined():
            found[key] = str(value.get())
    return found


_FETCHERS: dict[str, Callable[[Any, JsonOf], dict[str, str]]] = {
    "relation": _relation,
    "v2_relation": _v2_relation,
    "fs_write": _fs_write,
    "datasource_write": _datasource_write,
    "mode": _written,
}
