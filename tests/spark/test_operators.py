"""Column lineage through each Catalyst operator, on a real Spark session.

Each test runs a small PySpark job on parquet inputs written by the `lake` fixture and compares
the captured edges with the edges worked out by hand from the code: IDENTITY for a copied
column, TRANSFORMATION for a computed one, AGGREGATION inside aggregates, and the indirect
kinds (FILTER, JOIN, GROUP_BY, SORT to every output column; WINDOW, CONDITIONAL to the column
holding them), exactly as the SQL collector types them.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from tests.spark.conftest import Lake, field_edges, indirect, table_edges


def test_project_filter_and_nested_struct_field(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        people.filter(F.col("amount") > 5).select(
            "id", (F.col("amount") * 2).alias("dbl"), F.col("addr.city").alias("city")
        ).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("people#amount", "out#dbl", "TRANSFORMATION"),
        ("people#addr.city", "out#city", "IDENTITY"),
        *indirect(["people#amount"], ["out#id", "out#dbl", "out#city"], "FILTER"),
    }


def test_aggregate(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        people.groupBy("name").agg(
            F.sum("amount").alias("total"),
            F.count(F.lit(1)).alias("n"),
            F.max(F.col("id") + 1).alias("top"),
        ).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#name", "out#name", "IDENTITY"),
        ("people#amount", "out#total", "AGGREGATION"),
        ("people#id", "out#top", "AGGREGATION"),
        *indirect(["people#name"], ["out#name", "out#total", "out#n", "out#top"], "GROUP_BY"),
    }


@pytest.mark.parametrize("how", ["inner", "left", "right", "full", "left_semi", "left_anti", "cross"])
def test_join(lake: Lake, how: str) -> None:
    people, scores, out = lake.read("people").select("id", "name"), lake.read("scores"), lake.output("out")

    def job() -> None:
        if how == "cross":
            people.crossJoin(scores).write.parquet(out)
        else:
            people.join(scores, people["id"] == scores["key"], how).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    left = {("people#id", "out#id", "IDENTITY"), ("people#name", "out#name", "IDENTITY")}
    right = {("scores#key", "out#key", "IDENTITY"), ("scores#score", "out#score", "IDENTITY")}
    tables = {("people", "out", None), ("scores", "out", None)}
    if how in ("left_semi", "left_anti"):
        # only the left side's columns come out; the right side decides which rows
        expected = left | indirect(["people#id", "scores#key"], ["out#id", "out#name"], "JOIN")
    elif how == "cross":
        expected = left | right
    else:
        outputs = ["out#id", "out#name", "out#key", "out#score"]
        expected = left | right | indirect(["people#id", "scores#key"], outputs, "JOIN")
    assert edges == expected | tables


def test_union_is_positional(lake: Lake) -> None:
    people, scores = lake.read("people"), lake.read("scores")
    out, by_name, widened = lake.output("out"), lake.output("by_name"), lake.output("widened")

    def job() -> None:
        people.select("id", "name").union(scores.select("key", F.lit("x").alias("label"))).write.parquet(out)
        people.select("id", "name").unionByName(
            scores.select(F.col("key").alias("id"), F.lit("z").alias("name"))
        ).write.parquet(by_name)
        # int and double: the analyzer casts `id` to double to line the branches up; that
        # cast is Spark's, the value is still the column's
        people.select("id").union(scores.select("score")).write.parquet(widened)

    edges = lake.edges(lake.run(job).batch())
    assert field_edges(edges, "out") == {
        ("people#id", "out#id", "IDENTITY"),
        ("scores#key", "out#id", "IDENTITY"),
        ("people#name", "out#name", "IDENTITY"),
    }
    assert field_edges(edges, "by_name") == {
        ("people#id", "by_name#id", "IDENTITY"),
        ("scores#key", "by_name#id", "IDENTITY"),
        ("people#name", "by_name#name", "IDENTITY"),
    }
    assert field_edges(edges, "widened") == {
        ("people#id", "widened#id", "IDENTITY"),
        ("scores#score", "widened#id", "IDENTITY"),
    }
    assert {("people", "out", None), ("scores", "out", None)} <= table_edges(edges)


def test_window(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")
    window = Window.partitionBy("name").orderBy("amount")

    def job() -> None:
        people.select(
            "id",
            F.row_number().over(window).alias("rn"),
            F.sum("amount").over(window).alias("running"),
            F.lag("id").over(window).alias("prev"),
        ).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    # the window's keys influence only the windowed columns, not `id`
    keys = indirect(["people#name", "people#amount"], ["out#rn", "out#running", "out#prev"], "WINDOW")
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("people#amount", "out#running", "AGGREGATION"),
        ("people#id", "out#prev", "TRANSFORMATION"),
        *keys,
    }


def test_ranks_read_only_the_window_and_first_value_copies_a_row(lake: Lake) -> None:
    """rank() holds a row's position: Catalyst's copy of the ORDER BY under it is no input of
    its value; first_value/last_value copy another row's value (TRANSFORMATION), as lag does."""
    people, out = lake.read("people"), lake.output("out")
    window = Window.partitionBy("name").orderBy("amount")

    def job() -> None:
        people.select(
            F.rank().over(window).alias("r"),
            F.dense_rank().over(window).alias("dr"),
            F.first("id").over(window).alias("first_id"),
            F.last("id").over(window).alias("last_id"),
        ).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    columns = ["out#r", "out#dr", "out#first_id", "out#last_id"]
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#first_id", "TRANSFORMATION"),
        ("people#id", "out#last_id", "TRANSFORMATION"),
        *indirect(["people#name", "people#amount"], columns, "WINDOW"),
    }


def test_sort(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        people.orderBy(F.col("amount").desc()).select("id", "name").write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("people#name", "out#name", "IDENTITY"),
        *indirect(["people#amount"], ["out#id", "out#name"], "SORT"),
    }


def test_generate_explode(lake: Lake) -> None:
    people, out, positions = lake.read("people"), lake.output("out"), lake.output("positions")

    def job() -> None:
        people.select("id", F.explode("tags").alias("tag")).write.parquet(out)
        people.select(F.posexplode("tags").alias("pos", "tag")).write.parquet(positions)

    edges = lake.edges(lake.run(job).batch())
    assert field_edges(edges, "out") == {
        ("people#id", "out#id", "IDENTITY"),
        ("people#tags", "out#tag", "TRANSFORMATION"),
    }
    assert field_edges(edges, "positions") == {
        ("people#tags", "positions#pos", "TRANSFORMATION"),
        ("people#tags", "positions#tag", "TRANSFORMATION"),
    }


@pytest.mark.parametrize("grouping", ["rollup", "cube"])
def test_expand_rollup_and_cube(lake: Lake, grouping: str) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        grouped = people.rollup("name", "id") if grouping == "rollup" else people.cube("name", "id")
        grouped.agg(F.max("amount").alias("mx")).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#name", "out#name", "IDENTITY"),
        ("people#id", "out#id", "IDENTITY"),
        ("people#amount", "out#mx", "AGGREGATION"),
        *indirect(["people#name", "people#id"], ["out#name", "out#id", "out#mx"], "GROUP_BY"),
    }


def test_deduplicate_and_distinct(lake: Lake) -> None:
    people, out, distinct = lake.read("people"), lake.output("out"), lake.output("distinct")

    def job() -> None:
        people.select("id", "name", "amount").dropDuplicates(["name"]).write.parquet(out)
        people.select("id", "name").distinct().write.parquet(distinct)

    edges = lake.edges(lake.run(job).batch())
    # one row kept per name: the key decides rows like a GROUP BY; a full DISTINCT adds nothing
    assert field_edges(edges, "out") == {
        ("people#id", "out#id", "IDENTITY"),
        ("people#name", "out#name", "IDENTITY"),
        ("people#amount", "out#amount", "IDENTITY"),
        *indirect(["people#name"], ["out#id", "out#name", "out#amount"], "GROUP_BY"),
    }
    assert field_edges(edges, "distinct") == {
        ("people#id", "distinct#id", "IDENTITY"),
        ("people#name", "distinct#name", "IDENTITY"),
    }


def test_subqueries_in_where_are_filters(lake: Lake) -> None:
    lake.read("people").createOrReplaceTempView("people_sq")
    lake.read("scores").createOrReplaceTempView("scores_sq")
    out = lake.output("out")
    sql = """
        SELECT id FROM people_sq p
        WHERE amount > (SELECT avg(score) FROM scores_sq)
          AND id IN (SELECT key FROM scores_sq)
          AND EXISTS (SELECT 1 FROM scores_sq s WHERE s.key = p.id AND s.score > 0)
    """

    def job() -> None:
        lake.spark.sql(sql).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    filters = ["people#amount", "people#id", "scores#score", "scores#key"]
    assert edges == {
        ("people", "out", None),
        ("scores", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        *indirect(filters, ["out#id"], "FILTER"),
    }


def test_correlated_scalar_subquery_in_select(lake: Lake) -> None:
    lake.read("people").createOrReplaceTempView("people_sc")
    lake.read("scores").createOrReplaceTempView("scores_sc")
    out = lake.output("out")
    sql = "SELECT id, (SELECT max(score) FROM scores_sc s WHERE s.key = p.id) AS best FROM people_sc p"

    def job() -> None:
        lake.spark.sql(sql).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    # the subquery's own WHERE picks the rows of `best` only
    assert edges == {
        ("people", "out", None),
        ("scores", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("scores#score", "out#best", "AGGREGATION"),
        ("scores#key", "out#best", "FILTER"),
        ("people#id", "out#best", "FILTER"),
    }


def test_temp_views_are_seen_through(lake: Lake) -> None:
    out = lake.output("out")
    lake.read("people").filter("amount > 6").createOrReplaceTempView("rich")

    def job() -> None:
        lake.spark.sql("SELECT name, amount * 2 AS doubled FROM rich").write.parquet(out)

    batch = lake.run(job).batch()
    assert lake.edges(batch) == {
        ("people", "out", None),
        ("people#name", "out#name", "IDENTITY"),
        ("people#amount", "out#doubled", "TRANSFORMATION"),
        *indirect(["people#amount"], ["out#name", "out#doubled"], "FILTER"),
    }
    assert not [a.urn for a in batch.assets if "rich" in a.urn]


def test_cte(lake: Lake) -> None:
    lake.read("people").createOrReplaceTempView("people_cte")
    out = lake.output("out")
    sql = """
        WITH big AS (SELECT id, amount * 2 AS a2 FROM people_cte),
             picked AS (SELECT id FROM big WHERE a2 > 15)
        SELECT big.id, a2 FROM big JOIN picked ON big.id = picked.id
    """

    def job() -> None:
        lake.spark.sql(sql).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    # the join key is `id` on both sides; `picked` keeps rows by a2, which comes from amount
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("people#amount", "out#a2", "TRANSFORMATION"),
        *indirect(["people#id"], ["out#id", "out#a2"], "JOIN"),
        *indirect(["people#amount"], ["out#id", "out#a2"], "FILTER"),
    }


def test_cached_dataframe(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")
    cached = people.filter("amount > 6").select("id", "amount").cache()

    def job() -> None:
        cached.count()
        cached.select("id", (F.col("amount") + 1).alias("next")).write.parquet(out)

    try:
        edges = lake.edges(lake.run(job).batch())
    finally:
        cached.unpersist()
    assert edges == {
        ("people", "out", None),
        ("people#id", "out#id", "IDENTITY"),
        ("people#amount", "out#next", "TRANSFORMATION"),
        *indirect(["people#amount"], ["out#id", "out#next"], "FILTER"),
    }


def test_checkpointed_dataframe_keeps_its_origin(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        checkpointed = people.select("id", "name").localCheckpoint()
        checkpointed.select("name").write.parquet(out)

    tracker = lake.run(job)
    # the checkpoint's columns keep their exprIds: the action that made it showed their origin
    assert lake.edges(tracker.batch()) == {
        ("people", "out", None),
        ("people#name", "out#name", "IDENTITY"),
    }
    assert tracker.batch().processes[0].metadata["in_memory_inputs"] == 0


def test_python_udf_is_opaque(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    # no type hints on purpose: PySpark would read them as a pandas UDF's
    label = F.udf(lambda name, amount: f"{name}:{amount}", "string", useArrow=False)

    def job() -> None:
        people.select(label("name", "amount").alias("label"), "id").write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#name", "out#label", "TRANSFORMATION"),
        ("people#amount", "out#label", "TRANSFORMATION"),
        ("people#id", "out#id", "IDENTITY"),
    }


def test_pandas_udf_is_opaque(lake: Lake) -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import pandas as pd

    people, out = lake.read("people"), lake.output("out")

    def multiply(amount, id_):  # type: ignore[no-untyped-def]
        return amount * id_

    # Real objects, not the strings `from __future__ import annotations` would leave: Spark
    # reads these hints to pick the pandas UDF's kind.
    multiply.__annotations__ = {"amount": pd.Series, "id_": pd.Series, "return": pd.Series}
    scaled = F.pandas_udf(multiply, "double")

    def job() -> None:
        people.select(scaled("amount", "id").alias("scaled")).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "out", None),
        ("people#amount", "out#scaled", "TRANSFORMATION"),
        ("people#id", "out#scaled", "TRANSFORMATION"),
    }


def test_case_when_and_if_are_conditional(lake: Lake) -> None:
    people, out = lake.read("people"), lake.output("out")

    def job() -> None:
        people.select(
            F.when(F.col("amount") > 8, F.col("name")).otherwise(F.lit("low")).alias("band"),
            F.expr("if(id > 1, amount, 0.0)").alias("capped"),
        ).write.parquet(out)

    edges = lake.edges(lake.run(job).batch())
    # conditions reach only the column holding them
    assert edges == {
        ("people", "out", None),
        ("people#name", "out#band", "TRANSFORMATION"),
        ("people#amount", "out#band", "CONDITIONAL"),
        ("people#amount", "out#capped", "TRANSFORMATION"),
        ("people#id", "out#capped", "CONDITIONAL"),
    }
