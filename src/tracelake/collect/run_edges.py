"""What a tracked run's batch says of its job's lineage when the run did not complete.

A completed run's lineage is its job's lineage: its batch replaces the version before it. A run
still going, or one that failed or was aborted, may not have reached some of the job's writes
(yet, or at all), which is no evidence that the job stopped making them: its batch carries the
job's stored edges of the same signal next to what the run showed. The Spark tracker
(`spark_run`) and the Python one (`python_run`) both store their runs this way.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from tracelake.model import Confidence, FlowEdge, LineageBatch, Signal, Transformation

# How a tracked run stands, as its Run's status says (OpenLineage's run states).
RUNNING, COMPLETE, FAIL, ABORT = "RUNNING", "COMPLETE", "FAIL", "ABORT"


class EdgeSource(Protocol):
    """What a run's batch asks of the store (a LineageStore is one)."""

    def edges(self, *, as_of: datetime | None = None, process: str | None = None) -> list[Any]: ...


def stored_edges(store: EdgeSource, process: str, signal: Signal) -> list[FlowEdge]:
    """The edges of `process` learnt from `signal` that the store holds now."""
    return [
        FlowEdge(
            e.source,
            e.target,
            e.process,
            signal,
            Confidence(e.confidence),
            Transformation(e.transformation) if e.transformation else None,
        )
        for e in store.edges(process=process)
        if e.signal == signal
    ]


def keeping(batch: LineageBatch, kept: list[FlowEdge]) -> LineageBatch:
    """`batch` with the `kept` edges it does not itself say."""
    seen = {edge.key for edge in batch.edges}
    return replace(batch, edges=[*batch.edges, *(edge for edge in kept if edge.key not in seen)])
