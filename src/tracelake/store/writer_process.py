"""The group commit's writer in a process of its own, so that ingest uses a second core.

In one interpreter, the HTTP server and the writer thread take turns on the GIL: under load the
writer spent half its time waiting for it, and it was the bottleneck. `WriterProcess` has the
same `submit(batches) -> Future` as `GroupCommit`; a child process on the same store URL takes
everything that arrived while it was writing the last group and writes it as the next one
(`write_group`, as the thread does), in one thread. Batches travel pickled over a pipe; a
group's answers come back in one message: each caller's ticket and, if its write failed, the
error. Callers are answered only after their own batches are committed, exactly as in process;
if the child dies, every waiting caller gets an error (nothing is acknowledged that was not
committed) and the next submit starts a new child.

The child is `python -m tracelake.store.writer_process` over a socket pair, not a
`multiprocessing` spawn: a spawned child imports the parent's main module again, which runs
the server a second time from a script without a `__main__` guard and fails outright from
`python -` (stdin). The store URL, which may hold a password, goes over the socket, not argv.

A store that lives only in memory (`sqlite://`) cannot be shared with another process: use
`GroupCommit` for it (`writer_for` chooses).
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection

import sqlalchemy as sa

from tracelake.model import LineageBatch
from tracelake.store.group_commit import GroupCommit, Writer, WriterStats, write_group
from tracelake.store.sqlstore import LineageStore


class WriterError(RuntimeError):
    """A write in the writer process failed; the message names the error it raised there."""


def writer_for(store: LineageStore) -> Writer:
    """A writer process for a store other processes can open; the thread writer otherwise."""
    url = sa.make_url(store.url)
    in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
    return GroupCommit(store) if in_memory else WriterProcess(store.url)


class WriterProcess:
    def __init__(self, url: str, *, max_group: int = 1000) -> None:
        self.url = url
        self.max_group = max_group
        self.stats = WriterStats()  # the child's, as of its last answer (its CPU: every thread's)
        self._lock = threading.Lock()  # one sender at a time; guards the child and the waiting
        self._tickets = itertools.count()
        self._waiting: dict[int, Future[None]] = {}
        self._child: subprocess.Popen[bytes] | None = None
        self._pipe: Connection | None = None

    def submit(self, batches: Sequence[LineageBatch]) -> Future[None]:
        done: Future[None] = Future()
        with self._lock:
            pipe = self._pipe if self._pipe is not None else self._start()
            ticket = next(self._tickets)
            self._waiting[ticket] = done
            try:
                pipe.send((ticket, list(batches)))
            except (OSError, ValueError) as error:  # the child is gone; its reader fails the rest
                self._waiting.pop(ticket, None)
                done.set_exception(WriterError(f"the writer process is not running: {error}"))
        return done

    def close(self) -> None:
        """Stop the child once it has answered everything sent to it."""
        with self._lock:
            child, pipe = self._child, self._pipe
            self._child = self._pipe = None
        if pipe is not None:
            with contextlib.suppress(OSError):  # already gone
                pipe.send(None)
        if child is not None:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _start(self) -> Connection:
        ours, theirs = socket.socketpair()
        with theirs:
            child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=[theirs.fileno()]
            )
        pipe = Connection(ours.detach())
        pipe.send((self.url, self.max_group))
        self._child, self._pipe = child, pipe
        threading.Thread(
            target=self._read, args=(pipe,), name="tracelake-writer-answers", daemon=True
        ).start()
        return pipe

    def _read(self, pipe: Connection) -> None:
        """Resolve callers' futures from the child's answers (one message a group), until it is gone."""
        while True:
            try:
                answers, self.stats = pipe.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                waiting = [(self._waiting.pop(ticket), error) for ticket, error in answers]
            for done, error in waiting:
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(WriterError(error))
        with self._lock:
            if self._pipe is pipe:  # died rather than closed: the next submit starts another
                self._child = self._pipe = None
            lost, self._waiting = self._waiting, {}
        for done in lost.values():
            done.set_exception(WriterError("the writer process stopped before answering"))


def _serve(pipe: Connection) -> None:
    """In the child, one thread: take everything that arrived while the last group was being
    written, write it as the next group, answer every ticket of it in one message."""
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when the child
    # stops (`close`, or its own end, which ends the pipe), so nothing it sent is dropped.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    url, max_group = pipe.recv()
    store = LineageStore(url)
    groups = 0
    closing = False
    while not closing:
        group: list[tuple[int, list[LineageBatch]]] = []
        while True:
            message = _receive(pipe)
            if message is None:
                closing = True  # everything sent before the close is written and answered first
                break
            group.append(message)
            if len(group) >= max_group or not pipe.poll():
                break
        if not group:
            break
        outcomes = write_group(store, [batches for _, batches in group])
        groups += 1
        answers = [
            (ticket, None if error is None else f"{type(error).__name__}: {error}")
            for (ticket, _), error in zip(group, outcomes, strict=True)
        ]
        with contextlib.suppress(OSError):  # the parent is gone: nobody is waiting
            pipe.send((answers, WriterStats(groups, time.process_time())))
    store.close()


def _receive(pipe: Connection) -> tuple[int, list[LineageBatch]] | None:
    """The next (ticket, batches), or None for a close or a parent that is gone."""
    try:
        return pipe.recv()  # type: ignore[no-any-return]  # the parent sends only this shape
    except (EOFError, ConnectionResetError):
        return None


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
