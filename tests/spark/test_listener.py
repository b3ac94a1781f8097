"""The listener's JSON channel: plan JSON through a file, the same text as `toJSON()`, short or long."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.conftest import Lake
from tracelake.collect import spark_listener
from tracelake.collect.spark_listener import JsonChannel


@pytest.mark.parametrize("columns", [0, 40])
def test_json_channel_reads_what_to_json_writes(spark: SparkSession, columns: int) -> None:
    frame = spark.range(3)
    for index in range(columns):
        frame = frame.withColumn(f"c{index}", F.col("id") * index)
    plan = frame._jdf.queryExecution().analyzed()
    text = JsonChannel.of(spark.sparkContext._gateway).read(plan.jsonValue())
    assert text == plan.toJSON()
    assert (len(text) > 8192) == (columns > 0)  # under and over py4j's 8 KB replies


def test_a_broken_channel_falls_back_to_the_socket(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    people, out = lake.read("people"), lake.output("out")

    def broken(_self: JsonChannel, _value: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(spark_listener.JsonChannel, "read", broken)
    edges = lake.edges(lake.run(lambda: people.select("id").write.parquet(out)).batch())
    assert edges == {("people", "out", None), ("people#id", "out#id", "IDENTITY")}
