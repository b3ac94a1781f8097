"""Lineage out: emitters that send what a collector captured to other lineage systems.

A collector that tracks runs (the Spark tracker) calls an emitter at the run's start and end;
`LineageEmitter` is the whole contract, so any sink with these three methods fits.
`OpenLineageEmitter` is the one that ships: OpenLineage RunEvents through the openlineage-python
client's transports.
"""

from __future__ import annotations

from typing import Protocol

from tracelake.emit.openlineage import OpenLineageEmitter, run_event
from tracelake.model import LineageBatch, Run

__all__ = ["LineageEmitter", "OpenLineageEmitter", "run_event"]


class LineageEmitter(Protocol):
    """What a run tracker calls; an emitter must not raise for its sink's failures."""

    def start(self, run: Run, batch: LineageBatch) -> None: ...

    def complete(self, run: Run, batch: LineageBatch) -> None: ...

    def fail(self, run: Run, batch: LineageBatch, error_class: str) -> None: ...
