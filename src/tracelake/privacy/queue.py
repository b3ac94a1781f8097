"""The privacy request queue and its audit trail, in the lineage store.

A request is submitted `pending` with its user ids, taken `running` by a batch run (which takes
every pending request of a kind at once, under a lease of its process renewed while it runs),
and ends `done` with its receipt or `failed` with the error. Asking again for what an open
request already asks (same kind, ids and datasets) is that request, not a second one. A request
whose holder died (killed, its machine lost: `store.leases.holder_gone`) is taken over by the
next run, which finishes it before anything new (`take_abandoned`). Its ids are kept only while
it is open: when it ends they are erased and only their fingerprint stays, so the store does not
become one more copy of the personal data it erased. Every change of state appends an audit
event (who, when, what, counts — never record values). The statements are
`store.privacy_requests`'s; what a request may be is said here.
"""

from __future__ import annotations

import builtins
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tracelake.model import utcnow
from tracelake.privacy.index import dataset_root
from tracelake.privacy.limits import MAX_ID_LENGTH
from tracelake.privacy.search import PrivacyRequestError
from tracelake.store import LineageStore
from tracelake.store.leases import holder_gone
from tracelake.store.location import StoreUnavailable
from tracelake.store.privacy_requests import (
    DONE,
    FAILED,
    KINDS,
    PENDING,
    RUNNING,
    STATUSES,
    AuditEvent,
    PrivacyRequest,
    RequestTable,
    TakenElsewhere,
)

__all__ = [
    "DONE",
    "FAILED",
    "KINDS",
    "MAX_ID_LENGTH",
    "PENDING",
    "RUNNING",
    "AuditEvent",
    "PrivacyRequest",
    "RequestQueue",
]

log = logging.getLogger(__name__)
RENEW_SECONDS = 30.0  # how often a run says it is alive; other hosts wait `leases.STALE`


class RequestQueue:
    """Privacy requests in `store`: submit, take a batch, finish or fail, and read the trail."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store
        self.table = RequestTable(store)

    def submit(
        self,
        kind: str,
        ids: Sequence[str],
        *,
        requester: str,
        datasets: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> PrivacyRequest:
        if kind not in KINDS:
            raise PrivacyRequestError(f"a request is one of {', '.join(KINDS)}, not {kind!r}")
        clean = list(dict.fromkeys(str(value).strip() for value in ids if str(value).strip()))
        if not clean:
            raise PrivacyRequestError("a request needs at least one user id")
        for number, value in enumerate(clean):
            if len(value) > MAX_ID_LENGTH or "\x00" in value:
                reason = f"over {MAX_ID_LENGTH} characters or binary"
                raise PrivacyRequestError(f"user id {number + 1} of the request is not one ({reason})")
        if not requester.strip():
            raise PrivacyRequestError("a request needs a requester")
        folders = [str(dataset_root(path)) for path in datasets or ()]
        missing = [folder for folder in folders if not Path(folder).is_dir()]
        if missing:
            raise PrivacyRequestError(f"dataset {missing[0]} does not exist (or is not a folder)")
        asked = self.open_request(kind, clean, folders)
        if asked is not None:  # asked again: the open request answers it, and the trail says so
            self.table.note(asked.id, "resubmitted", requester, {"ids": len(clean)})
            return asked
        request_id = request_id or f"{kind}-{uuid.uuid4().hex[:12]}"
        self.table.insert(request_id, kind, clean, requester=requester, datasets=folders)
        return self.get(request_id)

    def open_request(
        self, kind: str, ids: Sequence[str], datasets: Sequence[str] | None = None
    ) -> PrivacyRequest | None:
        """The pending or running request of `kind` for exactly these ids and datasets, if any."""
        clean = sorted({str(value).strip() for value in ids if str(value).strip()})
        folders = sorted(str(dataset_root(path)) for path in datasets or ())
        for request in self.table.open_with(kind, clean):
            if sorted(request.ids) == clean and sorted(request.datasets or ()) == folders:
                return request
        return None

    def take(self, kind: str) -> list[PrivacyRequest]:
        """Every pending request of `kind`, now running under this process's lease."""
        return [self.get(request_id) for request_id in self.table.take(kind)]

    def take_abandoned(self, kind: str | None = None) -> list[PrivacyRequest]:
        """Requests (of `kind`, or of any) left running by a process that is gone, now this
        process's to finish. Two runs finding the same one: the first to take it over has it."""
        now = utcnow()
        taken = []
        for holder in self.table.running(kind):
            # No lease: left by a version that kept none, which cannot be running still.
            if holder.host is not None:
                assert holder.pid is not None and holder.heard_at is not None
                if not holder_gone(holder.host, holder.pid, holder.heard_at, now):
                    continue
            left_by = "a run that kept no lease" if holder.host is None else f"{holder.host} pid {holder.pid}"
            try:
                self.table.take_over(holder, left_by)
            except TakenElsewhere:
                continue
            taken.append(self.get(holder.request_id))
        return taken

    @contextmanager
    def holding(self) -> Iterator[None]:
        """While the block runs, renew this process's leases every `RENEW_SECONDS`, so that no
        other host takes its requests over (`leases.STALE` unheard)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(RENEW_SECONDS):
                try:
                    self.table.renew()
                except (sa.exc.SQLAlchemyError, StoreUnavailable) as error:  # the next may get through
                    log.warning("privacy request leases not renewed (%s)", type(error).__name__)

        renewer = threading.Thread(target=renew, name="tracelake-privacy-leases", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()

    def finish(self, request_id: str, receipt: dict[str, Any]) -> None:
        self.table.end(request_id, DONE, receipt=receipt, details=_summary(receipt))

    def fail(self, request_id: str, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.table.end(request_id, FAILED, error=message, details={"error": message})

    def get(self, request_id: str) -> PrivacyRequest:
        request = self.table.get(request_id)
        if request is None:
            raise PrivacyRequestError(f"no privacy request {request_id!r}")
        return request

    def list(self, *, status: str | None = None, limit: int = 100) -> list[PrivacyRequest]:
        if status is not None and status not in STATUSES:
            raise PrivacyRequestError(f"a request status is one of {', '.join(STATUSES)}, not {status!r}")
        return self.table.list(status=status, limit=limit)

    def audit(self, request_id: str | None = None, *, limit: int = 100) -> builtins.list[AuditEvent]:
        return self.table.audit(request_id, limit=limit)


def _summary(receipt: dict[str, Any]) -> dict[str, Any]:
    """What the audit trail keeps of a receipt: which datasets, how many files and rows."""
    return {
        "datasets": [scan["dataset"] for scan in receipt.get("datasets", [])],
        "files_read": sum(scan["read"] for scan in receipt.get("datasets", [])),
        "files_rewritten": receipt.get("files_rewritten", 0),
        "files_removed": receipt.get("files_removed", 0),
        "rows": receipt.get("rows", 0),
    }
