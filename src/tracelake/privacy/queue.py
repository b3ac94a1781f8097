"""The privacy request queue and its audit trail, in the lineage store.

A request is submitted `pending` with its user ids, taken `running` by a batch run (which takes
every pending request of a kind at once), and ends `done` with its receipt or `failed` with the
error. Its ids are kept only while it is open: when it ends they are erased and only their
fingerprint stays, so the store does not become one more copy of the personal data it erased.
Every change of state appends an audit event (who, when, what, counts — never record values).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa

from tracelake.model import fingerprint, utcnow
from tracelake.privacy.search import RequestError
from tracelake.store import LineageStore
from tracelake.store import schema as s

Kind = Literal["access", "delete"]
KINDS: tuple[Kind, ...] = ("access", "delete")
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
STATUSES = (PENDING, RUNNING, DONE, FAILED)


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
            raise RequestError(f"a request is one of {', '.join(KINDS)}, not {kind!r}")
        clean = list(dict.fromkeys(str(value).strip() for value in ids if str(value).strip()))
        if not clean:
            raise RequestError("a request needs at least one user id")
        if not requester.strip():
            raise RequestError("a request needs a requester")
        folders = [str(Path(path).absolute()) for path in datasets or ()]
        missing = [folder for folder in folders if not Path(folder).is_dir()]
        if missing:
            raise RequestError(f"dataset {missing[0]} does not exist (or is not a folder)")
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

    def take(self, kind: str, *, resume: bool = False) -> list[PrivacyRequest]:
        """Every pending request of `kind`, now running; with `resume`, also those left running."""
        token = _micros(utcnow())
        states = [PENDING, RUNNING] if resume else [PENDING]
        table = s.privacy_requests
        with self.store.engine.begin() as conn:
            conn.execute(
                table.update()
                .where(table.c.kind == kind, table.c.status.in_(states))
                .values(status=RUNNING, started_at=token)
            )
            taken = conn.execute(
                sa.select(table.c.id, table.c.requester).where(
                    table.c.status == RUNNING, table.c.started_at == token, table.c.kind == kind
                )
            ).all()
            for request_id, requester in taken:
                self._audit(conn, request_id, "started", token, requester, {})
        return [self.get(request_id) for request_id, _ in taken]

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
            self._audit(conn, request_id, status, now, requester, details)

    def get(self, request_id: str) -> PrivacyRequest:
        table = s.privacy_requests
        with self.store.engine.connect() as conn:
            row = conn.execute(sa.select(table).where(table.c.id == request_id)).mappings().first()
        if row is None:
            raise RequestError(f"no privacy request {request_id!r}")
        return _request(row)

    def list(self, *, status: str | None = None, limit: int = 100) -> list[PrivacyRequest]:
        table = s.privacy_requests
        query = sa.select(table).order_by(table.c.submitted_at.desc(), table.c.id).limit(limit)
        if status is not None:
            if status not in STATUSES:
                raise RequestError(f"a request status is one of {', '.join(STATUSES)}, not {status!r}")
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
