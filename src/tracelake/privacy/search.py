"""Finding a batch of users' records in datasets: the index picks files, Spark matches exactly.

`Search` runs one pass per dataset for every id of a batch: the dataset's identity index rules
out the files that cannot hold any id (`DatasetIndex.plan`), Spark reads the rest and keeps the
rows where some id of an identity column — at any depth of an identity map — is in the batch.
The batch's ids travel as one literal set (Spark turns `IN` into a hash set), so 10,000 ids
cost one pass, not 10,000. Each matched row carries the ids it matched and the requests they
belong to; access requests export those rows, delete requests rewrite the files holding them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from tracelake.model import InputError
from tracelake.privacy.filters import hash_ids
from tracelake.privacy.identity import IdentityError, all_row_ids, check_identity_columns, holds_any
from tracelake.privacy.index import DataFile, DatasetIndex, ScanPlan, dataset_root

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

MATCHED_IDS = "_tracelake_ids"
REQUESTS = "_tracelake_requests"
SOURCE_FILE = "_tracelake_file"
_URI_PATH_SAFE = "/;:@&=+$,-_.!~*'()"  # java.net.URI leaves these unescaped in a path
# Up to this many files are named to Spark; more are cut from the folder's listing (Spark lists
# more than 32 named paths with a job of its own: spark.sql.sources.parallelPartitionDiscovery).
_NAMED_AT_MOST = 32
_REQUEST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:#@+=-]{0,127}")


class PrivacyRequestError(InputError):
    """A request that cannot run as asked: no ids, an unknown dataset, no identity columns."""


@dataclass
class DatasetScan:
    """What one pass over one dataset read and found (counts and times only, never values)."""

    dataset: str
    files: int
    skipped: int
    read: int
    unindexed: int
    full_scan: bool
    rows: int = 0
    rows_by_file: dict[str, int] = field(default_factory=dict)  # matched rows per file read
    probe_seconds: float = 0.0
    scan_seconds: float = 0.0
    index_problems: list[str] = field(default_factory=list)  # damaged or unreadable index parts

    @classmethod
    def of(cls, plan: ScanPlan) -> DatasetScan:
        return cls(
            str(plan.root),
            plan.files,
            plan.skipped,
            len(plan.candidates),
            len(plan.unindexed),
            plan.full_scan,
            probe_seconds=plan.probe_seconds,
            index_problems=list(plan.problems),
        )


@dataclass
class Batch:
    """The ids of one or more requests, searched together."""

    ids_by_request: dict[str, list[str]]
    requests_by_id: dict[str, list[str]] = field(init=False)

    def __post_init__(self) -> None:
        if not self.ids_by_request:
            raise PrivacyRequestError("no request to run")
        self.ids_by_request = dict(self.ids_by_request)  # cleaned below: the caller's stays as it was
        self.requests_by_id = {}
        for request, ids in list(self.ids_by_request.items()):
            if not _REQUEST_NAME.fullmatch(request):
                # It names the request's egress folder: no path separators, no dot files.
                raise PrivacyRequestError(
                    f"request name {request!r} is not usable (letters, digits, ._:#@+=- and spaces)"
                )
            clean = [str(value).strip() for value in ids if str(value).strip()]
            if not clean:
                raise PrivacyRequestError(f"request {request} has no user id")
            self.ids_by_request[request] = clean
            for value in clean:
                self.requests_by_id.setdefault(value, []).append(request)

    @property
    def ids(self) -> list[str]:
        return sorted(self.requests_by_id)


@dataclass
class Dataset:
    """A dataset a request covers: its root folder and the columns that hold identities."""

    root: Path
    identity: list[str]

    @classmethod
    def resolve(cls, path: str | Path, identity: Sequence[str] = ()) -> Dataset:
        root = dataset_root(path)
        if not root.is_dir():
            raise PrivacyRequestError(f"dataset {root} does not exist (or is not a folder)")
        columns = list(identity) or sorted(DatasetIndex.load(root).columns())
        if not columns:
            raise PrivacyRequestError(
                f"dataset {root} has no identity index and no identity columns were given; "
                "index it (`tracelake privacy index`) or name its identity columns"
            )
        return cls(root, columns)


def matches(spark: SparkSession, df: DataFrame, identity: Sequence[str], batch: Batch) -> DataFrame:
    """The rows of `df` holding any id of `batch`, with the ids and requests they matched.

    Rows are first tested column by column (`holds_any`: cheap, and pushed down to Parquet for
    plain columns); only the rows that pass get their ids gathered and mapped to requests.
    """
    from pyspark.sql import functions as F

    columns = check_identity_columns(df.schema, identity)
    wanted = batch.ids
    requests = F.map_from_arrays(
        F.lit(wanted), F.lit([sorted(batch.requests_by_id[value]) for value in wanted])
    )
    found = df.where(holds_any(df.schema, columns, wanted)).withColumn(
        MATCHED_IDS, F.filter(all_row_ids(df.schema, columns), lambda value: value.isin(wanted))
    )
    return found.withColumn(
        REQUESTS,
        F.array_distinct(F.flatten(F.transform(MATCHED_IDS, lambda value: F.element_at(requests, value)))),
    )


def holds(df: DataFrame, identity: Sequence[str], ids: Sequence[str]) -> Column:
    """True for the rows of `df` that hold any of `ids` in an identity column."""
    return holds_any(df.schema, check_identity_columns(df.schema, identity), ids)


def plan_scan(dataset: Dataset, batch: Batch, files: dict[str, DataFile] | None = None) -> ScanPlan:
    index = DatasetIndex.load(dataset.root)
    return index.plan(hash_ids(batch.ids), columns=dataset.identity, files=files)


def read_files(spark: SparkSession, dataset: Dataset, plan: ScanPlan) -> DataFrame:
    """The plan's files as one DataFrame, partition columns included.

    The dataset is read whole and cut to the plan's files by Spark's `_metadata.file_path`,
    which prunes the file list before any file is opened: one listing of the folder, where
    naming hundreds of files would list and stat each one (3× slower at 350 files of 1,000).
    Files written at different times may differ in columns, and Spark takes its schema from one
    file: the candidates' footers are compared first, and only if they differ does Spark merge
    every footer's schema (a job of its own).
    """
    from pyspark.sql import functions as F

    root = dataset.root
    few = not plan.full_scan and len(plan.candidates) <= _NAMED_AT_MOST
    reader = spark.read.option("basePath", str(root)) if few else spark.read
    if len({_columns(root / path) for path in plan.candidates}) > 1:
        reader = reader.option("mergeSchema", "true")
    else:
        # One candidate's columns (its footer, read on the driver) stand for all of them.
        reader = reader.schema(spark.read.parquet(str(root / plan.candidates[0])).schema)
    if few:  # naming a few files is quicker than listing the whole folder
        return reader.parquet(*[str(root / path) for path in plan.candidates])
    df = reader.parquet(str(root))
    if plan.full_scan:
        return df
    return df.where(
        F.col("_metadata.file_path").isin([spark_file_path(root / path) for path in plan.candidates])
    )


def spark_file_path(path: Path) -> str:
    """A local file as Spark's `_metadata.file_path` names it: Hadoop's `Path.toUri()` text,
    `file:` and the path with the characters a URI path cannot hold escaped (not `=` or `:`,
    nor non-ASCII letters)."""
    return "file:" + "".join(
        char if not char.isascii() or char.isalnum() or char in _URI_PATH_SAFE else quote(char)
        for char in str(path)
    )


def _columns(path: Path) -> tuple[str, ...]:
    import pyarrow.parquet as pq

    return tuple(str(field) for field in pq.read_schema(path))


@dataclass(frozen=True)
class Bounds:
    """How much one Spark pass may read; a bigger plan runs as several passes (sub-jobs)."""

    max_files: int | None = None
    max_bytes: int | None = None

    def split(self, plan: ScanPlan, files: Mapping[str, DataFile]) -> list[ScanPlan]:
        """`plan` cut into passes within these bounds, files in plan order (one pass if it fits)."""
        parts: list[list[str]] = [[]]
        size = 0
        for path in plan.candidates:
            full = (self.max_files is not None and len(parts[-1]) >= self.max_files) or (
                self.max_bytes is not None and parts[-1] and size + files[path].size > self.max_bytes
            )
            if full:
                parts.append([])
                size = 0
            parts[-1].append(path)
            size += files[path].size
        if len(parts) == 1:
            return [plan] if plan.candidates else []
        return [
            replace(
                plan,
                candidates=part,
                unindexed=[path for path in plan.unindexed if path in set(part)],
                full_scan=False,
            )
            for part in parts
        ]


@contextmanager
def whole_files(spark: SparkSession, files: Mapping[str, DataFile]) -> Iterator[None]:
    """Spark reads each of `files` in one task (no split), for jobs that handle files whole."""
    key = "spark.sql.files.maxPartitionBytes"
    largest = max((data_file.size for data_file in files.values()), default=0)
    previous = spark.conf.get(key)
    spark.conf.set(key, str(max(largest + 1, 128 * 1024 * 1024)))
    try:
        yield
    finally:
        spark.conf.set(key, previous)


__all__ = [
    "Batch",
    "Bounds",
    "Dataset",
    "DatasetScan",
    "IdentityError",
    "PrivacyRequestError",
    "holds",
    "matches",
]
