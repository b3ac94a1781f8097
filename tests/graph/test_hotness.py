"""Hotness (PageRank over "depends on") on graphs small enough to solve by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.graph.test_traverse import flow
from tracelake.cli import app
from tracelake.graph.hotness import hotness
from tracelake.graph.index import GraphIndex
from tracelake.model import Asset, AssetRead, LineageBatch, Signal
from tracelake.store import LineageStore

T = "hive.table/db."


def index_of(tmp_path: Path, pairs: list[tuple[str, str]]) -> GraphIndex:
    store = LineageStore(str(tmp_path / "lineage.db"))
    store.ingest(LineageBatch(edges=[flow(T + a, T + b, f"job_{a}_{b}") for a, b in pairs]))
    return GraphIndex.from_store(store)


def test_a_table_read_by_three_is_the_hottest(tmp_path: Path) -> None:
    # hub → c1, c2, c3. Each consumer votes for hub; hub reads nothing and spreads its rank.
    # With d = 0.85 and n = 4: c = (1 − d)/4 + d·hub/4 for each consumer, hub = c + 3·d·c,
    # and hub + 3c = 1, so c = 1/(4 + 3d) = 1/6.55 and hub = (1 + 3d)/(4 + 3d) = 3.55/6.55.
    scores = dict(hotness(index_of(tmp_path, [("hub", "c1"), ("hub", "c2"), ("hub", "c3")])))

    assert scores[T + "hub"] == pytest.approx(3.55 / 6.55, abs=1e-9)
    for consumer in ("c1", "c2", "c3"):
        assert scores[T + consumer] == pytest.approx(1 / 6.55, abs=1e-9)


def test_a_cycle_shares_evenly_and_scores_sum_to_one(tmp_path: Path) -> None:
    ranked = hotness(index_of(tmp_path, [("a", "b"), ("b", "c"), ("c", "a")]))

    assert [score for _, score in ranked] == pytest.approx([1 / 3] * 3)


def test_a_chain_ranks_upstream_first(tmp_path: Path) -> None:
    # raw → clean → report: the report is read by nobody, raw feeds everything
    ranked = hotness(index_of(tmp_path, [("raw", "clean"), ("clean", "report")]))

    assert [urn for urn, _ in ranked] == [T + "raw", T + "clean", T + "report"]
    assert sum(score for _, score in ranked) == pytest.approx(1.0)


def test_tracelake_hot_lists_the_hottest_first(tmp_path: Path) -> None:
    index_of(tmp_path, [("hub", "c1"), ("hub", "c2"), ("hub", "c3")])
    result = CliRunner().invoke(app, ["hot", "--limit", "2", "--db", str(tmp_path / "lineage.db")])

    assert result.exit_code == 0
    rows = [line for line in result.stdout.splitlines() if "hive.table/db." in line]
    assert len(rows) == 2 and "db.hub" in rows[0] and "0.5420" in rows[0]


def reads_of(asset: str, *processes: str) -> list[tuple[str, str]]:
    return [(f"sql.query/{process}", T + asset) for process in processes]


def assets_only(tmp_path: Path, *names: str) -> GraphIndex:
    store = LineageStore(str(tmp_path / "lineage.db"))
    store.ingest(LineageBatch(assets=[Asset(T + name) for name in names]))
    return GraphIndex.from_store(store)


def test_each_reading_process_votes_for_what_it_read(tmp_path: Path) -> None:
    # lookup is read by three jobs and built from nothing; unused is neither. The readers r are
    # voted for by nobody, lookup and unused vote for nobody (dangling, their rank spread). With
    # n = 5 and b = (1 − d)/5 + d·(lookup + unused)/5: r = unused = b, lookup = b + 3·d·b, and
    # 3b + b + b(1 + 3d) = 1, so b = 1/(5 + 3d) = 1/7.55 and lookup = 3.55/7.55.
    index = assets_only(tmp_path, "lookup", "unused")
    ranked = hotness(index, reads=reads_of("lookup", "a", "b", "c") + reads_of("lookup", "a"))

    assert [urn for urn, _ in ranked] == [T + "lookup", T + "unused"]
    assert dict(ranked)[T + "lookup"] == pytest.approx(3.55 / 7.55, abs=1e-9)
    assert dict(ranked)[T + "unused"] == pytest.approx(1 / 7.55, abs=1e-9)


def test_without_reads_the_ranks_are_what_they_were(tmp_path: Path) -> None:
    index = index_of(tmp_path, [("raw", "clean"), ("clean", "report"), ("hub", "c1"), ("hub", "c2")])
    plain = hotness(index)

    assert hotness(index, reads=[]) == plain
    # a read of a table the graph does not hold is no vote
    assert hotness(index, reads=reads_of("elsewhere", "a")) == plain


def test_a_table_read_outranks_its_unread_twin_and_lifts_its_upstream(tmp_path: Path) -> None:
    index = index_of(tmp_path, [("raw", "report_a"), ("raw", "report_b")])
    before = dict(hotness(index))
    after = dict(hotness(index, reads=reads_of("report_a", "a", "b", "c", "d")))

    assert before[T + "report_a"] == pytest.approx(before[T + "report_b"])  # two leaves nobody reads…
    assert after[T + "report_a"] > after[T + "report_b"]  # …until four jobs read one
    # what those jobs rely on is built from raw: its share grows with them
    assert after[T + "raw"] / after[T + "report_b"] > before[T + "raw"] / before[T + "report_b"]


def test_tracelake_hot_counts_reading_runs_and_readers(tmp_path: Path) -> None:
    db = tmp_path / "lineage.db"
    at = datetime(2024, 3, 10, tzinfo=UTC)

    def read(run: str, process: str, user: str | None) -> AssetRead:
        return AssetRead(T + "lookup", run, f"sql.query/{process}", at, user, Signal.SQL_STATIC)

    with LineageStore(str(db)) as store:
        store.ingest(LineageBatch(assets=[Asset(T + "unused")]))
        # four runs of three jobs, by alice, bob and a job run by nobody named: three readers
        store.ingest(
            LineageBatch(reads=[read("r1", "a", "alice"), read("r2", "a", "alice"), read("r3", "b", "bob")])
        )
        store.ingest(LineageBatch(reads=[read("r4", "c", None)]))
    result = CliRunner().invoke(app, ["hot", "--db", str(db)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines()]
    rows = [row for row in rows if row and row[0].isdigit()]
    assert rows == [
        ["1", T + "lookup", f"{3.55 / 7.55:.4f}", "4", "3"],
        ["2", T + "unused", f"{1 / 7.55:.4f}", "0", "0"],
    ]
