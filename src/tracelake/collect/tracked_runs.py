"""What the run trackers (Spark's `spark_run`, Python's `python_run`) share: how a run stands,
what its batch says of its job's lineage when it did not complete, how an emitter is told.

A completed run's lineage is its job's lineage: its batch replaces the version before it. A run
still going, or one that failed or was aborted, may not have reached some of the job's writes
(yet, or at all), which is no evidence that the job stopped making them: its batch carries the
job's stored edges of the same signal next to what the run showed. An emitter
(`emit.LineageEmitter`) hears of a run's start and end; a sink that fails is logged, never the
job's failure.
"""

from __future__ import annotations

import logging
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


def tell(
    emitter: Any, event: str, run: Any, batch: LineageBatch, error_class: str | None, log: logging.Logger
) -> None:
    """Tell `emitter` (an `emit.LineageEmitter`) of a run's `event`: start, complete or fail."""
    try:
        if event == "start":
            emitter.start(run, batch)
        elif event == "complete":
            emitter.complete(run, batch)
        else:
            emitter.fail(run, batch, error_class or "Exception")
    except Exception as error:  # a sink never fails the job it watches
        log.warning("run event %s of %s not emitted (%s)", event, run.process, type(error).__name__)
