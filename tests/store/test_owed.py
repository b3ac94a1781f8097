"""Writes owed to a store: a connection in this process waits for what another thread promised
it, never for what its own thread owes, and not past its timeout."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tracelake.model import LineageBatch, Process
from tracelake.store import LineageStore, owed


def test_a_connection_waits_for_the_write_another_thread_owes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    LineageStore(url).close()
    written = threading.Event()

    def writer() -> None:
        written.wait()
        try:
            with LineageStore(url) as store:  # the owing thread itself is not held up by its promise
                store.ingest(LineageBatch(processes=[Process(urn="job/owed", name="owed")]))
        finally:
            owed.kept(url, thread)

    thread = threading.Thread(target=writer)
    owed.promise(url, thread)
    thread.start()
    threading.Timer(0.5, written.set).start()
    started = time.monotonic()
    # the same file by another spelling of its URL is the same store
    with LineageStore(f"sqlite:///{tmp_path}/./lineage.db") as store:
        assert store.node("job/owed") is not None
    assert time.monotonic() - started >= 0.4
    thread.join()


def test_a_promise_kept_by_no_one_holds_a_reader_only_until_its_timeout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    stuck = threading.Thread(target=lambda: None)
    owed.promise(url, stuck)
    try:
        assert not owed.settle(url, timeout=0.2)
        assert owed.settle(f"sqlite:///{tmp_path / 'other.db'}", timeout=0.2)  # another store is not held
    finally:
        owed.kept(url, stuck)
    assert owed.settle(url, timeout=0.2)
