"""Writes a thread of this process has promised a store and not made yet, so that the process
reads its own writes.

A Spark run's end is stored by the tracker's worker after `stop()` has returned, so the job goes
on while its lineage is written (the run's journal already holds it: a process that dies first
loses nothing, `spark.tracker`). Every connection to that store opened in this process meanwhile,
through any `LineageStore` on it, first waits for what other threads owe it (`settle`, called by
the engine as it connects): what a process stored is what it reads next, as if the write had
been made before `stop()` returned.
"""

from __future__ import annotations

import threading
from collections import Counter

from tracelake.model.store_urls import store_label

# How long a connection waits for writes owed to its store before it goes on without them: a
# writer stuck behind another process's lock must not hang every reader of the store.
SETTLE_TIMEOUT = 60.0

_changed = threading.Condition()
_owed: Counter[tuple[str, threading.Thread]] = Counter()


def promise(url: str, writer: threading.Thread) -> None:
    """`writer` owes the store at `url` a write, until it says it is `kept`."""
    with _changed:
        _owed[store_label(url), writer] += 1


def kept(url: str, writer: threading.Thread) -> None:
    """`writer` made (or gave up) a write it promised the store at `url`."""
    with _changed:
        key = (store_label(url), writer)
        _owed[key] -= 1
        if _owed[key] <= 0:
            del _owed[key]
        _changed.notify_all()


def settle(url: str, timeout: float = SETTLE_TIMEOUT) -> bool:
    """Wait until no thread but this one owes the store at `url` a write; False on timeout."""
    if not _owed:  # the usual case, read without the lock: nothing is ever owed
        return True
    label, here = store_label(url), threading.current_thread()

    def others_owe() -> bool:
        return any(owed_to == label and writer is not here for owed_to, writer in _owed)

    with _changed:
        return _changed.wait_for(lambda: not others_owe(), timeout=timeout)
