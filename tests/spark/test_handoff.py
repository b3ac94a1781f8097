"""A Spark DataFrame handed to pandas or Arrow inside `tracelake.python.track`: what each column
of the frame holds, by hand; then against the Spark collector's own lineage of writing the very
same DataFrame to files (what Spark says a write of it holds, the hand-off must say too)."""

from __future__ import annotations

from pyspark.sql import functions as F

import tracelake.python as tp
from tests.spark.conftest import Lake


def columns_by_short_name(lake: Lake, read: tp.DataRead) -> dict[str, set[str]]:
    return {name: {lake.short(source) for source in sources} for name, sources in read.columns.items()}


def test_to_pandas_says_which_columns_each_frame_column_holds(lake: Lake) -> None:
    people, scores = lake.read("people"), lake.read("scores")
    frame = (
        people.join(scores, people.id == scores.key)
        .where(F.col("amount") > 6)
        .select(
            F.col("id").alias("user"),
            (F.col("amount") * F.col("score")).alias("weighted"),
            F.upper("addr.city").alias("city"),
            F.when(F.col("name") == "ann", 1).otherwise(0).alias("is_ann"),
            F.lit(1).alias("one"),
        )
    )
    with tp.track(job="handoff", store=f"sqlite:///{lake.root / 'lineage.db'}") as run:
        pandas_frame = frame.toPandas()
        arrow_table = frame.toArrow()
    assert (
        list(pandas_frame.columns)
        == arrow_table.column_names
        == ["user", "weighted", "city", "is_ann", "one"]
    )
    to_pandas, to_arrow = run.observed
    assert isinstance(to_pandas, tp.DataRead) and isinstance(to_arrow, tp.DataRead)
    assert to_pandas.call.endswith("DataFrame.toPandas") and to_arrow.call.endswith("DataFrame.toArrow")
    assert sorted(lake.short(a) for a in to_pandas.assets) == ["people", "scores"]
    # only what each value is computed from: the join keys and the filter put nothing in a cell
    assert columns_by_short_name(lake, to_pandas) == {
        "user": {"people#id"},
        "weighted": {"people#amount", "scores#score"},
        "city": {"people#addr.city"},
        "is_ann": {"people#name"},  # a CASE on the name encodes it
        "one": set(),
    }
    assert to_arrow.columns == to_pandas.columns


def test_a_hand_off_says_what_writing_the_same_frame_would(lake: Lake) -> None:
    """The collector's write lineage of a DataFrame (the field edges into the output that put
    something of the source in the value: copies, computations, aggregates, CASEs) against the
    hand-off's columns of the same DataFrame."""
    people, scores = lake.read("people"), lake.read("scores")
    frame = (
        people.join(scores, people.id == scores.key, "left")
        .groupBy("name")
        .agg(F.sum("amount").alias("total"), F.max(F.coalesce("score", F.lit(0.0))).alias("best"))
        .withColumn("label", F.when(F.col("total") > 10, "big").otherwise("small"))
    )
    out = lake.output("out")
    tracker = lake.run(lambda: frame.write.mode("overwrite").parquet(out))
    written: dict[str, set[str]] = {}
    for source, target, kind in lake.edges(tracker.batch()):
        if target.startswith("out#") and kind in ("IDENTITY", "TRANSFORMATION", "AGGREGATION", "CONDITIONAL"):
            written.setdefault(target.removeprefix("out#"), set()).add(source)
    with tp.track(job="handoff_vs_write", store=f"sqlite:///{lake.root / 'lineage.db'}") as run:
        frame.toPandas()
    (handed,) = run.observed
    assert isinstance(handed, tp.DataRead)
    assert {
        name: sources for name, sources in columns_by_short_name(lake, handed).items() if sources
    } == written
    assert written["label"] == {"people#amount"}  # a CASE on total encodes it


def test_a_python_run_inside_a_tracked_spark_run_links_to_it(lake: Lake) -> None:
    store = f"sqlite:///{lake.root / 'lineage.db'}"
    from tracelake.spark import track

    with track(lake.spark, "features", store=store) as spark_run, tp.track(job="train", store=store) as run:
        lake.read("people").select("id", "amount").toPandas().to_parquet(lake.output("frame.parquet"))
    (context,) = run.contexts
    assert (context.kind, context.process, context.run_id) == (
        "spark",
        "spark.job/features",
        spark_run.run.run_id,
    )
    assert run.run.job_id == spark_run.run.run_id
    edges = {(lake.short(e.source), lake.short(e.target)) for e in run.batch().edges}
    assert edges == {
        ("people#id", "frame.parquet#id"),
        ("people#amount", "frame.parquet#amount"),
        ("people", "frame.parquet"),
    }
