"""Policy checks (`tracelake.graph.policy`) as a Spark job over the lake: the same four kinds, the
same violations with the same messages and paths.

`purpose` policies run the labels' propagation (`walk.propagation`) and keep what reached an asset
in the zone or layer; the route of each is rebuilt by joining back along the parents, one join a
hop, over the violations only. `security_level`, `layer` and `redundant` read the table-level
flows in force beside the assets' facts (layer, security level; the columns are the asset's
fields).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracelake.graph.policy import Policy, Violation
from tracelake.graph.propagate import PropagationRules
from tracelake.graph.spark.lake import LakeGraph, asset_flows, kept
from tracelake.graph.spark.walk import propagation

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_SCHEMA = "policy string, kind string, message string, path array<string>, position int"


@dataclass(frozen=True)
class SparkViolations:
    """The violations as a table (`policy`, `kind`, `message`, `path`, `position`: the policy's
    place in the list), and as `Violation`s in that order."""

    frame: DataFrame

    def collected(self) -> list[Violation]:
        rows = self.frame.orderBy("position", "path").collect()
        return [Violation(row.policy, row.kind, row.message, tuple(row.path)) for row in rows]


def violations(
    graph: LakeGraph,
    policies: Sequence[Policy],
    declared: Mapping[str, Iterable[str]],
    rules: PropagationRules | None = None,
) -> SparkViolations:
    from pyspark.sql import functions as F

    found = graph.spark.createDataFrame([], _SCHEMA)
    flows = _flows(graph)
    labels = {policy.label for policy in policies if policy.kind == "purpose"}
    spread = None
    if labels:
        wanted = {urn: [name for name in names if name in labels] for urn, names in declared.items()}
        spread = propagation(graph, {urn: names for urn, names in wanted.items() if names}, rules)
    for position, policy in enumerate(policies):
        if policy.kind == "purpose":
            assert spread is not None
            frame = _purpose(graph, policy, spread)
        elif policy.kind == "security_level":
            frame = flows.where(
                F.col("source_level").isNotNull()
                & F.col("target_level").isNotNull()
                & (F.col("target_level") < F.col("source_level"))
            ).select(
                F.format_string("security level drops from %d to %d", "source_level", "target_level").alias(
                    "message"
                ),
                F.array("source", "target").alias("path"),
            )
        elif policy.kind == "layer":
            frame = flows.where(
                (F.col("source_layer") == policy.source_layer)
                & (F.col("target_layer") == policy.target_layer)
            ).select(
                F.lit(f"a {policy.target_layer} asset reads a {policy.source_layer} asset directly").alias(
                    "message"
                ),
                F.array("source", "target").alias("path"),
            )
        else:
            frame = _redundant(graph, flows)
        found = found.unionByName(
            frame.select(
                F.lit(policy.name).alias("policy"),
                F.lit(policy.kind).alias("kind"),
                "message",
                "path",
                F.lit(position).alias("position"),
            )
        )
    return SparkViolations(found)


def _flows(graph: LakeGraph) -> DataFrame:
    """Table-level flows in force (each pair once, no self-loop), with both assets' URNs and facts."""
    pairs = asset_flows(graph)
    facts = graph.assets.select("id", "urn", "layer", "security_level")
    for side in ("source", "target"):
        named = facts.toDF(f"{side}_id", side, f"{side}_layer", f"{side}_level")
        pairs = pairs.join(named, f"{side}_id")
    return pairs


def _purpose(graph: LakeGraph, policy: Policy, spread: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    assets = graph.assets.select(F.col("id").alias("asset_id"), F.col("urn").alias("asset_urn"), "layer")
    reached = (
        spread.where(F.col("label") == policy.label)
        .join(graph.nodes.select(F.col("id").alias("node"), "asset_id"), "node")
        .join(assets, "asset_id")
    )
    in_zone: Column = F.lit(False)
    for zone in policy.zones:
        in_zone = in_zone | F.col("asset_urn").startswith(zone)
    if policy.layer:
        in_zone = in_zone | (F.col("layer") == policy.layer)
    hits = reached.where(in_zone).select(
        "label", "node", "urn", F.format_string(f"{policy.label} reaches %s", "urn").alias("message")
    )
    return _with_routes(hits, spread).select("message", "path")


def _with_routes(hits: DataFrame, spread: DataFrame) -> DataFrame:
    """`hits` (label, node, urn) with `path`: the URNs from the declared node to `node`, rebuilt
    one parent a join (the route `Propagation.path` gives: the walk kept each node's first step)."""
    from pyspark.sql import functions as F

    steps = spread.select("label", F.col("node").alias("at"), "parent", "parent_urn")
    going = hits.select("label", "node", "message", F.col("node").alias("at"), F.array("urn").alias("path"))
    done = None
    while True:
        stepped = kept(going.join(steps, ["label", "at"], "left"))
        finished = stepped.where(F.col("parent").isNull()).select("label", "node", "message", "path")
        done = finished if done is None else done.unionByName(finished)
        going = stepped.where(F.col("parent").isNotNull()).select(
            "label",
            "node",
            "message",
            F.col("parent").alias("at"),
            F.concat(F.array("parent_urn"), "path").alias("path"),
        )
        if going.isEmpty():
            return done


def _redundant(graph: LakeGraph, flows: DataFrame) -> DataFrame:
    """Assets fed by the same upstreams with the same columns, in more than one layer."""
    from pyspark.sql import functions as F

    upstreams = flows.groupBy("target_id").agg(F.array_sort(F.collect_set("source")).alias("upstreams"))
    fields = graph.nodes.where(F.col("node_type") == "field").select(
        F.col("asset_id").alias("target_id"), F.expr("substr(urn, instr(urn, '#') + 1)").alias("column")
    )
    columns = fields.groupBy("target_id").agg(F.array_sort(F.collect_set("column")).alias("columns"))
    assets = graph.assets.select(
        F.col("id").alias("target_id"), "urn", F.coalesce("layer", F.lit("\0")).alias("layer")
    )
    groups = (
        upstreams.join(columns, "target_id")
        .join(assets, "target_id")
        .groupBy("upstreams", "columns")
        .agg(F.array_sort(F.collect_list("urn")).alias("path"), F.countDistinct("layer").alias("layers"))
        .where((F.size("path") > 1) & (F.col("layers") > 1))
    )
    return groups.select(
        F.format_string(
            "%s read the same upstreams (%s) with the same columns",
            F.array_join("path", ", "),
            F.array_join("upstreams", ", "),
        ).alias("message"),
        "path",
    )
