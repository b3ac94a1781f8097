"""Each Spark action's analyzed plan, captured in the driver's JVM and read back from a journal.

The listener is Java (`jvm/TracelakeCapture.java`), compiled in the driver's JVM by Janino, the
compiler Spark ships for its own code generation: no jar to install, and no Python on the
listener bus. For every action it appends one JSON line to a journal segment in a directory of
the tracker's own: the plan's JSON, the facts the JSON leaves null (a relation's files, a
write's path, format, mode and schema; relations looked at once per DataFrame) and the action's
timing; a failed action, its exception's class. `CaptureJournal.read` turns new lines into
`ActionCapture`s and `ActionFailure`s. Before that design, a py4j listener asked the JVM for the
same facts in 4–14 round trips an action and ran Python on the bus (~5 ms an action); the Java
one took ~0.7 ms, most of it Spark's `toJSON()` asking Scala reflection for every node's field
names. The listener now writes the same JSON itself, byte for byte, with the names looked up
once per class (~0.3 ms an action); `VERIFY_PLAN_JSON` checks it against Spark's on every plan.

The journal is also what makes a run durable before it is stored: `spark_journal` says where
it lives, how it is synced and bounded, and how a dead driver's journal is found again. Nothing
here may fail the user's job: errors are logged by their class only, never a message that could
hold record values.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from tracelake.collect import spark_rdd
from tracelake.collect.spark_datasets import LIFECYCLE_COMMANDS, WRAPPER_WRITES, WRITE_COMMANDS
from tracelake.collect.spark_journal import TRIM_BYTES, SegmentReader
from tracelake.collect.spark_lineage import NESTED_WRITE, Details, detail_requests
from tracelake.collect.spark_plan import PlanNode, parse_plan, relation_key
from tracelake.model import utcnow

logger = logging.getLogger("tracelake.spark")

_LISTENER_CLASS = "TracelakeCapture"
# Set (to anything) to check every plan's JSON against Spark's own `toJSON()`: the listener
# writes Spark's on a difference, and counts them (`TracelakeCapture.planJsonChecks`).
VERIFY_PLAN_JSON = "TRACELAKE_VERIFY_PLAN_JSON"
_RELATION_KINDS = frozenset({"relation", "v2_relation", "rdd"})


@dataclass(slots=True)
class ActionCapture:
    """One successful action: its name, its parsed plan and the JVM details it needed."""

    func_name: str
    plan: PlanNode
    details: Details
    duration_ms: float  # the action's own time, as Spark measured it
    listener_ms: float  # what capturing it cost on the listener bus thread
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class ActionFailure:
    """One failed action: its name and the JVM exception's class."""

    func_name: str
    error_class: str
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class RddAction:
    """An RDD action of PySpark: what it wrote (`saveAsTextFile`, …; no path for `collect`,
    `count`…) and its RDD's sources."""

    func_name: str
    path: str | None
    file_format: str
    sources: dict[str, str]  # what the JVM found: Hadoop inputs, ancestor RDD ids
    duration_ms: float
    listener_ms: float
    at: datetime = field(default_factory=utcnow)


@dataclass(slots=True)
class RddOrigin:
    """`df.rdd`: the RDD `rdd_id` holds the rows of the DataFrame whose plan this is."""

    rdd_id: int
    plan: PlanNode
    details: Details
    at: datetime = field(default_factory=utcnow)


Captured = ActionCapture | ActionFailure | RddAction | RddOrigin


class CaptureJournal:
    """One tracker's listener in the JVM and the journal it writes in `directory`; `read` what
    is new (`spark_journal` says where journals live and how they are read)."""

    def __init__(self, spark: Any, directory: Path, *, segment_bytes: int | None = None) -> None:
        self._spark = spark
        self.directory = directory
        self.errors = 0
        self._reader = SegmentReader(directory)
        self._lock = threading.Lock()
        self._listener = new_listener(spark.sparkContext._gateway)
        if os.environ.get(VERIFY_PLAN_JSON):
            self._listener.setVerifyPlanJson(True)
        if segment_bytes is not None:
            self._listener.setSegmentBytes(segment_bytes)
        self._listener.open(
            spark._jsparkSession,
            str(directory),
            NESTED_WRITE,
            ",".join(sorted(WRAPPER_WRITES)),
            ",".join(sorted(WRITE_COMMANDS)),
            ",".join(sorted(LIFECYCLE_COMMANDS)),
        )
        spark_rdd.attach(spark.sparkContext, self._listener)

    @property
    def segment(self) -> int:
        """The segment being read: those below it are read to their end."""
        return self._reader.segment

    def read(self) -> list[Captured]:
        """The actions journalled since the last read, in the order they ended."""
        with self._lock:
            items, errors = parse_lines(self._reader.read())
            self.errors += errors
        return items

    def trim(self, stored_below: int) -> bool:
        """Past `TRIM_BYTES`, remove the segments below `stored_below`: their lineage is stored.
        True if any was removed."""
        with self._lock:
            return self._reader.size() > TRIM_BYTES and self._reader.trim(
                min(stored_below, self._reader.segment)
            )

    def close(self) -> None:
        """Detach the listener: the journal holds all it will (`read` it, then `discard` it)."""
        spark_rdd.detach(self._spark.sparkContext, self._listener)
        try:
            self._listener.close(self._spark._jsparkSession)
        except Exception as error:
            logger.warning("Spark listener not detached (%s)", type(error).__name__)


_compiled: dict[int, Any] = {}
_compile_lock = threading.Lock()


def new_listener(gateway: Any) -> Any:
    """A new listener object in the JVM of `gateway`; its class compiled on first use, once per
    JVM."""
    with _compile_lock:
        made = _compiled.get(id(gateway))
        if made is None:
            jvm = gateway.jvm
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
            source = resources.files("tracelake.collect").joinpath("jvm", f"{_LISTENER_CLASS}.java")
            compiler.cook(source.read_text(encoding="utf-8"))
            listener_class = compiler.getClassLoader().loadClass(_LISTENER_CLASS)
            constructor = listener_class.getConstructor(gateway.new_array(jvm.java.lang.Class, 0))
            made = _compiled[id(gateway)] = (constructor, gateway.new_array(jvm.java.lang.Object, 0))
    constructor, no_arguments = made
    return constructor.newInstance(no_arguments)


def parse_lines(lines: list[bytes]) -> tuple[list[Captured], int]:
    """Journal lines as captured actions, and how many could not be read (each logged)."""
    items: list[Captured] = []
    errors = 0
    for line in lines:
        item = _item(line)
        if item is None:
            errors += 1
        else:
            items.append(item)
    return items, errors


def _item(line: bytes) -> Captured | None:
    func_name = "?"
    try:
        record = json.loads(line)
        func_name = str(record.get("func"))
        at = datetime.fromtimestamp(record["at_ms"] / 1000, UTC)
        kind = record.get("kind")
        if kind == "failure":
            return ActionFailure(func_name, str(record.get("error_class")), at)
        if kind == "rdd_action":
            sources = {key: str(value) for key, value in record["rdd"].items()}
            duration, capture = record["duration_ns"] / 1e6, record["capture_ns"] / 1e6
            path = record["path"] or None
            return RddAction(func_name, path, record["format"], sources, duration, capture, at)
        if kind not in ("success", "rdd_origin"):
            raise _JvmError(str(record.get("error_class")))
        for problem in record.get("problems") or ():
            # one node's details missing costs that node's name, not the action's lineage
            logger.warning("Spark plan detail of a %s not fetched (%s)", *problem.split(" ", 1))
        plan = parse_plan(record["plan"])
        details = _details(func_name, plan, record.get("relations") or {}, record.get("command") or {})
        if kind == "rdd_origin":
            return RddOrigin(int(record["rdd_id"]), plan, details, at)
        return ActionCapture(
            func_name, plan, details, record["duration_ns"] / 1e6, record["capture_ns"] / 1e6, at
        )
    except Exception as error:
        cause = error.error_class if isinstance(error, _JvmError) else type(error).__name__
        logger.warning(
            "lineage of Spark action %r not captured (%s); the action is unaffected", func_name, cause
        )
        return None


class _JvmError(Exception):
    def __init__(self, error_class: str) -> None:
        super().__init__(error_class)
        self.error_class = error_class


def _details(
    func_name: str, plan: PlanNode, relations: dict[str, dict[str, Any]], command: dict[str, Any]
) -> Details:
    """The journalled facts, by the plan node that needs them."""
    details: Details = {}
    for node, kind in detail_requests(func_name, plan):
        # relations by their exprIds; anything else detail_requests asks of is the root command
        key = ",".join(map(str, relation_key(node)))
        found = relations.get(key) if kind in _RELATION_KINDS else command
        if found:
            details[id(node)] = {key: str(value) for key, value in found.items()}
    return details


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
