"""Whole-graph analyses on Spark (`--engine spark`): the lake brought up to date, the job run over
it, its answer written beside the lake as a table and loaded into the store. (Spark, pyarrow and
the jobs are imported by the functions that use them: a command that runs in memory loads none.)

The in-memory engine answers from one process's index; this one answers the same questions
(`tracelake.graph.spark`) from the lake's tables (`tracelake.store.lake`), on the Spark session
running or a local one (`TRACELAKE_SPARK_MASTER`, `local[*]` by default). Each analysis writes its
result under `LAKE/results/NAME/` (overwritten each run), so other jobs can read it as they read
the lake; what the store keeps of it (inferred labels with their routes) is loaded from there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tracelake.app.service import Tracelake
    from tracelake.graph.policy import Policy, Violation
    from tracelake.graph.propagate import PropagationRules
    from tracelake.graph.spark.lake import LakeGraph


class Engine(StrEnum):
    """Where a whole-graph analysis runs: the in-memory index (the default) or Spark."""

    memory = "memory"
    spark = "spark"


ENGINES = tuple(str(engine) for engine in Engine)


def default_lake() -> Path:
    """Where `--engine spark` keeps the lake unless told: `TRACELAKE_LAKE`, or `.tracelake/lake`."""
    return Path(os.environ.get("TRACELAKE_LAKE", ".tracelake/lake"))


@contextmanager
def _lake_graph(service: Tracelake, lake: Path | None, command: str) -> Iterator[tuple[LakeGraph, Path]]:
    """The lake (`lake`, else `default_lake()`) brought up to date and read on a Spark session:
    what every analysis here starts from."""
    from tracelake.graph.spark.lake import read_lake
    from tracelake.spark.local import local_session
    from tracelake.store.lake import export_lake

    folder = lake or default_lake()
    export_lake(service.store, folder)
    with local_session(command) as spark:
        yield read_lake(spark, folder), folder


def propagate(
    service: Tracelake, declared: Mapping[str, Iterable[str]], rules: PropagationRules, lake: Path | None
) -> list[tuple[str, tuple[str, ...]]]:
    """Spread `declared` under `rules` on Spark: (label, route from its declared node) for every
    node a label reached. Every row is in `LAKE/results/propagation` too."""
    from tracelake.graph.spark.walk import propagation

    with _lake_graph(service, lake, "tracelake propagate") as (graph, folder):
        table = _write(propagation(graph, declared, rules), folder, "propagation")
        rows = graph.spark.read.parquet(str(table)).select("label", "urn", "parent_urn").collect()
    return _routes([(row.label, row.urn, row.parent_urn) for row in rows])


def hottest(service: Tracelake, limit: int, lake: Path | None) -> list[tuple[str, float]]:
    """The `limit` hottest assets with their scores; every score is in `LAKE/results/hotness`."""
    from pyspark.sql import functions as F

    from tracelake.graph.spark.hotness import hotness

    with _lake_graph(service, lake, "tracelake hot") as (graph, folder):
        table = _write(hotness(graph), folder, "hotness")
        top = graph.spark.read.parquet(str(table)).orderBy(F.desc("score"), "asset_id").limit(limit).collect()
    return [(row.urn, float(row.score)) for row in top]


def check(
    service: Tracelake,
    policies: list[Policy],
    declared: Mapping[str, Iterable[str]],
    rules: PropagationRules,
    lake: Path | None,
) -> list[Violation]:
    """Every violation of `policies`, found by the Spark job (`tracelake.graph.spark.policy`)."""
    from tracelake.graph.spark.policy import violations

    with _lake_graph(service, lake, "tracelake check") as (graph, folder):
        found = violations(graph, policies, declared, rules)
        _write(found.frame, folder, "violations")
        return found.collected()


def _write(frame: DataFrame, lake: Path, name: str) -> Path:
    table = lake.absolute() / "results" / name  # not relative: Spark's directory is not ours
    frame.write.mode("overwrite").parquet(str(table))
    return table


def _routes(reached: list[tuple[str, str, str]]) -> list[tuple[str, tuple[str, ...]]]:
    """Each (label, node, parent) reached with its route from its declared node, following the
    parents back (the route `Propagation.path` gives: the walk kept each node's first step)."""
    parent = {(label, urn): step for label, urn, step in reached}
    routes: dict[tuple[str, str], tuple[str, ...]] = {}

    def route(label: str, urn: str) -> tuple[str, ...]:
        trail, at = [], urn
        while (label, at) not in routes and (label, at) in parent:
            trail.append(at)
            at = parent[(label, at)]
        known = routes.get((label, at), (at,))  # not reached: a declared node, where routes start
        for step in reversed(trail):
            known = routes[(label, step)] = (*known, step)
        return known

    return [(label, route(label, urn)) for label, urn, _ in reached]
