"""Runtime lineage of Python data and model code in one line: `tracelake.python.track(job="…")`.

`track` returns a `PythonTracker`, one run of the process `python.job/<job>`: the datasets it
reads and writes through pandas, pyarrow and Spark hand-offs, and the models it saves and loads
(joblib, pickle, scikit-learn estimators, ONNX, safetensors), joined into lineage with signal
`ai_runtime` (`tracker`; the calls are wrapped by `hooks`, described by `collect.python_io`).
`install()` wraps them without starting a run: a service calls it first, so that names its modules
bind later (`from pandas import read_parquet`) are the wrapped ones.
"""

from tracelake.collect.python_run import PROCESS_PREFIX, DataRead, DataWrite, RunContext
from tracelake.python.hooks import install
from tracelake.python.tracker import PythonTracker, run_contexts, track

__all__ = [
    "PROCESS_PREFIX",
    "DataRead",
    "DataWrite",
    "PythonTracker",
    "RunContext",
    "install",
    "run_contexts",
    "track",
]
