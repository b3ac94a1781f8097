"""The privacy request queue's tables: requests, the leases of the runs that hold them, and the
audit trail. Every statement of the queue is here; what a request may be, and when a lease's
holder counts as gone, is `privacy.queue`'s to say.

A request's ids are kept only while it is open: ending it erases them, and only their
fingerprint stays, so the store does not become one more copy of the personal data it erased.
"""

from __future__ import annotations

import builtins
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from tracelake.model import fingerprint, utcnow
from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore

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


@dataclass(frozen=True)
class Holder:
    """Who holds a running request: the process its lease names (None: it kept no lease)."""

    request_id: str
    requester: str
    host: str | None
    pid: int | None
    heard_at_us: int | None  # as stored, so a take-over matches the very lease it judged

    @property
    def heard_at(self) -> datetime | None:
        return None if self.heard_at_us is None else s.from_micros(self.heard_at_us)


class TakenElsewhere(Exception):
    """Another run took the request over first: this one's take-over is rolled back."""


class RequestTable:
    """Privacy requests in `store`, their leases and their audit trail."""

    def __init__(self, store: LineageStore) -> None:
        self.store = store

    def insert(
        self, request_id: str, kind: str, ids: Sequence[str], *, requester: str, datasets: Sequence[str]
    ) -> None:
        """A pending request, and its `submitted` event."""
        now = _micros(utcnow())
        with self.store.engine.begin() as conn:
            conn.execute(
                s.privacy_requests.insert().values(
                    id=request_id,
                    kind=kind,
                    requester=requester,
                    status=PENDING,
                    subject=list(ids),
                    subject_fingerprint=fingerprint(*sorted(ids)),
                    id_count=len(ids),
                    datasets=list(datasets) or None,
                    submitted_at=now,
                )
            )
            _audit(conn, request_id, "submitted", now, requester, {"ids": len(ids)})

    def note(self, request_id: str, event: str, requester: str, details: dict[str, Any]) -> None:
        """Append an event to a request's trail."""
        with self.store.engine.begin() as conn:
            _audit(conn, request_id, event, _micros(utcnow()), requester, details)

    def open_with(self, kind: str, ids: Sequence[str]) -> list[PrivacyRequest]:
        """Pending or running requests of `kind` whose ids have the fingerprint of `ids`."""
        table = s.privacy_requests
        query = sa.select(table).where(
            table.c.kind == kind,
            table.c.status.in_([PENDING, RUNNING]),
            table.c.subject_fingerprint == fingerprint(*sorted(ids)),
        )
        with self.store.engine.connect() as conn:
            return [_request(row) for row in conn.execute(query.order_by(table.c.submitted_at)).mappings()]

    def take(self, kind: str) -> list[str]:
        """The ids of every pending request of `kind`, now running under this process's lease."""
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
                _audit(conn, request_id, "started", token, requester, {})
        return [request_id for request_id, _ in taken]

    def running(self, kind: str | None = None) -> list[Holder]:
        """The running requests (of `kind`, or of any), oldest first, with who holds them."""
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
            rows = conn.execute(query).all()
        return [Holder(row.id, row.requester, row.host, row.pid, row.heard_at) for row in rows]

    def take_over(self, holder: Holder, left_by: str) -> None:
        """Make this process the holder of a request whose holder is gone, in one transaction
        that starts by writing (so SQLite takes its lock before anything is read);
        `TakenElsewhere` when another run did first."""
        table, leases = s.privacy_requests, s.privacy_leases
        now = _micros(utcnow())
        try:
            with self.store.engine.begin() as conn:
                if holder.host is None:
                    conn.execute(leases.insert().values(request_id=holder.request_id, **_holder(now)))
                else:
                    moved = conn.execute(
                        leases.update()
                        .where(
                            leases.c.request_id == holder.request_id,
                            leases.c.host == holder.host,
                            leases.c.pid == holder.pid,
                            leases.c.heard_at == holder.heard_at_us,
                        )
                        .values(**_holder(now))
                    )
                    if moved.rowcount != 1:
                        raise TakenElsewhere
                still = conn.execute(
                    sa.select(table.c.status).where(table.c.id == holder.request_id)
                ).scalar_one_or_none()
                if still != RUNNING:
                    raise TakenElsewhere
                _audit(conn, holder.request_id, "resumed", now, holder.requester, {"left_by": left_by})
        except sa.exc.IntegrityError:  # another run inserted the lease first
            raise TakenElsewhere from None

    def renew(self) -> None:
        """This process's leases heard from now."""
        leases = s.privacy_leases
        with self.store.engine.begin() as conn:
            conn.execute(
                leases.update()
                .where(leases.c.host == socket.gethostname(), leases.c.pid == os.getpid())
                .values(heard_at=_micros(utcnow()))
            )

    def end(self, request_id: str, status: str, *, details: dict[str, Any], **values: Any) -> None:
        """End a request (`done` or `failed`): its ids erased, its lease dropped, the trail told."""
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
            _audit(conn, request_id, status, now, requester, details)

    def get(self, request_id: str) -> PrivacyRequest | None:
        table = s.privacy_requests
        with self.store.engine.connect() as conn:
            row = conn.execute(sa.select(table).where(table.c.id == request_id)).mappings().first()
        return None if row is None else _request(row)

    def list(self, *, status: str | None = None, limit: int = 100) -> list[PrivacyRequest]:
        """Requests (of `status`, or all), newest first."""
        table = s.privacy_requests
        query = sa.select(table).order_by(table.c.submitted_at.desc(), table.c.id).limit(limit)
        if status is not None:
            query = query.where(table.c.status == status)
        with self.store.engine.connect() as conn:
            return [_request(row) for row in conn.execute(query).mappings()]

    def audit(self, request_id: str | None = None, *, limit: int = 100) -> builtins.list[AuditEvent]:
        """The latest `limit` events (of one request, or of all), oldest first."""
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


def _audit(
    conn: sa.Connection, request_id: str, event: str, at: int, requester: str, details: dict[str, Any]
) -> None:
    conn.execute(
        s.privacy_audit.insert().values(
            request_id=request_id, event=event, at=at, requester=requester, details=details
        )
    )


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
