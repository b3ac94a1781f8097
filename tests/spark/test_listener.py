"""The listener's JSON channel: long plan JSON comes through a file, short inline, same text."""

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
    channel = JsonChannel(spark.sparkContext._gateway)
    try:
        text = channel.read(plan.jsonValue())
    finally:
        channel.close()
    assert text == plan.toJSON()
    assert (len(text) > 4096) == (columns > 0)  # both ways of coming back are exercised


def test_a_broken_channel_falls_back_to_the_socket(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    people, out = lake.read("people"), lake.output("out")

    def broken(_self: JsonChannel, _value: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(spark_listener.JsonChannel, "read", broken)
    edges = lake.edges(lake.run(lambda: people.select("id").write.parquet(out)).batch())
    assert edges == {("people", "out", None), ("people#id", "out#id", "IDENTITY")}
