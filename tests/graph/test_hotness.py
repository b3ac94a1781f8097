"""Hotness (PageRank over "depends on") on graphs small enough to solve by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.graph.test_traverse import flow
from tracelake.cli import app
from tracelake.graph.hotness import hotness
from tracelake.graph.index import GraphIndex
from tracelake.model import LineageBatch
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
