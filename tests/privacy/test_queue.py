"""The privacy request queue and audit trail, on SQLite and PostgreSQL.

What matters: requests move pending → running → done/failed, a batch takes every pending request
of a kind at once, user ids leave the store when a request ends, and the audit trail records
who asked what and what it touched without ever holding an id or a record value.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tracelake.model import fingerprint
from tracelake.privacy.queue import DONE, FAILED, PENDING, RUNNING, RequestQueue
from tracelake.privacy.search import RequestError
from tracelake.store import LineageStore


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


def test_requests_a_dead_run_left_running_are_taken_again_only_when_resuming(queue: RequestQueue) -> None:
    request = queue.submit("delete", ["u1"], requester="a")
    queue.take("delete")

    assert queue.take("delete") == []
    assert [r.id for r in queue.take("delete", resume=True)] == [request.id]


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
    with pytest.raises(RequestError, match=message):
        queue.submit(kind, ids, requester="dpo")
    assert queue.list() == []
    assert queue.audit() == []


def test_a_request_for_a_dataset_that_does_not_exist_is_refused(queue: RequestQueue, tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="does not exist"):
        queue.submit("delete", ["u1"], requester="dpo", datasets=[str(tmp_path / "nope")])
    assert queue.list() == []


def test_requests_list_newest_first_and_filter_by_status(queue: RequestQueue) -> None:
    older = queue.submit("access", ["u1"], requester="a")
    time.sleep(0.002)  # submission times are in microseconds: make the order certain
    newer = queue.submit("delete", ["u2"], requester="a")
    queue.take("access")

    assert [r.id for r in queue.list()] == [newer.id, older.id]
    assert [r.id for r in queue.list(status=RUNNING)] == [older.id]
    with pytest.raises(RequestError, match="status"):
        queue.list(status="stuck")
