"""Access and delete requests over datasets, one pass per dataset for a whole batch of requests.

Access: matched rows go to `<egress>/<request>/<dataset>/` as JSON lines, with a `receipt.json`
per request (datasets, files considered/skipped/read, rows found, timings — no record values).

Delete is copy-on-write, file by file, and safe to kill at any point:
  1. search — which files hold matching rows, and how many each (Spark, exact);
  2. stage — every such file is rewritten without those rows into a staging folder, by one
     indexed write (so the new files come with their filters), each file read by one task;
  3. verify — each staged file has exactly its original's rows minus the removed ones, and
     reading both again by the plain Arrow walk (`plain_ids`, not the Spark walk that chose
     the rows) finds as many requested rows in the original as Spark removed, and none left
     in the staged file;
  4. index — the new filters go into the dataset's index, bound to the original names with the
     staged files' size and modification time (they match only once the swap is done);
  5. swap — each staged file is renamed over its original (atomic: a reader sees the old file or
     the new one), and a file left with no rows is removed;
  6. clean — the staging folder goes, the index is compacted.
A run that dies anywhere leaves every data file either old or new. Running the request again
starts from a fresh search — files already swapped no longer match — and finishes the job.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from tracelake.model import fingerprint, utcnow
from tracelake.privacy.index import (
    DataFile,
    DatasetIndex,
    ScanPlan,
    columns_of,
    list_data_files,
    staging_folder,
)
from tracelake.privacy.plain_ids import rows_holding
from tracelake.privacy.search import (
    MATCHED_IDS,
    REQUESTS,
    SOURCE_FILE,
    Batch,
    Bounds,
    Dataset,
    DatasetScan,
    PrivacyRequestError,
    holds,
    matches,
    plan_scan,
    read_files,
    whole_files,
)
from tracelake.privacy.writer import write

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Step = Callable[[str], None]
_REQUEST_COLUMN = "_tracelake_request"
_FILE_NUMBER = "_tracelake_n"


class DeleteError(RuntimeError):
    """A rewrite that failed its checks; nothing of that dataset was swapped."""


class AccessError(RuntimeError):
    """An export that does not hold every row the search matched."""


@dataclass
class Receipt:
    """What a request did, for its requester and the audit trail: counts and times, never values."""

    request: str
    kind: Literal["access", "delete"]
    started_at: str
    datasets: list[DatasetScan] = field(default_factory=list)
    rows: int = 0  # found (access) or removed (delete)
    files_rewritten: int = 0
    files_removed: int = 0
    seconds: float = 0.0
    egress: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def access(
    spark: SparkSession,
    batch: Batch,
    datasets: Sequence[Dataset],
    egress: Path | str,
    *,
    bounds: Bounds | None = None,
    step: Step | None = None,
) -> dict[str, Receipt]:
    """Export every request's records from `datasets` under `egress`; a receipt per request.

    Each dataset is one Spark pass over the files its index cannot rule out, or several passes
    within `bounds`; `step` hears of each ("<dataset> pass 2/5").
    """
    started, clock = utcnow().isoformat(), time.perf_counter()
    receipts = {r: Receipt(r, "access", started) for r in batch.ids_by_request}
    egress = Path(egress).absolute()
    step = step or _quiet
    bounds = bounds or Bounds()
    for dataset in datasets:
        files = list_data_files(dataset.root)
        plan = plan_scan(dataset, batch, files)
        scan = DatasetScan.of(plan)
        read_started = time.perf_counter()
        for request in receipts:  # a re-run replaces what an earlier run of the request exported
            shutil.rmtree(egress / request / dataset_slug(dataset.root), ignore_errors=True)
        per_request: dict[str, dict[str, int]] = {}
        passes = bounds.split(plan, files)
        for number, part in enumerate(passes, 1):
            step(f"{dataset.root} pass {number}/{len(passes)}")
            found = _matching(spark, dataset, part, batch).persist()
            try:
                matched: dict[str, dict[str, int]] = {}
                _count_by_file(dataset, found, matched)
                exported = _export(found.drop(SOURCE_FILE), egress, dataset)
            finally:
                found.unpersist()
            for request, by_file in matched.items():
                if exported.get(request, 0) != sum(by_file.values()):
                    raise AccessError(
                        f"{request}: {exported.get(request, 0)} rows of {dataset.root} exported, "
                        f"{sum(by_file.values())} matched"
                    )
                for path, rows in by_file.items():
                    per_request.setdefault(request, {})[path] = rows
        scan.scan_seconds = time.perf_counter() - read_started
        for request, receipt in receipts.items():
            receipt.datasets.append(_scan_for(scan, per_request.get(request, {})))
            receipt.rows += receipt.datasets[-1].rows
    for request, receipt in receipts.items():
        receipt.seconds = time.perf_counter() - clock
        folder = egress / request
        folder.mkdir(parents=True, exist_ok=True)
        receipt.egress = str(folder)
        (folder / "receipt.json").write_text(json.dumps(receipt.to_json(), indent=2))
    return receipts


def _export(found: Any, egress: Path, dataset: Dataset) -> dict[str, int]:
    """Add matched rows, as JSON lines, to each request's folder; rows written per request."""
    from pyspark.sql import functions as F

    staging = egress / f"_staging-{fingerprint(str(dataset.root), str(time.time_ns()))}"
    rows = found.withColumn(_REQUEST_COLUMN, F.explode(REQUESTS)).drop(MATCHED_IDS, REQUESTS)
    rows.write.partitionBy(_REQUEST_COLUMN).json(str(staging))
    counts: dict[str, int] = {}
    name = dataset_slug(dataset.root)
    for folder in sorted(staging.glob(f"{_REQUEST_COLUMN}=*")):
        request = unquote(folder.name.split("=", 1)[1])  # Spark escapes e.g. `#` and `:` in folder names
        target = egress / request / name
        target.mkdir(parents=True, exist_ok=True)
        for part in folder.glob("part-*"):  # Spark's part names are unique across passes
            os.replace(part, target / part.name)
            counts[request] = counts.get(request, 0) + _count_lines(target / part.name)
    shutil.rmtree(staging, ignore_errors=True)
    return counts


def delete(
    spark: SparkSession,
    batch: Batch,
    datasets: Sequence[Dataset],
    *,
    fpp: float | None = None,
    bounds: Bounds | None = None,
    step: Step | None = None,
) -> dict[str, Receipt]:
    """Erase every request's records from `datasets`; a receipt per request.

    `step` is called with each step's name as it begins ("search", "stage", "verify", "index",
    "swap", "swapped <file>", "clean"), for progress reports — and for tests to cut a run short.
    A dataset bigger than `bounds` is done in several passes, each complete on its own.
    """
    started, clock = utcnow().isoformat(), time.perf_counter()
    receipts = {r: Receipt(r, "delete", started) for r in batch.ids_by_request}
    for dataset in datasets:
        _delete_from(spark, batch, dataset, receipts, fpp, bounds or Bounds(), step or _quiet)
    for receipt in receipts.values():
        receipt.seconds = time.perf_counter() - clock
    return receipts


def _delete_from(
    spark: SparkSession,
    batch: Batch,
    dataset: Dataset,
    receipts: dict[str, Receipt],
    fpp: float | None,
    bounds: Bounds,
    step: Step,
) -> None:
    root = dataset.root
    staging = staging_folder(root, f"delete-{fingerprint(*sorted(batch.ids_by_request))}")
    shutil.rmtree(staging, ignore_errors=True)  # what a run that died left behind
    files = list_data_files(root)
    plan = plan_scan(dataset, batch, files)
    scan = DatasetScan.of(plan)
    clock = time.perf_counter()
    removed: dict[str, int] = {}  # relative path -> rows removed
    per_request: dict[str, dict[str, int]] = {}
    for part in bounds.split(plan, files):
        step("search")
        found, uris = _count_by_file(dataset, _matching(spark, dataset, part, batch), per_request)
        if found:
            _rewrite(spark, batch, dataset, files, found, uris, staging, fpp, step)
            removed.update(found)
        shutil.rmtree(staging, ignore_errors=True)
    scan.scan_seconds = time.perf_counter() - clock
    step("clean")
    _remove_empty(staging.parent)
    DatasetIndex.load(root).compact()
    emptied = sum(1 for path in removed if not (root / path).exists())
    for request, receipt in receipts.items():
        receipt.datasets.append(_scan_for(scan, per_request.get(request, {})))
        receipt.rows += receipt.datasets[-1].rows
        receipt.files_rewritten += len(removed) - emptied
        receipt.files_removed += emptied


def _matching(spark: SparkSession, dataset: Dataset, plan: ScanPlan, batch: Batch) -> Any:
    """The plan's rows holding an id of `batch`, with their requests and their file's URI."""
    from pyspark.sql import functions as F

    source = read_files(spark, dataset, plan).withColumn(SOURCE_FILE, F.input_file_name())
    return matches(spark, source, dataset.identity, batch)


def _count_by_file(
    dataset: Dataset, found: Any, per_request: dict[str, dict[str, int]]
) -> tuple[dict[str, int], dict[str, str]]:
    """Matched rows per file (each row once), also added per request and file to `per_request`;
    and the files' URIs as Spark names them, by relative path."""
    rows_by_file: dict[str, int] = {}
    uris: dict[str, str] = {}
    for row in found.groupBy(SOURCE_FILE, REQUESTS).count().collect():
        relative = _relative(dataset.root, row[SOURCE_FILE])
        uris[relative] = row[SOURCE_FILE]
        rows_by_file[relative] = rows_by_file.get(relative, 0) + row["count"]
        for request in row[REQUESTS]:
            by_file = per_request.setdefault(request, {})
            by_file[relative] = by_file.get(relative, 0) + row["count"]
    return rows_by_file, uris


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def _quiet(_: str) -> None:
    pass


def _rewrite(
    spark: SparkSession,
    batch: Batch,
    dataset: Dataset,
    files: dict[str, DataFile],
    removed: dict[str, int],
    uris: dict[str, str],
    staging: Path,
    fpp: float | None,
    step: Step,
) -> None:
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    root = dataset.root
    targets = sorted(removed)
    step("stage")
    numbers = F.map_from_arrays(F.lit([uris[path] for path in targets]), F.lit(list(range(len(targets)))))
    # Files with different columns are rewritten apart: read together, they would all get one
    # file's columns, and the others' extra columns would be dropped from the rewrite.
    by_schema: dict[str, list[str]] = {}
    for path in targets:
        by_schema.setdefault(_schema_text(root / path), []).append(path)
    options: dict[str, Any] = {} if fpp is None else {"fpp": fpp}
    for group in by_schema.values():
        with whole_files(spark, {path: files[path] for path in group}):
            source = spark.read.parquet(*[str(root / path) for path in group])
            kept = source.withColumn(_FILE_NUMBER, F.element_at(numbers, F.input_file_name())).where(
                ~holds(source, dataset.identity, batch.ids)
            )
            write(kept, staging, identity=dataset.identity, partition_by=[_FILE_NUMBER], **options)

    step("verify")
    staged: dict[str, str | None] = dict.fromkeys(targets)
    for relative in list_data_files(staging):
        number = int(relative.split("/", 1)[0].split("=", 1)[1])
        if staged[targets[number]] is not None:
            raise DeleteError(f"{targets[number]} was rewritten into more than one file; nothing swapped")
        staged[targets[number]] = relative
    for path, new in staged.items():
        expected = pq.read_metadata(root / path).num_rows - removed[path]
        actual = 0 if new is None else pq.read_metadata(staging / new).num_rows
        if actual != expected:
            raise DeleteError(f"rewrite of {path} holds {actual} rows, not {expected}; nothing swapped")
        if new is not None and pq.read_schema(staging / new).names != pq.read_schema(root / path).names:
            raise DeleteError(f"rewrite of {path} does not have its columns; nothing swapped")
    _check_rewrites(root, staging, staged, removed, dataset.identity, batch.ids)

    step("index")
    staging_index = DatasetIndex.load(staging)
    staged_index = staging_index.fresh(list_data_files(staging))
    entries = []
    for path, new in staged.items():
        if new is None:
            continue
        stamp = DataFile.of(staging, new)
        for stored in staging_index.intact(staged_index.get(new, [])):  # a damaged one: left unindexed
            entries.append(
                (
                    stored.filter,
                    DataFile(path, stamp.size, stamp.mtime_ns),
                    columns_of(stored),
                    int(stored.meta["rows"]),
                )
            )
    DatasetIndex(root).write_segment(entries)

    step("swap")
    for path, new in staged.items():
        original = root / path
        (original.parent / f".{original.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum
        if new is None:
            original.unlink(missing_ok=True)
        else:
            os.replace(staging / new, original)
        step(f"swapped {path}")


def _check_rewrites(
    root: Path,
    staging: Path,
    staged: dict[str, str | None],
    removed: dict[str, int],
    identity: Sequence[str],
    ids: Sequence[str],
) -> None:
    """Each original holds as many requested rows as Spark removed, its rewrite none, as the
    plain Arrow walk reads them: a fault in the Spark walk fails the delete, never hides a row."""
    from concurrent.futures import ThreadPoolExecutor

    def holding(path: str) -> tuple[str, int, int]:
        new = staged[path]
        left = 0 if new is None else rows_holding(staging / new, identity, ids)
        return path, rows_holding(root / path, identity, ids), left

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, found, left in pool.map(holding, sorted(staged)):
            if left:
                raise DeleteError(
                    f"rewrite of {path} still holds {left} rows with a requested id; nothing swapped"
                )
            if found != removed[path]:
                raise DeleteError(
                    f"{path} holds {found} rows with a requested id, but {removed[path]} were "
                    "matched for removal; nothing swapped"
                )


def _schema_text(path: Path) -> str:
    import pyarrow.parquet as pq

    text: str = pq.read_schema(path).remove_metadata().to_string(show_field_metadata=False)
    return text


def _relative(root: Path, uri: str) -> str:
    from urllib.parse import unquote, urlparse

    local = Path(unquote(urlparse(uri).path)) if "://" in uri or uri.startswith("file:") else Path(uri)
    return local.relative_to(root).as_posix()


def _scan_for(scan: DatasetScan, rows_by_file: dict[str, int]) -> DatasetScan:
    """One request's view of a dataset's scan: the rows it matched, in all and per file."""
    from dataclasses import replace

    return replace(scan, rows=sum(rows_by_file.values()), rows_by_file=dict(sorted(rows_by_file.items())))


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def dataset_slug(root: Path) -> str:
    """A folder name for a dataset's records in an egress folder: its name and a short hash."""
    return f"{root.name}-{fingerprint(str(root))[:8]}"


__all__ = ["AccessError", "DeleteError", "PrivacyRequestError", "Receipt", "access", "dataset_slug", "delete"]
