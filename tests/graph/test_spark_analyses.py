"""Whole-graph analyses on real Spark (`tracelake.graph.spark`) over a lake exported from a real
store: hand-worked answers on a small graph, then the in-memory analyses' own answers on random
graphs with cycles, every confidence and transformation, stop kinds and zones — the same labels
at the same depth by the same route, the same closures, PageRank within 1e-9, the same policy
violations — and the CLI's `--engine spark` storing what the in-memory engine stores.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tracelake.graph.hotness import hotness as memory_hotness
from tracelake.graph.index import GraphIndex
from tracelake.graph.policy import Policy, check
from tracelake.graph.propagate import CARRYING, PropagationRules, propagate
from tracelake.graph.spark.hotness import hotness
from tracelake.graph.spark.lake import read_lake
from tracelake.graph.spark.policy import violations
from tracelake.graph.spark.walk import closures, propagation
from tracelake.graph.traverse import TraversalFilters, lineage
from tracelake.model import Asset, Confidence, FlowEdge, LineageBatch, Process, Signal, Transformation
from tracelake.store import LineageStore
from tracelake.store.facts import asset_facts
from tracelake.store.labels import LabelStore
from tracelake.store.lake import export_lake

T = "hive.table/db."
ADS = "hive.table/ads."
AT = datetime(2026, 1, 5, tzinfo=UTC)
C, M, L = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW
ID, TR, AG, FI = (
    Transformation.IDENTITY,
    Transformation.TRANSFORMATION,
    Transformation.AGGREGATION,
    Transformation.FILTER,
)


def field_flow(
    source: str, target: str, process: str, confidence: Confidence, transformation: Transformation
) -> FlowEdge:
    return FlowEdge(source, target, process, Signal.SQL_STATIC, confidence, transformation)


def hand_batch() -> LineageBatch:
    """src#rel → mid#rel (copied), src#rel → mid#flag (a filter: carries nothing), mid#rel → low#rel
    (LOW), mid#rel → ads.t#rel (a stop zone) → after#rel, mid#rel → agg#n (MEDIUM aggregation),
    agg#n → mid#rel (a cycle); a model of kind ai.model reached from agg#n and feeding out#x."""
    flows = [
        ("p1", f"{T}src#rel", f"{T}mid#rel", C, ID),
        ("p1", f"{T}src#rel", f"{T}mid#flag", C, FI),
        ("p2", f"{T}mid#rel", f"{T}low#rel", L, TR),
        ("p3", f"{T}mid#rel", f"{ADS}t#rel", C, ID),
        ("p4", f"{ADS}t#rel", f"{T}after#rel", C, ID),
        ("p5", f"{T}mid#rel", f"{T}agg#n", M, AG),
        ("p6", f"{T}agg#n", f"{T}mid#rel", C, ID),
        ("p7", f"{T}agg#n", "ai.model/m#w", C, TR),
        ("p8", "ai.model/m#w", f"{T}out#x", C, ID),
    ]
    edges: list[FlowEdge] = []
    for process, source, target, confidence, transformation in flows:
        edges.append(field_flow(source, target, f"sql.job/{process}", confidence, transformation))
        asset_of = (source.split("#")[0], target.split("#")[0])
        edges.append(FlowEdge(*asset_of, f"sql.job/{process}", Signal.SQL_STATIC, confidence))
    processes = [Process(f"sql.job/p{i}", name=f"p{i}") for i in range(1, 9)]
    return LineageBatch(processes=processes, edges=edges, observed_at=AT)


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[LineageStore, Any]:
    folder = tmp_path_factory.mktemp("hand")
    store = LineageStore(f"sqlite:///{folder / 'lineage.db'}")
    store.ingest(hand_batch())
    LabelStore(store).declare(f"{T}src#rel", ["religion"])
    export_lake(store, folder / "lake")
    return store, read_lake(spark, folder / "lake")


def test_propagation_by_hand(hand: tuple[LineageStore, Any]) -> None:
    _, graph = hand
    rules = PropagationRules(stop_zones=(ADS,), stop_kinds=frozenset({"ai.model"}))
    rows = propagation(graph, None, rules).collect()  # the lake's declared labels
    found = {(r.label, r.urn): (r.depth, r.parent_urn, r.source_urn, r.stopped) for r in rows}
    src = f"{T}src#rel"
    assert found == {
        ("religion", f"{T}mid#rel"): (1, src, src, False),
        ("religion", f"{ADS}t#rel"): (2, f"{T}mid#rel", src, True),  # reached, not left
        ("religion", f"{T}agg#n"): (2, f"{T}mid#rel", src, False),  # MEDIUM carries at MEDIUM
        ("religion", "ai.model/m#w"): (3, f"{T}agg#n", src, True),  # a stop kind
    }
    # not mid#flag (a filter), low#rel (LOW), after#rel (past the zone), out#x (past the model)
    strict = propagation(graph, None, PropagationRules(min_confidence=Confidence.HIGH, max_depth=5)).collect()
    assert {r.urn for r in strict} == {f"{T}mid#rel", f"{ADS}t#rel", f"{T}after#rel"}
    one_hop = propagation(graph, {f"{T}agg#n": ["x"]}, PropagationRules(max_depth=1)).collect()
    assert {(r.label, r.urn, r.depth) for r in one_hop} == {("x", f"{T}mid#rel", 1), ("x", "ai.model/m#w", 1)}


def test_closures_by_hand(hand: tuple[LineageStore, Any]) -> None:
    _, graph = hand
    rows = closures(graph, [f"{T}src", "ai.model/m"], "downstream").collect()
    found = {(r.root, r.urn): r.depth for r in rows}
    assert found == {
        (f"{T}src", f"{T}src"): 0,
        (f"{T}src", f"{T}mid"): 1,
        (f"{T}src", f"{T}low"): 2,
        (f"{T}src", f"{ADS}t"): 2,
        (f"{T}src", f"{T}agg"): 2,
        (f"{T}src", f"{T}after"): 3,
        (f"{T}src", "ai.model/m"): 3,
        (f"{T}src", f"{T}out"): 4,
        ("ai.model/m", "ai.model/m"): 0,
        ("ai.model/m", f"{T}out"): 1,
    }
    up = closures(graph, [f"{T}mid"], "upstream", TraversalFilters(depth=1)).collect()
    assert {(r.urn, r.depth) for r in up} == {(f"{T}mid", 0), (f"{T}src", 1), (f"{T}agg", 1)}


def test_pagerank_by_hand(tmp_path: Path, spark: Any) -> None:
    """a → b and a → c: b and c each vote for a, and a (reading nothing) spreads evenly. With
    d = 0.85 the fixed point solves b = c = 0.05 + 0.85·a/3 and a + 2b = 1: b = 1/4.7, a = 2.7/4.7."""
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    edges = [FlowEdge(f"{T}a", f"{T}{x}", f"sql.job/{x}", Signal.SQL_STATIC) for x in ("b", "c")]
    store.ingest(LineageBatch(edges=edges, observed_at=AT))
    export_lake(store, tmp_path / "lake")
    scores = {r.urn: r.score for r in hotness(read_lake(spark, tmp_path / "lake"), tolerance=1e-10).collect()}
    assert scores == pytest.approx({f"{T}a": 2.7 / 4.7, f"{T}b": 1 / 4.7, f"{T}c": 1 / 4.7}, rel=1e-9)


# ---------------------------------------------------------------------- against the in-memory engine


def random_store(path: Path, seed: int) -> LineageStore:
    """A random warehouse: 24 tables (some in `ads.`, some models) of 3 columns, 40 processes each
    reading 1–3 tables (any table: cycles happen) into one, column edges of every transformation
    and confidence, the table edges they imply; a few processes observed again later with other
    edges (closed versions), and declared labels on random columns."""
    rng = random.Random(seed)
    tables = [f"{ADS if i % 7 == 3 else T}t{i}" for i in range(20)] + [f"ai.model/m{i}" for i in range(4)]
    store = LineageStore(f"sqlite:///{path}")
    facts = [
        Asset(t, layer=rng.choice(("raw", "dw", "ads", None)), security_level=rng.choice((None, 1, 2, 3)))
        for t in tables
    ]
    store.ingest(LineageBatch(assets=facts))

    def observe(process: str, at: datetime) -> None:
        target = rng.choice(tables)
        edges = []
        for source in rng.sample(tables, rng.randint(1, 3)):
            confidence = rng.choice((C, C, M, L))
            edges.append(FlowEdge(source, target, process, Signal.SQL_STATIC, confidence))
            for column in rng.sample(("a", "b", "c"), rng.randint(1, 3)):
                transformation = rng.choice(tuple(Transformation))
                other = rng.choice(("a", "b", "c"))
                edges.append(
                    FlowEdge(
                        f"{source}#{column}",
                        f"{target}#{other}",
                        process,
                        Signal.SQL_STATIC,
                        confidence,
                        transformation,
                    )
                )
        store.ingest(LineageBatch(processes=[Process(process, name=process)], edges=edges, observed_at=at))

    for i in range(40):
        observe(f"sql.job/p{i}", AT)
    # two copies of t0 ⋈ t1 in two layers: what `redundant` finds
    store.ingest(LineageBatch(assets=[Asset(f"{T}copy_dw", layer="dw"), Asset(f"{ADS}copy", layer="ads")]))
    for copy in (f"{T}copy_dw", f"{ADS}copy"):
        edges = [FlowEdge(f"{T}t{i}", copy, f"sql.job/{copy}", Signal.SQL_STATIC) for i in (0, 1)]
        edges += [
            FlowEdge(f"{T}t0#{c}", f"{copy}#{c}", f"sql.job/{copy}", Signal.SQL_STATIC, C, ID) for c in "abc"
        ]
        store.ingest(
            LineageBatch(processes=[Process(f"sql.job/{copy}", name=copy)], edges=edges, observed_at=AT)
        )
    for i in rng.sample(range(40), 8):
        observe(f"sql.job/p{i}", AT + timedelta(days=1))
    labels = LabelStore(store)
    for label in ("religion", "email", "age"):
        for table in rng.sample(tables, 2):
            labels.declare(f"{table}#{rng.choice('abc')}", [label])
    return store


@pytest.fixture(scope="module", params=[1, 2])
def twin(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> tuple[GraphIndex, Any, LineageStore]:
    folder = tmp_path_factory.mktemp(f"twin{request.param}")
    store = random_store(folder / "lineage.db", request.param)
    export_lake(store, folder / "lake")
    return GraphIndex.from_store(store), read_lake(spark, folder / "lake"), store


RULES = [
    PropagationRules(),
    PropagationRules(
        min_confidence=Confidence.LOW, transformations=frozenset(Transformation), stop_zones=(ADS,)
    ),
    PropagationRules(stop_kinds=frozenset({"ai.model"}), max_depth=3, transformations=CARRYING),
]


@pytest.mark.parametrize("rules", RULES, ids=["defaults", "everything-but-ads", "models-stop-depth-3"])
def test_propagation_equals_the_in_memory_one(
    twin: tuple[GraphIndex, Any, LineageStore], rules: PropagationRules
) -> None:
    index, graph, store = twin
    declared = LabelStore(store).declared()
    memory = propagate(index, declared, rules)
    expected = {
        (walk.label, index.urns[int(p)]): (
            int(walk.dist[p]),
            memory.path(walk, int(p)),
            bool(walk.stopped[p]),
        )
        for walk in memory.walks.values()
        for p in walk.reached
    }
    assert expected, "the random graph should spread something"
    rows = propagation(graph, declared, rules).collect()
    parents = {(r.label, r.urn): r.parent_urn for r in rows}

    def route(label: str, urn: str) -> tuple[str, ...]:
        return (*route(label, parents[(label, urn)]), urn) if (label, urn) in parents else (urn,)

    found = {(r.label, r.urn): (r.depth, route(r.label, r.urn), r.stopped) for r in rows}
    assert found == expected


CLOSURES = [
    ("downstream", TraversalFilters()),
    ("upstream", TraversalFilters(depth=2, min_confidence=Confidence.MEDIUM)),
    (
        "both",
        TraversalFilters(
            as_of=AT + timedelta(hours=12), transformations=[ID, AG], asset_kinds=["hive.table"]
        ),
    ),
]


@pytest.mark.parametrize(
    ("direction", "filters"), CLOSURES, ids=["downstream", "upstream-filtered", "both-as-of"]
)
def test_closures_equal_the_in_memory_lineage(
    twin: tuple[GraphIndex, Any, LineageStore], direction: str, filters: TraversalFilters
) -> None:
    index, graph, _ = twin
    roots = [f"{T}t0", f"{T}t1#a", "ai.model/m0", f"{ADS}t3"]
    expected = {
        (root, urn): hops
        for root in roots
        for urn, hops in lineage(index, root, direction, filters).distance_by_urn().items()  # type: ignore[arg-type]
    }
    assert len(expected) > len(roots)
    found = {(r.root, r.urn): r.depth for r in closures(graph, roots, direction, filters).collect()}  # type: ignore[arg-type]
    assert found == expected


def test_pagerank_equals_the_in_memory_one(twin: tuple[GraphIndex, Any, LineageStore]) -> None:
    """At a looser stopping rule than the default (the same for both: the same iterations), which
    keeps the test short; the bench compares them at the default on a million edges."""
    index, graph, _ = twin
    expected = dict(memory_hotness(index, tolerance=1e-8))
    found = {r.urn: r.score for r in hotness(graph, tolerance=1e-8).collect()}
    assert found.keys() == expected.keys()
    assert found == pytest.approx(expected, rel=1e-9)


def test_policy_checks_equal_the_in_memory_ones(twin: tuple[GraphIndex, Any, LineageStore]) -> None:
    index, graph, store = twin
    policies = [
        Policy("no religion in ads", "purpose", label="religion", zones=(ADS,)),
        Policy("no email in models", "purpose", label="email", zones=("ai.model/",)),
        Policy("levels", "security_level"),
        Policy("no raw to ads", "layer", source_layer="raw", target_layer="ads"),
        Policy("ads apart", "purpose", label="age", layer="ads"),
        Policy("copies", "redundant"),
    ]
    declared = LabelStore(store).declared()
    expected = check(index, policies, asset_facts(store), declared)
    assert {v.kind for v in expected} >= {"purpose", "security_level", "redundant"}
    found = violations(graph, policies, declared).collected()
    assert sorted(found, key=repr) == sorted(expected, key=repr)


def test_reliable_checkpoints_walk_the_same(hand: tuple[LineageStore, Any], tmp_path: Path) -> None:
    """`checkpointed=True` (a cluster's choice: a lost executor costs one hop) writes each hop to
    the checkpoint folder and gives the walk the in-memory checkpoints give."""
    _, graph = hand
    graph.spark.sparkContext.setCheckpointDir(str(tmp_path / "checkpoints"))
    rules = PropagationRules(stop_zones=(ADS,))
    columns = ("label", "urn", "depth", "parent_urn", "stopped")
    local = {tuple(r[c] for c in columns) for r in propagation(graph, None, rules).collect()}
    reliable = {
        tuple(r[c] for c in columns) for r in propagation(graph, None, rules, checkpointed=True).collect()
    }
    assert (
        reliable == local and len(local) == 5
    )  # mid, ads.t (stopped), agg, and past no stop kind m#w, out#x
    assert any((tmp_path / "checkpoints").rglob("part-*")), "nothing was written to the checkpoint folder"
