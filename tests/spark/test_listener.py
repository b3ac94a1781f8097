"""The capture journal: the JVM listener's lines, read back whole, in order, across segments."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.conftest import Lake
from tracelake.collect import spark_listener
from tracelake.collect.spark_listener import ActionCapture, ActionFailure, CaptureJournal, ListenerQueue
from tracelake.collect.spark_plan import all_nodes, expr_preorder


def _drained(spark: SparkSession, journal: CaptureJournal) -> list[ActionCapture | ActionFailure]:
    ListenerQueue.of(spark.sparkContext).wait_until_empty(30)
    return journal.read()


def _current_segment(journal: CaptureJournal) -> Path:
    return max(Path(journal.directory).glob("capture-*.jsonl"))


def _segments(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("capture-*.jsonl"))


def test_a_plan_of_many_columns_reaches_the_store_whole(lake: Lake) -> None:
    # 40 columns make a plan JSON of over 8 KB, which py4j once sent in stalling pieces
    people, out = lake.read("people"), lake.output("wide")
    wide = people.select(*[F.col("id").alias(f"c{i}") for i in range(40)])
    edges = lake.edges(lake.run(lambda: wide.write.parquet(out)).batch())
    assert edges == {("people", "wide", None)} | {("people#id", f"wide#c{i}", "IDENTITY") for i in range(40)}


def test_segments_roll_over_are_read_in_order_and_kept_until_trimmed(
    spark: SparkSession, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    people = lake.read("people")
    journal = CaptureJournal(spark, tmp_path, segment_bytes=1)  # every line a segment of its own
    try:
        for limit in range(5):
            people.filter(F.col("id") > limit).count()
        items = _drained(spark, journal)
        # segments read to their end stay: until the run is stored, they are what makes it durable
        assert _segments(tmp_path) == [f"capture-{i:06d}.jsonl" for i in range(5)]
        assert journal.segment == 4
        assert not journal.trim(4)  # a journal under its bound keeps everything
        monkeypatch.setattr(spark_listener, "TRIM_BYTES", 0)
        assert journal.trim(3)  # past it, the segments stored go; a segment not yet stored stays
        assert _segments(tmp_path) == ["capture-000003.jsonl", "capture-000004.jsonl"]
        assert journal.trim(99)  # never the one being read
        assert _segments(tmp_path) == ["capture-000004.jsonl"]
    finally:
        journal.close()
    assert [item.func_name for item in items] == ["count"] * 5
    literals = [
        [
            e.data["value"]
            for node in all_nodes(item.plan)
            if node.cls == "Filter"
            for condition in node.expr_list("condition")
            for e in expr_preorder(condition)
            if e.cls == "Literal"
        ]
        for item in items
        if isinstance(item, ActionCapture)
    ]
    assert literals == [[str(limit)] for limit in range(5)]


def test_a_line_still_being_written_waits_for_the_next_read(spark: SparkSession, tmp_path: Path) -> None:
    journal = CaptureJournal(spark, tmp_path)
    try:
        line = b'{"kind":"failure","func":"collect","at_ms":0,"error_class":"org.example.Boom"}\n'
        with open(_current_segment(journal), "ab") as segment:
            segment.write(line[:30])
            segment.flush()
            assert journal.read() == []
            segment.write(line[30:])
        (failure,) = journal.read()
    finally:
        journal.close()
    assert isinstance(failure, ActionFailure)
    assert (failure.func_name, failure.error_class) == ("collect", "org.example.Boom")


def test_a_capture_that_failed_in_the_jvm_is_counted_and_logged_by_its_class(
    spark: SparkSession, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    journal = CaptureJournal(spark, tmp_path)
    try:
        with open(_current_segment(journal), "ab") as segment:
            segment.write(
                b'{"kind":"error","func":"count","at_ms":0,"error_class":"java.lang.OutOfMemoryError"}\n'
            )
            segment.write(b"not json at all\n")
        with caplog.at_level(logging.WARNING, logger="tracelake.spark"):
            assert journal.read() == []
    finally:
        journal.close()
    assert journal.errors == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "tracelake.spark"]
    assert messages == [
        "lineage of Spark action 'count' not captured (java.lang.OutOfMemoryError); the action is unaffected",
        "lineage of Spark action '?' not captured (JSONDecodeError); the action is unaffected",
    ]
