"""`tracelake ingest openlineage`: events from files and streams, written by what really writes them —
the OpenLineage client's file transport, and Marquez's events page as Tracelake's own Marquez route
serves it — each found again by the names it carries; a broken line among good ones is that line's
problem only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner

from tests.api.test_api import client_event, run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.cli import app
from tracelake.store import LineageStore


def cli(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def jobs_and_datasets(db: str) -> tuple[set[str], set[str]]:
    with LineageStore(db) as store:
        counts = store.property_of("name", urn_prefix="openlineage.job/")
        assets = set(store.search_urns("", node_type="asset", limit=1000))
    return set(counts), assets


def test_the_client_file_transports_json_lines(tmp_path: Path) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import RunState
    from openlineage.client.transport.file import FileConfig, FileTransport

    log = tmp_path / "events.jsonl"
    client = OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(log), append=True)))
    for state in (RunState.START, RunState.COMPLETE):
        orders, daily = ("postgres://db:5432", "shop.public.orders"), ("s3://lake", "daily/orders")
        client.emit(client_event("shop.daily", [daily], [orders], state))
    assert len(log.read_text().splitlines()) == 2  # one event a line, as the transport writes them
    db = str(tmp_path / "lineage.db")

    code, out, err = cli("ingest", "openlineage", str(log), "--db", db)

    assert (code, err) == (0, "")
    assert out.strip() == "2 events: 2 accepted, 0 refused; 2 edges"
    with LineageStore(db) as store:
        [edge] = {(e.source, e.target, e.process) for e in store.edges()}
    assert edge == (
        "postgres.table//db:5432/shop.public.orders",
        "file.dataset/s3://lake/daily/orders",
        "openlineage.job/airflow/shop.daily",
    )


def test_a_broken_line_is_that_lines_problem_and_the_rest_land(tmp_path: Path) -> None:
    bad = run_event("job.bad")
    del bad["job"]["namespace"]
    lines = [
        json.dumps(run_event("job.one")),
        "{not json",
        json.dumps(bad),
        "",
        json.dumps(run_event("job.two", run_id="not-a-uuid")),
    ]
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "lineage.db")

    code, out, err = cli("ingest", "openlineage", str(log), "--db", db)

    assert code == 3  # stored, with problems recorded
    assert out.strip() == "4 events: 2 accepted, 2 refused; 4 edges"
    problems = [line for line in err.splitlines() if line.startswith("problem:")]
    assert problems[0].startswith(f"problem: {log}:line 2: not JSON")
    assert problems[1] == f"problem: {log}:line 3 $.job.namespace: required"
    assert problems[2].startswith(f"problem: {log}:line 5 $.run.runId: not a UUID")
    with LineageStore(db) as store:
        processes = {e.process for e in store.edges()}
        recorded = {(p.source, p.location) for p in store.problems()}
    assert processes == {"openlineage.job/airflow/job.one", "openlineage.job/airflow/job.two"}
    assert (str(log), "line 3 $.job.namespace") in recorded


def test_an_event_the_store_could_not_hold_is_that_lines_problem_on_either_backend(
    store: LineageStore, tmp_path: Path
) -> None:
    """Checked as the HTTP route checks a body: a NUL character (PostgreSQL refuses to store one,
    and took the events sharing its transaction with it), a lone surrogate, a number that is not
    finite. Each line is refused on its own; the others land."""
    nul, surrogate = run_event("job.nul"), run_event("job.surrogate")
    nul["run"]["facets"] = {"note": {"text": "a\x00b"}}
    surrogate["job"]["facets"] = {"\udfff": {}}
    lines = [
        json.dumps(run_event("job.one")),
        json.dumps(nul),
        json.dumps(surrogate),  # json.dumps escapes it: `"\\udfff"`, as a producer would send it
        json.dumps(run_event("job.nan")).replace('"producer"', '"nan": NaN, "producer"', 1),
        json.dumps(run_event("job.two")),
    ]
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + "\n")

    code, out, err = cli("ingest", "openlineage", str(log), "--db", store.url)

    assert code == 3
    assert out.strip() == "5 events: 2 accepted, 3 refused; 4 edges"
    problems = [line for line in err.splitlines() if line.startswith("problem:")]
    assert problems == [
        f"problem: {log}:line 2 $.run.facets.note.text: a string with a NUL character (\\u0000) cannot be "
        "stored (PostgreSQL refuses it)",
        f"problem: {log}:line 3 $.job.facets.\\udfff: a string with a lone surrogate escape "
        "(\\ud800-\\udfff) is not Unicode text",
        f"problem: {log}:line 4 $.nan: a number that is not finite (NaN, Infinity or past 1.8e308) "
        "is not JSON",
    ]
    processes = {e.process for e in store.edges()}
    assert processes == {"openlineage.job/airflow/job.one", "openlineage.job/airflow/job.two"}


def test_an_array_from_standard_input(tmp_path: Path) -> None:
    events = [run_event("job.a"), run_event("job.b", eventTime="yesterday")]
    db = str(tmp_path / "lineage.db")

    code, out, err = cli("ingest", "openlineage", "-", "--db", db, stdin=json.dumps(events, indent=2))

    assert code == 3
    assert out.strip() == "2 events: 1 accepted, 1 refused; 2 edges"
    assert "problem: <stdin>:$[1].eventTime: not an RFC 3339 date-time" in err


def test_a_backfill_from_marquez_events_page(tmp_path: Path) -> None:
    source = Tracelake(LineageStore(str(tmp_path / "source.db")))
    with serve_in_thread(create_app(source, ApiSettings(subscription_interval=None))) as url:
        for job in ("job.x", "job.y"):
            requests.post(f"{url}/api/v1/lineage", json=run_event(job), timeout=10).raise_for_status()
        page = requests.get(f"{url}/api/v1/events/lineage", params={"limit": 10}, timeout=10).text
    source.close()
    (tmp_path / "page.json").write_text(page)
    db = str(tmp_path / "lineage.db")

    code, out, _ = cli("ingest", "openlineage", str(tmp_path / "page.json"), "--db", db)

    assert code == 0 and out.strip() == "2 events: 2 accepted, 0 refused; 4 edges"
    with LineageStore(db) as store:
        assert {e.process for e in store.edges()} == {
            "openlineage.job/airflow/job.x",
            "openlineage.job/airflow/job.y",
        }


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    code, _, err = cli("ingest", "openlineage", str(tmp_path / "none.jsonl"), "--db", str(tmp_path / "l.db"))
    assert code == 2
    assert err.strip() == f"error: {tmp_path / 'none.jsonl'}: no such file"


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_an_empty_log_is_no_events(tmp_path: Path, text: str) -> None:
    db = str(tmp_path / "lineage.db")
    code, out, _ = cli("ingest", "openlineage", "-", "--db", db, stdin=text)
    assert (code, out.strip()) == (0, "0 events: 0 accepted, 0 refused; 0 edges")


def test_a_line_that_is_not_utf8_is_refused_not_read_with_replacement_characters(tmp_path: Path) -> None:
    """Decoding with replacement characters would store a dataset named with U+FFFD, one that
    never was; the line is refused instead and the events around it land."""
    latin1 = json.dumps(run_event("job.café"), ensure_ascii=False).encode("latin-1")
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join([json.dumps(run_event("job.one")).encode(), latin1, b""]))
    db = str(tmp_path / "lineage.db")

    code, out, err = cli("ingest", "openlineage", str(log), "--db", db)

    assert code == 3
    assert out.strip() == "2 events: 1 accepted, 1 refused; 2 edges"
    assert f"problem: {log}:line 2: not UTF-8 text at column" in err
    with LineageStore(db) as store:
        names = set(store.property_of("name", urn_prefix="openlineage.job/"))
        urns = store.search_urns("", limit=1000)
    assert not any("\ufffd" in urn for urn in urns)
    assert not any("caf" in name for name in names)
