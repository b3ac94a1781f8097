"""Helpers for the Spark collector tests: tiny input files, one tracked run, edges by short name.

Every test writes its inputs under its own `tmp_path` and runs one `track()` on the session-wide
`spark` fixture. Expected edges are written as `(source, target, transformation)` with datasets
by short name (`people#amount`), worked out by hand from the PySpark code under test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tracelake.model import LineageBatch
from tracelake.model.names import location_urn
from tracelake.spark import SparkTracker, track

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Edge = tuple[str, str, str | None]

PEOPLE_SCHEMA = "id int, name string, amount double, addr struct<city:string,zip:string>, tags array<int>"
PEOPLE_ROWS = [
    (1, "ann", 10.0, ("oslo", "0150"), [1, 2]),
    (2, "bob", 20.0, ("rome", "00100"), [3]),
    (3, "cy", 5.0, ("oslo", "0151"), []),
]
SCORES_ROWS = [(1, 0.5), (2, 0.9), (4, 0.1)]


@dataclass
class Lake:
    """A test's folder for what it writes, plus the shared read-only inputs."""

    root: Path
    spark: SparkSession
    names: dict[str, str] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)

    def path(self, name: str) -> str:
        return str(self.paths.get(name, self.root / name))

    def urn(self, name: str) -> str:
        return location_urn(self.path(name))

    def write(
        self, name: str, rows: list[tuple[object, ...]], schema: str, file_format: str = "parquet"
    ) -> None:
        frame = self.spark.createDataFrame(rows, schema)
        writer = frame.write.mode("overwrite")
        if file_format == "csv":
            writer = writer.option("header", True)
        writer.format(file_format).save(self.path(name))
        self.names[self.urn(name)] = name

    def read(self, name: str, file_format: str = "parquet") -> DataFrame:
        reader = self.spark.read.format(file_format)
        if file_format == "csv":
            reader = reader.option("header", True).option("inferSchema", True)
        return reader.load(self.path(name))

    def output(self, name: str, file_format: str = "parquet") -> str:
        """Where a test writes `name`; edges into it show up under that short name."""
        self.names[self.urn(name)] = name
        return self.path(name)

    def run(self, body: Callable[[], object], job: str = "test_job") -> SparkTracker:
        """Run `body` as one tracked run, stored in this lake's SQLite file."""
        with track(self.spark, job, store=f"sqlite:///{self.root / 'lineage.db'}") as tracker:
            body()
        return tracker

    def edges(self, batch: LineageBatch) -> set[Edge]:
        return {
            (self.short(e.source), self.short(e.target), e.transformation.value if e.transformation else None)
            for e in batch.edges
        }

    def short(self, urn: str) -> str:
        asset, _, path = urn.partition("#")
        name = self.names.get(asset, asset)
        return f"{name}#{path}" if path else name


@pytest.fixture(scope="session")
def inputs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`people` and `scores` as parquet, written once: tests only read them."""
    shared = Lake(tmp_path_factory.mktemp("spark_inputs"), spark)
    shared.write("people", PEOPLE_ROWS, PEOPLE_SCHEMA)
    shared.write("scores", SCORES_ROWS, "key int, score double")
    return {name: shared.root / name for name in ("people", "scores")}


@pytest.fixture
def lake(spark: SparkSession, tmp_path: Path, inputs: dict[str, Path]) -> Lake:
    lake = Lake(tmp_path, spark, paths=dict(inputs))
    for name in inputs:
        lake.names[lake.urn(name)] = name
    return lake


def field_edges(edges: set[Edge], into: str) -> set[Edge]:
    """The column edges into dataset `into` (by short name)."""
    return {e for e in edges if e[1].startswith(into + "#")}


def table_edges(edges: set[Edge]) -> set[Edge]:
    return {e for e in edges if "#" not in e[1]}


def indirect(sources: list[str], targets: list[str], kind: str) -> set[Edge]:
    """An indirect influence reaching every listed target column."""
    return {(s, t, kind) for s in sources for t in targets}
