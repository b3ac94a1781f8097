"""Batch runs of queued privacy requests: every pending request of a kind in one pass a dataset.

`run_requests` takes every pending access (or delete) request, groups them by the datasets they
cover (their own list, or every privacy target the store knows), and runs each group in
sub-jobs of at most `max_ids` user ids: one Spark pass per dataset per sub-job, however many
requests it carries (or several passes, each within `bounds` of files and bytes). A sub-job
that fails fails its requests, with the error, and the run goes on with the others. A run that
dies leaves its requests `running`; `resume=True` takes them again (a delete picks up where the
files say it stopped: see `requests.delete`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.privacy.queue import PrivacyRequest, RequestQueue
from tracelake.privacy.requests import Receipt, access, delete
from tracelake.privacy.search import Batch, Bounds, Dataset, RequestError
from tracelake.privacy.targets import find_targets
from tracelake.store import LineageStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_IDS = 10_000


@dataclass
class SubJob:
    """Requests run together over the same datasets."""

    requests: list[PrivacyRequest]
    datasets: list[Dataset]

    @property
    def ids(self) -> int:
        return sum(request.id_count for request in self.requests)


@dataclass
class RunReport:
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    receipts: dict[str, Receipt] = field(default_factory=dict)


def target_datasets(store: LineageStore) -> list[Dataset]:
    """The privacy targets that can be searched: file datasets that exist."""
    return [
        Dataset(target.path, list(target.identity))
        for target in find_targets(store)
        if target.path is not None and target.path.is_dir()
    ]


def plan_sub_jobs(
    requests: Sequence[PrivacyRequest], targets: Sequence[Dataset], *, max_ids: int = MAX_IDS
) -> list[SubJob]:
    """Group requests by the datasets they cover, then cut each group at `max_ids` ids."""
    by_datasets: dict[tuple[str, ...], list[PrivacyRequest]] = {}
    for request in requests:
        key = tuple(sorted(request.datasets)) if request.datasets else ()
        by_datasets.setdefault(key, []).append(request)
    identity = {str(dataset.root): dataset.identity for dataset in targets}
    jobs = []
    for key, group in by_datasets.items():
        datasets = (
            [Dataset.resolve(path, identity.get(str(Path(path).absolute()), ())) for path in key]
            if key
            else list(targets)
        )
        current: list[PrivacyRequest] = []
        for request in group:
            if current and sum(r.id_count for r in current) + request.id_count > max_ids:
                jobs.append(SubJob(current, datasets))
                current = []
            current.append(request)
        jobs.append(SubJob(current, datasets))
    return jobs


def run_requests(
    spark: SparkSession,
    store: LineageStore,
    kind: str,
    *,
    egress: Path | str | None = None,
    targets: Sequence[Dataset] | None = None,
    max_ids: int = MAX_IDS,
    bounds: Bounds | None = None,
    resume: bool = False,
    progress: Callable[[SubJob, int, int], None] | None = None,
) -> RunReport:
    """Run every pending request of `kind` (`access` needs `egress`); what ended how.

    `max_ids` bounds the ids of a sub-job, `bounds` the files and bytes of one Spark pass.
    """
    if kind == "access" and egress is None:
        raise RequestError("access requests need an egress folder for the records they export")
    queue = RequestQueue(store)
    report = RunReport()
    taken = queue.take(kind, resume=resume)
    if not taken:
        return report
    try:
        jobs = plan_sub_jobs(taken, target_datasets(store) if targets is None else targets, max_ids=max_ids)
    except RequestError as error:
        for request in taken:
            queue.fail(request.id, error)
            report.failed[request.id] = str(error)
        return report
    for number, job in enumerate(jobs, 1):
        if progress:
            progress(job, number, len(jobs))
        try:
            if not job.datasets:
                raise RequestError("no dataset to search: declare privacy targets or name datasets")
            batch = Batch({request.id: list(request.ids) for request in job.requests})
            if kind == "access":
                receipts = access(spark, batch, job.datasets, egress or "", bounds=bounds)
            else:
                receipts = delete(spark, batch, job.datasets, bounds=bounds)
        except Exception as error:  # one sub-job failing must not stop the others
            for request in job.requests:
                queue.fail(request.id, error)
                report.failed[request.id] = f"{type(error).__name__}: {error}"
            continue
        for request_id, receipt in receipts.items():
            queue.finish(request_id, receipt.to_json())
            report.done.append(request_id)
            report.receipts[request_id] = receipt
    return report
