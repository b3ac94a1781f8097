"""The lake (`tracelake.store.lake`), read by Spark, holds the graph the store holds, however it
was brought up to date: random ingest sequences (processes observed again with other edges, late
observations that split and retime versions, tables dropped, recreated and renamed), an export
after each — appending what changed, or compacting — and after each, the current edges Spark
reads from the lake are, row for row, the edge versions of an index built from the store (the
ends of ended assets applied); its nodes are the index's. An export that dies half way leaves the
lake as it was, and the next one clears what it left.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.graph.test_catch_up import batch_of, flow, lifecycle, node_of, observations
from tracelake.graph.index import GraphIndex
from tracelake.graph.spark.lake import read_lake
from tracelake.store import LineageStore
from tracelake.store import lake as lake_module
from tracelake.store.lake import LakeError, export_lake, read_manifest


def index_edges(index: GraphIndex) -> dict[int, tuple[Any, ...]]:
    rows = {}
    for e in range(index.n_edges):
        edge = index.edge(e)
        rows[int(index.edge_ids[e])] = (
            edge.source,
            edge.target,
            edge.process,
            str(edge.signal),
            str(edge.confidence),
            None if edge.transformation is None else str(edge.transformation),
            edge.valid_from,
            edge.valid_to,
        )
    return rows


def lake_edges(spark: Any, folder: Path) -> dict[int, tuple[Any, ...]]:
    graph = read_lake(spark, folder)
    urn = {row.id: row.urn for row in graph.nodes.collect()}
    rows = {}
    for row in graph.edges.collect():
        assert row.id not in rows, f"edge {row.id} twice in the lake"
        rows[row.id] = (
            urn[row.source_id],
            urn[row.target_id],
            urn[row.process_id],
            row.signal,
            row.confidence,
            row.transformation,
            _utc(row.valid_from),
            _utc(row.valid_to),
        )
    return rows


def _utc(moment: datetime | None) -> datetime | None:
    """Spark hands timestamps back in the session's zone, naive: the same instant, made UTC."""
    return None if moment is None else moment.astimezone(UTC)


def index_nodes(index: GraphIndex) -> set[tuple[Any, ...]]:
    return {
        (int(index.node_ids[p]), urn, index.node_type(p), index.kind(p), index.asset_urn(p))
        for p, urn in enumerate(index.urns)
    }


def lake_nodes(spark: Any, folder: Path) -> set[tuple[Any, ...]]:
    rows = read_lake(spark, folder).nodes.collect()
    urn = {row.id: row.urn for row in rows}
    return {(row.id, row.urn, row.node_type, row.kind, urn.get(row.asset_id)) for row in rows}


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(st.one_of(observations, observations, lifecycle), min_size=1, max_size=5),
    st.sampled_from((lake_module.COMPACT_SHARE, 0.0, 1e9)),
)
def test_the_lake_holds_what_the_store_holds_after_every_export(
    spark: Any, steps: list[tuple[Any, ...]], compact_share: float
) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        LineageStore(f"sqlite:///{folder}/lineage.db") as store,
        patch.object(lake_module, "COMPACT_SHARE", compact_share),
    ):
        lake = Path(folder) / "lake"
        store.ingest(batch_of(("observe", "sql.job/p0", [flow(node_of("a", "k"), node_of("b", "k"))], 4)))
        export_lake(store, lake)
        for step in steps:
            store.ingest(batch_of(step))
            done = export_lake(store, lake)
            if compact_share == 1e9:
                assert not done.full  # appended, never compacted
            index = GraphIndex.from_store(store)
            assert lake_edges(spark, lake) == index_edges(index)
            assert lake_nodes(spark, lake) == index_nodes(index)
        manifest = read_manifest(lake)
        assert manifest is not None and manifest.graph_version == store.graph_version()
        # only the snapshots the manifest names are on disk
        for table, seqs in manifest.tables.items():
            assert sorted(p.name for p in (lake / table).glob("seq=*")) == sorted(f"seq={n}" for n in seqs)


def test_an_export_that_dies_half_way_leaves_the_lake_as_it_was(spark: Any, tmp_path: Path) -> None:
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    store.ingest(batch_of(("observe", "sql.job/p0", [flow(node_of("a", "k"), node_of("b", "k"))], 1)))
    lake = tmp_path / "lake"
    export_lake(store, lake)
    before = index_edges(GraphIndex.from_store(store))
    store.ingest(batch_of(("observe", "sql.job/p0", [flow(node_of("a", "v"), node_of("c", "v"))], 2)))
    real_write = lake_module._SnapshotWriter.write

    def dies_at_the_deletes(self: Any, table: str, *args: Any, **kwargs: Any) -> None:
        if table == "edge_deletes":
            raise OSError("disk full")
        real_write(self, table, *args, **kwargs)

    appending = patch.object(lake_module, "COMPACT_SHARE", 1e9)  # a tiny lake would compact
    with (
        appending,
        patch.object(lake_module._SnapshotWriter, "write", dies_at_the_deletes),
        pytest.raises(OSError),
    ):
        export_lake(store, lake)
    assert (lake / "edges" / "seq=1").is_dir()  # written, named by no manifest
    assert lake_edges(spark, lake) == before
    with appending:
        done = export_lake(store, lake)
    assert (done.seq, done.full) == (1, False)
    assert lake_edges(spark, lake) == index_edges(GraphIndex.from_store(store))


def test_another_store_or_a_bad_manifest(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    first = LineageStore(f"sqlite:///{tmp_path / 'one.db'}")
    first.ingest(batch_of(("observe", "sql.job/p0", [flow(node_of("a", "k"), node_of("b", "k"))], 1)))
    assert export_lake(first, lake).full
    assert not export_lake(first, lake).full
    other = LineageStore(f"sqlite:///{tmp_path / 'two.db'}")
    other.ingest(batch_of(("observe", "sql.job/p9", [flow(node_of("c", "k"), node_of("d", "k"))], 1)))
    again = export_lake(other, lake)
    # another store's lake is written again whole: c, c#k, d, d#k and the process
    assert again.full and again.seq == 2 and again.rows["nodes"] == 5
    (lake / "_lake.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(LakeError, match=r"_lake.json: lake format 99, this version reads 1"):
        export_lake(other, lake)
    (lake / "_lake.json").write_text("{")
    with pytest.raises(LakeError, match=r"_lake.json: not a lake manifest"):
        read_manifest(lake)
    (tmp_path / "file").write_text("x")
    with pytest.raises(LakeError, match=r"is a file, not a folder"):
        export_lake(other, tmp_path / "file")


def test_exports_into_one_lake_take_turns(tmp_path: Path) -> None:
    """A second export waits for the first (both would write snapshot 1), then appends after it."""
    import fcntl
    import threading

    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    store.ingest(batch_of(("observe", "sql.job/p0", [flow(node_of("a", "k"), node_of("b", "k"))], 1)))
    lake = tmp_path / "lake"
    export_lake(store, lake)
    done: list[int] = []
    with open(lake / lake_module.LOCK, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as an export in another process holds it
        second = threading.Thread(target=lambda: done.append(export_lake(store, lake).seq))
        second.start()
        second.join(timeout=1.0)
        assert second.is_alive() and done == []  # waiting
    second.join(timeout=30)
    assert done == [1]
