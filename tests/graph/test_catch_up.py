"""An index caught up from the store's change log answers exactly as one built from the store.

Random ingest sequences into a real SQLite store: processes observed again with other edges,
late observations (an instant before the latest, which splits or retimes stored versions),
repeated observations, new tables and columns, tables dropped, recreated and renamed. After each
ingest the index is caught up from the one before (itself caught up, so catch-ups chain) and
compared, node by node and edge version by edge version, with an index built from the whole
store. Then the kept index: a new process opens the one on disk, whatever its version, and
catches it up.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracelake.graph import IndexCache
from tracelake.graph import catch_up as catch_up_module
from tracelake.graph.catch_up import catch_up
from tracelake.graph.index import GraphIndex, gather_slots
from tracelake.model import AssetChange, FlowEdge, Lifecycle, LineageBatch, Process, Signal, Transformation
from tracelake.store import LineageStore

T = "hive.table/db."
START = datetime(2025, 1, 1, tzinfo=UTC)
TABLES = ("a", "b", "c", "d")
COLUMNS = ("k", "v")
# more processes than steps often: a new one is appended after the index (a tail), an old one
# observed again is merged into it
PROCESSES = tuple(f"sql.job/p{i}" for i in range(8))


def node_of(table: str, column: str | None) -> str:
    return f"{T}{table}" + (f"#{column}" if column else "")


def flow(source: str, target: str) -> FlowEdge:
    """An edge of no process yet: `batch_of` gives it the observed one."""
    return FlowEdge(source, target, "", Signal.SQL_STATIC)


edges = st.builds(
    lambda source, target, column, transformation: FlowEdge(
        node_of(source, column),
        node_of(target, column),
        "",
        Signal.SQL_STATIC,
        transformation=transformation if column else None,
    ),
    st.sampled_from(TABLES),
    st.sampled_from(TABLES),
    st.sampled_from((None, *COLUMNS)),
    st.sampled_from((Transformation.IDENTITY, Transformation.AGGREGATION)),
)
observations = st.builds(
    lambda process, flows, hour: ("observe", process, flows, hour),
    st.sampled_from(PROCESSES),
    st.lists(edges, max_size=4),
    st.integers(0, 8),  # any order: late observations split and retime stored versions
)
lifecycle = st.builds(
    lambda change, table, other, hour: ("change", change, table, other, hour),
    st.sampled_from((Lifecycle.DROP, Lifecycle.CREATE, Lifecycle.RENAME)),
    st.sampled_from(TABLES),
    st.sampled_from(TABLES),
    st.integers(0, 8),
)


def batch_of(step: tuple[Any, ...]) -> LineageBatch:
    at = START + timedelta(hours=step[-1])
    if step[0] == "observe":
        _, process, flows, _ = step
        return LineageBatch(
            processes=[Process(process, name=process)],
            edges=[
                FlowEdge(e.source, e.target, process, e.signal, transformation=e.transformation)
                for e in flows
            ],
            observed_at=at,
        )
    _, change, table, other, _ = step
    previous = node_of(other, None) if change == Lifecycle.RENAME and other != table else None
    if change == Lifecycle.RENAME and previous is None:
        change = Lifecycle.ALTER
    return LineageBatch(
        changes=[AssetChange(node_of(table, None), change, at, Signal.SQL_STATIC, previous=previous)]
    )


def described(index: GraphIndex) -> dict[str, Any]:
    """Everything an index answers from, by URN and store id (positions and codes may differ)."""
    urns = list(index.urns)
    nodes = {
        urn: (index.node_type(p), index.kind(p), index.asset_urn(p), int(index.node_ids[p]))
        for p, urn in enumerate(urns)
    }
    edge_rows = [
        (int(index.edge_ids[e]), *_edge_fields(index, e), bool(index.edge_is_field[e]))
        for e in range(index.n_edges)
    ]
    adjacency = {}
    for direction in ("downstream", "upstream"):
        csr = getattr(index, direction)
        assert np.array_equal(csr.degrees, np.diff(csr.indptr)), "degrees disagree with the row pointers"
        adjacency[direction] = {
            urns[v]: [
                (int(index.edge_ids[csr.edges[i]]), urns[int(csr.neighbours[i])], bool(csr.is_open[i]))
                for i in gather_slots(csr, np.array([v], dtype=np.int64))[0].tolist()
            ]
            for v in range(index.n_nodes)
        }
    return {
        "version": index.version,
        "nodes": nodes,
        "edges": edge_rows,
        "adjacency": adjacency,
        "ended": dict(index.ended),
        "positions": all(index.positions[urn] == p for p, urn in enumerate(urns)),
    }


def _edge_fields(index: GraphIndex, e: int) -> tuple[Any, ...]:
    edge = index.edge(e)
    return (
        edge.source,
        edge.target,
        edge.process,
        edge.signal,
        edge.transformation,
        edge.valid_from,
        edge.valid_to,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(observations, observations, lifecycle), min_size=1, max_size=12),
    st.sampled_from((0, catch_up_module.TAIL_MIN)),
)
def test_a_caught_up_index_answers_as_one_built_from_the_store(
    steps: list[tuple[Any, ...]], tail_min: int
) -> None:
    """With appends kept in a tail (the default) and with every change merged (no tail minimum,
    so a tail only while it is within its share of the base), chained over random ingests."""
    with (
        tempfile.TemporaryDirectory() as folder,
        LineageStore(f"sqlite:///{folder}/lineage.db") as store,
        patch.object(catch_up_module, "TAIL_MIN", tail_min),
    ):
        index = GraphIndex.from_store(store)
        for step in steps:
            store.ingest(batch_of(step))
            caught = catch_up(index, store)
            assert caught is not None
            built = GraphIndex.from_store(store)
            assert described(caught) == described(built)
            assert described(caught)["positions"]
            index = caught


def test_a_new_process_opens_the_kept_index_and_catches_it_up(tmp_path: Path) -> None:
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    steps = [
        ("observe", "sql.job/p0", [flow(node_of("a", "k"), node_of("b", "k"))], 2),
        (
            "observe",
            "sql.job/p1",
            [flow(node_of("b", None), node_of("c", None))],
            3,
        ),
    ]
    for step in steps:
        store.ingest(batch_of(step))
    first = IndexCache(store, root=tmp_path / "index", keep_after=0.0)
    first.get()
    assert (first.builds, first.loads) == (1, 0)
    more = [
        ("observe", "sql.job/p0", [flow(node_of("a", "v"), node_of("d", "v"))], 1),
        ("change", Lifecycle.DROP, "c", "c", 4),
        (
            "observe",
            "sql.job/p2",
            [flow(node_of("d", None), node_of("a", None))],
            5,
        ),
    ]
    for step in more:
        store.ingest(batch_of(step))

    later = IndexCache(store, root=tmp_path / "index", keep_after=0.0)  # as a new process would
    index = later.get()
    assert (later.loads, later.catch_ups, later.builds) == (1, 1, 0)
    assert isinstance(index.edge_ids, np.ndarray)
    assert described(index) == described(GraphIndex.from_store(store))
    assert node_of("d", "v") in index.positions and index.urns[index.positions[node_of("d", "v")]] == node_of(
        "d", "v"
    )
    store.close()


def test_a_kept_index_older_than_the_change_log_is_built_again(tmp_path: Path) -> None:
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    first = (
        "observe",
        "sql.job/p0",
        [flow(node_of("a", None), node_of("b", None))],
        1,
    )
    store.ingest(batch_of(first))
    IndexCache(store, root=tmp_path / "index", keep_after=0.0).get()
    with store.engine.begin() as conn:  # as if the log began after that index was kept
        conn.exec_driver_sql("UPDATE store_state SET value = 5 WHERE key = 'graph_log_since'")
    second = (
        "observe",
        "sql.job/p1",
        [flow(node_of("b", None), node_of("c", None))],
        2,
    )
    store.ingest(batch_of(second))

    later = IndexCache(store, root=tmp_path / "index", keep_after=0.0)
    index = later.get()
    assert (later.loads, later.catch_ups, later.builds) == (1, 0, 1)
    assert described(index) == described(GraphIndex.from_store(store))
    store.close()


@pytest.mark.postgres
def test_catching_up_on_postgres(postgres_url: str) -> None:
    """The same comparison on PostgreSQL (its RETURNING, row-value IN and locks), one seeded
    sequence of fifty steps."""
    rng = random.Random(5)

    def step() -> tuple[Any, ...]:
        at = rng.randrange(9)
        if rng.random() < 0.3:
            change = rng.choice((Lifecycle.DROP, Lifecycle.CREATE, Lifecycle.RENAME))
            return ("change", change, rng.choice(TABLES), rng.choice(TABLES), at)
        flows = [
            flow(node_of(rng.choice(TABLES), column), node_of(rng.choice(TABLES), column))
            for column in rng.choices((None, *COLUMNS), k=rng.randrange(4))
        ]
        return ("observe", rng.choice(PROCESSES), flows, at)

    drawn = [step() for _ in range(50)]
    with LineageStore(postgres_url) as store:
        index = GraphIndex.from_store(store)
        for step in drawn:
            store.ingest(batch_of(step))
            caught = catch_up(index, store)
            assert caught is not None
            assert described(caught) == described(GraphIndex.from_store(store)), step
            index = caught
