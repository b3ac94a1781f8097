"""A Spark DataFrame handed to Python (`toPandas`, `toArrow`): what it read, column by column.

The hand-off is where a Spark pipeline's data enters pandas or a model library, and the only
moment its plan is at hand. The tracker's listener class (`jvm/TracelakeCapture.java`, compiled
once per JVM) describes the DataFrame's analyzed plan as it would journal an action — the plan's
JSON and its relations' facts — and returns the line instead of writing it; the Spark
collector's own analysis (`spark_lineage.analyze_action`) then gives the datasets read and,
for each column of the result, the source columns its value derives from: copied, computed,
aggregated, or chosen by (a CASE on `religion` encodes it); a column that only filters, joins,
groups or orders rows puts nothing of itself in a cell. One py4j call and a
few milliseconds, at a call that moves a whole result to the driver anyway.
"""

from __future__ import annotations

from typing import Any

from tracelake.collect.python_run import DataRead, NotDescribed
from tracelake.collect.spark_lineage import analyze_action
from tracelake.collect.spark_listener import ActionCapture, new_listener, parse_lines
from tracelake.model import Transformation


def handoff_read(call: str, frame: Any) -> DataRead:
    """The `DataRead` of handing `frame` (a classic PySpark DataFrame) to Python by `call`."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        raise NotDescribed("a DataFrame with no JVM plan (Spark Connect?)")
    listener = new_listener(frame.sparkSession.sparkContext._gateway)
    line = str(listener.describe(call, jdf.queryExecution()))
    items, _ = parse_lines([line.encode()])
    capture = items[0] if items else None
    if not isinstance(capture, ActionCapture):
        raise NotDescribed("its plan could not be read")
    lineage = analyze_action(capture.func_name, capture.plan, capture.details)
    columns = {
        name: frozenset(source for source, transformation in deps if _in_the_value(transformation))
        for name, deps in lineage.outputs
    }
    return DataRead(call, tuple(lineage.reads), columns)


def _in_the_value(transformation: Transformation) -> bool:
    return transformation.is_direct or transformation is Transformation.CONDITIONAL
