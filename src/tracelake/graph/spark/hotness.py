"""Asset hotness (PageRank over "depends on", reads voting too) as a Spark job: the same votes,
damping, dangling-node rule and stopping rule as `tracelake.graph.hotness`, so the scores agree.

Vertices are the assets and the processes that read assets (readers, keyed by their negated id
so the two never meet). Each iteration is one join of the votes with the ranks and one sum by
voted vertex; the new ranks are checkpointed, and one aggregate over them gives both the change
(the L1 distance the stopping rule reads) and the dangling vertices' mass for the next iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelake.graph.spark.lake import LakeGraph, asset_flows, kept

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def hotness(
    graph: LakeGraph,
    *,
    damping: float = 0.85,
    tolerance: float = 1e-12,
    max_iterations: int = 500,
    checkpointed: bool = False,
) -> DataFrame:
    """Every asset's score (`asset_id`, `urn`, `score`); ordering is the reader's business."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    nodes = graph.nodes
    assets = nodes.where(F.col("node_type") == "asset").select(F.col("id").alias("vertex"))
    # the consumer votes for its producer; a reader for what it read
    flows = asset_flows(graph).select(F.col("target_id").alias("voter"), F.col("source_id").alias("voted"))
    reads = graph.reads.join(assets.withColumnRenamed("vertex", "asset_id"), "asset_id", "left_semi").select(
        (-F.col("process_id")).alias("voter"), F.col("asset_id").alias("voted")
    )
    votes = flows.unionByName(reads).distinct().persist(StorageLevel.MEMORY_AND_DISK)
    vertices = assets.unionByName(reads.select(F.col("voter").alias("vertex")).distinct())
    out_degree = votes.groupBy(F.col("voter").alias("vertex")).agg(F.count("*").alias("degree"))
    base = (
        vertices.join(out_degree, "vertex", "left")
        .fillna(0, ["degree"])
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    n = base.count()
    if n == 0:
        votes.unpersist()
        base.unpersist()
        return graph.spark.createDataFrame([], "asset_id long, urn string, score double")

    rank = kept(base.withColumn("rank", F.lit(1.0 / n)), checkpointed)
    dangling_mass = float(rank.where(F.col("degree") == 0).agg(F.sum("rank")).first()[0] or 0.0)
    try:
        for _ in range(max_iterations):
            shares = rank.where(F.col("degree") > 0).select(
                F.col("vertex").alias("voter"), (F.col("rank") / F.col("degree")).alias("share")
            )
            # each vertex's row (its rank before) and the shares voted to it, summed in one shuffle
            spread = votes.join(shares, "voter").select(
                F.col("voted").alias("vertex"),
                F.lit(None).cast("long").alias("degree"),
                F.lit(None).cast("double").alias("before"),
                F.col("share"),
            )
            own = rank.select("vertex", "degree", F.col("rank").alias("before"), F.lit(0.0).alias("share"))
            summed = (
                own.unionByName(spread)
                .groupBy("vertex")
                .agg(
                    F.max("degree").alias("degree"),
                    F.max("before").alias("before"),
                    F.sum("share").alias("spread"),
                )
            )
            # the change and the dangling mass are observed while the checkpoint is written: one job
            seen = Observation()
            new = kept(
                summed.select(
                    "vertex",
                    "degree",
                    "before",
                    (
                        F.lit((1.0 - damping) / n)
                        + F.lit(damping) * (F.col("spread") + F.lit(dangling_mass / n))
                    ).alias("rank"),
                ).observe(
                    seen,
                    F.sum(F.abs(F.col("rank") - F.col("before"))).alias("change"),
                    F.sum(F.when(F.col("degree") == 0, F.col("rank")).otherwise(F.lit(0.0))).alias(
                        "dangling"
                    ),
                ),
                checkpointed,
            )
            change, dangling = seen.get["change"], seen.get["dangling"]
            rank = new.drop("before")
            dangling_mass = float(dangling or 0.0)
            if float(change) < tolerance:
                break
    finally:
        votes.unpersist()
        base.unpersist()
    urns = nodes.select(F.col("id").alias("vertex"), "urn")
    return rank.join(urns, "vertex").select(
        F.col("vertex").alias("asset_id"), "urn", F.col("rank").alias("score")
    )
