"""Batch runs of queued privacy requests: every pending request of a kind in one pass a dataset.

`run_requests` takes every pending access (or delete) request, groups them by the datasets they
cover (their own list, or every privacy target the store knows), and runs each group in
sub-jobs of at most `max_ids` user ids: one Spark pass per dataset per sub-job, however many
requests it carries (or several passes, each within `bounds` of files and bytes). A sub-job
that fails fails its requests, with the error, and the run goes on with the others. A run that
dies leaves its requests `running` under the lease of a process that is gone; every run first
finishes such requests, of either kind (`RequestQueue.take_abandoned`), then takes the new
ones — a delete picks up where the files say it stopped (see `requests.delete`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.privacy.index import dataset_root
from tracelake.privacy.limits import MAX_IDS
from tracelake.privacy.queue import PrivacyRequest, RequestQueue
from tracelake.privacy.requests import Receipt, access, delete
from tracelake.privacy.search import Batch, Bounds, Dataset, PrivacyRequestError
from tracelake.privacy.targets import find_targets
from tracelake.store import LineageStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    resumed: list[str] = field(default_factory=list)  # taken over from a run that died (done or failed)
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
            [Dataset.resolve(path, identity.get(str(dataset_root(path)), ())) for path in key]
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
    progress: Callable[[SubJob, int, int], None] | None = None,
) -> RunReport:
    """Finish the requests dead runs left running, then run every pending request of `kind`
    (`access` needs `egress`, and abandoned access requests wait for a run that has one).

    `max_ids` bounds the ids of a sub-job, `bounds` the files and bytes of one Spark pass.
    """
    if kind == "access" and egress is None:
        raise PrivacyRequestError("access requests need an egress folder for the records they export")
    queue = RequestQueue(store)
    report = RunReport()
    with queue.holding():
        abandoned = ("delete", "access") if egress is not None else ("delete",)
        phases = [(each, queue.take_abandoned(each)) for each in abandoned]
        report.resumed = [request.id for _, taken in phases for request in taken]
        phases.append((kind, queue.take(kind)))
        if any(taken for _, taken in phases):
            datasets = target_datasets(store) if targets is None else targets
            for phase_kind, taken in phases:
                _run_taken(
                    spark, queue, phase_kind, taken, datasets, report, egress, max_ids, bounds, progress
                )
    return report


def _run_taken(
    spark: SparkSession,
    queue: RequestQueue,
    kind: str,
    taken: Sequence[PrivacyRequest],
    targets: Sequence[Dataset],
    report: RunReport,
    egress: Path | str | None,
    max_ids: int,
    bounds: Bounds | None,
    progress: Callable[[SubJob, int, int], None] | None,
) -> None:
    """Run requests this process holds, in sub-jobs; each ends done or failed in `report`."""
    if not taken:
        return
    try:
        jobs = plan_sub_jobs(taken, targets, max_ids=max_ids)
    except PrivacyRequestError as error:
        for request in taken:
            queue.fail(request.id, error)
            report.failed[request.id] = str(error)
        return
    for number, job in enumerate(jobs, 1):
        if progress:
            progress(job, number, len(jobs))
        try:
            if not job.datasets:
                raise PrivacyRequestError("no dataset to search: declare privacy targets or name datasets")
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
