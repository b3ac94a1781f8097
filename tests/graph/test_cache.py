"""`IndexCache.get` while another refresh runs: the caller waits for it, and its answer holds every
write committed before the call (a server's reader, after its own commit started a refresh)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.graph.test_traverse import JAN, LAKE_EDGES, H, flow, make_store
from tracelake.graph import IndexCache
from tracelake.model import LineageBatch


def test_a_reader_waits_for_the_refresh_running_and_sees_the_write_before_it(tmp_path: Path) -> None:
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
        cache = IndexCache(store, root=False)
        first = cache.get()
        store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))
        written = store.graph_version()

        cache._lock.acquire()  # a refresh running elsewhere (the background one, another reader)
        threading.Timer(0.2, cache._lock.release).start()
        began = time.monotonic()
        index = cache.get()

        assert time.monotonic() - began >= 0.15  # it waited for the refresh
        assert index.version >= written > first.version
        assert "hive.table/db.report" in index.positions


def test_a_refresh_slower_than_the_budget_leaves_the_reader_the_index_it_has(tmp_path: Path) -> None:
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
        cache = IndexCache(store, root=False, wait_budget=0.1)
        first = cache.get()
        store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))

        cache._lock.acquire()
        try:
            index = cache.get()  # gives up after the budget: the old index, not a wait without end
        finally:
            cache._lock.release()

        assert index is first
