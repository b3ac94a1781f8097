"""JSON-lines query logs: entries of one job_id are one run (temp views connect them),
other entries are runs of their own, `engine` picks the dialect, bad lines become problems.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from tracelake.collect.sql import collect_path, collect_query_log

from . import column_edges, direct_edges, table_edges, to_all


def write_log(path: Path, entries: list[dict[str, object] | str]) -> Path:
    lines = [entry if isinstance(entry, str) else json.dumps(entry) for entry in entries]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


JOB = [
    {
        "query": "CREATE OR REPLACE TEMP VIEW tv AS SELECT user_id, religion FROM dating.profiles "
        "WHERE ds = '2024-03-10'",
        "user": "etl",
        "timestamp": "2024-03-10T05:00:00Z",
        "job_id": "stats-2024-03-10",
        "engine": "spark",
    },
    {
        "query": "INSERT INTO x.y SELECT a FROM x.z",
        "user": "adhoc",
        "timestamp": "2024-03-10T05:00:30Z",
    },
    {
        "query": "INSERT OVERWRITE TABLE dating.religion_stats SELECT religion, count(user_id) AS n "
        "FROM tv GROUP BY religion",
        "user": "etl",
        "timestamp": "2024-03-10T05:01:00Z",
        "job_id": "stats-2024-03-10",
        "engine": "spark",
    },
]


def test_a_job_is_one_run_and_its_temp_view_connects_entries(tmp_path: Path) -> None:
    c = collect_query_log(write_log(tmp_path / "q.jsonl", JOB))
    assert (c.statements, c.parsed, c.failed) == (3, 3, 0)
    assert c.problems == []
    job, adhoc = c.batches
    targets = ["dating.religion_stats#religion", "dating.religion_stats#n"]
    assert {(e.source, e.target) for e in job.edges if e.transformation is None} == {
        ("hive.table/dating.profiles", "hive.table/dating.religion_stats")
    }
    assert {(e.source[11:], e.target[11:], e.transformation) for e in job.edges if e.transformation} == (
        {
            ("dating.profiles#religion", "dating.religion_stats#religion", "IDENTITY"),
            ("dating.profiles#user_id", "dating.religion_stats#n", "AGGREGATION"),
        }
        | to_all(["dating.profiles#ds"], targets, "FILTER")
        | to_all(["dating.profiles#religion"], targets, "GROUP_BY")
    )
    (process,) = job.processes
    (run,) = job.runs
    assert process.urn == "sql.job/stats-2024-03-10"
    assert process.metadata["statements"] == 2
    assert run.job_id == "stats-2024-03-10"
    assert run.user == "etl"
    assert run.started_at == datetime(2024, 3, 10, 5, 0, tzinfo=UTC)
    assert job.observed_at == datetime(2024, 3, 10, 5, 0, tzinfo=UTC)
    assert {e.process for e in job.edges} == {process.urn}

    assert adhoc.processes[0].urn.startswith("sql.query/")
    assert adhoc.runs[0].job_id is None
    assert adhoc.runs[0].user == "adhoc"
    assert adhoc.observed_at == datetime(2024, 3, 10, 5, 0, 30, tzinfo=UTC)


def test_the_same_query_with_other_literals_is_the_same_process(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {"query": f"INSERT INTO d.t SELECT a FROM d.s WHERE ds = '2024-03-{day}'", "timestamp": None}
        for day in (10, 11)
    ]
    entries.append({"query": "INSERT INTO d.t SELECT b FROM d.s"})
    c = collect_query_log(write_log(tmp_path / "q.jsonl", entries))
    urns = [b.processes[0].urn for b in c.batches]
    assert len(urns) == 3
    assert urns[0] == urns[1] != urns[2]
    assert len({b.runs[0].run_id for b in c.batches}) == 3


def test_malformed_entries_are_problems_and_the_rest_goes_on(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {"query": "INSERT INTO d.a SELECT x FROM d.s"},
        "{not json",
        {"user": "nobody"},
        "",
        {"query": "INSERT INTO d.b SELEC y FROM d.s"},
        ["a", "list"],  # type: ignore[list-item]
        {"query": "INSERT INTO d.c SELECT z FROM d.s"},
    ]
    path = tmp_path / "q.log"
    path.write_text(
        "\n".join(e if isinstance(e, str) else json.dumps(e) for e in entries) + "\n", encoding="utf-8"
    )
    c = collect_path(path)
    assert table_edges(c) == {("d.s", "d.a"), ("d.s", "d.c")}
    locations = {p.location: p.reason for p in c.problems}
    assert set(locations) == {"entry 2", "entry 3", "entry 5", "entry 6"}
    assert "JSON" in locations["entry 2"]
    assert "no query" in locations["entry 3"]
    assert "SELEC" in next(p.excerpt for p in c.problems if p.location == "entry 5")
    assert (c.statements, c.parsed, c.failed) == (6, 2, 4)
    assert all(p.source == str(path) for p in c.problems)


def test_engine_picks_the_dialect_of_each_entry(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {
            # Presto/Trino only: UNNEST ... WITH ORDINALITY, catalog-qualified names
            "query": "INSERT INTO hive.mart.tags SELECT u.id, t.tag FROM hive.raw.users u "
            "CROSS JOIN UNNEST(u.tags) WITH ORDINALITY AS t(tag, n)",
            "engine": "trino",
        },
        {
            # Hive only: INSERT OVERWRITE TABLE ... with a backquoted name
            "query": "INSERT OVERWRITE TABLE `mart`.`copy` SELECT id FROM raw.users",
            "engine": "hive",
        },
    ]
    c = collect_query_log(write_log(tmp_path / "q.jsonl", entries), dialect="spark")
    assert c.problems == []
    assert direct_edges(c) == {
        ("raw.users#id", "mart.tags#id", "IDENTITY"),
        ("raw.users#tags", "mart.tags#tag", "TRANSFORMATION"),
        ("raw.users#id", "mart.copy#id", "IDENTITY"),
    }
    assert [b.processes[0].metadata["dialect"] for b in c.batches] == ["trino", "hive"]


def test_unknown_engine_falls_back_to_the_default_dialect_with_a_note(tmp_path: Path) -> None:
    c = collect_query_log(
        write_log(tmp_path / "q.jsonl", [{"query": "INSERT INTO d.t SELECT a FROM d.s", "engine": "cobol"}])
    )
    assert column_edges(c) == {("d.s#a", "d.t#a", "IDENTITY")}
    (problem,) = c.problems
    assert problem.location == "entry 1" and "cobol" in problem.reason


def test_job_entries_are_replayed_in_time_order(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {"query": "INSERT INTO d.dst SELECT id FROM v", "job_id": "j", "timestamp": "2024-01-01T00:02:00Z"},
        {
            "query": "CREATE TEMP VIEW v AS SELECT id FROM d.src",
            "job_id": "j",
            "timestamp": "2024-01-01T00:01:00",
        },
    ]
    c = collect_query_log(write_log(tmp_path / "q.jsonl", entries))
    assert table_edges(c) == {("d.src", "d.dst")}
    assert c.batches[0].runs[0].started_at == datetime(2024, 1, 1, 0, 1, tzinfo=UTC)


def test_a_json_array_log_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"query": "INSERT INTO d.t SELECT a FROM d.s"}]), encoding="utf-8")
    c = collect_path(path)
    assert column_edges(c) == {("d.s#a", "d.t#a", "IDENTITY")}


def test_the_dating_example_log(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "dating"
    from tracelake.collect.catalog import SchemaCatalog

    c = collect_path(root / "query_log.jsonl", schema=SchemaCatalog.from_file(root / "schema.yaml"))
    assert c.failed == len(c.problems) == 1  # the log carries one deliberately broken query
    # through the job's temp view recent_reports, back to the real table it reads
    assert (
        "dating.safety_log_tbl#religion",
        "dating.safety_training_tbl#target_religion",
        "IDENTITY",
    ) in direct_edges(c)
    assert not any(
        "recent_reports" in e.source or "recent_reports" in e.target for b in c.batches for e in b.edges
    )


def test_an_entry_with_several_statements_locates_problems_by_statement(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {
            "query": "CREATE TEMP VIEW v AS SELECT id FROM d.s; INSERT INTO d.t SELEC id FROM v; "
            "INSERT INTO d.u SELECT id FROM v"
        },
    ]
    c = collect_query_log(write_log(tmp_path / "q.jsonl", entries))
    assert [p.location for p in c.problems] == ["entry 1, statement 2"]
    assert column_edges(c) == {("d.s#id", "d.u#id", "IDENTITY")}


def test_a_named_job_is_one_process_whose_daily_runs_are_versions(tmp_path: Path) -> None:
    entries: list[dict[str, object] | str] = [
        {
            "query": "INSERT INTO d.t SELECT a FROM d.s",
            "job_id": f"load.2024-03-{day}",
            "job_name": "load",
            "timestamp": f"2024-03-{day}T01:00:00Z",
        }
        for day in (10, 11)
    ]
    c = collect_query_log(write_log(tmp_path / "q.jsonl", entries))
    assert [b.processes[0].urn for b in c.batches] == ["sql.job/load", "sql.job/load"]
    assert [b.runs[0].job_id for b in c.batches] == ["load.2024-03-10", "load.2024-03-11"]
    assert len({b.runs[0].run_id for b in c.batches}) == 2
