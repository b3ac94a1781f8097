"""Keeps one graph index per store, and keeps it fresh: caught up (or rebuilt) when the store's
graph version moved, and kept on disk beside the store (`index_files`) once it takes long enough
to build that the next process should open it rather than build it again (issue 21).

`TRACELAKE_INDEX` names the folder the index is kept in, or `off` for none; by default it is
beside a SQLite file (`lineage.db.index`), or under `~/.tracelake/index/` for a server's store.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.graph import index_files
from tracelake.graph.catch_up import TAIL_SHARE, catch_up
from tracelake.graph.index import GraphIndex
from tracelake.model.store_urls import files_of, store_label

if TYPE_CHECKING:
    from tracelake.store.sqlstore import LineageStore

logger = logging.getLogger(__name__)

INDEX_ENV = "TRACELAKE_INDEX"
# An index that builds faster than this is rebuilt by the next process rather than kept: writing
# its files would cost about what building it does.
KEEP_AFTER = 0.2
# An index caught up from its kept files is written again once what it caught up passes this
# share of them: until then each new process catches up from the kept one, at a small cost. The
# share at which a catch-up merges appended rows into its base: the merged index is kept.
REKEEP = TAIL_SHARE


def index_root(store_url: str) -> Path | None:
    """Where the index of the store at `store_url` is kept (`TRACELAKE_INDEX`, else beside it);
    None when it is not kept (`off`, or a store in memory)."""
    configured = os.environ.get(INDEX_ENV, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return Path(configured).expanduser()
    return files_of(store_url, "index")


class IndexCache:
    """Keeps one index per store and brings it to the store's graph version when that moved.

    Checking costs one tiny query, so callers (a CLI command, an HTTP request) can call `get()`
    every time. A stale index catches up from the changes since its version (`catch_up`: the
    rows those ingests wrote, merged in), or is built again when the changes cannot be placed.
    The caller waits while that is quick (under `wait_budget` seconds last time): the answers
    follow the latest graph. One caller refreshes at a time; the others answer from the index
    there is meanwhile instead of queueing behind it. Once a refresh takes longer, readers keep
    the index they have, one background thread refreshes it, and the new one replaces the old
    when done. Indexes are immutable, so readers of an old one are safe.

    The index kept on disk (`root`) is opened by a process that has none, whatever its version,
    and caught up; it is written again after a build that took `keep_after` seconds or more, or
    when what was caught up since it was written passes `REKEEP` of it.
    """

    def __init__(
        self,
        store: LineageStore,
        *,
        wait_budget: float = 0.5,
        root: Path | bool | None = True,
        keep_after: float = KEEP_AFTER,
    ) -> None:
        self.store = store
        self.wait_budget = wait_budget
        # where the index is kept between processes: True for the store's own place (`index_root`)
        self.root = index_root(store.url) if root is True else root or None
        self.keep_after = keep_after
        self.builds = 0
        self.catch_ups = 0  # indexes brought up to date from the store's changes, not built
        self.loads = 0  # indexes opened from disk rather than built
        self.last_build_seconds = 0.0  # of the last build or catch-up
        self._index: GraphIndex | None = None
        self._kept_size = 0  # nodes and edges of the index kept on disk, when this one came from it
        self._lock = threading.Lock()  # held while building
        self._flag = threading.Lock()  # guards `_building` alone, never held during a build
        self._building = False  # a background build is running

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def get(self) -> GraphIndex:
        index = self._index
        version = self.store.graph_version()
        if index is not None and index.version == version:
            return index
        if index is not None and self.last_build_seconds > self.wait_budget:
            self._build_in_background()
            return index
        if index is None:
            with self._lock:
                return self._fresh()
        # one reader refreshes; the others answer from the index there is meanwhile, rather
        # than queue behind it (a server written to many times a second would refresh for each)
        if not self._lock.acquire(blocking=False):
            return index
        try:
            return self._fresh()
        finally:
            self._lock.release()

    def _fresh(self) -> GraphIndex:
        """The index at the store's version (the lock held)."""
        current = self.store.graph_version()
        if self._index is not None and self._index.version == current:
            return self._index  # another caller built it while this one waited
        if self._index is None:
            kept = self._open_kept(current)
            if kept is not None and kept.version == current:
                return kept
        return self._refresh()

    def _open_kept(self, current: int) -> GraphIndex | None:
        """Take the index kept on disk for this store, if there is one no newer than `current`."""
        if self.root is None or not (self.root / index_files.CURRENT).is_file():
            return None
        try:
            identity = self._identity()
        except Exception:  # a store read-only before it ever had an identity keeps no index
            return None
        kept = index_files.load(self.root, store=identity)
        if kept is None or kept.version > current:
            return None
        self._index = kept
        self._kept_size = kept.n_nodes + kept.n_edges
        self.loads += 1
        return kept

    def _refresh(self) -> GraphIndex:
        """Catch the index up, or build it when there is none or the changes cannot be placed."""
        started = time.perf_counter()
        index = self._index
        caught = catch_up(index, self.store) if index is not None else None
        if caught is None:
            return self._build(started)
        self.last_build_seconds = time.perf_counter() - started
        self._index = caught
        self.catch_ups += 1
        grown = caught.n_nodes + caught.n_edges - self._kept_size
        # one with a tail is kept once merged into its base, at this share (`catch_up.TAIL_SHARE`)
        if (
            self.root is not None
            and self._kept_size
            and grown > REKEEP * self._kept_size
            and caught.base is None
        ):
            self._keep(caught)
        return caught

    def _build(self, started: float) -> GraphIndex:
        index = GraphIndex.from_store(self.store)
        self.last_build_seconds = time.perf_counter() - started
        self._index = index
        self.builds += 1  # after the swap: a caller that sees the count sees the index
        if self.root is not None and self.last_build_seconds >= self.keep_after:
            self._keep(index)
        return index

    def _keep(self, index: GraphIndex) -> None:
        """Write the index beside the store for the next process; a place that cannot be written
        costs a warning, never the answer."""
        assert self.root is not None
        try:
            index_files.save(index, self.root, store=self._identity())
            self._kept_size = index.n_nodes + index.n_edges
        except Exception as error:  # a full disk, a read-only store: the next process builds
            logger.warning("graph index not kept at %s (%s: %s)", self.root, type(error).__name__, error)

    def _identity(self) -> str:
        return f"{store_label(self.store.url)}#{self.store.identity()}"

    def _build_in_background(self) -> None:
        with self._flag:
            if self._building:
                return
            self._building = True

        def build() -> None:
            try:
                with self._lock:
                    self._refresh()
            finally:
                self._building = False

        threading.Thread(target=build, name="tracelake-index-build", daemon=True).start()

    def invalidate(self) -> None:
        with self._lock:
            self._index = None
