"""Traversal on small hand-drawn graphs, ingested through a real SQLite store.

Every expected answer below is read off the drawings by hand, not computed by the code
under test. The main lake:

    a ─job1─▶ c ─job3─▶ e ─job4 (spark_runtime)─▶ f   (kafka.topic)
    b ─job1─▶ c         e ─job5 (config, LOW)───▶ g   (ai.model) ─job6─▶ h
    b ─job2─▶ d ─job3─▶ e

with column lineage

    a#user_id ─IDENTITY─▶ c#user_id ─IDENTITY─▶ e#user_id
    b#score ─AGGREGATION─▶ c#score_sum ─TRANSFORMATION─▶ e#flag
    b#country ─GROUP_BY─▶ c#score_sum
    b#country ─IDENTITY─▶ d#x ─FILTER─▶ e#flag
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from tracelake.graph import GraphIndex, IndexCache, impact, index_files, lineage, paths
from tracelake.graph.file_array import FileArray
from tracelake.graph.traverse import DOWNSTREAM, UPSTREAM, TraversalFilters, _bfs, _Scratch, edge_filter
from tracelake.model import Confidence, FlowEdge, LineageBatch, Signal, Transformation, UnknownNodeError
from tracelake.store import LineageStore

A, B, C, D, E = (f"hive.table/db.{x}" for x in "abcde")
F = "kafka.topic/f_out"
G = "ai.model/g"
H = "hive.table/db.h"
JAN, FEB, MAR, APR = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 2, 3, 4))
DEC = datetime(2023, 12, 1, tzinfo=UTC)


def flow(
    source: str,
    target: str,
    process: str,
    *,
    signal: Signal = Signal.SQL_STATIC,
    confidence: Confidence = Confidence.HIGH,
    transformation: Transformation | None = None,
) -> FlowEdge:
    return FlowEdge(source, target, f"sql.job/{process}", signal, confidence, transformation)


def fld(asset: str, column: str) -> str:
    return f"{asset}#{column}"


LAKE_EDGES = [
    flow(A, C, "job1"),
    flow(B, C, "job1"),
    flow(B, D, "job2"),
    flow(C, E, "job3"),
    flow(D, E, "job3"),
    flow(E, F, "job4", signal=Signal.SPARK_RUNTIME),
    flow(E, G, "job5", signal=Signal.CONFIG, confidence=Confidence.LOW),
    flow(G, H, "job6"),
    flow(fld(A, "user_id"), fld(C, "user_id"), "job1", transformation=Transformation.IDENTITY),
    flow(fld(B, "score"), fld(C, "score_sum"), "job1", transformation=Transformation.AGGREGATION),
    flow(fld(B, "country"), fld(C, "score_sum"), "job1", transformation=Transformation.GROUP_BY),
    flow(fld(B, "country"), fld(D, "x"), "job2", transformation=Transformation.IDENTITY),
    flow(fld(C, "user_id"), fld(E, "user_id"), "job3", transformation=Transformation.IDENTITY),
    flow(fld(C, "score_sum"), fld(E, "flag"), "job3", transformation=Transformation.TRANSFORMATION),
    flow(fld(D, "x"), fld(E, "flag"), "job3", transformation=Transformation.FILTER),
]


def make_store(tmp_path: Path, name: str) -> LineageStore:
    return LineageStore(f"sqlite:///{tmp_path / name}.db")


@pytest.fixture
def lake_store(tmp_path: Path) -> Iterator[LineageStore]:
    with make_store(tmp_path, "lake") as store:
        store.ingest(LineageBatch(edges=list(LAKE_EDGES), observed_at=JAN))
        yield store


@pytest.fixture(params=["built", "kept"])
def lake(request: pytest.FixtureRequest, lake_store: LineageStore, tmp_path: Path) -> GraphIndex:
    """The lake's index as built from the store, and as kept on disk and read from its files
    (`index_files`): every question below gets the same answer from both."""
    built = GraphIndex.from_store(lake_store)
    if request.param == "built":
        return built
    index_files.save(built, tmp_path / "index", store="lake")
    kept = index_files.load(tmp_path / "index", store="lake")
    assert kept is not None and isinstance(kept.edge_ids, FileArray)
    return kept


def reached(result) -> dict[str, int]:
    return result.distance_by_urn()


# ---------------------------------------------------------------------- the index


def test_index_knows_types_kinds_and_assets_of_fields(lake: GraphIndex) -> None:
    c_user = lake.positions[fld(C, "user_id")]
    assert lake.node_type(c_user) == "field"
    assert lake.asset_urn(c_user) == C
    assert lake.kind(c_user) == "hive.table"
    assert lake.node_type(lake.positions[F]) == "asset"
    assert lake.kind(lake.positions[F]) == "kafka.topic"
    assert lake.kind(lake.positions[G]) == "ai.model"
    job = lake.positions["sql.job/job1"]
    assert lake.node_type(job) == "process"
    assert lake.asset_urn(job) is None
    assert lake.n_edges == len(LAKE_EDGES)
    # Both CSR copies hold every edge exactly once.
    assert sorted(lake.downstream.edges.tolist()) == list(range(lake.n_edges))
    assert sorted(lake.upstream.edges.tolist()) == list(range(lake.n_edges))
    ref = lake.edge(int(np.flatnonzero(lake.edge_signal == list(Signal).index(Signal.CONFIG))[0]))
    assert (ref.source, ref.target, ref.process) == (E, G, "sql.job/job5")
    assert ref.confidence is Confidence.LOW
    assert ref.valid_from == JAN and ref.valid_to is None


# ---------------------------------------------------------------------- directions and depth


def test_downstream_closure(lake: GraphIndex) -> None:
    result = lineage(lake, [A], "downstream")
    assert reached(result) == {A: 0, C: 1, E: 2, F: 3, G: 3, H: 4}
    assert result.edge_pairs() == {(A, C), (C, E), (E, F), (E, G), (G, H)}
    assert result.starts == (A,)


def test_upstream_closure(lake: GraphIndex) -> None:
    result = lineage(lake, [E], "upstream")
    assert reached(result) == {E: 0, C: 1, D: 1, A: 2, B: 2}
    assert result.edge_pairs() == {(C, E), (D, E), (A, C), (B, C), (B, D)}
    assert set(result.sides.tolist()) == {0, UPSTREAM}


def test_both_directions_keep_sides_apart(lake: GraphIndex) -> None:
    result = lineage(lake, [C], "both")
    assert reached(result) == {C: 0, A: 1, B: 1, E: 1, F: 2, G: 2, H: 3}
    sides = dict(zip(result.urns, result.sides.tolist(), strict=True))
    assert sides == {
        C: 0,
        A: UPSTREAM,
        B: UPSTREAM,
        E: DOWNSTREAM,
        F: DOWNSTREAM,
        G: DOWNSTREAM,
        H: DOWNSTREAM,
    }
    # d is a sibling (b → d), neither upstream nor downstream of c
    assert D not in result


def test_depth_limits(lake: GraphIndex) -> None:
    assert reached(lineage(lake, [A], "downstream", filters=TraversalFilters(depth=0))) == {A: 0}
    assert reached(lineage(lake, [A], "downstream", filters=TraversalFilters(depth=1))) == {A: 0, C: 1}
    result = lineage(lake, [A], "downstream", filters=TraversalFilters(depth=2))
    assert reached(result) == {A: 0, C: 1, E: 2}
    # e is at the depth limit: it is reached but not expanded
    assert result.edge_pairs() == {(A, C), (C, E)}
    assert reached(lineage(lake, [H], "upstream", filters=TraversalFilters(depth=2))) == {H: 0, G: 1, E: 2}


def test_batch_starts_are_the_union_of_single_starts(lake: GraphIndex) -> None:
    # By hand: a reaches c1 e2 f3 g3 h4; d reaches e1 f2 g2 h3; together each at its nearest.
    single_a = {A: 0, C: 1, E: 2, F: 3, G: 3, H: 4}
    single_d = {D: 0, E: 1, F: 2, G: 2, H: 3}
    assert reached(lineage(lake, [A], "downstream")) == single_a
    assert reached(lineage(lake, [D], "downstream")) == single_d
    both = lineage(lake, [A, D], "downstream")
    assert reached(both) == {A: 0, D: 0, C: 1, E: 1, F: 2, G: 2, H: 3}
    assert set(reached(both)) == set(single_a) | set(single_d)
    assert both.edge_pairs() == {(A, C), (C, E), (D, E), (E, F), (E, G), (G, H)}
    assert both.starts == (A, D)

    # With a depth limit as well: a@2 = {a, c, e}, d@2 = {d, e, f, g}; edges out of the
    # expanded nodes only.
    limited = lineage(lake, [A, D], "downstream", filters=TraversalFilters(depth=2))
    assert reached(limited) == {A: 0, D: 0, C: 1, E: 1, F: 2, G: 2}
    assert limited.edge_pairs() == {(A, C), (D, E), (C, E), (E, F), (E, G)}
    assert limited.edge_pairs() == (
        lineage(lake, [A], "downstream", filters=TraversalFilters(depth=2)).edge_pairs()
        | lineage(lake, [D], "downstream", filters=TraversalFilters(depth=2)).edge_pairs()
    )


def test_duplicate_starts_and_a_start_reached_from_another(lake: GraphIndex) -> None:
    result = lineage(lake, [A, C, A], "downstream")
    assert reached(result) == {A: 0, C: 0, E: 1, F: 2, G: 2, H: 3}


def test_plain_table_names_resolve(lake: GraphIndex) -> None:
    assert reached(lineage(lake, ["db.a"], "downstream", filters=TraversalFilters(depth=1))) == {A: 0, C: 1}


# ---------------------------------------------------------------------- filters


def test_min_confidence_stops_at_low_edges(lake: GraphIndex) -> None:
    assert reached(
        lineage(lake, [A], "downstream", filters=TraversalFilters(min_confidence=Confidence.MEDIUM))
    ) == {
        A: 0,
        C: 1,
        E: 2,
        F: 3,
    }
    # LOW admits everything
    assert H in lineage(lake, [A], "downstream", filters=TraversalFilters(min_confidence=Confidence.LOW))
    # upstream of h, the LOW edge e → g is the wall
    assert reached(lineage(lake, [H], "upstream", filters=TraversalFilters(min_confidence="HIGH"))) == {
        H: 0,
        G: 1,
    }


def test_signal_filter(lake: GraphIndex) -> None:
    assert reached(
        lineage(lake, [A], "downstream", filters=TraversalFilters(signals={Signal.SQL_STATIC}))
    ) == {A: 0, C: 1, E: 2}
    assert reached(
        lineage(
            lake, [E], "downstream", filters=TraversalFilters(signals={Signal.SPARK_RUNTIME, Signal.CONFIG})
        )
    ) == {
        E: 0,
        F: 1,
        G: 1,
    }


def test_asset_kind_filter(lake: GraphIndex) -> None:
    result = lineage(
        lake, [A], "downstream", filters=TraversalFilters(asset_kinds={"hive.table", "kafka.topic"})
    )
    # g is a model, and h lies only behind it
    assert reached(result) == {A: 0, C: 1, E: 2, F: 3}
    # the start is kept whatever its kind
    assert reached(lineage(lake, [G], "both", filters=TraversalFilters(asset_kinds={"ai.feature"}))) == {G: 0}


def test_field_lineage_and_transformation_filters(lake: GraphIndex) -> None:
    country = fld(B, "country")
    assert reached(lineage(lake, [country], "downstream")) == {
        country: 0,
        fld(C, "score_sum"): 1,
        fld(D, "x"): 1,
        fld(E, "flag"): 2,
    }
    # GROUP_BY and FILTER are indirect
    assert reached(lineage(lake, [country], "downstream", filters=TraversalFilters(direct_only=True))) == {
        country: 0,
        fld(D, "x"): 1,
    }
    chosen = {Transformation.GROUP_BY, Transformation.TRANSFORMATION}
    assert reached(
        lineage(lake, [country], "downstream", filters=TraversalFilters(transformations=chosen))
    ) == {
        country: 0,
        fld(C, "score_sum"): 1,
        fld(E, "flag"): 2,
    }
    # table-level edges have no transformation and are not removed by the filter
    assert reached(lineage(lake, [A], "downstream", filters=TraversalFilters(direct_only=True, depth=1))) == {
        A: 0,
        C: 1,
    }


def test_asset_and_field_starts_in_one_pass(lake: GraphIndex) -> None:
    result = lineage(lake, [D, fld(A, "user_id")], "downstream", filters=TraversalFilters(depth=1))
    assert reached(result) == {D: 0, fld(A, "user_id"): 0, E: 1, fld(C, "user_id"): 1}


def test_include_fields_adds_the_column_edges_alongside(lake: GraphIndex) -> None:
    result = lineage(lake, [A], "downstream", filters=TraversalFilters(depth=1), include_fields=True)
    assert reached(result) == {A: 0, C: 1, fld(A, "user_id"): 0, fld(C, "user_id"): 1}
    assert result.edge_pairs() == {(A, C), (fld(A, "user_id"), fld(C, "user_id"))}
    # b → c was not crossed, so b#score → c#score_sum is not added
    assert fld(B, "score") not in result


# ---------------------------------------------------------------------- as of


def test_as_of_follows_process_versions(tmp_path: Path) -> None:
    k = "hive.table/db.k"
    with make_store(tmp_path, "versions") as store:
        store.ingest(LineageBatch(edges=[flow(A, C, "job1"), flow(B, C, "job1")], observed_at=JAN))
        # job1 changed in March: b dropped, k added
        store.ingest(LineageBatch(edges=[flow(A, C, "job1"), flow(k, C, "job1")], observed_at=MAR))
        index = GraphIndex.from_store(store)
    assert index.n_edges == 4  # two versions of two edges each
    assert reached(lineage(index, [C], "upstream", filters=TraversalFilters(as_of=FEB))) == {C: 0, A: 1, B: 1}
    assert reached(lineage(index, [C], "upstream", filters=TraversalFilters(as_of=APR))) == {C: 0, A: 1, k: 1}
    assert reached(lineage(index, [C], "upstream")) == {C: 0, A: 1, k: 1}
    assert reached(lineage(index, [C], "upstream", filters=TraversalFilters(as_of=DEC))) == {C: 0}
    # the version boundary: valid_from ≤ t < valid_to
    assert reached(lineage(index, [C], "upstream", filters=TraversalFilters(as_of=MAR))) == {C: 0, A: 1, k: 1}
    assert reached(lineage(index, [B], "downstream", filters=TraversalFilters(as_of=JAN))) == {B: 0, C: 1}
    assert reached(lineage(index, [B], "downstream")) == {B: 0}
    assert paths(index, B, C, filters=TraversalFilters(as_of=FEB)) and not paths(index, B, C)


# ---------------------------------------------------------------------- cycles


def test_cycles_terminate_and_keep_shortest_distances(tmp_path: Path) -> None:
    x, y, z, w = (f"hive.table/db.{n}" for n in "xyzw")
    with make_store(tmp_path, "cycle") as store:
        store.ingest(
            LineageBatch(edges=[flow(x, y, "p1"), flow(y, z, "p2"), flow(z, x, "p3"), flow(z, w, "p4")])
        )
        index = GraphIndex.from_store(store)
    down = lineage(index, [x], "downstream")
    assert reached(down) == {x: 0, y: 1, z: 2, w: 3}
    # the edge back into the start is part of the drawn subgraph
    assert down.edge_pairs() == {(x, y), (y, z), (z, x), (z, w)}
    assert reached(lineage(index, [x], "upstream")) == {x: 0, z: 1, y: 2}
    both = lineage(index, [y], "both")
    # x is one hop upstream and two downstream; z the reverse: each keeps its nearer count
    assert reached(both) == {y: 0, x: 1, z: 1, w: 2}
    sides = dict(zip(both.urns, both.sides.tolist(), strict=True))
    assert sides[x] == sides[z] == UPSTREAM | DOWNSTREAM
    assert [[index.edge(e).target for e in p] for p in paths(index, x, w)] == [[y, z, w]]
    assert paths(index, x, x) == []


# ---------------------------------------------------------------------- paths


def diamonds(tmp_path: Path) -> GraphIndex:
    """s → {m1, m2} → j → {n1, n2, n3} → t, plus a shortcut s → j, and a second, LOW,
    spark_runtime record of s → m1 (a parallel edge: one more piece of evidence, not a route).

    Routes s → t: through m1 or m2 then one of three n (2 × 3 = 6, four hops), or over the
    shortcut then one of three n (3, three hops): 9 in all.
    """
    names = ["s", "m1", "m2", "j", "n1", "n2", "n3", "t"]
    s, m1, m2, j, n1, n2, n3, t = (f"hive.table/db.{n}" for n in names)
    edges = [flow(s, m1, "p_m1"), flow(s, m2, "p_m2"), flow(m1, j, "p_j"), flow(m2, j, "p_j")]
    edges += [flow(s, j, "p_j")]
    edges += [flow(j, n, f"p_{n[-2:]}") for n in (n1, n2, n3)]
    edges += [flow(n, t, "p_t") for n in (n1, n2, n3)]
    edges += [flow(s, m1, "p_m1_rt", signal=Signal.SPARK_RUNTIME, confidence=Confidence.LOW)]
    store = make_store(tmp_path, "diamonds")
    store.ingest(LineageBatch(edges=edges))
    index = GraphIndex.from_store(store)
    store.close()
    return index


def routes(index: GraphIndex, found: list[list[int]]) -> list[list[str]]:
    """Each path as the short names of the tables it visits."""

    def short(urn: str) -> str:
        return urn.rsplit(".", 1)[1]

    return [[short(index.edge(p[0]).source)] + [short(index.edge(e).target) for e in p] for p in found]


def test_paths_counted_by_hand(tmp_path: Path) -> None:
    index = diamonds(tmp_path)
    s, t = "hive.table/db.s", "hive.table/db.t"
    found = paths(index, s, t)
    assert len(found) == 9
    named = routes(index, found)
    assert named[:3] == [["s", "j", n, "t"] for n in ("n1", "n2", "n3")]  # shortest first
    assert sorted(map(tuple, named[3:])) == sorted(
        ("s", m, "j", n, "t") for m in ("m1", "m2") for n in ("n1", "n2", "n3")
    )
    # every hop is an edge whose ends chain up
    for path in found:
        hops = [index.edge(e) for e in path]
        assert all(a.target == b.source for a, b in itertools.pairwise(hops))
    # the parallel s → m1 is represented by its surest record
    s_m1 = {index.edge(p[0]).process for p in found if index.edge(p[0]).target.endswith(".m1")}
    assert s_m1 == {"sql.job/p_m1"}

    assert len(paths(index, s, t, max_depth=3)) == 3
    assert len(paths(index, s, t, max_depth=2)) == 0
    limited = paths(index, s, t, max_paths=4)
    assert len(limited) == 4 and [len(p) for p in limited] == [3, 3, 3, 4]
    # filters apply to paths too; the runtime record alone joins only s → m1
    assert len(paths(index, s, t, filters=TraversalFilters(signals={Signal.SQL_STATIC}))) == 9
    assert len(paths(index, s, t, filters=TraversalFilters(signals={Signal.SPARK_RUNTIME}))) == 0
    assert paths(index, t, s) == []  # paths run downstream only


# ---------------------------------------------------------------------- impact


def test_impact_of_assets(lake: GraphIndex) -> None:
    found = impact(lake, [B])
    # b reaches e over c and over d: two shortest routes, and so on down from e
    # nearest first, then by URN ("ai.model/g" < "kafka.topic/f_out")
    assert [(i.asset, i.distance, i.paths) for i in found] == [
        (C, 1, 1),
        (D, 1, 1),
        (E, 2, 2),
        (G, 3, 2),
        (F, 3, 2),
        (H, 4, 2),
    ]
    assert {i.asset: i.kind for i in found}[F] == "kafka.topic"
    assert all(i.via_fields == () for i in found)
    assert [
        (i.asset, i.distance)
        for i in impact(lake, [A, D], filters=TraversalFilters(min_confidence=Confidence.MEDIUM))
    ] == [
        (C, 1),
        (E, 1),
        (F, 2),
    ]


def test_impact_of_a_field_counts_for_its_asset(lake: GraphIndex) -> None:
    found = impact(lake, [fld(B, "country")])
    assert [(i.asset, i.distance, i.paths, i.via_fields) for i in found] == [
        (C, 1, 1, (fld(C, "score_sum"),)),
        (D, 1, 1, (fld(D, "x"),)),
        (E, 2, 2, (fld(E, "flag"),)),
    ]


def test_impact_shortest_route_counts(tmp_path: Path) -> None:
    index = diamonds(tmp_path)
    found = {i.asset.rsplit(".", 1)[1]: (i.distance, i.paths) for i in impact(index, ["hive.table/db.s"])}
    # j is one hop away over the shortcut (the two-hop routes over m1/m2 are not shortest);
    # t is three hops away over the shortcut and any of n1..n3. The parallel s → m1 is one route.
    assert found == {
        "m1": (1, 1),
        "m2": (1, 1),
        "j": (1, 1),
        "n1": (2, 1),
        "n2": (2, 1),
        "n3": (2, 1),
        "t": (3, 3),
    }
    found = {i.asset.rsplit(".", 1)[1]: (i.distance, i.paths) for i in impact(index, ["hive.table/db.m1"])}
    assert found == {"j": (1, 1), "n1": (2, 1), "n2": (2, 1), "n3": (2, 1), "t": (3, 3)}


# ---------------------------------------------------------------------- errors and refresh


def test_unknown_node_is_named(lake: GraphIndex) -> None:
    with pytest.raises(UnknownNodeError) as caught:
        lineage(lake, [A, "hive.table/db.cc"], "downstream")
    assert isinstance(caught.value, KeyError)
    assert caught.value.urn == "hive.table/db.cc"
    assert "hive.table/db.cc" in str(caught.value)
    assert C in caught.value.suggestions
    # nothing else ends in "user_idd": the suggestions come from the asset's other fields
    with pytest.raises(UnknownNodeError) as caught:
        lineage(lake, [fld(C, "user_idd")], "upstream")
    assert caught.value.suggestions[0] == fld(C, "user_id")
    with pytest.raises(UnknownNodeError):
        impact(lake, ["kafka.topic/nope"])
    with pytest.raises(UnknownNodeError):
        paths(lake, A, "nonsense")
    with pytest.raises(ValueError):
        lineage(lake, [A], "sideways")  # type: ignore[arg-type]


def test_index_refreshes_only_when_the_store_changed(lake_store: LineageStore) -> None:
    cache = IndexCache(lake_store)
    first = cache.get()
    assert cache.get() is first and cache.builds == 1

    lake_store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))
    second = cache.get()
    assert second is not first and (cache.builds, cache.catch_ups) == (1, 1)  # caught up, not rebuilt
    assert second.version > first.version == lake_store.graph_version() - 1
    assert "hive.table/db.report" in reached(lineage(second, [A], "downstream"))
    assert "hive.table/db.report" not in first.positions
    assert cache.get() is second


def test_once_builds_are_slow_readers_keep_the_old_index_while_one_is_built_behind_them(
    lake_store: LineageStore,
) -> None:
    cache = IndexCache(lake_store, wait_budget=-1.0)  # every build counts as slow
    first = cache.get()  # no index yet: the caller waits for it
    lake_store.ingest(LineageBatch(edges=[flow(H, "hive.table/db.report", "job7")]))

    assert cache.get() is first  # stale, at once; a catch-up starts behind it
    deadline = time.monotonic() + 10
    while cache.catch_ups < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    second = cache.get()
    assert (cache.builds, cache.catch_ups) == (1, 1)
    assert second.version == lake_store.graph_version()
    assert "hive.table/db.report" in reached(lineage(second, [A], "downstream"))


# ---------------------------------------------------------------------- vectorised helpers


def test_dedupe_keeps_each_node_once_on_both_paths() -> None:
    from tracelake.graph.traverse import _dedupe

    n = 1000
    stamp, mark = np.empty(n, dtype=np.int64), np.zeros(n, dtype=bool)
    small = np.array([7, 3, 7, 7, 999, 3], dtype=np.int64)  # 6 * 32 < 1000: the stamp path
    big = np.random.default_rng(1).integers(0, n, 500)  # the bitmap path
    assert sorted(_dedupe(small, stamp, mark).tolist()) == [3, 7, 999]
    assert _dedupe(big, stamp, mark).tolist() == sorted(set(big.tolist()))
    assert not mark.any()  # scratch left clean for the next level


def test_store_ids_map_to_positions_dense_or_sparse() -> None:
    from tracelake.graph.index import positions_of

    dense = np.array([1, 2, 5], dtype=np.int64)
    assert positions_of(dense, np.array([5, 3, 7, -1, 1])).tolist() == [2, -1, -1, -1, 0]
    sparse = np.array([3, 10, 10_000_000], dtype=np.int64)  # too sparse for a lookup table
    assert positions_of(sparse, np.array([10, -1, 5, 10_000_000, 20_000_000])).tolist() == [1, -1, -1, 2, -1]
    assert positions_of(np.empty(0, dtype=np.int64), np.array([1])).tolist() == [-1]
    many = np.arange(1, 1001, dtype=np.int64) * 2  # dense ids 2, 4, … 2000; a few asked: searched
    assert positions_of(many, np.array([2000, 2, 3, -1, 2002, 1000])).tolist() == [999, 0, -1, -1, -1, 499]


def test_the_index_of_a_node_with_a_huge_kind_stays_small(tmp_path: Path) -> None:
    """One process of a 200,000-character kind (an OpenLineage jobType as sent) among 2,000 nodes:
    the kinds once were a numpy string array as wide as the longest kind for every node (1.6 GB
    here), which the fuzzing of OpenLineage events found as an out-of-memory kill."""
    import tracemalloc

    from tracelake.model import Asset, Process

    huge = "k" * 200_000
    with LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}") as store:
        assets = [Asset(f"hive.table/db.t{number}") for number in range(2_000)]
        store.ingest(
            LineageBatch(assets=assets, processes=[Process("openlineage.job/ns/huge", "huge", kind="job")])
        )
        snapshot = store.snapshot()
        # The store now leaves a kind over its column's 200 characters out; the index must still
        # not cost what the longest kind it is given costs, for every node.
        job = snapshot.node_urns.index("openlineage.job/ns/huge")
        snapshot.node_kinds[job] = huge
        tracemalloc.start()
        index = GraphIndex.from_snapshot(snapshot)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, f"{peak / 2**20:.0f} MiB"
    assert index.kind(index.positions["openlineage.job/ns/huge"]) == huge
    assert index.kind(index.positions["hive.table/db.t7"]) == "hive.table"


# ---------------------------------------------------------------------- scratch kept between walks


def test_walks_answer_the_same_with_their_scratch_reused(lake: GraphIndex) -> None:
    starts = [A, B, C, D, E, G, fld(B, "country"), fld(C, "score_sum")]
    fresh = {}
    for start, direction in itertools.product(starts, ("downstream", "upstream")):
        _Scratch._pools.clear()  # the reference: every walk on arrays made for it
        fresh[start, direction] = reached(lineage(lake, [start], direction))
    for start, direction in [*fresh, *reversed(fresh), *fresh]:
        assert reached(lineage(lake, [start], direction)) == fresh[start, direction]


def test_a_walk_keeps_its_distances_while_another_runs_and_gives_back_clean_arrays(lake: GraphIndex) -> None:
    flt = edge_filter(lake)
    first = _bfs(lake, lake.downstream, np.array([lake.positions[A]]), flt, None)
    before = first.dist[np.arange(lake.n_nodes)]
    second = _bfs(lake, lake.downstream, np.array([lake.positions[B]]), flt, None)
    assert first.dist is not second.dist
    assert np.array_equal(first.dist[np.arange(lake.n_nodes)], before)
    del first, second
    pool = _Scratch._pools[lake.n_nodes]
    assert len(pool) >= 2
    assert all(not s.level.any() and not s.mark.any() for s in pool)
