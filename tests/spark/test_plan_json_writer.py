"""The listener's own plan JSON against Spark's `LogicalPlan.toJSON()`, byte for byte.

The listener writes each plan's JSON itself (`TracelakeCapture.planJson`) because Spark's asks
Scala reflection for every node's field names each time, most of the listener's cost. Spark's
serializer is the reference: every plan here, of every operator, expression and literal kind
the suite could think of, must come out identical. The whole Spark suite also runs with
`TRACELAKE_VERIFY_PLAN_JSON` set (tests/conftest.py), which compares every plan any tracked run
captures, commands included, and fails the run on a difference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tracelake.collect.spark_listener import VERIFY_PLAN_JSON, new_listener

from .conftest import Lake


def _people(lake: Lake) -> Any:
    return lake.read("people")


def _sql(lake: Lake, query: str) -> Any:
    spark = lake.spark
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW people_v AS SELECT * FROM parquet.`{lake.path('people')}`")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW scores_v AS SELECT * FROM parquet.`{lake.path('scores')}`")
    return spark.sql(query)


def _literals(lake: Lake) -> Any:
    from pyspark.sql import functions as F

    return _people(lake).select(
        F.lit(1.5).alias("double"),
        F.lit(0.1).cast("float").alias("float"),
        F.lit(3).cast("decimal(10,2)").alias("decimal"),
        F.lit(2**40).alias("long"),
        F.lit(True).alias("bool"),
        F.lit(None).cast("string").alias("null"),
        F.lit('é\u0001"\\').alias("text"),
        F.to_date(F.lit("2020-01-01")).alias("date"),
        F.current_timestamp().alias("now"),
        F.lit(bytearray(b"\x00\xff")).alias("binary"),
        F.array(F.lit(1), F.lit(2)).alias("array"),
        F.create_map(F.lit("k"), F.col("amount")).alias("map"),
        F.struct("id", "name").alias("struct"),
        F.lit(float("nan")).alias("nan"),
        F.lit(1e300).alias("huge"),
    )


def _non_ascii(lake: Lake) -> Any:
    from pyspark.sql import functions as F

    lake.write("words", [('é\u0001"\\ü', 1)], "word string, n int", file_format="json")
    return lake.read("words", file_format="json").select(F.concat("word", F.lit("∑")).alias("w∑"))


def _joins(lake: Lake) -> Any:
    from pyspark.sql import functions as F

    people, scores = _people(lake), lake.read("scores")
    return (
        people.join(scores, people.id == scores.key, "left_outer")
        .join(people.select("id", F.col("name").alias("n2")), "id", "left_anti")
        .crossJoin(scores.select(F.col("score").alias("s2")))
    )


def _aggregates(lake: Lake) -> Any:
    from pyspark.sql import functions as F

    return (
        _people(lake)
        .groupBy("name")
        .agg(
            F.sum("amount"), F.collect_list("tags"), F.countDistinct("id"), F.percentile_approx("amount", 0.5)
        )
    )


def _windows(lake: Lake) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy("name").orderBy(F.desc("amount"))
    framed = ordered.rowsBetween(-2, Window.currentRow)
    return _people(lake).select("id", F.row_number().over(ordered), F.avg("amount").over(framed))


def _python_udf(lake: Lake) -> Any:
    from pyspark.sql import functions as F

    shout = F.udf(lambda name: (name or "").upper(), "string", useArrow=False)
    return _people(lake).select(shout("name").alias("loud"))


PLANS: dict[str, Callable[[Lake], Any]] = {
    "count": lambda lake: _people(lake).filter("id % 3 = 1").groupBy().count(),
    "literals": _literals,
    "nested fields": lambda lake: _people(lake).selectExpr("addr.city", "tags[0] AS first_tag"),
    "non-ASCII data": _non_ascii,
    "joins": _joins,
    "aggregates": _aggregates,
    "cube": lambda lake: _people(lake).cube("name", "id").agg({"amount": "max"}),
    "windows": _windows,
    "generators": lambda lake: _people(lake).selectExpr("id", "posexplode(tags)"),
    "set operations": lambda lake: (
        _people(lake)
        .select("id")
        .union(lake.read("scores").select("key"))
        .intersect(_people(lake).select("id"))
    ),
    "sort, limit, sample": lambda lake: _people(lake).sample(0.5, seed=7).orderBy("amount").limit(2),
    "repartition and hints": lambda lake: _people(lake).repartition(3, "id").hint("broadcast").coalesce(1),
    "python udf": _python_udf,
    "subqueries": lambda lake: _sql(
        lake,
        "SELECT id, (SELECT max(score) FROM scores_v) AS top FROM people_v p "
        "WHERE EXISTS (SELECT 1 FROM scores_v s WHERE s.key = p.id) AND id IN (SELECT key FROM scores_v)",
    ),
    "ctes": lambda lake: _sql(
        lake,
        "WITH rich AS (SELECT * FROM people_v WHERE amount > 6), "
        "twice AS (SELECT * FROM rich UNION ALL SELECT * FROM rich) "
        "SELECT name, count(*) FROM twice GROUP BY name",
    ),
    "lateral view": lambda lake: _sql(lake, "SELECT id, t FROM people_v LATERAL VIEW explode(tags) x AS t"),
    "pivot": lambda lake: _people(lake).groupBy("id").pivot("name", ["ann", "bob"]).sum("amount"),
    "in-memory rows": lambda lake: lake.spark.createDataFrame([(1, "a")], "k int, v string").select("k"),
    "range": lambda lake: lake.spark.range(0, 10, 2).selectExpr("id * 2 AS twice"),
}


@pytest.fixture(scope="module")
def listener(spark: Any) -> Any:
    return new_listener(spark.sparkContext._gateway)


@pytest.mark.parametrize("name", list(PLANS))
def test_plan_json_is_sparks(lake: Lake, listener: Any, name: str) -> None:
    plan = PLANS[name](lake)._jdf.queryExecution().analyzed()
    ours, sparks = str(listener.planJson(plan)), str(plan.toJSON())
    at = next((i for i, (a, b) in enumerate(zip(ours, sparks, strict=False)) if a != b), None)
    assert ours == sparks, (
        f"first difference at {at}: ours {ours[at - 60 : at + 60]!r}, Spark's {sparks[at - 60 : at + 60]!r}"
    )


def test_a_tracked_run_checks_every_plan_it_captures(
    lake: Lake, listener: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commands too (a table written, created, altered, dropped): in verify mode each captured
    plan is compared in the JVM, and none differs."""
    monkeypatch.setenv(VERIFY_PLAN_JSON, "1")
    spark = lake.spark
    compared, differing = listener.planJsonChecks()

    def job() -> None:
        _people(lake).write.mode("overwrite").saveAsTable("plan_json_people")
        spark.sql(
            "CREATE TABLE plan_json_ctas USING parquet AS SELECT id, upper(name) AS n FROM plan_json_people"
        )
        spark.sql("INSERT INTO plan_json_ctas SELECT id, name FROM plan_json_people WHERE amount > 6")
        spark.sql("ALTER TABLE plan_json_ctas SET TBLPROPERTIES ('team' = 'x')")
        _people(lake).write.mode("append").partitionBy("name").parquet(lake.output("by_name"))
        spark.sql("DROP TABLE plan_json_ctas")
        spark.sql("DROP TABLE plan_json_people")

    tracker = lake.run(job)
    now_compared, now_differing = listener.planJsonChecks()
    assert now_compared - compared >= 5  # every write and DDL command, each a plan
    assert now_differing == differing
    assert tracker.batch().edges  # and the lineage came through
