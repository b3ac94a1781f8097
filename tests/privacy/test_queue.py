"""The privacy request queue and audit trail, on SQLite and PostgreSQL.

What matters: requests move pending → running → done/failed, a batch takes every pending request
of a kind at once under its process's lease, a request whose process was killed is taken over
once (a real process, killed) and a live one's never, asking again is the open request, user ids
leave the store when a request ends, and the audit trail records who asked what and what it
touched without ever holding an id or a record value.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tracelake.model import fingerprint, utcnow
from tracelake.privacy import queue as queue_module
from tracelake.privacy.queue import DONE, FAILED, PENDING, RUNNING, RequestQueue
from tracelake.privacy.search import PrivacyRequestError
from tracelake.store import LineageStore
from tracelake.store import schema as s
from tracelake.store.leases import STALE


@pytest.fixture
def queue(store: LineageStore) -> RequestQueue:
    return RequestQueue(store)


def test_a_submitted_request_waits_with_its_ids(queue: RequestQueue) -> None:
    request = queue.submit("access", [" u1 ", "u2", "u1", ""], requester="dpo@example.com")

    assert request.status == PENDING
    assert request.ids == ("u1", "u2")
    assert request.id_count == 2
    assert request.datasets is None
    assert request.subject_fingerprint == fingerprint("u1", "u2")
    assert [e.event for e in queue.audit(request.id)] == ["submitted"]


def test_a_batch_takes_every_pending_request_of_its_kind_and_only_those(queue: RequestQueue) -> None:
    first = queue.submit("delete", ["u1"], requester="a")
    second = queue.submit("delete", ["u2"], requester="b")
    other_kind = queue.submit("access", ["u3"], requester="c")

    taken = queue.take("delete")

    assert sorted(r.id for r in taken) == sorted([first.id, second.id])
    assert all(r.status == RUNNING and r.ids for r in taken)
    assert queue.get(other_kind.id).status == PENDING
    assert queue.take("delete") == []


TAKER = """
import sys, time
from tracelake.privacy.queue import RequestQueue
from tracelake.store import LineageStore

store = LineageStore(sys.argv[1])
taken = RequestQueue(store).take("delete")
print(" ".join(request.id for request in taken), flush=True)
time.sleep(120)
"""


def test_a_request_whose_run_was_killed_is_taken_over_once_and_a_live_ones_never(
    queue: RequestQueue, store: LineageStore
) -> None:
    request = queue.submit("delete", ["u1"], requester="a")
    taker = subprocess.Popen(
        [sys.executable, "-c", TAKER, store.url], stdout=subprocess.PIPE, text=True
    )  # a real run, in a process of its own
    try:
        assert taker.stdout is not None
        assert taker.stdout.readline().split() == [request.id]
        assert queue.take("delete") == []
        assert queue.take_abandoned() == []  # its holder is alive

        taker.send_signal(signal.SIGKILL)
        taker.wait(30)
    finally:
        taker.kill()
        taker.wait(30)

    (resumed,) = queue.take_abandoned()
    assert resumed.id == request.id and resumed.status == RUNNING and resumed.ids == ("u1",)
    assert queue.take_abandoned() == []  # this process holds it now, and is alive
    assert [e.event for e in queue.audit(request.id)] == ["submitted", "started", "resumed"]
    assert queue.audit(request.id)[-1].details == {"left_by": f"{socket.gethostname()} pid {taker.pid}"}

    queue.finish(request.id, {"datasets": [], "rows": 0})
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(s.privacy_leases)).all() == []
    assert queue.get(request.id).ids == ()


def test_a_lease_of_another_host_is_given_up_only_when_unheard_for_long(
    queue: RequestQueue, store: LineageStore
) -> None:
    quiet = queue.submit("delete", ["u1"], requester="a")
    heard = queue.submit("delete", ["u2"], requester="a")
    queue.take("delete")
    now = utcnow()
    with store.engine.begin() as conn:  # as a run on another machine left them
        for request, heard_at in ((quiet, now - STALE - timedelta(seconds=1)), (heard, now)):
            conn.execute(
                sa.update(s.privacy_leases)
                .where(s.privacy_leases.c.request_id == request.id)
                .values(host="elsewhere.example", pid=1, heard_at=s.to_micros(heard_at))
            )

    assert [r.id for r in queue.take_abandoned("delete")] == [quiet.id]
    assert queue.take_abandoned("access") == []


def test_a_run_renews_its_leases_while_it_holds_them(
    queue: RequestQueue, store: LineageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "RENEW_SECONDS", 0.05)
    queue.submit("delete", ["u1"], requester="a")

    def heard() -> int:
        with store.engine.connect() as conn:
            return int(conn.execute(sa.select(s.privacy_leases.c.heard_at)).scalar_one())

    with queue.holding():
        queue.take("delete")
        first = heard()
        time.sleep(0.3)
        assert heard() > first


def test_asking_again_for_what_an_open_request_asks_is_that_request(
    queue: RequestQueue, tmp_path: Path
) -> None:
    first = queue.submit("delete", ["u1", "u2"], requester="a")

    again = queue.submit("delete", [" u2", "u1"], requester="b")
    assert again.id == first.id
    assert [(e.event, e.requester) for e in queue.audit(first.id)] == [
        ("submitted", "a"),
        ("resubmitted", "b"),
    ]
    queue.take("delete")
    assert queue.submit("delete", ["u2", "u1"], requester="b").id == first.id  # running: the same

    # other ids, another kind or other datasets are other requests; so is one after it ended
    assert queue.submit("delete", ["u1"], requester="a").id != first.id
    assert queue.submit("access", ["u1", "u2"], requester="a").id != first.id
    assert queue.submit("delete", ["u1", "u2"], requester="a", datasets=[str(tmp_path)]).id != first.id
    queue.finish(first.id, {"datasets": [], "rows": 0})
    assert queue.submit("delete", ["u1", "u2"], requester="a").id != first.id
    assert queue.open_request("delete", ["u1", "u2"]) is not None


def test_a_finished_request_keeps_its_receipt_and_forgets_its_ids(queue: RequestQueue) -> None:
    request = queue.submit("delete", ["alice@example.com"], requester="dpo")
    queue.take("delete")
    receipt = {
        "datasets": [{"dataset": "/lake/events", "read": 3, "skipped": 97}],
        "rows": 12,
        "files_rewritten": 3,
        "files_removed": 0,
    }

    queue.finish(request.id, receipt)

    done = queue.get(request.id)
    assert done.status == DONE
    assert done.ids == ()
    assert done.subject_fingerprint == fingerprint("alice@example.com")
    assert done.receipt == receipt
    assert done.ended_at is not None
    events = queue.audit(request.id)
    assert [e.event for e in events] == ["submitted", "started", "done"]
    assert events[-1].details == {
        "datasets": ["/lake/events"],
        "files_read": 3,
        "files_rewritten": 3,
        "files_removed": 0,
        "rows": 12,
    }
    assert all(e.requester == "dpo" for e in events)


def test_the_store_holds_no_user_id_once_requests_end(queue: RequestQueue, store: LineageStore) -> None:
    done = queue.submit("access", ["alice@example.com"], requester="dpo")
    failed = queue.submit("access", ["bob@example.com"], requester="dpo")
    queue.take("access")
    queue.finish(done.id, {"datasets": [], "rows": 0})
    queue.fail(failed.id, RuntimeError("Spark died"))

    dumped = json.dumps([r.__dict__ for r in queue.list()] + [e.__dict__ for e in queue.audit()], default=str)
    assert "alice@example.com" not in dumped
    assert "bob@example.com" not in dumped
    assert queue.get(failed.id).status == FAILED
    assert queue.get(failed.id).error == "RuntimeError: Spark died"


@pytest.mark.parametrize(
    ("kind", "ids", "message"),
    [
        ("erase", ["u1"], "one of access, delete"),
        ("access", [], "at least one user id"),
        ("delete", ["  ", ""], "at least one user id"),
    ],
)
def test_a_bad_request_is_refused_and_nothing_is_queued(
    queue: RequestQueue, kind: str, ids: list[str], message: str
) -> None:
    with pytest.raises(PrivacyRequestError, match=message):
        queue.submit(kind, ids, requester="dpo")
    assert queue.list() == []
    assert queue.audit() == []


def test_a_request_for_a_dataset_that_does_not_exist_is_refused(queue: RequestQueue, tmp_path: Path) -> None:
    with pytest.raises(PrivacyRequestError, match="does not exist"):
        queue.submit("delete", ["u1"], requester="dpo", datasets=[str(tmp_path / "nope")])
    assert queue.list() == []


def test_requests_list_newest_first_and_filter_by_status(queue: RequestQueue) -> None:
    older = queue.submit("access", ["u1"], requester="a")
    time.sleep(0.002)  # submission times are in microseconds: make the order certain
    newer = queue.submit("delete", ["u2"], requester="a")
    queue.take("access")

    assert [r.id for r in queue.list()] == [newer.id, older.id]
    assert [r.id for r in queue.list(status=RUNNING)] == [older.id]
    with pytest.raises(PrivacyRequestError, match="status"):
        queue.list(status="stuck")
