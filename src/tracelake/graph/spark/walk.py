"""Breadth-first walks from many starts at once, as Spark joins: label propagation and closures.

One walk carries a tag per start (a label, a root), so every label, or every root, walks in the
same job: each hop joins the frontier (tag, node) with the crossable edges, keeps for each
(tag, node) reached the edge of least id (the in-memory walk's choice, so paths agree), and drops
the pairs already reached. Each hop's new pairs are checkpointed (to the checkpoint folder when
there is one, else in the executors' memory), so a hop's plan never holds the hops before it. The
walk ends when a hop finds nothing new or at the depth limit: hops plus one Spark jobs.

The rules are those of the in-memory analyses: `tracelake.graph.propagate` (confidence, carrying
transformations on field edges, stop kinds and zones a label reaches but does not leave, depth)
and `tracelake.graph.traverse.lineage` (validity now or as of a moment, confidence, signals,
transformations, asset kinds of the nodes crossed into, depth).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from tracelake.graph.propagate import PropagationRules
from tracelake.graph.spark.lake import LakeGraph, confidence_rank, kept
from tracelake.graph.traverse import Direction, TraversalFilters
from tracelake.model import Confidence, Signal, Transformation

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# what a walk returns: one row a (tag, node) reached, the starts at depth 0 with no edge
WALK_COLUMNS = ("tag", "node", "depth", "edge_id", "parent", "source")


def walk(
    edges: DataFrame,
    starts: DataFrame,
    *,
    stop: DataFrame | None = None,
    max_depth: int | None = None,
    checkpointed: bool = False,
) -> DataFrame:
    """Every (tag, node) reachable from `starts` (tag, node) over `edges` (src, dst, edge_id),
    with its hop count, the edge and node it was first reached from, and its start (`source`).
    Nodes in `stop` (node) are reached but not walked from (a start is walked from regardless).
    `checkpointed`: each hop to the SparkContext's checkpoint folder, not to memory."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    # laid out by source once and kept: each hop shuffles only its frontier to the edges, never
    # the edges to the frontier
    partitions = int(edges.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    crossable = (
        edges.select("src", "dst", "edge_id")
        .repartition(partitions, "src")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    first = kept(
        starts.select("tag", "node")
        .distinct()
        .select(
            "tag",
            "node",
            F.lit(0).alias("depth"),
            F.lit(None).cast("long").alias("edge_id"),
            F.lit(None).cast("long").alias("parent"),
            F.col("node").alias("source"),
        ),
        checkpointed,
    )
    levels = [first]
    reached = first.select("tag", "node")
    frontier = first.select("tag", "node", "source")
    depth = 0
    try:
        while max_depth is None or depth < max_depth:
            depth += 1
            hop = frontier.join(crossable, frontier["node"] == crossable["src"]).select(
                "tag",
                F.col("dst").alias("node"),
                F.struct("edge_id", F.col("src").alias("parent"), "source").alias("via"),
            )
            first_way = hop.groupBy("tag", "node").agg(F.min("via").alias("via"))
            found = Observation()  # counted while the checkpoint is written: one job a hop
            new = kept(
                first_way.join(reached, ["tag", "node"], "left_anti")
                .select("tag", "node", F.lit(depth).alias("depth"), "via.edge_id", "via.parent", "via.source")
                .observe(found, F.count(F.lit(1)).alias("rows")),
                checkpointed,
            )
            if found.get["rows"] == 0:
                break
            levels.append(new)
            reached = reached.unionByName(new.select("tag", "node"))
            walked_on = new if stop is None else new.join(stop, "node", "left_anti")
            frontier = walked_on.select("tag", "node", "source")
        result = levels[0]
        for level in levels[1:]:
            result = result.unionByName(level)
        return result
    finally:
        crossable.unpersist()


# ---------------------------------------------------------------------- label propagation


def propagation(
    graph: LakeGraph,
    declared: Mapping[str, Iterable[str]] | None = None,
    rules: PropagationRules | None = None,
    *,
    checkpointed: bool = False,
) -> DataFrame:
    """Labels inferred downstream of the declared ones, as `tracelake.graph.propagate` infers them:
    one row a (label, node) reached (the declared nodes themselves not), with `depth` (hops),
    `source` (the declared node it came from), `parent` and `edge_id` (the step it was reached
    by: the route back to `source` follows them), `stopped` and the three URNs (`urn`,
    `source_urn`, `parent_urn`). `declared`: node URN → labels (None: the lake's declared labels)."""
    from pyspark.sql import functions as F

    rules = rules or PropagationRules()
    spark, nodes = graph.spark, graph.nodes
    if declared is None:
        wanted = graph.labels.where(F.col("provenance") == "declared").select(
            "urn", F.col("label").alias("tag")
        )
    else:
        pairs = sorted({(urn, label) for urn, labels in declared.items() for label in labels})
        wanted = spark.createDataFrame(pairs, "urn string, tag string")
    starts = wanted.join(nodes.select("urn", F.col("id").alias("node")), "urn").select("tag", "node")
    # the in-memory propagation's edge filter: in force, confident enough, carrying on field edges
    filters = TraversalFilters(min_confidence=rules.min_confidence, transformations=rules.transformations)
    crossable = _crossable(graph, filters)
    stop = _stop_nodes(graph, rules)
    walked = walk(
        _directed(crossable, "downstream"),
        starts,
        stop=stop,
        max_depth=rules.max_depth,
        checkpointed=checkpointed,
    ).where(F.col("depth") > 0)
    stopped = stop.select("node", F.lit(True).alias("stopped"))
    urns = nodes.select(F.col("id").alias("node"), "urn")
    return (
        walked.withColumnRenamed("tag", "label")
        .join(stopped, "node", "left")
        .fillna(False, ["stopped"])
        .join(urns, "node")
        .join(urns.toDF("source", "source_urn"), "source")
        .join(urns.toDF("parent", "parent_urn"), "parent")
    )


def _stop_nodes(graph: LakeGraph, rules: PropagationRules) -> DataFrame:
    """The nodes of a stop kind, or whose asset is in a stop zone (URN prefix)."""
    from pyspark.sql import functions as F

    nodes = graph.nodes
    stop: Column = F.lit(False)
    if rules.stop_kinds:
        stop = stop | F.col("kind").isin(sorted(rules.stop_kinds))
    if rules.stop_zones:
        assets = nodes.select(F.col("id").alias("asset_id"), F.col("urn").alias("asset_urn"))
        nodes = nodes.join(assets, "asset_id", "left")
        in_zone = F.lit(False)
        for zone in rules.stop_zones:
            in_zone = in_zone | F.col("asset_urn").startswith(zone)
        stop = stop | F.coalesce(in_zone, F.lit(False))
    return nodes.where(stop).select(F.col("id").alias("node"))


# ---------------------------------------------------------------------- closures


def closures(
    graph: LakeGraph,
    roots: Sequence[str],
    direction: Direction = "downstream",
    filters: TraversalFilters | None = None,
    *,
    checkpointed: bool = False,
) -> DataFrame:
    """Each root's closure, as `tracelake.graph.traverse.lineage` of that root alone would give
    it: one row a (root, node) with `depth`, the root itself at 0; `root` and `urn` are URNs.
    Roots the lake does not hold are left out (the caller checks them)."""
    from pyspark.sql import functions as F

    filters = filters or TraversalFilters()
    nodes = graph.nodes
    roots_frame = graph.spark.createDataFrame([(root,) for root in sorted(set(roots))], "urn string")
    starts = roots_frame.join(nodes, "urn").select(F.col("id").alias("tag"), F.col("id").alias("node"))
    crossable = _crossable(graph, filters)
    sides = ("upstream", "downstream") if direction == "both" else (direction,)
    reached: DataFrame | None = None
    for side in sides:
        edges = _directed(crossable, side)
        if filters.asset_kinds is not None:
            kinds = sorted(set(filters.asset_kinds))
            allowed = nodes.where(F.col("kind").isin(kinds)).select(F.col("id").alias("dst"))
            edges = edges.join(allowed, "dst", "left_semi")
        one = walk(edges, starts, max_depth=filters.depth, checkpointed=checkpointed).select(
            "tag", "node", "depth"
        )
        reached = one if reached is None else reached.unionByName(one)
    assert reached is not None
    nearest = reached.groupBy("tag", "node").agg(F.min("depth").alias("depth"))
    urns = nodes.select(F.col("id").alias("node"), "urn")
    return nearest.join(urns.toDF("tag", "root"), "tag").join(urns, "node").select("root", "urn", "depth")


def _crossable(graph: LakeGraph, filters: TraversalFilters) -> DataFrame:
    """The edges a traversal with `filters` may cross (validity, confidence, signal,
    transformation: `tracelake.graph.traverse.EdgeFilter`)."""
    from pyspark.sql import functions as F

    edges = graph.edges
    if filters.as_of is None:
        edges = edges.where(F.col("valid_to").isNull())
    else:
        at = F.lit(_utc(filters.as_of))
        edges = edges.where(
            (F.col("valid_from") <= at) & (F.col("valid_to").isNull() | (at < F.col("valid_to")))
        )
    if filters.min_confidence is not None:
        edges = edges.where(confidence_rank() >= Confidence(filters.min_confidence).rank)
    if filters.signals is not None:
        edges = edges.where(F.col("signal").isin(sorted(str(Signal(s)) for s in filters.signals)))
    if filters.transformations is not None or filters.direct_only:
        allowed = {Transformation(t) for t in filters.transformations or tuple(Transformation)}
        if filters.direct_only:
            allowed = {t for t in allowed if t.is_direct}
        # table-level edges have no transformation; only field edges are filtered by it
        edges = edges.where(
            ~F.col("is_field") | F.col("transformation").isin(sorted(str(t) for t in allowed))
        )
    return edges


def _directed(edges: DataFrame, direction: str) -> DataFrame:
    """(src, dst, edge_id) walking `direction`: downstream follows source → target."""
    from pyspark.sql import functions as F

    near, far = ("source_id", "target_id") if direction == "downstream" else ("target_id", "source_id")
    return edges.select(F.col(near).alias("src"), F.col(far).alias("dst"), F.col("id").alias("edge_id"))


def _utc(moment: datetime) -> datetime:
    """A moment Spark compares with the lake's UTC timestamps whatever the session's time zone."""
    from datetime import UTC

    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
