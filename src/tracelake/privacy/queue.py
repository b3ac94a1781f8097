"""The privacy request queue and its audit trail, in the lineage store.

A request is submitted `pending` with its user ids, taken `running` by a batch run (which takes
every pending request of a kind at once, under a lease of its process renewed while it runs),
and ends `done` with its receipt or `failed` with the error. Asking again for what an open
request already asks (same kind, ids and datasets) is that request, not a second one. A request
whose holder died (killed, its machine lost: `store.leases.holder_gone`) is taken over by the
next run, which finishes it before anything new (`take_abandoned`). Its ids are kept only while
it is open: when it ends they are erased and only their fingerprint stays, so the store does not
become one more copy of the personal data it erased. Every change of state appends an audit
event (who, when, what, counts — never record values).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa

from tracelake.model import fingerprint, utcnow
from tracelake.privacy.search import PrivacyRequestError
from tracelake.store import LineageStore
from tracelake.store import schema as s
from tracelake.store.leases import holder_gone

log = logging.getLogger(__name__)
# A user id is a key, an email, a device id: anything longer is a file pasted by mistake.
MAX_ID_LENGTH = 1024

Kind = Literal["access", "delete"]
KINDS: tuple[Kind, ...] = ("access", "delete")
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
STATUSES = (PENDING, RUNNING, DONE, FAILED)
RENEW_SECONDS = 30.0  # how often a run says it is alive; other hosts wait `leases.STALE`


class _TakenElsewhere(Exception):
    """Another run took the request over first: this one's take-over is rolled back."""


@dataclass(frozen=True)
class PrivacyRequest:
    id: str
    kind: Kind
    requester: str
    status: str
    ids: tuple[str, ...]  # empty once the request has ended
    subject_fingerprint: str
    id_count: int
    datasets: tuple[str, ...] | None  # None: every privacy target
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    error: str | None
    receipt: dict[str, Any] | None


@dataclass(frozen=True)
class AuditEvent:
    request_id: str
    event: str
    at: datetime
    requester: str
    details: dict[str, Any]


class RequestQueue:
    """Privacy requests in `store`: submit, take a batch, finish or fail, and read the trail."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store

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
        folders = [str(Path(path).absolute()) for path in datasets or ()]
        missing = [folder for folder in folders if not Path(folder).is_dir()]
        if missing:
            raise PrivacyRequestError(f"dataset {missing[0]} does not exist (or is not a folder)")
        asked = self.open_request(kind, clean, folders)
        if asked is not None:  # asked again: the open request answers it, and the trail says so
            with self.store.engine.begin() as conn:
                self._audit(conn, asked.id, "resubmitted", _micros(utcnow()), requester, {"ids": len(clean)})
            return asked
        request_id = request_id or f"{kind}-{uuid.uuid4().hex[:12]}"
        now = _micros(utcnow())
        with self.store.engine.begin() as conn:
            conn.execute(
                s.privacy_requests.insert().values(
                    id=request_id,
                    kind=kind,
                    requester=requester,
                    status=PENDING,
                    subject=clean,
                    subject_fingerprint=fingerprint(*sorted(clean)),
                    id_count=len(clean),
                    datasets=folders or None,
                    submitted_at=now,
                )
            )
            self._audit(conn, request_id, "submitted", now, requester, {"ids": len(clean)})
        return self.get(request_id)

    def open_request(
        self, kind: str, ids: Sequence[str], datasets: Sequence[str] | None = None
    ) -> PrivacyRequest | None:
        """The pending or running request of `kind` for exactly these ids and datasets, if any."""
        clean = sorted({str(value).strip() for value in ids if str(value).strip()})
        folders = sorted(str(Path(path).absolute()) for path in datasets or ())
        table = s.privacy_requests
        query = sa.select(table).where(
            table.c.kind == kind,
            table.c.status.in_([PENDING, RUNNING]),
            table.c.subject_fingerprint == fingerprint(*clean),
        )
        with self.store.engine.connect() as conn:
            for row in conn.execute(query.order_by(table.c.submitted_at)).mappings():
                request = _request(row)
                if sorted(request.ids) == clean and sorted(request.datasets or ()) == folders:
                    return request
        return None

    def take(self, kind: str) -> list[PrivacyRequest]:
        """Every pending request of `kind`, now running under this process's lease."""
        token = _micros(utcnow())
        table = s.privacy_requests
        with self.store.engine.begin() as conn:
            conn.execute(
                table.update()
                .where(table.c.kind == kind, table.c.status == PENDING)
                .values(status=RUNNING, started_at=token)
            )
            taken = conn.execute(
                sa.select(table.c.id, table.c.requester).where(
                    table.c.status == RUNNING, table.c.started_at == token, table.c.kind == kind
                )
            ).all()
            for request_id, requester in taken:
                conn.execute(s.privacy_leases.insert().values(request_id=request_id, **_holder(token)))
                self._audit(conn, request_id, "started", token, requester, {})
        return [self.get(request_id) for request_id, _ in taken]

    def take_abandoned(self, kind: str | None = None) -> list[PrivacyRequest]:
        """Requests (of `kind`, or of any) left running by a process that is gone, now this
        process's to finish. Two runs finding the same one: the first to take it over has it."""
        now = utcnow()
        table, leases = s.privacy_requests, s.privacy_leases
        query = (
            sa.select(table.c.id, table.c.requester, leases.c.host, leases.c.pid, leases.c.heard_at)
            .select_from(table.outerjoin(leases, leases.c.request_id == table.c.id))
            .where(table.c.status == RUNNING)
            .order_by(table.c.submitted_at)
        )
        if kind is not None:
            query = query.where(table.c.kind == kind)
        with self.store.engine.connect() as conn:
            running = conn.execute(query).all()
        taken = []
        for row in running:
            # No lease: left by a version that kept none, which cannot be running still.
            if row.host is not None and not holder_gone(row.host, row.pid, s.from_micros(row.heard_at), now):
                continue
            try:
                self._take_over(row, _micros(now))
            except (_TakenElsewhere, sa.exc.IntegrityError):
                continue
            taken.append(self.get(row.id))
        return taken

    def _take_over(self, row: Any, now: int) -> None:
        """Make this process the holder of a request whose holder is gone, in one transaction
        that starts by writing (so SQLite takes its lock before anything is read)."""
        table, leases = s.privacy_requests, s.privacy_leases
        with self.store.engine.begin() as conn:
            if row.host is None:
                conn.execute(leases.insert().values(request_id=row.id, **_holder(now)))
            else:
                moved = conn.execute(
                    leases.update()
                    .where(
                        leases.c.request_id == row.id,
                        leases.c.host == row.host,
                        leases.c.pid == row.pid,
                        leases.c.heard_at == row.heard_at,
                    )
                    .values(**_holder(now))
                )
                if moved.rowcount != 1:
                    raise _TakenElsewhere
            still = conn.execute(sa.select(table.c.status).where(table.c.id == row.id)).scalar_one_or_none()
            if still != RUNNING:
                raise _TakenElsewhere
            left_by = "a run that kept no lease" if row.host is None else f"{row.host} pid {row.pid}"
            self._audit(conn, row.id, "resumed", now, row.requester, {"left_by": left_by})

    @contextmanager
    def holding(self) -> Iterator[None]:
        """While the block runs, renew this process's leases every `RENEW_SECONDS`, so that no
        other host takes its requests over (`leases.STALE` unheard)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(RENEW_SECONDS):
                leases = s.privacy_leases
                try:
                    with self.store.engine.begin() as conn:
                        conn.execute(
                            leases.update()
                            .where(leases.c.host == socket.gethostname(), leases.c.pid == os.getpid())
                            .values(heard_at=_micros(utcnow()))
                        )
                except sa.exc.SQLAlchemyError as error:  # the next renewal may get through
                    log.warning("privacy request leases not renewed (%s)", type(error).__name__)

        renewer = threading.Thread(target=renew, name="tracelake-privacy-leases", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()

    def finish(self, request_id: str, receipt: dict[str, Any]) -> None:
        self._end(request_id, DONE, receipt=receipt, details=_summary(receipt))

    def fail(self, request_id: str, error: BaseException | str) -> None:
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._end(request_id, FAILED, error=message, details={"error": message})

    def _end(self, request_id: str, status: str, *, details: dict[str, Any], **values: Any) -> None:
        now = _micros(utcnow())
        table = s.privacy_requests
        with self.store.engine.begin() as conn:
            requester = conn.execute(
                sa.select(table.c.requester).where(table.c.id == request_id)
            ).scalar_one()
            conn.execute(
                table.update()
                .where(table.c.id == request_id)
                .values(status=status, ended_at=now, subject=None, **values)
            )
            conn.execute(s.privacy_leases.delete().where(s.privacy_leases.c.request_id == request_id))
            self._audit(conn, request_id, status, now, requester, details)

    def get(self, request_id: str) -> PrivacyRequest:
        table = s.privacy_requests
        with self.store.engine.connect() as conn:
            row = conn.execute(sa.select(table).where(table.c.id == request_id)).mappings().first()
        if row is None:
            raise PrivacyRequestError(f"no privacy request {request_id!r}")
        return _request(row)

    def list(self, *, status: str | None = None, limit: int = 100) -> list[PrivacyRequest]:
        table = s.privacy_requests
        query = sa.select(table).order_by(table.c.submitted_at.desc(), table.c.id).limit(limit)
        if status is not None:
            if status not in STATUSES:
                raise PrivacyRequestError(f"a request status is one of {', '.join(STATUSES)}, not {status!r}")
            query = query.where(table.c.status == status)
        with self.store.engine.connect() as conn:
            return [_request(row) for row in conn.execute(query).mappings()]

    def audit(self, request_id: str | None = None, *, limit: int = 100) -> list[AuditEvent]:
        table = s.privacy_audit
        query = sa.select(table).order_by(table.c.id.desc()).limit(limit)
        if request_id is not None:
            query = query.where(table.c.request_id == request_id)
        with self.store.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            AuditEvent(
                r["request_id"], r["event"], s.from_micros(r["at"]), r["requester"], r["details"] or {}
            )
            for r in reversed(rows)
        ]

    @staticmethod
    def _audit(
        conn: sa.Connection, request_id: str, event: str, at: int, requester: str, details: dict[str, Any]
    ) -> None:
        conn.execute(
            s.privacy_audit.insert().values(
                request_id=request_id, event=event, at=at, requester=requester, details=details
            )
        )


def _summary(receipt: dict[str, Any]) -> dict[str, Any]:
    """What the audit trail keeps of a receipt: which datasets, how many files and rows."""
    return {
        "datasets": [scan["dataset"] for scan in receipt.get("datasets", [])],
        "files_read": sum(scan["read"] for scan in receipt.get("datasets", [])),
        "files_rewritten": receipt.get("files_rewritten", 0),
        "files_removed": receipt.get("files_removed", 0),
        "rows": receipt.get("rows", 0),
    }


def _request(row: Any) -> PrivacyRequest:
    def when(micros: int | None) -> datetime | None:
        return None if micros is None else s.from_micros(micros)

    return PrivacyRequest(
        id=row["id"],
        kind=row["kind"],
        requester=row["requester"],
        status=row["status"],
        ids=tuple(row["subject"] or ()),
        subject_fingerprint=row["subject_fingerprint"],
        id_count=row["id_count"],
        datasets=tuple(row["datasets"]) if row["datasets"] else None,
        submitted_at=s.from_micros(row["submitted_at"]),
        started_at=when(row["started_at"]),
        ended_at=when(row["ended_at"]),
        error=row["error"],
        receipt=row["receipt"],
    )


def _micros(moment: datetime) -> int:
    return s.to_micros(moment)


def _holder(heard_at: int) -> dict[str, Any]:
    """This process, as a lease names it."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "heard_at": heard_at}
