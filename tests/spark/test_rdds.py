"""RDD jobs on real Spark: Hadoop inputs, RDD writes and reads, and the hops between RDDs and
DataFrames (`df.rdd`, `rdd.toDF()`), as table-level edges of MEDIUM confidence saying why.

Expectations by hand: rows that pass through a Python lambda can come from any column, so each
job below has exactly one table edge per dataset its RDD was made from, into what it wrote, and
no column edge at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import Row

from tests.spark.conftest import Lake
from tracelake.collect.spark_lineage import THROUGH_RDD
from tracelake.model import LineageBatch


def _text(lake: Lake, name: str, lines: list[str]) -> str:
    """A folder of text files, the input an RDD job reads."""
    folder = lake.root / name
    folder.mkdir()
    (folder / "part-0.txt").write_text("".join(f"{line}\n" for line in lines))
    lake.names[lake.urn(name)] = name
    return str(folder)


def _edges(lake: Lake, batch: LineageBatch) -> set[tuple[str, str, str, str | None]]:
    """(source, target, confidence, description) by short name."""
    short = lake.short
    return {(short(e.source), short(e.target), e.confidence.value, e.description) for e in batch.edges}


def _formats(batch: LineageBatch) -> dict[str, str]:
    return {asset.urn: asset.metadata.get("format") for asset in batch.assets}


def test_text_in_text_out(lake: Lake) -> None:
    words = _text(lake, "words", ["a b", "c"])
    out = lake.output("upper")
    tracker = lake.run(lambda: lake.spark.sparkContext.textFile(words).map(str.upper).saveAsTextFile(out))
    batch = tracker.batch()
    assert _edges(lake, batch) == {("words", "upper", "MEDIUM", THROUGH_RDD)}
    assert _formats(batch) == {lake.urn("words"): "text", lake.urn("upper"): "text"}
    assert [a.func_name for a in tracker.actions] == ["saveAsTextFile"]
    assert sorted(Path(out).glob("part-*"))  # the job's own output is untouched


def test_every_input_of_a_union_and_a_comma_list_is_an_edge(lake: Lake) -> None:
    first, second, third = (_text(lake, name, [name]) for name in ("first", "second", "third"))
    out = lake.output("merged")
    context = lake.spark.sparkContext

    def job() -> None:
        both = context.textFile(f"{first},{second}")  # Hadoop reads a comma-separated list of paths
        both.union(context.wholeTextFiles(third).values()).saveAsTextFile(out)

    assert _edges(lake, lake.run(job).batch()) == {
        ("first", "merged", "MEDIUM", THROUGH_RDD),
        ("second", "merged", "MEDIUM", THROUGH_RDD),
        ("third", "merged", "MEDIUM", THROUGH_RDD),
    }


def test_an_rdd_made_into_a_dataframe_leads_back_to_its_files(lake: Lake) -> None:
    words = _text(lake, "words", ["ann 10", "bob 20"])
    out = lake.output("parsed")

    def job() -> None:
        rows = lake.spark.sparkContext.textFile(words).map(lambda line: Row(name=line.split()[0]))
        lake.spark.createDataFrame(rows).write.parquet(out)

    batch = lake.run(job).batch()
    # the columns of `parsed` come out of a lambda: no column edge, only the table's
    assert _edges(lake, batch) == {("words", "parsed", "MEDIUM", THROUGH_RDD)}


def test_a_dataframe_made_into_an_rdd_leads_back_to_its_sources(lake: Lake) -> None:
    people, scores = lake.read("people"), lake.read("scores")
    joined = people.join(scores, people.id == scores.key)
    as_text, as_table = lake.output("as_text"), lake.output("as_table")

    def job() -> None:
        pairs = joined.rdd.map(lambda row: (row.id, row.score))
        pairs.map(str).saveAsTextFile(as_text)
        pairs.toDF(["id", "score"]).write.parquet(as_table)

    batch = lake.run(job).batch()
    assert _edges(lake, batch) == {
        ("people", "as_text", "MEDIUM", THROUGH_RDD),
        ("scores", "as_text", "MEDIUM", THROUGH_RDD),
        ("people", "as_table", "MEDIUM", THROUGH_RDD),
        ("scores", "as_table", "MEDIUM", THROUGH_RDD),
    }


def test_a_sure_path_beside_an_rdd_keeps_the_edge_sure(lake: Lake) -> None:
    people = lake.read("people")
    out = lake.output("both")

    def job() -> None:
        through_rdd = people.rdd.map(lambda row: (row.id,)).toDF(["id"])
        people.select("id").union(through_rdd).write.parquet(out)

    edges = _edges(lake, lake.run(job).batch())
    # the column read directly makes people → both certain, and gives the one column edge
    assert ("people", "both", "HIGH", None) in edges
    assert ("people#id", "both#id", "HIGH", None) in edges
    assert not [e for e in edges if e[2] != "HIGH"]


def test_pickle_files_and_parallelized_data(lake: Lake) -> None:
    context = lake.spark.sparkContext
    pickled, again, numbers = lake.output("pickled"), lake.output("again"), lake.output("numbers")

    def job() -> None:
        context.parallelize([1, 2, 3]).saveAsPickleFile(pickled)
        context.pickleFile(pickled).map(lambda n: n * 2).saveAsTextFile(again)
        context.parallelize(["x"]).saveAsTextFile(numbers)

    tracker = lake.run(job)
    batch = tracker.batch()
    # data made in the driver is no dataset: its writes have no input, and the run says so
    assert _edges(lake, batch) == {("pickled", "again", "MEDIUM", THROUGH_RDD)}
    assert _formats(batch)[lake.urn("pickled")] == "sequencefile"
    assert {lake.short(w["dataset"]) for w in batch.processes[0].metadata["writes"]} == {
        "pickled",
        "again",
        "numbers",
    }
    notes = batch.processes[0].metadata["notes"]
    assert any("saveAsPickleFile: an RDD of no dataset" in note for note in notes)


def test_an_rdd_job_that_only_reads_records_its_reads(lake: Lake) -> None:
    words = _text(lake, "words", ["a b", "c"])
    people = lake.read("people")
    answers: list[object] = []

    def job() -> None:
        answers.append(lake.spark.sparkContext.textFile(words).map(len).count())
        answers.append(people.rdd.map(lambda row: row.id).take(1))

    tracker = lake.run(job)
    assert answers == [2, [1]]
    batch = tracker.batch()
    assert batch.edges == []
    assert sorted(lake.short(urn) for urn in batch.processes[0].metadata["reads"]) == ["people", "words"]
    # count is sum of a collect underneath, take a runJob: each is the one action the job called
    assert [a.func_name for a in tracker.actions] == ["count", "take"]


def test_a_failed_rdd_write_fails_the_run_and_still_raises(lake: Lake) -> None:
    words = _text(lake, "words", ["a"])
    context = lake.spark.sparkContext

    def job() -> None:
        with pytest.raises(Py4JJavaError):  # the directory exists: Hadoop refuses to write into it
            context.textFile(words).saveAsTextFile(words)

    tracker = lake.run(job)
    assert tracker.run.status == "FAIL"
    assert [(f.func_name, f.error_class) for f in tracker.failures] == [
        ("saveAsTextFile", "org.apache.hadoop.mapred.FileAlreadyExistsException")
    ]


def test_untracked_rdd_writes_are_left_alone(lake: Lake) -> None:
    words = _text(lake, "words", ["a"])
    out = lake.output("untracked")
    lake.run(lambda: None)  # the wrappers are installed, no tracker is attached any more
    lake.spark.sparkContext.textFile(words).saveAsTextFile(out)
    assert sorted(Path(out).glob("part-*"))
