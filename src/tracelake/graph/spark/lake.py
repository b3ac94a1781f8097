"""The lake's tables as Spark DataFrames: each table's live snapshots, and the edges as they are
now (a row replaced by a later snapshot of its process version gone: `tracelake.store.lake`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracelake.model import Confidence
from tracelake.store.lake import LakeError, Manifest, read_manifest, snapshot_paths

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class LakeGraph:
    """One lake's graph for Spark jobs. `edges` are the current rows (every version, `valid_to`
    null while in force), `nodes` every node; `assets`, `labels` and `reads` as written."""

    spark: SparkSession
    folder: Path
    manifest: Manifest
    nodes: DataFrame  # id, urn, node_type, kind, asset_id
    edges: DataFrame  # id, source_id, target_id, process_id, signal, confidence, transformation, …
    assets: DataFrame
    labels: DataFrame
    reads: DataFrame  # process_id, asset_id

    @property
    def graph_version(self) -> int:
        return self.manifest.graph_version


def read_lake(spark: SparkSession, folder: Path) -> LakeGraph:
    """The lake in `folder`; a folder without one is a `LakeError` saying how to write one."""
    from pyspark.sql import functions as F

    folder = folder.absolute()  # Spark resolves a relative path against its JVM's directory, not ours
    manifest = read_manifest(folder)
    if manifest is None:
        raise LakeError(f"{folder}: no lake here (`tracelake export {folder}` writes one)")

    def table(name: str) -> DataFrame:
        paths = [str(path) for path in snapshot_paths(folder, manifest, name)]
        return spark.read.option("basePath", str(folder / name)).parquet(*paths)

    latest = table("edge_deletes").groupBy("process_id", "valid_from").agg(F.max("seq").alias("_replaced_at"))
    edges = (
        table("edges")
        .join(latest, ["process_id", "valid_from"], "left")
        .where(F.col("_replaced_at").isNull() | (F.col("seq") >= F.col("_replaced_at")))
        .drop("_replaced_at", "seq")
    )
    return LakeGraph(
        spark,
        folder,
        manifest,
        nodes=table("nodes").drop("seq"),
        edges=edges,
        assets=table("assets").drop("seq"),
        labels=table("labels").drop("seq"),
        reads=table("reads").drop("seq"),
    )


def confidence_rank(column: str = "confidence") -> Column:
    """An edge's confidence as its rank (`Confidence.rank`), to compare with a minimum."""
    from pyspark.sql import functions as F

    ranks = [item for c in Confidence for item in (F.lit(str(c)), F.lit(c.rank))]
    return F.create_map(*ranks)[F.col(column)]


def asset_flows(graph: LakeGraph) -> DataFrame:
    """Table-level flows in force as unique (source_id, target_id) pairs, without self-loops
    (`GraphIndex.asset_flows`): what hotness and the policies read."""
    from pyspark.sql import functions as F

    in_force = ~F.col("is_field") & F.col("valid_to").isNull() & (F.col("source_id") != F.col("target_id"))
    return graph.edges.where(in_force).select("source_id", "target_id").distinct()


def kept(frame: DataFrame, checkpointed: bool = False) -> DataFrame:
    """`frame` computed now and cut from its plan: checkpointed to the SparkContext's checkpoint
    folder when `checkpointed` (a lost executor costs one step), else in the executors' memory."""
    return frame.checkpoint(eager=True) if checkpointed else frame.localCheckpoint(eager=True)
