"""Privacy requests and identity indexes, as the CLI and the HTTP API both work them: index a
dataset's identities, verify (and repair) an index, declare and find the datasets requests must
cover, queue access and delete requests, run them, and read the queue and its audit trail.

Commands that need Spark use the running session, or start a quiet local one for the call
(`spark.local.local_session`). A request that cannot be carried out as asked (an unknown kind, a
dataset that is not there, an id that is not one, a column that holds no identity) is a
`PrivacyRequestError` with a sentence for the user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracelake.app.service import Tracelake
from tracelake.privacy.identity import IdentityError
from tracelake.privacy.index import dataset_root
from tracelake.privacy.limits import DEFAULT_FPP, MAX_ID_LENGTH, MAX_IDS
from tracelake.privacy.queue import AuditEvent, PrivacyRequest, RequestQueue
from tracelake.privacy.runner import RunReport, SubJob, run_requests
from tracelake.privacy.search import Bounds, PrivacyRequestError
from tracelake.privacy.targets import Target, declare, find_targets
from tracelake.privacy.verify import VerifyReport, verify
from tracelake.privacy.writer import WriteReport, build_index
from tracelake.spark.local import local_session

__all__ = [
    "DEFAULT_FPP",
    "MAX_IDS",
    "MAX_ID_LENGTH",
    "PrivacyOperations",
    "PrivacyRequestError",
    "Submitted",
    "index_dataset",
    "verify_index",
]


@dataclass(slots=True)
class Submitted:
    """What a submission queued: the requests, and those of them that were already open."""

    requests: list[PrivacyRequest] = field(default_factory=list)
    again: list[PrivacyRequest] = field(default_factory=list)  # an id asked for by an open request

    @property
    def new(self) -> int:
        return len(self.requests) - len(self.again)


class PrivacyOperations:
    def __init__(self, service: Tracelake) -> None:
        self.service = service
        self.queue = RequestQueue(service.store)

    # ------------------------------------------------------------ targets

    def declare(self, path: Path, identity: Sequence[str]) -> Target:
        """Record that the dataset at `path` holds identities in these columns."""
        with _refusals():
            return declare(self.service.store, path, identity)

    def targets(self) -> list[Target]:
        """The datasets privacy requests cover: declared, or reached by identities through lineage."""
        return find_targets(self.service.store)

    # ------------------------------------------------------------ requests

    def submit(
        self, kind: str, ids: Sequence[str], *, requester: str, datasets: Sequence[str] | None = None
    ) -> PrivacyRequest:
        """Queue one request for every id of `ids` (an id already asked for by an open request of
        the same kind is that request, the trail saying it was asked again)."""
        return self.queue.submit(kind, ids, requester=requester, datasets=datasets)

    def submit_each(
        self, kind: str, ids: Sequence[str], *, requester: str, datasets: Sequence[str] | None = None
    ) -> Submitted:
        """Queue a request for each id alone, as the command line does for a file of ids."""
        submitted = Submitted()
        for value in ids:
            before = self.queue.open_request(kind, [value], datasets)
            submitted.requests.append(self.submit(kind, [value], requester=requester, datasets=datasets))
            if before is not None:
                submitted.again.append(before)
        return submitted

    def run(
        self,
        kind: str,
        *,
        egress: Path | None,
        max_ids: int = MAX_IDS,
        max_files: int | None = None,
        max_bytes: int | None = None,
        progress: Callable[[SubJob, int, int], None] | None = None,
    ) -> RunReport:
        """Run every queued request of `kind` in sub-jobs of at most `max_ids` ids, `max_files`
        data files and `max_bytes` read a Spark pass, after finishing any request a run that died
        left running; access requests write under `egress`."""
        if kind not in ("access", "delete"):
            raise PrivacyRequestError(f"kind must be access or delete, not {kind!r}")
        bounds = Bounds(max_files, max_bytes)
        with local_session("tracelake-privacy") as spark, _refusals():
            return run_requests(
                spark,
                self.service.store,
                kind,
                egress=egress,
                max_ids=max_ids,
                bounds=bounds,
                progress=progress,
            )

    def request(self, request_id: str) -> PrivacyRequest:
        return self.queue.get(request_id)

    def requests(self, *, status: str | None = None, limit: int = 100) -> list[PrivacyRequest]:
        """Requests, newest first."""
        with _refusals():
            return self.queue.list(status=status, limit=limit)

    def audit(self, request_id: str | None = None, *, limit: int = 100) -> list[AuditEvent]:
        """The trail: who asked what, when, and what it touched (counts, never ids)."""
        return self.queue.audit(request_id, limit=limit)


def request_json(request: PrivacyRequest) -> dict[str, Any]:
    """A request as the API and `privacy requests --format json` show it: counts and a
    fingerprint of its ids, never the ids."""
    return {
        "id": request.id,
        "kind": request.kind,
        "requester": request.requester,
        "status": request.status,
        "id_count": request.id_count,
        "subject_fingerprint": request.subject_fingerprint,
        "datasets": list(request.datasets) if request.datasets is not None else None,
        "submitted_at": request.submitted_at.isoformat(),
        "started_at": request.started_at.isoformat() if request.started_at else None,
        "ended_at": request.ended_at.isoformat() if request.ended_at else None,
        "error": request.error,
        "receipt": request.receipt,
    }


def audit_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "request": event.request_id,
        "event": event.event,
        "at": event.at.isoformat(),
        "requester": event.requester,
        "details": event.details,
    }


def target_json(target: Target) -> dict[str, Any]:
    return {
        "dataset": target.asset,
        "identity": list(target.identity),
        "path": str(target.path) if target.path is not None else None,
        "declared": target.declared,
        "reason": list(target.reason),
    }


def index_dataset(path: Path, identity: Sequence[str], *, fpp: float = DEFAULT_FPP) -> WriteReport:
    """Build identity filters for a Parquet dataset's files that have none (or a stale one)."""
    root = dataset_root(path)  # one Tracelake cannot reach is refused before Spark starts
    with local_session("tracelake-privacy") as spark, _refusals():
        return build_index(spark, root, identity=identity, fpp=fpp)


def verify_index(
    path: Path,
    identity: Sequence[str] = (),
    *,
    repair: bool = False,
    fpp: float = DEFAULT_FPP,
    sample: int | None = None,
) -> VerifyReport:
    """Check that each file's filters (or a random `sample` of files') hold every id in it;
    `repair` rebuilds those that do not (with Spark) and indexes the files that have none."""
    root = dataset_root(path)
    with _refusals():
        if not repair:
            return verify(root, identity, sample=sample)
        with local_session("tracelake-privacy") as spark:
            return verify(root, identity, repair_with=spark, fpp=fpp, sample=sample)


@contextmanager
def _refusals() -> Iterator[None]:
    """What the privacy functions refuse as a value (a column, a path, a status) is the user's."""
    try:
        yield
    except PrivacyRequestError:
        raise
    except (IdentityError, ValueError) as error:
        raise PrivacyRequestError(str(error)) from None
