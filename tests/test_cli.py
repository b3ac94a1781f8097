"""The command line end to end on the dating-app example: real SQLite, real query log.

Expected nodes and edges below were worked out by reading examples/dating/query_log.jsonl.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.store.test_reads import write_read_log
from tracelake.cli import app
from tracelake.model import AssetChange, Lifecycle, LineageBatch, Signal
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dating"
T = "hive.table/"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "lineage.db")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def run_ingest_example(db: str) -> tuple[int, str, str]:
    return run(
        "ingest",
        "sql",
        str(EXAMPLE / "query_log.jsonl"),
        "--schema",
        str(EXAMPLE / "schema.yaml"),
        "--db",
        db,
    )


def ingest_example(db: str) -> str:
    code, out, err = run_ingest_example(db)
    assert code == 3, err  # stored, with the log's one typo recorded as a problem
    return out


def lineage_json(db: str, *args: str) -> dict:
    code, out, err = run("lineage", *args, "--format", "json", "--db", db)
    assert code == 0, err
    return json.loads(out)


def test_ingest_reports_statements_and_the_one_broken_entry(db: str) -> None:
    code, out, err = run_ingest_example(db)

    assert code == 3  # ingested, with a problem recorded
    # 13 statements a day for three days, plus one analyst query with a typo
    # 36 writes (INSERT, CREATE … AS, MERGE, WITH … INSERT) and the 3 days' USE, counted by hand
    assert (
        "40 statements: 39 parsed (36 with lineage, 0 read-only, 3 moving no data, 0 not traced), 1 failed"
        in out
    )
    assert "entry 27" in err and "Traceback" not in err
    code, out, _ = run("problems", "--db", db)
    assert "entry 27" in out


def test_ingesting_the_same_log_twice_adds_nothing(db: str) -> None:
    ingest_example(db)
    again = ingest_example(db)

    assert "(0 new, 0 closed, 0 process versions new" in again


def test_upstream_values_of_target_religion(db: str) -> None:
    ingest_example(db)

    graph = lineage_json(db, "dating.safety_training_tbl#target_religion", "--up", "--direct-only")

    assert {n["id"]: n["distance"] for n in graph["nodes"]} == {
        f"{T}dating.safety_training_tbl#target_religion": 0,
        f"{T}dating.safety_log_tbl#religion": 1,  # through the temp view recent_reports
        f"{T}dating.user_profile#religion": 2,
        f"{T}dating.user_profile_raw#religion": 3,  # COALESCE(u.new_value, p.religion)
        f"{T}dating.profile_update_log#new_value": 3,
        f"{T}raw.web_profile_events#event.value": 4,  # struct field access
    }
    edges = {
        (e["source"].split("/")[1], e["target"].split("/")[1], e["transformation"]) for e in graph["edges"]
    }
    assert edges == {
        ("dating.safety_log_tbl#religion", "dating.safety_training_tbl#target_religion", "IDENTITY"),
        ("dating.user_profile#religion", "dating.safety_log_tbl#religion", "IDENTITY"),
        ("dating.user_profile_raw#religion", "dating.user_profile#religion", "TRANSFORMATION"),
        ("dating.profile_update_log#new_value", "dating.user_profile#religion", "TRANSFORMATION"),
        ("raw.web_profile_events#event.value", "dating.profile_update_log#new_value", "IDENTITY"),
    }
    assert all(e["signal"] == "sql_static" for e in graph["edges"])
    assert not any("recent_reports" in n["id"] for n in graph["nodes"])


def test_downstream_of_target_religion_reaches_the_view_through_select_star(db: str) -> None:
    ingest_example(db)

    graph = lineage_json(db, "safety_training_tbl#target_religion", "--down")

    assert {n["id"] for n in graph["nodes"]} == {
        f"{T}dating.safety_training_tbl#target_religion",
        f"{T}dating.safety_training_latest#target_religion",
    }


def test_as_of_shows_the_graph_before_the_training_job_changed(db: str) -> None:
    ingest_example(db)

    before = lineage_json(db, "dating.safety_training_tbl", "--up", "--depth", "1", "--as-of", "2024-03-10")
    now = lineage_json(db, "dating.safety_training_tbl", "--up", "--depth", "1")

    assert {n["id"] for n in before["nodes"]} == {
        f"{T}dating.safety_training_tbl",
        f"{T}dating.safety_log_tbl",
    }
    # on 2024-03-12 the job started joining user_profile to keep verified reporters only
    assert {n["id"] for n in now["nodes"]} == {
        f"{T}dating.safety_training_tbl",
        f"{T}dating.safety_log_tbl",
        f"{T}dating.user_profile",
    }


def test_diff_shows_what_the_changed_job_added(db: str) -> None:
    ingest_example(db)

    code, out, err = run("diff", "--from", "2024-03-11", "--to", "2024-03-12", "--format", "json", "--db", db)

    assert code == 0, err
    changes = json.loads(out)
    assert changes["removed"] == []
    table_edges = {(e["source"], e["target"]) for e in changes["added"] if e["transformation"] is None}
    assert table_edges == {(f"{T}dating.user_profile", f"{T}dating.safety_training_tbl")}
    assert {e["transformation"] for e in changes["added"] if e["transformation"]} == {"JOIN"}


def test_impact_lists_every_downstream_asset_with_its_distance(db: str) -> None:
    ingest_example(db)

    code, out, err = run("impact", "dating.user_profile", "--format", "json", "--db", db)

    assert code == 0, err
    impacted = {i["id"].split("/")[1]: i["distance"] for i in json.loads(out)["impacted"]}
    assert impacted == {
        "dating.safety_log_tbl": 1,
        "dating.safety_training_tbl": 1,
        "dating.daily_match_stats": 1,
        "dating.dating_training_tbl": 1,
        "ads.user_segments": 1,
        "dating.user_blocklist": 2,
        "dating.safety_training_latest": 2,
    }


@pytest.mark.parametrize("fmt", ["dot", "mermaid", "table"])
def test_other_formats_render(db: str, fmt: str) -> None:
    ingest_example(db)

    code, out, err = run("lineage", "dating.safety_log_tbl#religion", "--down", "--format", fmt, "--db", db)

    assert code == 0, err
    assert "target_religion" in out
    if fmt == "dot":
        assert out.startswith("digraph lineage {")
    if fmt == "mermaid":
        assert out.startswith("flowchart LR")


def test_show_lists_fields_and_edges(db: str) -> None:
    ingest_example(db)

    code, out, err = run("show", "dating.safety_log_tbl", "--format", "json", "--db", db)

    assert code == 0, err
    node = json.loads(out)
    assert node["id"] == f"{T}dating.safety_log_tbl" and node["kind"] == "asset"
    assert {f["id"].partition("#")[2] for f in node["fields"]} >= {"user_id", "religion", "report_reason"}
    assert {e["source"] for e in node["inputs"]} == {f"{T}dating.abuse_reports", f"{T}dating.user_profile"}


def test_show_as_a_table_prints_the_node_its_fields_and_its_edges_with_their_process(db: str) -> None:
    """The README's own example, in the default format (it once crashed on its edge table)."""
    ingest_example(db)

    code, out, err = run("show", "dating.safety_log_tbl", "--db", db)

    assert code == 0, err
    assert "dating.safety_log_tbl" in out and "fields:" in out and "religion" in out
    assert "inputs" in out and "process" in out and "dating.abuse_reports" in out


def test_show_as_of_a_date_lists_the_edges_of_then(db: str) -> None:
    ingest_example(db)

    # before the latest recent_reports (2024-03-12) joined user_profile into safety_training_tbl
    code, out, err = run(
        "show", "dating.safety_training_tbl", "--as-of", "2024-03-11T12:00", "--format", "json", "--db", db
    )
    now = json.loads(run("show", "dating.safety_training_tbl", "--format", "json", "--db", db)[1])

    assert code == 0, err
    assert {e["source"] for e in json.loads(out)["inputs"]} == {f"{T}dating.safety_log_tbl"}
    assert {e["source"] for e in now["inputs"]} == {f"{T}dating.safety_log_tbl", f"{T}dating.user_profile"}


def test_show_gives_a_dropped_tables_lifecycle_and_no_current_edges(db: str) -> None:
    ingest_example(db)
    log = f"{T}dating.safety_log_tbl"
    dropped_at = datetime(2024, 3, 13, 9, 0, tzinfo=UTC)
    with LineageStore(f"sqlite:///{db}") as store:
        store.ingest(
            LineageBatch(
                changes=[
                    AssetChange(
                        log, Lifecycle.DROP, dropped_at, Signal.SPARK_RUNTIME, "spark.job/cleanup", "run-1"
                    )
                ]
            )
        )

    code, out, err = run("show", "dating.safety_log_tbl", "--db", db)
    assert code == 0, err
    assert "lifecycle" in out and "DROP" in out and "cleanup" in out
    node = json.loads(run("show", "dating.safety_log_tbl", "--format", "json", "--db", db)[1])
    assert [(c["change"], c["at"], c["run_id"]) for c in node["changes"]] == [
        ("DROP", dropped_at.isoformat(), "run-1")
    ]
    assert node["inputs"] == [] and node["outputs"] == []  # the drop ended them
    before = run("show", "dating.safety_log_tbl", "--as-of", "2024-03-12", "--format", "json", "--db", db)[1]
    assert json.loads(before)["inputs"] and json.loads(before)["changes"] == []


def test_show_lists_who_read_a_table(db: str, tmp_path: Path) -> None:
    # tests/store/test_reads.py works the reads out: alice twice, bob once; etl's INSERT is no read
    ingest_example(db)
    code, out, err = run("ingest", "sql", str(write_read_log(tmp_path / "reads.jsonl")), "--db", db)
    assert code == 0, err
    assert "3 read-only" in out

    code, out, err = run("show", "dating.user_profile", "--db", db)
    assert code == 0, err
    section = out[out.index("readers (3 reading runs by 2 readers)") :]
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in section.splitlines()]
    assert [(r[0], r[1], r[3], r[4]) for r in rows if r and r[0].startswith("2024")] == [
        ("2024-03-12T08:15:00+00:00", "alice", "religion", "sql_static"),
        ("2024-03-11T14:30:00+00:00", "bob", "user_id", "sql_static"),
        ("2024-03-10T09:00:00+00:00", "alice", "country, religion, user_id", "sql_static"),
    ]

    node = json.loads(run("show", "dating.user_profile", "--format", "json", "--db", db)[1])
    assert node["reads"] == {"runs": 3, "readers": 2}
    assert [(r["user"], r["at"], r["columns"], r["signal"]) for r in node["readers"]] == [
        ("alice", "2024-03-12T08:15:00+00:00", ["religion"], "sql_static"),
        ("bob", "2024-03-11T14:30:00+00:00", ["user_id"], "sql_static"),
        ("alice", "2024-03-10T09:00:00+00:00", ["country", "religion", "user_id"], "sql_static"),
    ]
    assert all(r["process"].startswith("sql.query/") and r["run_id"] for r in node["readers"])
    # as of before bob's query (noon that day), alice's first is the only read
    then = json.loads(
        run("show", "dating.user_profile", "--as-of", "2024-03-11T12:00", "--format", "json", "--db", db)[1]
    )
    assert (then["reads"], [r["user"] for r in then["readers"]]) == ({"runs": 1, "readers": 1}, ["alice"])
    # a table only written, and not read by a query, has no reader
    assert json.loads(run("show", "dating.stats", "--format", "json", "--db", db)[1])["readers"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lineage", "dating.no_such_table"], "unknown node"),
        (["lineage", "dating.safety_log_tbl", "--as-of", "last tuesday"], "not an ISO date"),
        (["lineage", "dating.safety_log_tbl", "--up", "--down"], "not both"),
        (["ingest", "sql", "/no/such/file.sql"], "no such file"),
        (["ingest", "sql", str(EXAMPLE / "query_log.jsonl"), "--dialect", "klingon"], "klingon"),
        (
            ["ingest", "sql", str(EXAMPLE / "query_log.jsonl"), "--schema", str(EXAMPLE / "query_log.jsonl")],
            "schema",
        ),
    ],
)
def test_user_mistakes_get_one_clear_line_and_exit_code_2(db: str, args: list[str], message: str) -> None:
    ingest_example(db)

    code, out, err = run(*args, "--db", db)

    assert code == 2
    assert message in err.lower() or message in err
    assert "Traceback" not in err + out


def test_serve_refuses_a_home_metastore_that_is_not_hive(db: str) -> None:
    code, _, err = run("serve", "--hive-namespace", "thrift://meta:9083", "--db", db)
    assert code == 2
    assert err.strip() == "error: --hive-namespace 'thrift://meta:9083': expected hive://host:port"


def test_serve_passes_its_read_concurrency_to_the_app(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[int] = []

    # the blocking server loop stood in for: the app it is handed is what is checked
    def serve_forever(app: Any, host: str, port: int) -> None:
        served.append(app.state.read_concurrency)

    monkeypatch.setattr("tracelake.api.server.serve_forever", serve_forever)
    assert run("serve", "--read-concurrency", "3", "--db", db)[0] == 0
    assert run("serve", "--db", db)[0] == 0
    assert served == [3, 1]
    code, _, err = run("serve", "--read-concurrency", "0", "--db", db)
    assert code == 2
    assert "--read-concurrency" in err and "Traceback" not in err
