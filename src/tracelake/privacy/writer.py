"""Indexed writes: Parquet data files and their identity filters from one Spark job.

`write(df, path, identity=[...])` is `df.write.parquet(path)` plus, in the same job, one identity
filter per data file over all its identity columns — no second scan of the data. Spark's own Parquet
writer writes the rows; an Arrow UDF placed just below it (`_sink`) is sent only the hashes of
each row's ids (computed in the JVM) and the row's partition values, collects them per
(task, partition) while the rows stream through, and when its task's input ends builds the
filters and writes them to a staging segment. After the job the driver binds each new data file
to its filters by the task number and partition folder in the file's name (Spark names files
`part-<task>-<job uuid>…`) and checks the row count in its footer; then it writes one segment for
the whole write. Where several attempts of a task staged filters (a retry, or a speculative copy:
both copies may stage, one commits), the one Spark's status store says succeeded is bound. A file
that cannot be bound for certain gets no filter — it stays readable and is always scanned.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from tracelake.privacy.filters import fingerprint_bits
from tracelake.privacy.identity import IdentityError, check_identity_columns, row_hashes
from tracelake.privacy.index import (
    DataFile,
    DatasetIndex,
    columns_of,
    dataset_root,
    list_data_files,
    staging_folder,
)
from tracelake.privacy.limits import DEFAULT_FPP
from tracelake.privacy.segments import SUFFIX, StoredFilter, read_segment

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

logger = logging.getLogger("tracelake.privacy")

_SINK_COLUMN = "_tracelake_indexed"
_TASK_IN_NAME = re.compile(r"^part-(\d{5})-")
_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# How long the driver waits for task ends to reach Spark's status store before telling attempts apart.
_STATUS_WAIT_MS = 30_000


@dataclass
class WriteReport:
    """What an indexed write wrote."""

    path: Path
    files: int  # data files the write added
    indexed: int  # of which bound to their filters
    unindexed: list[str] = field(default_factory=list)  # added but left without filters
    distinct_ids: int = 0  # summed over files, each file's identity columns together
    index_bytes: int = 0
    seconds: float = 0.0
    # the false-positive rate the new fuse filters measured when built, averaged (None: no such filter)
    measured_fpp: float | None = None

    @property
    def bits_per_id(self) -> float:
        return 8.0 * self.index_bytes / self.distinct_ids if self.distinct_ids else 0.0


def write(
    df: DataFrame,
    path: str | Path,
    *,
    identity: Sequence[str],
    partition_by: Sequence[str] = (),
    mode: Literal["append", "overwrite"] = "append",
    fpp: float = DEFAULT_FPP,
) -> WriteReport:
    """Write `df` as Parquet under `path` with identity filters for the `identity` columns."""
    started = time.perf_counter()
    fingerprint_bits(fpp)  # a bad rate fails here, before any data moves
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    columns = check_identity_columns(df.schema, identity)
    partitions = _check_partitions(df, partition_by, columns)
    root = dataset_root(path)
    staging = staging_folder(root, uuid.uuid4().hex)
    before = set(list_data_files(root)) if root.is_dir() else set()

    from pyspark.sql import functions as F

    # Spark writes an empty string partition value to the null partition's folder: group them as one.
    partition_key = (
        F.to_json(F.array(*[F.nullif(F.col(f"`{name}`").cast("string"), F.lit("")) for name in partitions]))
        if partitions
        else None
    )
    try:
        marked = _mark(df, staging, columns, partition_key, fpp)
        (
            marked.write.mode(mode)
            .partitionBy(*partitions)
            .option("maxRecordsPerFile", 0)  # one file per (task, partition): how files are bound
            .parquet(str(root))
        )
        added = {name: stamp for name, stamp in list_data_files(root).items() if name not in before}
        slots = {_slot_of(name): name for name in added}
        report = _bind(
            df.sparkSession,
            root,
            staging,
            added,
            columns,
            lambda task, group: slots.get((task, _values(group))),
        )
    finally:
        _remove_staging(staging)
    DatasetIndex.load(root).compact()
    report.seconds = time.perf_counter() - started
    return report


def build_index(
    spark: SparkSession,
    path: str | Path,
    *,
    identity: Sequence[str],
    fpp: float = DEFAULT_FPP,
    rebuild: Sequence[str] = (),
) -> WriteReport:
    """Index the data files of a Parquet dataset written by anyone: those with no fresh filter.

    One Spark job reads only the identity columns of those files, each file whole in one task,
    and the same sink as `write` builds their filters. Files already indexed are left alone, so
    running it again after new files arrive (or old ones were rewritten) refreshes the index;
    `rebuild` names files (relative paths) whose filters are built again all the same.
    """
    from pyspark.sql import functions as F

    from tracelake.privacy.search import whole_files

    started = time.perf_counter()
    fingerprint_bits(fpp)
    root = dataset_root(path)
    files = list_data_files(root)
    fresh, again = DatasetIndex.load(root).fresh(files, identity), set(rebuild)
    todo = {name: stamp for name, stamp in files.items() if name not in fresh or name in again}
    report = WriteReport(root, 0, 0)
    if todo:
        staging = staging_folder(root, f"index-{uuid.uuid4().hex}")
        try:
            with whole_files(spark, todo):
                df = spark.read.parquet(*[str(root / name) for name in todo])
                columns = check_identity_columns(df.schema, identity)
                marked = _mark(
                    df.select(*[f"`{c}`" for c in columns]), staging, columns, F.input_file_name(), fpp
                )
                marked.count()
            by_uri = {str((root / name).as_uri()): name for name in todo}
            report = _bind(
                spark, root, staging, todo, columns, lambda _task, uri: by_uri.get(_normal_uri(uri))
            )
        finally:
            _remove_staging(staging)
    DatasetIndex.load(root).compact(force=bool(todo))
    report.seconds = time.perf_counter() - started
    return report


def _mark(
    df: DataFrame, staging: Path, columns: Sequence[str], group: Column | None, fpp: float
) -> DataFrame:
    """`df`, its rows unchanged, with the sink seeing each row's group and id hashes on the way.

    Without a group (an unpartitioned write) every row of a task goes to one file: the sink is
    sent the hashes alone, since every byte sent costs on every row written.
    """
    from pyspark.sql import functions as F

    sink = _sink(str(staging), columns, fpp, grouped=group is not None)
    hashes = F.concat(*[row_hashes(df.schema, column) for column in columns])  # one list a row
    marked = df.select("*", sink(*([] if group is None else [group]), hashes).alias(_SINK_COLUMN))
    return marked.where(F.col(_SINK_COLUMN)).drop(_SINK_COLUMN)


def _remove_staging(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    with contextlib.suppress(OSError):
        staging.parent.rmdir()  # the shared staging folder, once no write is using it


def _normal_uri(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path)).as_uri()


def _check_partitions(df: DataFrame, partition_by: Sequence[str], identity: Sequence[str]) -> list[str]:
    names = {name.lower(): name for name in df.schema.fieldNames()}
    found = []
    for column in partition_by:
        name = names.get(column.lower())
        if name is None:
            raise IdentityError(f"partition column {column!r} is not in the data")
        if name in identity:
            raise IdentityError(f"{name!r} cannot be both an identity and a partition column")
        found.append(name)
    return found


def _sink(staging: str, columns: Sequence[str], fpp: float, *, grouped: bool) -> Any:
    """The Arrow UDF that collects each task's id hashes and writes its filters when input ends.

    It returns True for every row. It is nondeterministic so the optimizer neither merges it
    with the user's own filters nor moves it: it must see exactly the rows that are written.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.functions import ArrowUDFType

    def collect(batches: Iterator[Any]) -> Iterator[Any]:  # a tuple of columns, or a lone one
        import numpy as np
        import pyarrow as pa

        collector = _TaskFilters(staging, columns, fpp)
        for arrays in batches:
            if not isinstance(arrays, tuple):  # PySpark passes a lone column bare
                arrays = (arrays,)
            collector.add(arrays[0] if grouped else None, arrays[-1])
            yield pa.array(np.ones(len(arrays[0]), dtype=bool))
        collector.finish()

    with warnings.catch_warnings():  # it prefers type hints, which cannot say "any number of columns"
        warnings.simplefilter("ignore", UserWarning)
        return F.arrow_udf(collect, "boolean", ArrowUDFType.SCALAR_ITER).asNondeterministic()


class _TaskFilters:
    """One task's id hashes, per group, until its input ends (runs on executors).

    A group is the rows bound for one data file: a write's partition values (Spark's JSON text
    of them), or an index build's input file. The ids of all identity columns go into one filter:
    a request looks for an id in every column, and one filter a file answers for all of them at
    the rate of one (which column holds it is found by the exact match that follows).
    """

    # Past this many held hashes a group's are deduplicated in place, bounding a big task's memory.
    _COMPACT_AT = 4_000_000

    def __init__(self, staging: str, columns: Sequence[str], fpp: float) -> None:
        self.staging = staging
        self.columns = list(columns)
        self.fpp = fpp
        self.hashes: dict[str, list[Any]] = {}
        self.held: dict[str, int] = {}
        self.rows: dict[str, int] = {}

    def add(self, group_keys: Any | None, hashes: Any) -> None:
        """One batch: its group keys (None: all in the one group `[]`), and each row's id hashes
        over all identity columns (a list of bigints a row)."""
        import pyarrow.compute as pc

        if group_keys is None:
            groups = [("[]", None)]
        else:
            keys = group_keys.unique()
            groups = (
                [(keys[0].as_py(), None)]
                if len(keys) == 1
                else [(key.as_py(), pc.equal(group_keys, key)) for key in keys]
            )
        for key, mask in groups:
            rows = len(hashes) if mask is None else int(pc.sum(mask).as_py())
            self.rows[key] = self.rows.get(key, 0) + rows
            self._hold(key, flat_keys(hashes if mask is None else hashes.filter(mask)))

    def _hold(self, slot: str, keys: Any) -> None:
        self.hashes.setdefault(slot, []).append(keys)
        self.held[slot] = self.held.get(slot, 0) + len(keys)
        if self.held[slot] > self._COMPACT_AT:
            import numpy as np

            from tracelake.privacy.filters import distinct

            merged = distinct(np.concatenate(self.hashes[slot]))
            self.hashes[slot] = [merged]
            self.held[slot] = len(merged)

    def finish(self) -> None:
        import numpy as np
        from pyspark import TaskContext

        from tracelake.privacy.filters import IdentityFilter
        from tracelake.privacy.segments import SegmentWriter

        if not self.rows:
            return
        context = TaskContext.get()
        task, attempt = context.partitionId(), context.attemptNumber()
        name = f"task-{task:05d}-{attempt}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        with SegmentWriter(Path(self.staging) / name) as writer:
            for key, rows in self.rows.items():
                chunks = self.hashes.get(key, [])
                keys = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
                writer.add(
                    IdentityFilter.build(keys, self.fpp),
                    task=task,
                    attempt=attempt,
                    stage=context.stageId(),
                    task_id=context.taskAttemptId(),  # Spark's id of this attempt, unique in the app
                    group=key,
                    columns=self.columns,
                    rows=rows,
                )


def flat_keys(hashes: Any) -> Any:
    """The filter keys in a batch of hashes (`identity.row_hashes`: a list a row): a bigint
    array, or lists of them nested to any depth, unnested level by level. Arrow's `flatten` skips
    null lists and the nulls are dropped last, so a null at any level hides nothing but itself."""
    import pyarrow as pa

    from tracelake.privacy.filters import as_keys

    while pa.types.is_list(hashes.type):
        hashes = hashes.flatten()
    return as_keys(hashes.drop_null().to_numpy(zero_copy_only=False))


def _read_staging(spark: SparkSession, staging: Path) -> dict[tuple[int, str], StoredFilter]:
    """The filter each (task, group) staged, from the attempt that committed the task's output.

    A task stages once, unless it ran more than once: a retry after a failure, or a speculative
    copy beside the original, where both may stage and only one is let commit. Then "the newest
    attempt" can be the loser; the attempt Spark's status store records as succeeded is the one
    whose file stayed. A (task, group) whose winner cannot be told is left out: its file is
    scanned, never skipped.
    """
    staged: dict[tuple[int, str], list[StoredFilter]] = {}
    for path in sorted(staging.glob(f"*{SUFFIX}")) if staging.is_dir() else []:
        for stored in read_segment(path).filters:
            staged.setdefault((int(stored.meta["task"]), str(stored.meta["group"])), []).append(stored)
    contested = {int(s.meta["stage"]) for attempts in staged.values() if len(attempts) > 1 for s in attempts}
    succeeded = succeeded_tasks(spark, contested) if contested else set()
    found: dict[tuple[int, str], StoredFilter] = {}
    for slot, attempts in staged.items():
        winners = attempts if len(attempts) == 1 else [s for s in attempts if s.meta["task_id"] in succeeded]
        if len(winners) == 1:
            found[slot] = winners[0]
        else:
            logger.warning(
                "task %d staged filters in %d attempts, of which Spark's status store knows %d to have "
                "succeeded: its file is left without a filter",
                slot[0],
                len(attempts),
                len(winners),
            )
    return found


def succeeded_tasks(spark: SparkSession, stages: set[int]) -> set[int]:
    """The task attempts (Spark's task ids) that succeeded in any attempt of `stages`, from the
    status store once the listener bus has delivered every task's end to it. A stage the store no
    longer holds adds none."""
    from py4j.protocol import Py4JJavaError

    context, jvm = spark.sparkContext._jsc.sc(), spark.sparkContext._jvm
    if not context.listenerBus().waitUntilEmpty(_STATUS_WAIT_MS):
        logger.warning(
            "Spark's listener bus did not drain in %d s: attempts may go unbound", _STATUS_WAIT_MS // 1000
        )
    store, api = context.statusStore(), jvm.org.apache.spark.status.api.v1
    only_succeeded = jvm.java.util.List.of(api.TaskStatus.SUCCESS)
    succeeded: set[int] = set()
    for stage in stages:
        try:
            last = store.lastStageAttempt(stage).attemptId()
        except Py4JJavaError:  # evicted (spark.ui.retainedStages)
            continue
        for attempt in range(last + 1):
            tasks = store.taskList(stage, attempt, 0, 2**31 - 1, api.TaskSorting.ID, only_succeeded)
            succeeded.update(
                task.taskId() for task in jvm.scala.jdk.javaapi.CollectionConverters.asJava(tasks)
            )
    return succeeded


def _bind(
    spark: SparkSession,
    root: Path,
    staging: Path,
    added: dict[str, DataFile],
    columns: Sequence[str],
    file_of: Callable[[int, str], str | None],
) -> WriteReport:
    """One segment binding each added data file to its staged filter, where that is certain.

    `file_of(task, group)` names the data file a task's group went to. A file gets a filter only
    if exactly one group went to it, with a filter of every identity column and its footer's row
    count.
    """
    import numpy as np
    import pyarrow.parquet as pq

    from tracelake.privacy.filters import IdentityFilter

    groups: dict[str, list[StoredFilter]] = {}
    for (task, group), stored in _read_staging(spark, staging).items():
        name = file_of(task, group)
        if name is not None:
            groups.setdefault(name, []).append(stored)
    report = WriteReport(root, len(added), 0)
    entries: list[tuple[IdentityFilter, DataFile, tuple[str, ...], int]] = []
    rates: list[float] = []
    for relative, data_file in sorted(added.items()):
        found = groups.get(relative, [])
        rows = pq.read_metadata(root / relative).num_rows
        if not found and rows == 0:  # no task saw a row of it: it holds no id, and need not be read
            report.indexed += 1
            entries.append((IdentityFilter.build(np.zeros(0, np.uint64)), data_file, tuple(columns), 0))
            continue
        bound = found[0] if len(found) == 1 else None
        if (
            bound is None
            or set(columns_of(bound)) != set(columns)
            or int(bound.meta["rows"]) != rows
            or bound.damaged()  # a staged segment damaged on disk: copied, its damage would pass
        ):
            report.unindexed.append(relative)
            continue
        report.indexed += 1
        entries.append((bound.filter, data_file, tuple(columns), rows))
        report.distinct_ids += bound.filter.keys
        report.index_bytes += bound.filter.nbytes
        if bound.filter.kind == "fuse" and bound.filter.measured_fpp is not None:
            rates.append(bound.filter.measured_fpp)
    report.measured_fpp = sum(rates) / len(rates) if rates else None
    if report.unindexed:
        logger.warning(
            "%d of %d data files under %s could not be bound to identity filters; "
            "they will always be scanned",
            len(report.unindexed),
            len(added),
            root,
        )
    DatasetIndex(root).write_segment(entries)
    return report


def _values(group: str) -> tuple[str | None, ...]:
    """A write's group is Spark's JSON text of the row's partition values."""
    return tuple(json.loads(group))


def _slot_of(relative: str) -> tuple[int, tuple[str | None, ...]] | None:
    """(task, partition key) of a file Spark wrote: its task from the name, partition from folders."""
    *folders, name = relative.split("/")
    match = _TASK_IN_NAME.match(name)
    if not match:
        return None
    values: list[str | None] = []
    for folder in folders:
        _, equals, value = folder.partition("=")
        if not equals:
            return None
        text = unquote(value)
        values.append(None if text == _NULL_PARTITION else text)
    return int(match.group(1)), tuple(values)
