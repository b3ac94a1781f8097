"""OpenLineage events that real producers published (`../shared/conformance`, read in place as
`test_openlineage_conformance` reads them), mutated and posted to `POST /api/v1/lineage` on a live
server: the answer is never a server error (the causes it found outside the API each have a test
at the end), always a 201 or a 4xx with a one-line reason, and the store stays
consistent — what was accepted is found by the names it was sent with, and what was refused left
nothing behind (no node, no stored event). Each case takes a published event (or, one case in six,
an array of two or three, which is all or nothing), marks every name in it with the case's tag so
that its traces can be looked for, and applies one to three mutations at a place drawn depth by
depth, so that the deepest facets are hit as often as the top: a member dropped; a list item or a
key duplicated (the key twice in the text, the later one holding another value); a value replaced
by one of another type, by null, by a string of up to half a million characters, by odd Unicode
(right-to-left, combining, zero-width, NUL, a lone surrogate, bytes that are not UTF-8) or by an
extreme number (2⁶³, 1e308, NaN); or the text cut short. Cases are drawn from
`random.Random(SEED)`, so every run tries the same ones; `TRACELAKE_FUZZ_CASES` raises their number
for a longer run by hand.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from tests.api.test_openlineage_conformance import _events
from tests.conftest import fresh_database
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

SEED = 19
CASES = int(os.environ.get("TRACELAKE_FUZZ_CASES", "300"))
ODD_TEXT = [
    "",
    " ",
    "\u0000",
    "é",
    "e\u0301",  # e and a combining acute
    "\u202eevil",  # right-to-left override
    "\u200b",  # zero-width space
    "\ufeff",
    "\u2028",
    "😀",
    "名前",
    "\ud800",  # a lone surrogate: JSON can carry it, UTF-8 cannot
    "a:b/c#d",  # the separators of Marquez ids and URNs
    "%2F..%00",
]
OTHER_VALUES: list[Any] = [None, True, 0, -1, 1.5, "", "text", [], {}, [1, "a", None], {"a": {"b": []}}]
NUMBERS: list[Any] = [2**63, -(2**63) - 1, 10**40, 1e308, -0.0, 5e-324, float("nan"), float("inf")]


class _Marker:
    """A key no JSON document has: the object holding it writes one of its keys twice (`_text`)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _Marker:
        return self  # an object copied with its duplicate still has it


_DUPLICATE = _Marker()


@dataclass
class Case:
    number: int
    body: bytes = field(repr=False)  # up to megabytes: not in a failure's report
    tags: list[str]  # one per event, in every name it held before the mutations
    sent: list[Any] | None = field(repr=False)  # as the server reads them; None: not JSON
    mutations: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"case {self.number} ({', '.join(self.mutations)}; {len(self.body):,} bytes)"


def _stem(number: int) -> str:
    """What the tags of case `number` start with, and no other case's: `_fz0012e`."""
    return f"_fz{number:04d}e"


# ---------------------------------------------------------------- mutations


def _places(document: Any) -> dict[int, list[tuple[Any, Any]]]:
    """Every (container, key) of the document by depth."""
    found: dict[int, list[tuple[Any, Any]]] = {}
    stack = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        keys = (
            list(value) if isinstance(value, dict) else range(len(value)) if isinstance(value, list) else []
        )
        for key in keys:
            if key is _DUPLICATE:  # a key to write twice, not a place of the document
                continue
            found.setdefault(depth, []).append((value, key))
            stack.append((value[key], depth + 1))
    return found


def _place(document: Any, rng: random.Random) -> Any:
    """A (container, key) drawn depth first: each depth as likely as any other."""
    places = _places(document)
    return rng.choice(places[rng.choice(list(places))]) if places else None


def _mutate(document: Any, rng: random.Random, case: Case) -> Any:
    """One mutation of the document in place (or its replacement); its name goes to the case."""
    place = _place(document, rng)
    if place is None:
        return document
    container, key = place
    kind = rng.choice(["drop", "duplicate", "retype", "null", "huge", "unicode", "number"])
    if kind == "drop" and isinstance(container, dict):
        del container[key]
    elif kind == "duplicate" and isinstance(container, list):
        container.insert(key, copy.deepcopy(container[key]))
    elif kind == "duplicate":
        kind = "duplicate key"  # done when the text is written: see _text
        container[_DUPLICATE] = (key, rng.choice(OTHER_VALUES))
    elif kind in ("retype", "drop"):
        kind = "retype"
        container[key] = rng.choice([v for v in OTHER_VALUES if type(v) is not type(container[key])])
    elif kind == "null":
        container[key] = None
    elif kind == "huge":
        container[key] = rng.choice(["x", "é", "😀"]) * rng.choice([5_000, 70_000, 500_000])
    elif kind == "unicode":
        odd = rng.choice(ODD_TEXT)
        value = container[key]
        container[key] = f"{value[:3]}{odd}{value[3:]}" if isinstance(value, str) and value else odd
    else:
        container[key] = rng.choice(NUMBERS)
    case.mutations.append(f"{kind} at {_path_to(document, container, key)}")
    return document


def _path_to(document: Any, container: Any, key: Any) -> str:
    stack: list[tuple[Any, str]] = [(document, "$")]
    while stack:
        value, path = stack.pop()
        if value is container:
            return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
        items = (
            value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        )
        for step, item in items:
            if step is not _DUPLICATE and isinstance(item, dict | list):
                stack.append((item, f"{path}[{step}]" if isinstance(step, int) else f"{path}.{step}"))
    return "$"


def _text(value: Any, ascii_only: bool) -> str:
    """The JSON text, a duplicated key written twice (the later one is the one a reader keeps)."""
    if isinstance(value, dict):
        duplicate = value.pop(_DUPLICATE, None)
        members = [
            f"{json.dumps(k, ensure_ascii=ascii_only)}: {_text(v, ascii_only)}" for k, v in value.items()
        ]
        if duplicate is not None:
            key, other = duplicate
            members.append(f"{json.dumps(key, ensure_ascii=ascii_only)}: {_text(other, ascii_only)}")
            value[key] = other  # what the server reads
        return "{" + ", ".join(members) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_text(item, ascii_only) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def _tagged(event: Any, tag: str) -> Any:
    """The event with `tag` at the end of every name in it (jobs, datasets, input fields)."""
    stack = [event]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("namespace"), str) and isinstance(value.get("name"), str):
                value["name"] += tag
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return event


def _cases(events: list[dict[str, Any]]) -> Iterator[Case]:
    rng = random.Random(SEED)
    for number in range(CASES):
        count = rng.choice([2, 3]) if rng.random() < 1 / 6 else 1
        tags = [f"{_stem(number)}{index}_" for index in range(count)]
        chosen = [_tagged(copy.deepcopy(rng.choice(events)), tag) for tag in tags]
        document: Any = chosen if count > 1 else chosen[0]
        case = Case(number, b"", tags, None)
        for _ in range(rng.choice([1, 1, 2, 3])):
            document = _mutate(document, rng, case)
        ascii_only = rng.random() < 0.5
        text = _text(document, ascii_only)
        body = text.encode("utf-8", "surrogatepass")  # a lone surrogate sent raw is not UTF-8
        ending = rng.random()
        if ending < 0.08:
            case.mutations.append("cut short")
            body = body[: rng.randrange(len(body))]
        elif ending < 0.12:
            case.mutations.append("a byte that is not UTF-8")
            at = body.find(b'"', rng.randrange(len(body))) + 1
            body = body[:at] + b"\xff" + body[at:]
        else:
            case.sent = document if isinstance(document, list) and count > 1 else [document]
        case.body = body
        yield case


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    url: str
    backend: str
    # each case, the status and the answer (None: empty); thousands: not in a failure's report
    answers: list[tuple[Case, int, Any]] = field(repr=False)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The cases posted in order to a server on a store of each backend: they fail differently."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            store_url = f"sqlite:///{tmp_path_factory.mktemp('fuzz_openlineage') / 'lineage.db'}"
        else:
            store_url = stack.enter_context(fresh_database(request.getfixturevalue("postgres_server")))
        service = Tracelake(LineageStore(store_url))
        stack.callback(service.close)
        yield stack.enter_context(_posted(service, request.param))


@contextlib.contextmanager
def _posted(service: Tracelake, backend: str) -> Iterator[Run]:
    events = [event for _, event in _events()]
    answers = []
    with serve_in_thread(create_app(service, ApiSettings(subscription_interval=None))) as url:
        # a connection each: a server error closes its connection, and would fail the next case
        for case in _cases(events):
            try:
                response = requests.post(
                    f"{url}/api/v1/lineage",
                    data=case.body,
                    headers={"Content-Type": "application/json"},
                    timeout=60,
                )
            except requests.ConnectionError as error:  # no answer at all: reported by the first test
                answers.append((case, 0, repr(error)))
                continue
            try:
                body = response.json() if response.content else None
            except ValueError:  # not JSON: a server error's page, reported by the first test
                body = response.text[:300]
            answers.append((case, response.status_code, body))
        yield Run(url, backend, answers)


def test_no_case_is_a_server_error_and_every_refusal_says_why_on_one_line(run: Run) -> None:
    wrong = []
    for case, status, body in run.answers:
        if status == 201 and body is None:
            continue
        said = body.get("error") if isinstance(body, dict) else None
        if not (400 <= status < 500 and isinstance(said, str) and said.strip() and "\n" not in said):
            wrong.append(f"{case}: {status} {str(body)[:300]}")
    refused = sum(1 for _, status, _ in run.answers if status != 201)
    print(
        f"\nposted {len(run.answers)} mutated cases ({run.backend}): {refused} refused, "
        f"{len(wrong)} wrong answers"
    )
    assert len(run.answers) == CASES
    assert not wrong, "\n".join(wrong)
    # the mutations are not all refusals, nor all harmless
    assert CASES / 10 < refused < CASES * 9 / 10


def _names(event: Any) -> list[str]:
    """The Marquez node ids of the job and datasets an accepted event names."""

    def named(value: Any) -> tuple[str, str] | None:
        ok = isinstance(value, dict) and all(isinstance(value.get(k), str) for k in ("namespace", "name"))
        return (value["namespace"], value["name"]) if ok else None

    ids = []
    if (job := named(event.get("job"))) is not None:
        ids.append("job:{}:{}".format(*job))
    # a DatasetEvent's dataset (a RunEvent's `dataset`, as the spec's full example has, is no part of it)
    datasets = [event.get("dataset")] if "job" not in event else []
    for side in ("inputs", "outputs"):
        datasets += event.get(side) if isinstance(event.get(side), list) else []
    ids += ["dataset:{}:{}".format(*found) for found in map(named, datasets) if found is not None]
    return ids


def test_what_was_accepted_is_found_by_the_names_it_was_sent_with(run: Run) -> None:
    missing = []
    with requests.Session() as http:
        for case, status, _ in run.answers:
            if status != 201:
                continue
            assert case.sent is not None, case
            for node_id in {node_id for event in case.sent for node_id in _names(event)}:
                response = http.get(
                    f"{run.url}/api/v1/lineage", params={"nodeId": node_id, "depth": 0}, timeout=30
                )
                if response.status_code != 200:
                    missing.append(
                        f"{case}: {node_id[:120]!r} → {response.status_code} {response.text[:200]}"
                    )
    assert not missing, "\n".join(missing)


def test_what_was_refused_left_nothing_behind(run: Run) -> None:
    stored = requests.get(f"{run.url}/api/v1/events/lineage", params={"limit": 100_000}, timeout=60).json()
    kept = json.dumps(stored["events"])
    left = []
    with requests.Session() as http:
        for case, status, _ in run.answers:
            if status == 201:
                continue
            stem = _stem(case.number)
            nodes = http.get(f"{run.url}/api/tracelake/v1/search", params={"q": stem, "limit": 5}, timeout=30)
            assert nodes.status_code == 200, nodes.text
            if nodes.json() or stem in kept:
                left.append(f"{case}: {stem} left {[node['id'] for node in nodes.json()]}")
    assert not left, "\n".join(left)


def test_the_read_routes_still_answer_over_what_was_stored(run: Run) -> None:
    for path in (
        "/api/v1/namespaces",
        "/api/v1/jobs",
        "/api/v1/events/lineage",
        "/api/v1/search?q=fz",
        "/api/tracelake/v1/problems?limit=10000",
        "/api/tracelake/v1/kinds",
        "/api/tracelake/v1/hot",
    ):
        response = requests.get(run.url + path, timeout=60)
        assert response.status_code == 200, (path, response.text[:300])


# ---------------------------------------------------------------- server errors the fuzzing found
# outside the API (the collector, the events table), each fixed where it lay


def test_an_event_type_that_is_no_string_is_kept_with_a_problem(run: Run) -> None:
    event = {**_a_run_event(run), "eventType": {"state": "COMPLETE"}}
    assert requests.post(f"{run.url}/api/v1/lineage", json=event, timeout=30).status_code == 201


def test_an_event_time_past_the_last_utc_date_is_a_400(run: Run) -> None:
    event = {**_a_run_event(run), "eventTime": "9999-12-31T23:59:59-14:00"}
    response = requests.post(f"{run.url}/api/v1/lineage", json=event, timeout=30)
    assert response.status_code == 400
    assert response.json()["path"] == "$.eventTime"


def test_an_event_type_of_any_length_is_kept_with_a_problem(run: Run) -> None:
    event = {**_a_run_event(run), "eventType": "NOT_A_STATE_" * 4}
    assert requests.post(f"{run.url}/api/v1/lineage", json=event, timeout=30).status_code == 201


def test_a_job_name_longer_than_the_store_keys_is_a_400(run: Run) -> None:
    event = copy.deepcopy(_a_run_event(run))
    event["job"]["name"] = "j" * 3000
    response = requests.post(f"{run.url}/api/v1/lineage", json=event, timeout=30)
    assert response.status_code == 400
    assert "over the 2,000-byte limit" in response.json()["error"]


def _a_run_event(run: Run) -> dict[str, Any]:
    """A published RunEvent the server accepted as it was."""
    for label, event in _events():
        if label.startswith("airflow/") and event.get("eventType") == "COMPLETE":
            return event
    raise AssertionError("no Airflow COMPLETE event in the conformance material")
