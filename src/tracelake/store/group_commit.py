"""Group commit: many concurrent ingests written in one transaction, each caller still answered
only once its own batches are durable.

A server receiving one OpenLineage event per request would spend nearly all its time opening
and committing transactions (about 1.2 ms each on SQLite, against 0.17 ms per event written in a
group). Callers queue their batches and wait; one writer thread takes everything queued while
the previous transaction was committing and writes it in one `store.ingest`. If a
group fails, each caller's batches are retried alone, so one bad request fails alone and the
others still land: all-or-nothing per caller, never a partial write.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

from tracelake.model import LineageBatch
from tracelake.store.sqlstore import LineageStore


class GroupCommit:
    def __init__(self, store: LineageStore, *, max_group: int = 1000) -> None:
        self.store = store
        self.max_group = max_group
        self._ready = threading.Condition()
        self._pending: list[tuple[Sequence[LineageBatch], Future[None]]] = []
        self._writer: threading.Thread | None = None
        self.groups = 0  # transactions written, for figures

    def submit(self, batches: Sequence[LineageBatch]) -> Future[None]:
        """Queue `batches`; the future is done once they are committed, or raises what their own
        write raised. An async caller awaits it with `asyncio.wrap_future`, holding no thread."""
        done: Future[None] = Future()
        with self._ready:
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write, name="tracelake-group-commit", daemon=True
                )
                self._writer.start()
            self._pending.append((batches, done))
            self._ready.notify()
        return done

    def _write(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                group, self._pending = self._pending[: self.max_group], self._pending[self.max_group :]
            self._commit(group)

    def _commit(self, group: list[tuple[Sequence[LineageBatch], Future[None]]]) -> None:
        try:
            self.store.ingest([batch for batches, _ in group for batch in batches])
            self.groups += 1
        except Exception as error:
            if len(group) == 1:
                group[0][1].set_exception(error)
                return
            for alone in group:  # find the caller whose batches fail; the others land
                self._commit([alone])
            return
        for _, done in group:
            done.set_result(None)
