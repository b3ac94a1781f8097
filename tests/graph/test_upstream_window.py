"""The window walk of root cause against plain Python on generated graphs.

Generated: up to 8 tables, edge versions between them with random validity (open or closed,
from any hour, several versions of one pair, self-loops), a random window. The reference is the
definition written out naively: an edge counts if it is in force at some moment of the window
(valid_from ≤ until and valid_to > since); distances are a textbook BFS over those edges; a pair
appeared if some version of it holds at `until` and none at `since`, vanished the other way
round.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelake.graph.index import ASSET, PROCESS, GraphIndex
from tracelake.graph.upstream_window import upstream_window
from tracelake.store.records import OPEN_END, GraphSnapshot

TABLES = 8
PROCESSES = 3

edge_versions = st.lists(
    st.tuples(
        st.integers(0, TABLES - 1),  # source
        st.integers(0, TABLES - 1),  # target
        st.integers(0, PROCESSES - 1),
        st.integers(0, 20),  # valid_from (hours)
        st.one_of(st.none(), st.integers(1, 12)),  # lasts this long, or open
    ),
    max_size=25,
)


def index_of(versions: list[tuple[int, int, int, int, int | None]]) -> GraphIndex:
    """Tables are store ids 1…8 (positions 0…7), processes 9…11."""
    n = TABLES + PROCESSES
    types = [ASSET] * TABLES + [PROCESS] * PROCESSES
    return GraphIndex.from_snapshot(
        GraphSnapshot(
            version=1,
            node_ids=np.arange(1, n + 1, dtype=np.int64),
            node_urns=[f"hive.table/db.t{i}" for i in range(TABLES)]
            + [f"sql.job/p{i}" for i in range(PROCESSES)],
            node_types=np.array(types, dtype=np.int8),
            node_kinds=["hive.table"] * TABLES + ["sql.job"] * PROCESSES,
            node_parents=np.full(n, -1, dtype=np.int64),
            edge_ids=np.arange(1, len(versions) + 1, dtype=np.int64),
            edge_source=np.array([v[0] + 1 for v in versions], dtype=np.int64),
            edge_target=np.array([v[1] + 1 for v in versions], dtype=np.int64),
            edge_process=np.array([TABLES + v[2] + 1 for v in versions], dtype=np.int64),
            edge_signal=np.zeros(len(versions), dtype=np.int8),
            edge_confidence=np.full(len(versions), 3, dtype=np.int8),
            edge_transformation=np.full(len(versions), -1, dtype=np.int8),
            edge_valid_from=np.array([v[3] for v in versions], dtype=np.int64),
            edge_valid_to=np.array(
                [OPEN_END if v[4] is None else v[3] + v[4] for v in versions], dtype=np.int64
            ),
        )
    )


def holds(version: tuple[int, int, int, int, int | None], moment: int) -> bool:
    start, lasts = version[3], version[4]
    return start <= moment and (lasts is None or moment < start + lasts)


def in_window(version: tuple[int, int, int, int, int | None], since: int, until: int) -> bool:
    return version[3] <= until and (version[4] is None or version[3] + version[4] > since)


@settings(max_examples=300, deadline=None)
@given(edge_versions, st.integers(0, TABLES - 1), st.integers(0, 20), st.integers(1, 10))
def test_the_walk_and_the_input_changes_are_those_of_the_naive_definition(
    versions: list[tuple[int, int, int, int, int | None]], start: int, since: int, length: int
) -> None:
    until = since + length
    index = index_of(versions)
    walk = upstream_window(index, start, since, until)

    # distances: BFS over the edges in force in the window, target → source
    into: dict[int, list[int]] = {}
    for version in versions:
        if in_window(version, since, until):
            into.setdefault(version[1], []).append(version[0])
    distance, queue = {start: 0}, deque([start])
    while queue:
        node = queue.popleft()
        for source in into.get(node, ()):
            if source not in distance:
                distance[source] = distance[node] + 1
                queue.append(source)
    assert walk.distance == distance

    # each route is as long as its node's distance, and made of edges in force in the window
    for node, hops in distance.items():
        route = walk.route(node)
        assert len(route) == hops
        position = node
        for edge in route:
            assert int(index.edge_source[edge]) == position
            assert in_window(versions[edge], since, until)
            position = int(index.edge_target[edge])
        assert position == start

    # a process writes a node of the walk, at the nearest such node
    writes: dict[int, int] = {}
    for version in versions:
        if in_window(version, since, until) and version[1] in distance:
            process = TABLES + version[2]
            writes[process] = min(writes.get(process, 99), distance[version[1]])
    assert {process: distance[node] for process, node in walk.writes.items()} == writes

    # pairs into the walk whose presence differs between since and until
    expected = set()
    for source, target in {(v[0], v[1]) for v in versions if v[1] in distance}:
        pair = [v for v in versions if (v[0], v[1]) == (source, target)]
        was, now = any(holds(v, since) for v in pair), any(holds(v, until) for v in pair)
        if was != now:
            if now:
                at = min(v[3] for v in pair if v[3] > since)
            else:
                at = max(v[3] + v[4] for v in pair if v[4] is not None and v[3] + v[4] <= until)
            expected.add((source, target, at, now))
    assert {(c.source, c.target, c.at_us, c.appeared) for c in walk.input_changes} == expected


def test_a_depth_of_one_stops_after_the_direct_inputs() -> None:
    # t2 ← t1 ← t0, all open
    index = index_of([(1, 2, 0, 0, None), (0, 1, 0, 0, None)])
    assert upstream_window(index, 2, 5, 10, depth=1).distance == {2: 0, 1: 1}
    assert upstream_window(index, 2, 5, 10).distance == {2: 0, 1: 1, 0: 2}
