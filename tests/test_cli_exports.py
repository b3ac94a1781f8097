"""List and graph commands as files (CSV, Excel, Parquet) and `tracelake export`, on the dating
example: each file read back with the format's own reader (csv, openpyxl, pyarrow, Spark) holds
the rows the command's JSON holds, and the export's tables are what the store holds.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.test_cli import ingest_example, run

TRAINING = "dating.safety_training_tbl"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("exports") / "lineage.db")
    ingest_example(path)
    return path


def as_json(*args: str) -> Any:
    code, out, err = run(*args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def text(value: Any) -> str:
    """How CSV and Excel carry a JSON value: text as it is, nested values as JSON, null empty."""
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else str(value)


def test_a_graph_as_csv_is_its_nodes_and_edges(db: str, tmp_path: Path) -> None:
    graph = as_json("lineage", TRAINING, "--up", "--db", db)
    code, out, _ = run(
        "lineage", TRAINING, "--up", "--format", "csv", "--output", str(tmp_path / "g"), "--db", db
    )
    assert code == 0 and "wrote" in out
    for table in ("nodes", "edges"):
        with (tmp_path / "g" / f"{table}.csv").open(newline="") as stream:
            rows = list(csv.DictReader(stream))
        assert rows == [{key: text(value) for key, value in row.items()} for row in graph[table]]


def test_one_table_as_csv_goes_to_stdout(db: str) -> None:
    impacted = as_json("impact", "dating.user_profile", "--db", db)["impacted"]
    code, out, _ = run("impact", "dating.user_profile", "--format", "csv", "--db", db)
    assert code == 0
    assert list(csv.DictReader(io.StringIO(out))) == [
        {k: text(v) for k, v in row.items()} for row in impacted
    ]


def test_causes_as_an_excel_sheet(db: str, tmp_path: Path) -> None:
    from openpyxl import load_workbook

    window = ("--since", "2024-03-12", "--until", "2024-03-13")
    causes = as_json("why", TRAINING, *window, "--db", db)["causes"]
    book = tmp_path / "why.xlsx"
    code, _, err = run("why", TRAINING, *window, "--format", "xlsx", "--output", str(book), "--db", db)
    assert code == 0, err
    sheet = load_workbook(book)["causes"]
    header, *rows = [list(row) for row in sheet.iter_rows(values_only=True)]
    assert header == list(causes[0])
    assert rows == [
        [json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v for v in c.values()]
        for c in causes
    ]


def test_problems_and_labels_as_parquet(db: str, tmp_path: Path) -> None:
    problems = as_json("problems", "--db", db)["problems"]
    code, _, _ = run("problems", "--format", "parquet", "--output", str(tmp_path / "p.parquet"), "--db", db)
    assert code == 0
    assert pq.read_table(tmp_path / "p.parquet").to_pylist() == problems
    assert len(problems) == 1  # the log's one typo

    code, _, _ = run("label", "add", "dating.user_profile#religion", "religion", "--db", db)
    assert code == 0
    labels = as_json("label", "list", "--db", db)["labels"]
    assert {
        "label": "religion",
        "node": "hive.table/dating.user_profile#religion",
        "provenance": "declared",
    }.items() <= labels[0].items()
    code, _, _ = run("label", "list", "--format", "parquet", "-o", str(tmp_path / "l.parquet"), "--db", db)
    assert code == 0 and pq.read_table(tmp_path / "l.parquet").to_pylist() == labels


def test_file_formats_need_a_place_and_drawings_are_for_graphs(db: str) -> None:
    code, _, err = run("lineage", TRAINING, "--format", "parquet", "--db", db)
    assert code == 2 and "--format parquet needs --output PATH (a folder: there are several tables)" in err
    code, _, err = run("impact", "dating.user_profile", "--format", "xlsx", "--db", db)
    assert code == 2 and "--format xlsx needs --output PATH" in err
    code, _, err = run("impact", "dating.user_profile", "--format", "mermaid", "--db", db)
    assert code == 2 and "--format must be one of table, json, csv, xlsx, parquet here, not mermaid" in err


def test_export_writes_the_store_as_lake_tables_spark_reads(db: str, tmp_path: Path, spark: Any) -> None:
    from tracelake.graph.spark.lake import read_lake
    from tracelake.store import LineageStore

    folder = tmp_path / "graph"
    code, out, err = run("export", str(folder), "--db", db)
    assert code == 0, err
    with LineageStore(db) as store:
        counts, version = store.counts(), store.graph_version()
    assert f"snapshot 0 (everything, graph version {version})" in out
    assert f"edges {counts['edge_versions']:,}" in out
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "_lake.json",
        "assets",
        "edge_deletes",
        "edges",
        "labels",
        "nodes",
        "reads",
        "runs",
        "versions",
    ]
    graph = read_lake(spark, folder)
    assert graph.edges.count() == counts["edge_versions"]
    assert graph.nodes.count() == counts["asset"] + counts["field"] + counts["process"]
    runs = spark.read.parquet(str(folder / "runs" / "seq=0"))
    assert runs.count() == 33  # one a job and day of the log
    # the training table's inputs now, in Spark SQL over the lake, are those `show` lists
    graph.nodes.createOrReplaceTempView("nodes")
    graph.edges.createOrReplaceTempView("edges")
    inputs = spark.sql(
        "SELECT DISTINCT s.urn FROM edges e "
        "JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id "
        f"WHERE t.urn = 'hive.table/{TRAINING}' AND e.valid_to IS NULL AND s.node_type = 'asset'"
    ).collect()
    shown = as_json("show", TRAINING, "--db", db)
    assert sorted(row.urn for row in inputs) == sorted({e["source"] for e in shown["inputs"]})
    assert dict(graph.edges.dtypes)["valid_from"] == "timestamp"
    # nothing changed: the next export appends nothing to the graph's tables and writes the rest
    code, out, _ = run("export", str(folder), "--db", db)
    assert code == 0 and "snapshot 1 (what changed" in out and "nodes 0, edges 0" in out
    assert graph.edges.count() == read_lake(spark, folder).edges.count()
    code, out, _ = run("export", str(folder), "--full", "--db", db)
    assert code == 0 and "snapshot 2 (everything" in out
    assert sorted(p.name for p in (folder / "edges").iterdir()) == ["seq=2"]  # compacted
    code, _, err = run("export", str(folder / "_lake.json"), "--db", db)
    assert code == 2 and err.strip().endswith("_lake.json is a file, not a folder")


def test_policy_violations_hot_assets_and_a_taint_plan_as_files(db: str, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples"
    assert run("label", "add", "dating.user_profile#religion", "religion", "--db", db)[0] == 0
    code, out, _ = run("check", str(example / "dating" / "policies.yml"), "--format", "json", "--db", db)
    assert code == 1  # religion reaches the ads tables
    violations = json.loads(out)
    code, out, _ = run("check", str(example / "dating" / "policies.yml"), "--format", "csv", "--db", db)
    assert code == 1
    assert list(csv.DictReader(io.StringIO(out))) == [{k: text(v) for k, v in v.items()} for v in violations]

    hottest = as_json("hot", "--limit", "5", "--db", db)["hottest"]
    assert [row["rank"] for row in hottest] == [1, 2, 3, 4, 5]
    code, _, _ = run(
        "hot", "--limit", "5", "--format", "parquet", "-o", str(tmp_path / "hot.parquet"), "--db", db
    )
    assert code == 0 and pq.read_table(tmp_path / "hot.parquet").to_pylist() == hottest

    code, _, err = run("entities", "load", str(example / "entities" / "events.yml"), "--db", db)
    assert code == 0, err
    taint = ("taint", "events", "--from", "2024-03-13T05:00", "--to", "2024-03-13T15:00", "--reason", "dup")
    plan = as_json(*taint, "--db", db)
    code, out, _ = run(*taint, "--format", "csv", "--db", db)
    assert code == 0
    assert list(csv.DictReader(io.StringIO(out))) == [{k: text(v) for k, v in step.items()} for step in plan]


def test_privacy_requests_and_their_audit_as_json_and_files(db: str, tmp_path: Path) -> None:
    code, _, err = run("privacy", "access", "--user", "u-42", "--queue-only", "--db", db)
    assert code == 0, err
    requests = as_json("privacy", "requests", "--db", db)["requests"]
    assert [(r["kind"], r["status"], r["id_count"]) for r in requests] == [("access", "pending", 1)]
    assert "u-42" not in json.dumps(requests)  # a fingerprint of the ids, never the ids
    events = as_json("privacy", "audit", "--db", db)["events"]
    assert [(e["request"], e["event"]) for e in events] == [(requests[0]["id"], "submitted")]
    code, out, _ = run("privacy", "audit", "--format", "csv", "--db", db)
    assert code == 0 and list(csv.DictReader(io.StringIO(out))) == [
        {k: text(v) for k, v in e.items()} for e in events
    ]
    code, _, _ = run("privacy", "requests", "--format", "xlsx", "-o", str(tmp_path / "r.xlsx"), "--db", db)
    assert code == 0 and (tmp_path / "r.xlsx").stat().st_size > 0


def test_entities_and_their_status_as_json_and_files(db: str, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "entities" / "events.yml"
    assert run("entities", "load", str(example), "--db", db)[0] == 0
    entities = as_json("entities", "list", "--db", db)
    names = [e["name"] for e in entities]
    assert (
        names.index("events") < names.index("daily_sessions") < names.index("weekly_engagement")
    )  # upstream first
    code, _, _ = run("entities", "list", "--format", "parquet", "-o", str(tmp_path / "e.parquet"), "--db", db)
    assert code == 0 and [row["name"] for row in pq.read_table(tmp_path / "e.parquet").to_pylist()] == [
        e["name"] for e in entities
    ]
    taint = ("taint", "events", "--from", "2024-03-13T05:00", "--to", "2024-03-13T07:00", "--reason", "dup")
    assert run(*taint, "--apply", "--actor", "ana", "--db", db)[0] == 0
    hours = ("--from", "2024-03-13T05:00", "--to", "2024-03-13T07:00")
    status = as_json("status", "events", *hours, "--db", db)
    assert [(s["instance"], s["valid"], s["reason"], s["actor"]) for s in status] == [
        ("2024-03-13T05:00:00+00:00", False, "dup", "ana"),  # the hours tainted, labelled as instances are
        ("2024-03-13T06:00:00+00:00", False, "dup", "ana"),
    ]
    code, out, _ = run("status", "events", *hours, "--format", "csv", "--db", db)
    assert code == 0 and list(csv.DictReader(io.StringIO(out))) == [
        {k: text(v) for k, v in s.items()} for s in status
    ]


def test_the_spark_engine_stores_what_the_memory_engine_stores(db: str, tmp_path: Path, spark: Any) -> None:
    """`propagate`, `hot` and `check` with `--engine spark` over a lake: the same inferred labels
    with the same routes, the same ranking, the same violations (and exit code) as in memory."""
    example = Path(__file__).resolve().parents[1] / "examples" / "dating"
    lake = ("--lake", str(tmp_path / "lake"))
    assert run("label", "add", "dating.user_profile#religion", "religion", "--db", db)[0] == 0
    assert run("label", "add", "dating.user_profile#user_id", "identity.user_id", "--db", db)[0] == 0

    def inferred() -> list[dict[str, Any]]:
        rows = as_json("label", "list", "--db", db)["labels"]
        return sorted(
            (r for r in rows if r["provenance"] == "inferred"), key=lambda r: (r["label"], r["node"])
        )

    code, memory_out, err = run("propagate", "--stop-zone", "hive.table/ads.", "--db", db)
    assert code == 0, err
    in_memory = inferred()
    assert len(in_memory) >= 5
    code, out, err = run("propagate", "--stop-zone", "hive.table/ads.", "--max-depth", "1", "--db", db)
    assert code == 0 and inferred() != in_memory  # fewer: Spark's must restore them
    code, spark_out, err = run(
        "propagate", "--stop-zone", "hive.table/ads.", "--engine", "spark", *lake, "--db", db
    )
    assert code == 0, err
    assert inferred() == in_memory  # the same nodes by the same routes
    assert [line for line in spark_out.splitlines() if "│" in line] == [
        line for line in memory_out.splitlines() if "│" in line
    ]  # the same table of labels, declared and inferred counts

    hot = as_json("hot", "--limit", "8", "--db", db)["hottest"]
    hot_spark = as_json("hot", "--limit", "8", "--engine", "spark", *lake, "--db", db)["hottest"]
    assert [h["asset"] for h in hot_spark] == [h["asset"] for h in hot]
    assert [h["score"] for h in hot_spark] == pytest.approx([h["score"] for h in hot], rel=1e-9)
    assert (tmp_path / "lake" / "results" / "hotness").is_dir()

    policies = str(example / "policies.yml")
    code, out, _ = run("check", policies, "--format", "json", "--db", db)
    code_spark, out_spark, err = run(
        "check", policies, "--format", "json", "--engine", "spark", *lake, "--db", db
    )
    assert (code, code_spark) == (1, 1), err
    key = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
    assert sorted(json.loads(out_spark), key=key) == sorted(json.loads(out), key=key) != []
    code, _, err = run("hot", "--engine", "spark", "--lake", policies, "--db", db)
    assert code == 2 and err.strip().endswith("policies.yml is a file, not a folder")
