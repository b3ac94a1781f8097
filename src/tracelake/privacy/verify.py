"""Checking a dataset's identity index against its data, and repairing what is wrong.

An index must never rule out a file that holds a requested id. `verify` reads every indexed file's
ids by the plain Arrow walk (`plain_ids`, not the Spark walk that built the filters), hashes them
in Python (not in the JVM) and asks each file's filter for each of its ids. A file whose filter
lacks any of them, or was built for another row count, or whose bytes fail their checksum, is
wrong: a request would skip it (or, for a damaged one, must read it). Filters built before ids
beside null lists were found (a null list among a map's values hid its row's other ids;
`index.ID_WALK`) are *legacy*: requests never skip a file for them, and `verify` checks them too,
so it can say which files were really short. With a Spark session, `verify` rebuilds wrong and
legacy filters (and indexes the files that have none), then checks the rebuilt ones again.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.privacy.filters import hash_ids
from tracelake.privacy.identity import IdentityError
from tracelake.privacy.index import DatasetIndex, columns_of, dataset_root, is_legacy, list_data_files
from tracelake.privacy.limits import DEFAULT_FPP
from tracelake.privacy.plain_ids import distinct_ids
from tracelake.privacy.segments import StoredFilter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class WrongFilter:
    """A data file whose filter would let a request skip it wrongly (or that could not be read to
    tell)."""

    path: str
    column: str  # the identity columns the filter holds, comma-separated
    missing_ids: int  # ids the file holds in those columns that the filter says it lacks
    rows: int  # rows of the file
    filter_rows: int  # rows the filter was built for
    unreadable: str | None = None  # why the file could not be read and checked
    damaged: bool = False  # the filter's bytes fail their checksum

    def describe(self) -> str:
        if self.unreadable is not None:
            return f"{self.path}: cannot be read to check it ({' '.join(self.unreadable.split())})"
        if self.damaged:
            return f"{self.path}: the filter of {self.column} is damaged (its bytes fail their checksum)"
        if self.rows != self.filter_rows:
            built = f"was built for {self.filter_rows} rows, not {self.rows}"
            return f"{self.path}: the filter of {self.column} {built}"
        return f"{self.path}: the filter of {self.column} lacks {self.missing_ids} of the file's ids"


@dataclass
class VerifyReport:
    """What `verify` found (and repaired) in one dataset's index."""

    root: Path
    columns: list[str]
    files: int = 0
    checked: int = 0  # files with a filter for every column, read and checked
    indexed_files: int = 0  # files with a filter for every column (all checked unless sampled)
    unindexed: list[str] = field(default_factory=list)  # no fresh filter: always read, never skipped
    legacy: list[str] = field(default_factory=list)  # filters of an older walk: always read, until rebuilt
    wrong: list[WrongFilter] = field(default_factory=list)  # still wrong at the end
    repaired: list[str] = field(default_factory=list)  # wrong, rebuilt and found right
    indexed: list[str] = field(default_factory=list)  # unindexed, now indexed by the repair
    index_problems: list[str] = field(default_factory=list)  # unreadable segments
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.wrong

    @property
    def sampled(self) -> bool:
        return self.checked < self.indexed_files


def verify(
    path: str | Path,
    identity: Sequence[str] = (),
    *,
    repair_with: SparkSession | None = None,
    fpp: float = DEFAULT_FPP,
    sample: int | None = None,
    seed: int | None = None,
) -> VerifyReport:
    """Check every indexed file of the dataset at `path` (or `sample` of them, drawn at random:
    a different draw each run unless `seed` is given); with `repair_with`, rebuild what is wrong."""
    if sample is not None and sample < 1:
        raise ValueError(f"a sample is at least one file, not {sample}")
    started = time.perf_counter()
    root = dataset_root(path)
    files = list_data_files(root)
    index = DatasetIndex.load(root)
    columns = list(identity) or sorted(index.columns())
    if not columns:
        raise IdentityError(f"{root} has no identity index; name its identity columns to index it")
    report = VerifyReport(root, columns, files=len(files), index_problems=list(index.problems))
    covered = index.fresh(files, columns, legacy=True)
    report.unindexed = sorted(path for path in files if path not in covered)
    report.legacy = sorted(path for path, filters in covered.items() if any(map(is_legacy, filters)))
    report.indexed_files = len(covered)
    if sample is not None and sample < len(covered):
        drawn = random.Random(seed).sample(sorted(covered), sample)
        covered = {path: covered[path] for path in sorted(drawn)}
    report.checked = len(covered)
    report.wrong = _check(root, covered, columns)
    if repair_with is not None and (report.wrong or report.unindexed or report.legacy):
        from tracelake.privacy.writer import build_index

        rebuilt = sorted({wrong.path for wrong in report.wrong} | set(report.legacy))
        build_index(repair_with, root, identity=columns, fpp=fpp, rebuild=rebuilt)
        files = list_data_files(root)
        covered = DatasetIndex.load(root).fresh(files, columns)
        redone = {path: covered[path] for path in [*rebuilt, *report.unindexed] if path in covered}
        still = _check(root, redone, columns)
        wrong_now = {wrong.path for wrong in still}
        report.repaired = [path for path in rebuilt if path in redone and path not in wrong_now]
        report.legacy = [path for path in report.legacy if path not in report.repaired]
        report.indexed = [path for path in report.unindexed if path in redone and path not in wrong_now]
        report.unindexed = [path for path in report.unindexed if path not in redone]
        report.wrong = [wrong for wrong in report.wrong if wrong.path not in report.repaired] + [
            wrong for wrong in still if wrong.path not in rebuilt
        ]
    report.seconds = time.perf_counter() - started
    return report


def _check(root: Path, covered: dict[str, list[StoredFilter]], columns: Sequence[str]) -> list[WrongFilter]:
    """The wrong filters among `covered` files (read in parallel: Arrow leaves the GIL)."""

    import pyarrow as pa

    def check_file(path: str) -> list[WrongFilter]:
        try:
            rows, ids = distinct_ids(root / path, columns)
        except (OSError, pa.ArrowException, IdentityError) as error:
            return [WrongFilter(path, "*", 0, -1, -1, unreadable=f"{type(error).__name__}: {error}")]
        ids_by_lower = {name.lower(): values for name, values in ids.items()}
        wrong = []
        for stored in covered[path]:
            held = columns_of(stored)
            if stored.damaged():
                wrong.append(
                    WrongFilter(
                        path, ", ".join(held), 0, rows, int(stored.meta.get("rows", -1)), damaged=True
                    )
                )
                continue
            values = set().union(*(ids_by_lower.get(column.lower(), set()) for column in held))
            keys = hash_ids(sorted(values))
            missing = int((~stored.filter.might_contain(keys)).sum()) if len(keys) else 0
            filter_rows = int(stored.meta.get("rows", -1))
            if missing or filter_rows != rows:
                wrong.append(WrongFilter(path, ", ".join(held), missing, rows, filter_rows))
        return wrong

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return [wrong for found in pool.map(check_file, sorted(covered)) for wrong in found]


__all__ = ["VerifyReport", "WrongFilter", "verify"]
