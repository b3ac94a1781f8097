"""Runtime lineage of PySpark jobs in one line: `tracelake.spark.track(spark, job="…")`.

`track` returns a `SparkTracker`, one run of the process `spark.job/<job>`, whose lineage is
durable as each action ends (`tracker`); `recover` stores what a dead driver journalled.
`local` starts the quiet local sessions Tracelake's own commands use.
"""

from tracelake.collect.spark_run import PROCESS_PREFIX, ActionRecord
from tracelake.collect.tracked_runs import ABORT, COMPLETE, FAIL, RUNNING
from tracelake.spark.tracker import Recovered, SparkTracker, recover, track

__all__ = [
    "ABORT",
    "COMPLETE",
    "FAIL",
    "PROCESS_PREFIX",
    "RUNNING",
    "ActionRecord",
    "Recovered",
    "SparkTracker",
    "recover",
    "track",
]
