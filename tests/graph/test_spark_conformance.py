"""The lake and the Spark jobs on lineage we did not write: every published OpenLineage event and
every compatibility scenario's events in `../shared/conformance` (read in place: Airflow, Spark,
dbt, Flink… producers), ingested as a log, exported to a lake and read by Spark. The lake holds
the index's edge versions and nodes row for row (real producers' names, through Parquet and
back); every asset's closure, each way in one multi-root job, and PageRank (the jobs that only
read voting too) agree with the in-memory engine.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_openlineage_conformance import _event_files
from tests.store.test_lake import index_edges, index_nodes, lake_edges, lake_nodes
from tracelake.app.service import Tracelake
from tracelake.graph.hotness import hotness as memory_hotness
from tracelake.graph.index import ASSET, GraphIndex
from tracelake.graph.spark.hotness import hotness
from tracelake.graph.spark.lake import read_lake
from tracelake.graph.spark.walk import closures
from tracelake.graph.traverse import lineage
from tracelake.store import LineageStore
from tracelake.store.lake import export_lake


@pytest.fixture(scope="module")
def producers(
    tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> tuple[GraphIndex, Any, Path, list[Any]]:
    folder = tmp_path_factory.mktemp("producers")
    service = Tracelake(LineageStore(str(folder / "lineage.db")))
    for path in _event_files():
        service.ingest_openlineage(io.BytesIO(path.read_bytes()), source=path.name)
    index = GraphIndex.from_store(service.store)
    assert index.n_edges > 50, "the conformance events should give lineage"
    export_lake(service.store, folder / "lake")
    # reads vote in PageRank: (process, asset) for every asset a job read without writing from it
    reads = [
        (process, asset) for asset, read in service.store.read_counts().items() for process in read.processes
    ]
    service.close()
    return index, read_lake(spark, folder / "lake"), folder / "lake", reads


def test_the_lake_holds_the_producers_lineage_row_for_row(
    producers: tuple[GraphIndex, Any, Path, list[Any]], spark: Any
) -> None:
    index, _, lake, _ = producers
    assert lake_edges(spark, lake) == index_edges(index)
    assert lake_nodes(spark, lake) == index_nodes(index)


@pytest.mark.parametrize("direction", ["downstream", "upstream"])
def test_every_assets_closure_on_spark_is_its_lineage_in_memory(
    producers: tuple[GraphIndex, Any, Path, list[Any]], direction: str
) -> None:
    index, graph, _, _ = producers
    assets = [index.urns[int(p)] for p in range(index.n_nodes) if index.node_types[p] == ASSET]
    expected = {
        (root, urn): hops
        for root in assets
        for urn, hops in lineage(index, root, direction).distance_by_urn().items()  # type: ignore[arg-type]
    }
    assert len(expected) > len(assets)  # some assets have lineage
    found = {(r.root, r.urn): r.depth for r in closures(graph, assets, direction).collect()}  # type: ignore[arg-type]
    assert found == expected


def test_pagerank_of_the_producers_assets(producers: tuple[GraphIndex, Any, Path, list[Any]]) -> None:
    index, graph, _, reads = producers
    assert reads, "some producers' jobs only read"
    expected = dict(memory_hotness(index, reads=reads, tolerance=1e-8))
    found = {r.urn: r.score for r in hotness(graph, tolerance=1e-8).collect()}
    assert found == pytest.approx(expected, rel=1e-9) and found.keys() == expected.keys()
