"""A dataset's identity index: which of its data files may hold given ids, without opening them.

The index of a Parquet dataset lives beside its data, in `<dataset>/_tracelake_index/` (Spark
skips names starting with `_`): a few segments (`segments.py`), each holding one filter per data
file over all its identity columns (indexes written before that hold one per file per column),
bound to the data file by relative path, size and modification time. Segments are only ever added
or replaced whole, so concurrent appends need no lock; where two segments describe the same file
and column the newer one wins. A data file whose filter is missing, or whose size or
modification time no longer match it (rewritten by someone else), is *unindexed*: it is always
read, never skipped. Zero false negatives is the invariant.

`DatasetIndex.plan` probes every fresh filter for a batch of ids at once and says which files to
read; when nearly all files are candidates it says to scan the whole dataset instead.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from tracelake.model import InputError
from tracelake.privacy.filters import IdentityFilter, fuse_slots, slot_answers, slot_bytes
from tracelake.privacy.segments import (
    SUFFIX,
    Segment,
    SegmentError,
    SegmentWriter,
    StoredFilter,
    damaged_tables,
    new_segment_path,
    read_segment,
)

logger = logging.getLogger("tracelake.privacy")

INDEX_DIR = "_tracelake_index"
STAGING_DIR = "_staging"
# Above this share of candidate files, reading the dataset whole is cheaper than listing files.
FULL_SCAN_AT = 0.8
# Segments a dataset may gather (one per write) before `compact` folds them into one.
COMPACT_AFTER = 16
# Which walk over identity columns built a filter (`identity.id_holder`), kept with each filter.
# Filters without one were built before a null list among an identity map's values stopped
# hiding its row's other ids: they may lack ids, so they never rule a file out (`legacy`).
ID_WALK = 2
_PROBE_CHUNK = 1 << 20  # (filter, id) pairs probed per numpy pass
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")  # two letters at least: not a drive


class DatasetLocationError(InputError):
    """A dataset named on a file system Tracelake cannot read and write itself."""


def dataset_root(path: str | Path) -> Path:
    """A dataset's root as an absolute local path, from a path or a `file:` URI as Spark and
    Hadoop spell them (`file:/x`, `file:///x`, `file://localhost/x`, escapes decoded).

    Other Hadoop file systems (`s3a:`, `gs:`, `abfs:`, `hdfs:`) are refused: the index is read
    and written with local file IO, and a delete's swap relies on a local rename being atomic,
    which object stores do not have (README, "Object stores").
    """
    text = str(path)
    if text.startswith("file:"):
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise DatasetLocationError(f"{text}: a file: URI names a local path, not one on {parsed.netloc}")
        return Path(unquote(parsed.path)).absolute()
    other = _URI_SCHEME.match(text)  # `s3a://b/x`, or `s3a:/b/x` once a Path has folded its slashes
    if other:
        scheme = other.group(1)
        raise DatasetLocationError(
            f"{text}: datasets on {scheme}: are not supported yet, only local paths and file: URIs "
            '(see the README, "Object stores")'
        )
    return Path(text).absolute()


@dataclass(frozen=True)
class DataFile:
    """A data file of a dataset as it is on disk now."""

    path: str  # relative to the dataset's root, with forward slashes
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, root: Path, relative: str) -> DataFile:
        status = (root / relative).stat()
        return cls(relative, status.st_size, status.st_mtime_ns)


def is_hidden(name: str) -> bool:
    """Spark's rule for what is not data: `.crc`, `_SUCCESS`, our index; `_x=1` is a partition."""
    return name.startswith(".") or (name.startswith("_") and "=" not in name) or name.endswith("._COPYING_")


def list_data_files(root: Path) -> dict[str, DataFile]:
    """Every data file under `root` (partition folders included, hidden names skipped)."""
    if not root.is_dir():
        raise FileNotFoundError(f"no dataset at {root}")
    files: dict[str, DataFile] = {}
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(name for name in folders if not is_hidden(name))
        for name in sorted(names):
            if not is_hidden(name):
                relative = Path(folder, name).relative_to(root).as_posix()
                files[relative] = DataFile.of(root, relative)
    return files


@dataclass
class ScanPlan:
    """What a request must read of one dataset."""

    root: Path
    files: int  # data files considered
    candidates: list[str]  # relative paths to read (all files when `full_scan`)
    unindexed: list[str]  # candidates read because no fresh filter covers them
    full_scan: bool
    probe_seconds: float
    # what made the index read more than it had to: segments it could not read, filters that
    # failed their checksum (never record values)
    problems: list[str] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.files - len(self.candidates)


@dataclass
class DatasetIndex:
    """The filters of one dataset, newest per (data file, column)."""

    root: Path
    segments: list[Segment] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.root / INDEX_DIR

    @classmethod
    def load(cls, root: Path | str) -> DatasetIndex:
        root = dataset_root(root)
        index = cls(root)
        if not index.folder.is_dir():
            return index
        for path in sorted(index.folder.glob(f"*{SUFFIX}")):
            try:
                index.segments.append(read_segment(path))
            except (OSError, SegmentError) as error:
                # Its files lose their filters and are read: slower, never wrong.
                index.problems.append(str(error))
                logger.warning("identity index segment skipped: %s", error)
        return index

    def columns(self) -> set[str]:
        return {
            column for segment in self.segments for stored in segment.filters for column in columns_of(stored)
        }

    def by_key(self) -> dict[tuple[str, str], list[StoredFilter]]:
        """Every filter of each (data file, column), newest first (segments sort by age)."""
        found: dict[tuple[str, str], list[StoredFilter]] = {}
        for segment in reversed(self.segments):
            for stored in segment.filters:
                for column in columns_of(stored):
                    found.setdefault((str(stored.meta["file"]), column), []).append(stored)
        return found

    def fresh(
        self, files: dict[str, DataFile], columns: Iterable[str] | None = None, *, legacy: bool = False
    ) -> dict[str, list[StoredFilter]]:
        """The files with an up-to-date filter for every column, and those filters.

        Up to date means written for the file as it is now: the newest filter whose size and
        modification time match (a newer one may describe a rewrite that never landed), and
        built by the current walk unless `legacy` (to check old filters, never to skip files).
        """
        wanted = sorted(self.columns() if columns is None else set(columns))
        by_key = self.by_key()
        covered: dict[str, list[StoredFilter]] = {}
        for path, data_file in files.items():
            filters = [
                next(
                    (
                        s
                        for s in by_key.get((path, column), [])
                        if _matches(s, data_file) and (legacy or not is_legacy(s))
                    ),
                    None,
                )
                for column in wanted
            ]
            if wanted and all(stored is not None for stored in filters):
                # one filter over several columns is probed once
                covered[path] = list(
                    {id(stored): stored for stored in filters if stored is not None}.values()
                )
        return covered

    def plan(
        self,
        keys: np.ndarray,
        *,
        columns: Iterable[str] | None = None,
        files: dict[str, DataFile] | None = None,
        full_scan_at: float = FULL_SCAN_AT,
    ) -> ScanPlan:
        """Which data files may hold any of `keys` (uint64 id hashes) in any identity column."""
        started = time.perf_counter()
        files = list_data_files(self.root) if files is None else files
        covered = self.fresh(files, columns)
        hits, damaged = _probe(covered, np.asarray(keys, dtype=np.uint64))
        self._record_damage(damaged)
        unreadable = {str(stored.meta["file"]) for stored in damaged}
        unindexed = [path for path in files if path not in covered or path in unreadable]
        candidates = sorted(set(unindexed) | {path for path, hit in hits.items() if hit})
        full_scan = bool(files) and len(candidates) >= full_scan_at * len(files)
        return ScanPlan(
            self.root,
            len(files),
            sorted(files) if full_scan else candidates,
            unindexed,
            full_scan,
            time.perf_counter() - started,
            list(self.problems),
        )

    def _record_damage(self, damaged: Iterable[StoredFilter]) -> None:
        for stored in damaged:
            problem = f"{stored.segment.path}: the filter of {stored.meta['file']} fails its checksum"
            if problem not in self.problems:
                self.problems.append(problem)
                logger.warning("identity filter damaged, its file is read: %s", problem)

    def intact(self, filters: Iterable[StoredFilter]) -> list[StoredFilter]:
        """The filters whose every block passes its checksum (the others recorded as problems):
        only those may be copied into a new segment, which would checksum the damage anew."""
        kept: list[StoredFilter] = []
        damaged: list[StoredFilter] = []
        for stored in filters:
            (damaged if stored.damaged() else kept).append(stored)
        self._record_damage(damaged)
        return kept

    # -- writing ------------------------------------------------------------------------------

    def write_segment(
        self, entries: Iterable[tuple[IdentityFilter, DataFile, tuple[str, ...], int]]
    ) -> Path | None:
        """A new segment of (filter, data file, the identity columns it covers, rows) entries; None
        if there are none."""
        writer = SegmentWriter(new_segment_path(self.folder))
        with writer:
            for identity_filter, data_file, columns, rows in entries:
                writer.add(
                    identity_filter,
                    file=data_file.path,
                    size=data_file.size,
                    mtime_ns=data_file.mtime_ns,
                    columns=list(columns),
                    rows=rows,
                    walk=ID_WALK,
                )
            if not len(writer):
                writer.abort()
                return None
        return writer.path

    def compact(self, files: dict[str, DataFile] | None = None, *, force: bool = False) -> Path | None:
        """Fold every segment into one holding only the filters still fresh; drops the rest."""
        if len(self.segments) < (1 if force else COMPACT_AFTER):
            return None
        files = list_data_files(self.root) if files is None else files
        live = self.intact(
            stored for _, filters in sorted(self.fresh(files, legacy=True).items()) for stored in filters
        )
        writer = SegmentWriter(new_segment_path(self.folder))
        with writer:
            for stored in live:  # as they were written: a legacy filter stays legacy
                writer.add(stored.filter, **stored.meta)
            if not len(writer):
                writer.abort()
        merged = writer.path if len(live) else None
        for segment in self.segments:
            if segment.path != merged:
                segment.path.unlink(missing_ok=True)
        return merged


def columns_of(stored: StoredFilter) -> tuple[str, ...]:
    """The identity columns whose ids a filter holds (one, in indexes written before a file's
    columns shared a filter)."""
    columns = stored.meta.get("columns")
    return tuple(str(c) for c in columns) if isinstance(columns, list) else (str(stored.meta["column"]),)


def is_legacy(stored: StoredFilter) -> bool:
    """Whether a filter was built by a walk older than the current one (see `ID_WALK`)."""
    return int(stored.meta.get("walk", 1)) < ID_WALK


def _matches(stored: StoredFilter, data_file: DataFile) -> bool:
    return stored.meta.get("size") == data_file.size and stored.meta.get("mtime_ns") == data_file.mtime_ns


def _probe(
    covered: dict[str, list[StoredFilter]], keys: np.ndarray
) -> tuple[dict[str, bool], list[StoredFilter]]:
    """For each covered file, whether any of its filters may hold any key; and the filters that
    failed a checksum where the lookup read them (their files must be read)."""
    hits = dict.fromkeys(covered, False)
    damaged: list[StoredFilter] = []
    if not len(keys):
        return hits, damaged
    groups: dict[tuple[int, str, int], list[tuple[str, StoredFilter]]] = {}
    for path, filters in covered.items():
        for stored in filters:
            group = (id(stored.segment), stored.filter.kind, stored.filter.bits)
            groups.setdefault(group, []).append((path, stored))
    for (_, kind, bits), members in groups.items():
        if kind == "exact":
            for path, stored in members:
                if stored.damaged():
                    damaged.append(stored)
                    hits[path] = True
                else:
                    hits[path] = hits[path] or bool(stored.filter.might_contain(keys).any())
            continue
        base = np.frombuffer(members[0][1].segment.buffer, dtype=np.uint8)
        step = max(1, _PROBE_CHUNK // len(keys))
        for start in range(0, len(members), step):
            chunk = members[start : start + step]
            pending = [(path, stored) for path, stored in chunk if not hits[path]]
            if not pending:
                continue
            shape = np.array([stored.filter.fuse_shape() for _, stored in pending], dtype=np.uint64).T
            offsets = np.array([stored.offset for _, stored in pending], dtype=np.int64)
            wanted, slots = fuse_slots(bits, shape[0], shape[1], shape[2], keys)
            found: np.ndarray = np.any(slot_answers(base, offsets, bits, wanted, slots), axis=1)
            broken = damaged_tables([stored for _, stored in pending], slot_bytes(slots, bits))
            for (path, stored), hit, bad in zip(pending, found, broken, strict=True):
                if bad:
                    damaged.append(stored)
                hits[path] = hits[path] or bool(hit) or bool(bad)
    return hits, damaged


def staging_folder(root: Path, write_id: str) -> Path:
    return Path(root) / INDEX_DIR / STAGING_DIR / write_id
