"""Who reads a table: the SELECT-only statements of a query log as reads of their runs, in the
store (`asset_reads`) on SQLite and PostgreSQL.

The log below was worked out by hand. alice's first query reads dating.user_profile's user_id
and religion and filters on country; bob's joins user_profile to abuse_reports on
user_id = reported_user_id and shows user_id (count(*) reads no column); alice's second reads
religion only. The etl job's INSERT writes dating.stats from user_profile: lineage, no read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from tracelake.collect.sql import collect_query_log
from tracelake.model import AssetRead, LineageBatch, Run, Signal
from tracelake.store import LineageStore
from tracelake.store import schema as store_schema
from tracelake.store.reads import ReadCounts

PROFILE, REPORTS, STATS = (f"hive.table/dating.{name}" for name in ("user_profile", "abuse_reports", "stats"))
ALICE_AT = datetime(2024, 3, 10, 9, 0, tzinfo=UTC)
BOB_AT = datetime(2024, 3, 11, 14, 30, tzinfo=UTC)
ALICE_AGAIN_AT = datetime(2024, 3, 12, 8, 15, tzinfo=UTC)

READ_LOG = [
    {
        "query": "SELECT user_id, religion FROM dating.user_profile WHERE country = 'NO'",
        "user": "alice",
        "timestamp": "2024-03-10T09:00:00Z",
    },
    {
        "query": "SELECT p.user_id, count(*) AS n FROM dating.user_profile p "
        "JOIN dating.abuse_reports r ON p.user_id = r.reported_user_id GROUP BY p.user_id",
        "user": "bob",
        "timestamp": "2024-03-11T14:30:00Z",
    },
    {
        "query": "INSERT INTO dating.stats SELECT country, count(*) AS n "
        "FROM dating.user_profile GROUP BY country",
        "user": "etl",
        "timestamp": "2024-03-11T15:00:00Z",
        "job_id": "stats-2024-03-11",
    },
    {
        "query": "SELECT religion FROM dating.user_profile",
        "user": "alice",
        "timestamp": "2024-03-12T08:15:00Z",
    },
]


def write_read_log(path: Path) -> Path:
    path.write_text("\n".join(json.dumps(entry) for entry in READ_LOG) + "\n", encoding="utf-8")
    return path


def batches(tmp_path: Path) -> list[LineageBatch]:
    return collect_query_log(write_read_log(tmp_path / "reads.jsonl")).batches


def read_of(run: Run, asset: str, at: datetime, columns: tuple[str, ...]) -> AssetRead:
    """The read the SQL collector makes of a SELECT-only run: by its user, at its time."""
    return AssetRead(asset, run.run_id, run.process, at, run.user, Signal.SQL_STATIC, columns)


def test_select_only_statements_are_reads_of_their_runs(tmp_path: Path) -> None:
    alice, bob, etl, alice_again = batches(tmp_path)

    assert alice.reads == [read_of(alice.runs[0], PROFILE, ALICE_AT, ("country", "religion", "user_id"))]
    assert bob.reads == [
        read_of(bob.runs[0], REPORTS, BOB_AT, ("reported_user_id",)),
        read_of(bob.runs[0], PROFILE, BOB_AT, ("user_id",)),
    ]
    assert [r.user for r in (alice.runs[0], bob.runs[0], alice_again.runs[0])] == ["alice", "bob", "alice"]
    assert etl.reads == []  # what a write reads is its lineage
    assert alice_again.reads == [read_of(alice_again.runs[0], PROFILE, ALICE_AGAIN_AT, ("religion",))]
    # the process metadata keeps its list of tables, as the OpenLineage emitter reads it
    assert bob.processes[0].metadata["reads"] == [REPORTS, PROFILE]


def test_the_store_lists_an_assets_readers_newest_first(store: LineageStore, tmp_path: Path) -> None:
    collected = batches(tmp_path)
    alice, bob, _, alice_again = (batch.runs[0] for batch in collected)
    report = store.ingest(collected)

    assert report.reads == 4
    assert store.readers(PROFILE) == [
        read_of(alice_again, PROFILE, ALICE_AGAIN_AT, ("religion",)),
        read_of(bob, PROFILE, BOB_AT, ("user_id",)),
        read_of(alice, PROFILE, ALICE_AT, ("country", "religion", "user_id")),
    ]
    assert store.readers(REPORTS) == [read_of(bob, REPORTS, BOB_AT, ("reported_user_id",))]
    assert store.readers(STATS) == []
    assert [r.user for r in store.readers(PROFILE, since=BOB_AT)] == ["alice", "bob"]
    assert [r.user for r in store.readers(PROFILE, until=BOB_AT)] == ["bob", "alice"]
    assert [r.at for r in store.readers(PROFILE, limit=1)] == [ALICE_AGAIN_AT]

    # three queries, each a process of its own; two people
    processes = tuple(sorted({alice.process, bob.process, alice_again.process}))
    assert store.read_counts() == {
        PROFILE: ReadCounts(runs=3, readers=2, processes=processes),
        REPORTS: ReadCounts(runs=1, readers=1, processes=(bob.process,)),
    }
    assert store.read_counts(asset=REPORTS, since=ALICE_AGAIN_AT) == {}


def test_ingesting_the_same_log_again_adds_no_read(store: LineageStore, tmp_path: Path) -> None:
    store.ingest(batches(tmp_path))
    before = store.readers(PROFILE)

    report = store.ingest(batches(tmp_path))

    assert report.reads == 0
    assert store.readers(PROFILE) == before
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(store_schema.asset_reads)).scalar()
    assert rows == 4


def test_a_run_reported_again_adds_the_columns_it_read_since(store: LineageStore) -> None:
    """A tracked Spark run is stored every ten seconds, its reads so far each time."""
    first = AssetRead(PROFILE, "run-1", "spark.job/report", ALICE_AT, "alice", Signal.SPARK_RUNTIME, ("id",))
    later = AssetRead(
        PROFILE, "run-1", "spark.job/report", ALICE_AT, "alice", Signal.SPARK_RUNTIME, ("id", "name")
    )
    assert store.ingest(LineageBatch(reads=[first])).reads == 1
    assert store.ingest(LineageBatch(reads=[later])).reads == 0
    store.ingest(LineageBatch(reads=[first]))  # an older report takes nothing away

    assert store.readers(PROFILE) == [later]
    assert store.node("spark.job/report") is not None  # a read names its process: the node exists


def test_a_store_made_before_reads_were_kept_gets_the_table_on_open(
    store: LineageStore, tmp_path: Path
) -> None:
    store.ingest(batches(tmp_path)[2])  # the etl job's write
    with store.engine.begin() as conn:
        store_schema.asset_reads.drop(conn)
    assert "asset_reads" not in sa.inspect(store.engine).get_table_names()

    with LineageStore(store.url) as reopened:
        assert reopened.readers(PROFILE) == []
        reopened.ingest(batches(tmp_path))
        assert [r.user for r in reopened.readers(PROFILE)] == ["alice", "bob", "alice"]
