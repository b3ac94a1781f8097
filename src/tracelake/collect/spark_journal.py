"""A tracked Spark run's journal on disk: where it lives, its header, and reading its segments.

The JVM listener (`jvm/TracelakeCapture.java`) appends one JSON line per action to numbered
segments (`capture-000000.jsonl`, …) in a directory of the run's own; `run.json` beside them says
whose run it is (job, run id, start, driver pid and host, the store). The directory lives beside
the store — `<db file>.spark-runs/<run id>/` for a SQLite file, `~/.tracelake/spark-runs/` for
a server database, `TRACELAKE_SPARK_JOURNAL` when set — so that when a driver dies before its
run is stored, the next tracked run or `tracelake` command of the same store finds the journal
and stores what it holds (`tracelake.spark.recover`).

Crash safety: each line is one `write` by the JVM, so a killed driver leaves whole lines and at
most one partial last line, which readers ignore; the OS has every line the moment it is
written (a SIGKILL loses nothing journalled). The tracker's reader `fsync`s a segment at most
once a second after reading new lines from it, so a machine that dies loses about the last
second. The journal is bounded: segments are 16 MB, and once a run's journal passes
`TRIM_BYTES` the segments already stored are removed (`SegmentReader.trim`). A run stored at its
end removes its journal; one whose store could not be reached keeps it for recovery.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa

from tracelake.model.store_urls import files_of, store_label

logger = logging.getLogger("tracelake.spark")

HEADER = "run.json"
ENDING = "ended.json"
JOURNAL_ENV = "TRACELAKE_SPARK_JOURNAL"
# Past this many bytes in one run's journal, segments whose lineage is stored are removed.
TRIM_BYTES = 256 << 20
_SYNC_INTERVAL = 1.0
_CLAIMED = ".recovering-"
# A stored run's journal, put out of the way until `sweep` removes it.
_DISCARDED = ".discarded-"
# Runs of this process whose trackers still write their journals: not to be recovered.
_WRITING: set[str] = set()


def journal_root(store_url: str) -> Path | None:
    """Where the journals of runs tracked into `store_url` live; None for an in-memory store
    (no later process could recover into it). A server's runs share one folder: each journal's
    header names its store."""
    configured = os.environ.get(JOURNAL_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    if sa.make_url(store_url).get_backend_name() != "sqlite":
        return Path.home() / ".tracelake" / "spark-runs"
    return files_of(store_url, "spark-runs")


@dataclass(frozen=True, slots=True)
class RunHeader:
    """Whose run a journal holds: enough to record the run without its driver."""

    run_id: str
    job: str
    process_urn: str
    started_at: datetime
    host: str
    pid: int
    store: str
    application_id: str
    application_name: str
    user: str
    spark_version: str

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "started_at": self.started_at.isoformat()})

    @classmethod
    def from_json(cls, text: str) -> RunHeader:
        record = json.loads(text)
        return cls(**{**record, "started_at": datetime.fromisoformat(record["started_at"])})


def make_journal(root: Path | None, header: RunHeader) -> Path:
    """A new, private journal directory for the run (plans hold literals: 0700), its header
    written before any action can be journalled (and synced by `sync_header`, off the job's
    thread: a driver killed outright loses nothing the OS holds, only a machine lost does)."""
    if root is None:
        return Path(tempfile.mkdtemp(prefix="tracelake-spark-"))
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory = root / header.run_id
    directory.mkdir(mode=0o700)
    _WRITING.add(header.run_id)
    staged = directory / (HEADER + ".tmp")
    staged.write_text(header.to_json(), encoding="utf-8")
    os.replace(staged, directory / HEADER)
    return directory


def sync_header(directory: Path) -> None:
    """Put the journal's header and its folder on disk."""
    try:
        fd = os.open(directory / HEADER, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _sync_directory(directory)
        _sync_directory(directory.parent)
    except OSError as error:
        logger.warning("Spark journal header not synced (%s)", type(error).__name__)


def read_header(directory: Path) -> RunHeader | None:
    try:
        return RunHeader.from_json((directory / HEADER).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_ending(directory: Path, status: str, error_class: str | None, ended_at: datetime | None) -> None:
    """How the run ended, said before it is stored: a driver that dies storing it (or whose
    store is gone) leaves the outcome for recovery. Best effort: the run's end goes on."""
    at = ended_at.isoformat() if ended_at is not None else None
    with contextlib.suppress(OSError):
        (directory / ENDING).write_text(
            json.dumps({"status": status, "error_class": error_class, "ended_at": at}), encoding="utf-8"
        )


def read_ending(directory: Path) -> tuple[str, str | None, datetime | None] | None:
    try:
        record = json.loads((directory / ENDING).read_text(encoding="utf-8"))
        at = datetime.fromisoformat(record["ended_at"]) if record.get("ended_at") else None
        return str(record["status"]), record.get("error_class"), at
    except (OSError, ValueError, TypeError, KeyError):
        return None


def let_go(header: RunHeader) -> None:
    """The tracker is done with its journal: stored, it is discarded; if not, it is recovered."""
    _WRITING.discard(header.run_id)


def abandoned(root: Path | None, store_url: str) -> list[tuple[Path, RunHeader]]:
    """Journals of `store_url`'s runs whose driver, a process of this host, is gone — or is
    this process, its tracker done without storing the run."""
    if root is None or not root.is_dir():
        return []
    label, here = store_label(store_url), socket.gethostname()
    found = []
    for directory in sorted(root.iterdir()):
        if directory.name.startswith(_DISCARDED):
            continue
        header = read_header(directory) if directory.is_dir() else None
        if header is None or header.store != label or header.host != here:
            continue
        _, claimed, claimer = directory.name.partition(_CLAIMED)
        if claimed:
            if _alive(int(claimer) if claimer.isdigit() else header.pid):
                continue  # being recovered
        elif header.pid == os.getpid():
            if header.run_id in _WRITING:
                continue
        elif _alive(header.pid):
            continue
        found.append((directory, header))
    return found


def claim(directory: Path) -> Path | None:
    """Take the journal for this process to recover (a rename: one claimer wins); None if
    another process took it first."""
    base = directory.name.partition(_CLAIMED)[0]
    claimed = directory.with_name(f"{base}{_CLAIMED}{os.getpid()}")
    try:
        directory.rename(claimed)
    except OSError:
        return None
    return claimed


def discard(directory: Path, *, later: bool = False) -> None:
    """Remove a journal whose run is stored. `later`: put it out of the way at once (one rename,
    ~0.04 ms) and leave its files to `sweep`, since removing files just synced takes ~5 ms, on
    the job's own thread when a run ends; the sweep runs at the next recovery (the next tracked
    run, the next command) and when this process exits."""
    if later:
        trash = directory.with_name(f"{_DISCARDED}{directory.name}")
        try:
            directory.rename(trash)
        except OSError:
            pass
        else:
            _sweep_at_exit(directory.parent)
            return
    shutil.rmtree(directory, ignore_errors=True)


def sweep(root: Path | None) -> None:
    """Remove the journals `discard` put out of the way under `root`."""
    if root is None or not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.name.startswith(_DISCARDED):
            shutil.rmtree(entry, ignore_errors=True)


_SWEPT_AT_EXIT: set[Path] = set()


def _sweep_at_exit(root: Path) -> None:
    if root not in _SWEPT_AT_EXIT:
        _SWEPT_AT_EXIT.add(root)
        atexit.register(sweep, root)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's, alive
    return True


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentReader:
    """Whole lines appended to a journal's segments since the last `read`, in order.

    A segment is read to its end once the next one exists (the listener closes a segment before
    it makes the next); a line still being written waits for the next read.
    """

    def __init__(self, directory: Path, *, sync: bool = True) -> None:
        self.directory = directory
        self.segment = 0  # the segment being read
        self._offset = 0
        self._sync = sync
        self._synced_at = 0.0
        self._trimmed = 0  # segments below this are gone

    def read(self) -> list[bytes]:
        lines: list[bytes] = []
        while True:
            path = segment_path(self.directory, self.segment)
            complete = segment_path(self.directory, self.segment + 1).exists()
            try:
                with open(path, "rb") as handle:
                    handle.seek(self._offset)
                    data = handle.read()
                    if data and self._sync and (complete or self._sync_due()):
                        os.fsync(handle.fileno())
            except FileNotFoundError:
                data = b""
            whole = data.rfind(b"\n") + 1
            lines.extend(data[:whole].splitlines())
            self._offset += whole
            if not complete:
                return lines
            self.segment, self._offset = self.segment + 1, 0

    def size(self) -> int:
        return sum(path.stat().st_size for path in self.directory.glob("capture-*.jsonl"))

    def trim(self, before: int) -> bool:
        """Remove the segments numbered below `before` (their lineage is stored); True if any."""
        removed = 0
        for index in range(self._trimmed, before):
            try:
                segment_path(self.directory, index).unlink()
                removed += 1
            except FileNotFoundError:
                pass
        self._trimmed = max(self._trimmed, before)
        return removed > 0

    def _sync_due(self) -> bool:
        now = time.monotonic()
        if now - self._synced_at < _SYNC_INTERVAL:
            return False
        self._synced_at = now
        return True


def segment_path(directory: Path, index: int) -> Path:
    return directory / f"capture-{index:06d}.jsonl"
