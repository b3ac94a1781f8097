"""Where Spark writes land and what reads are recorded: files, catalog tables, JDBC, partitions.

Catalog tables live in the session's in-memory catalog (its warehouse is a temp folder), so each
test uses table names of its own. Statements run through `spark.sql` are also given to the SQL
collector: both collectors must type the same statement's column edges the same way.
"""

from __future__ import annotations

import uuid

from pyspark.sql import functions as F

from tests.spark.conftest import Lake, indirect
from tracelake.collect.sql import collect_sql
from tracelake.model import Signal
from tracelake.model.names import table_urn


def _table(lake: Lake, name: str) -> str:
    urn = table_urn(name)
    lake.names[urn] = name
    return urn


def _sql_edges(lake: Lake, statement: str) -> set[tuple[str, str, str | None]]:
    collection = collect_sql(statement, dialect="spark")
    return {
        (lake.short(e.source), lake.short(e.target), e.transformation.value if e.transformation else None)
        for batch in collection.batches
        for e in batch.edges
    }


def test_save_as_table_names_the_table_not_its_files(lake: Lake) -> None:
    people = lake.read("people")
    _table(lake, "tl_copy")

    def job() -> None:
        people.select("id", "name").write.saveAsTable("tl_copy")
        people.select("id", "name").write.mode("append").saveAsTable("tl_copy")

    batch = lake.run(job).batch()
    assert lake.edges(batch) == {
        ("people", "tl_copy", None),
        ("people#id", "tl_copy#id", "IDENTITY"),
        ("people#name", "tl_copy#name", "IDENTITY"),
    }
    # the warehouse directory Spark writes the table's files into is not a second asset
    assert {a.urn for a in batch.assets} == {lake.urn("people"), table_urn("tl_copy")}
    writes = batch.processes[0].metadata["writes"]
    assert [(w["dataset"], w["mode"]) for w in writes] == [(table_urn("tl_copy"), "Append")]
    assert batch.reads == []  # what a write reads is its lineage, not a read


def test_insert_into_fits_columns_without_computing(lake: Lake) -> None:
    lake.spark.sql("CREATE TABLE tl_ids (id BIGINT, name STRING) USING parquet")
    people = lake.read("people")
    _table(lake, "tl_ids")

    def job() -> None:
        # `id` is an int: Spark casts it to the table's BIGINT, the value is still the column's
        people.select("id", "name").write.insertInto("tl_ids")

    edges = lake.edges(lake.run(job).batch())
    assert edges == {
        ("people", "tl_ids", None),
        ("people#id", "tl_ids#id", "IDENTITY"),
        ("people#name", "tl_ids#name", "IDENTITY"),
    }


def test_sql_insert_matches_the_sql_collector(lake: Lake) -> None:
    lake.read("people").write.saveAsTable("tl_src_insert")
    lake.spark.sql("CREATE TABLE tl_totals (name STRING, total DOUBLE) USING parquet")
    _table(lake, "tl_src_insert")
    _table(lake, "tl_totals")
    statement = (
        "INSERT INTO tl_totals SELECT name, sum(amount) AS total"
        " FROM tl_src_insert WHERE id > 0 GROUP BY name"
    )

    edges = lake.edges(lake.run(lambda: lake.spark.sql(statement)).batch())
    expected = {
        ("tl_src_insert", "tl_totals", None),
        ("tl_src_insert#name", "tl_totals#name", "IDENTITY"),
        ("tl_src_insert#amount", "tl_totals#total", "AGGREGATION"),
        *indirect(["tl_src_insert#id"], ["tl_totals#name", "tl_totals#total"], "FILTER"),
        *indirect(["tl_src_insert#name"], ["tl_totals#name", "tl_totals#total"], "GROUP_BY"),
    }
    assert edges == expected
    assert _sql_edges(lake, statement) == expected


def test_ctas_matches_the_sql_collector(lake: Lake) -> None:
    lake.read("people").write.saveAsTable("tl_src_ctas")
    _table(lake, "tl_src_ctas")
    _table(lake, "tl_ctas")
    # the subquery reads files: the listener reaches them through the command's query field
    statement = (
        "CREATE TABLE tl_ctas USING parquet AS"
        " SELECT id, upper(name) AS uname FROM tl_src_ctas"
        f" WHERE amount > 1 AND id IN (SELECT key FROM parquet.`{lake.path('scores')}`)"
    )

    batch = lake.run(lambda: lake.spark.sql(statement)).batch()
    expected = {
        ("tl_src_ctas", "tl_ctas", None),
        ("scores", "tl_ctas", None),
        ("tl_src_ctas#id", "tl_ctas#id", "IDENTITY"),
        ("tl_src_ctas#name", "tl_ctas#uname", "TRANSFORMATION"),
        *indirect(
            ["tl_src_ctas#amount", "tl_src_ctas#id", "scores#key"], ["tl_ctas#id", "tl_ctas#uname"], "FILTER"
        ),
    }
    assert lake.edges(batch) == expected
    assert _sql_edges(lake, statement) == expected
    assert {a.urn for a in batch.assets} == {
        table_urn("tl_src_ctas"),
        table_urn("tl_ctas"),
        lake.urn("scores"),
    }


def test_partitioned_writes_and_partition_reads_name_the_dataset_root(lake: Lake) -> None:
    people, events, out = lake.read("people"), lake.output("events"), lake.output("out")

    def job() -> None:
        people.select("id", "name", F.lit("2024-03-10").alias("ds")).write.partitionBy("ds").mode(
            "append"
        ).parquet(events)
        # one partition directory read on its own is still the `events` dataset
        lake.spark.read.parquet(f"{events}/ds=2024-03-10").select("id").write.parquet(out)

    batch = lake.run(job).batch()
    assert lake.edges(batch) == {
        ("people", "events", None),
        ("people#id", "events#id", "IDENTITY"),
        ("people#name", "events#name", "IDENTITY"),
        ("events", "out", None),
        ("events#id", "out#id", "IDENTITY"),
    }
    writes = {w["dataset"]: w for w in batch.processes[0].metadata["writes"]}
    assert writes[lake.urn("events")]["partitioned_by"] == ["ds"]
    assert writes[lake.urn("events")]["mode"] == "Append"
    assert writes[lake.urn("out")]["mode"] == "ErrorIfExists"
    assert (lake.urn("events") + "#ds", "string") in {(f.urn, f.data_type) for f in batch.fields}


def test_file_formats_name_their_urns(lake: Lake) -> None:
    people = lake.read("people").select("id", "name")
    lake.write("people_csv", [(1, "ann")], "id int, name string", file_format="csv")
    targets = {fmt: lake.output(f"out_{fmt}", fmt) for fmt in ("csv", "json", "orc", "text")}

    def job() -> None:
        people.write.csv(targets["csv"])
        people.write.json(targets["json"])
        people.write.orc(targets["orc"])
        people.select("name").write.text(targets["text"])
        lake.read("people_csv", "csv").select("name").write.json(lake.output("from_csv", "json"))

    edges = lake.edges(lake.run(job).batch())
    assert {("people", f"out_{fmt}", None) for fmt in ("csv", "json", "orc", "text")} <= edges
    assert ("people_csv#name", "from_csv#name", "IDENTITY") in edges
    assert ("people#name", "out_text#value", "IDENTITY") not in edges  # text writes the column as is
    assert ("people#name", "out_text#name", "IDENTITY") in edges


def test_datasource_v2_file_reads(lake: Lake) -> None:
    out = lake.output("out")
    conf = lake.spark.conf
    previous = conf.get("spark.sql.sources.useV1SourceList")
    conf.set("spark.sql.sources.useV1SourceList", "")  # file reads through DataSource V2
    try:
        people = lake.read("people")
        edges = lake.edges(lake.run(lambda: people.select("id").write.parquet(out)).batch())
    finally:
        conf.set("spark.sql.sources.useV1SourceList", previous)
    assert edges == {("people", "out", None), ("people#id", "out#id", "IDENTITY")}


def test_jdbc_urns_carry_no_credentials(lake: Lake) -> None:
    people, out = lake.read("people").select("id", "name"), lake.output("out")
    database = f"tl_{uuid.uuid4().hex[:8]}"
    url = f"jdbc:derby:memory:{database};create=true"
    properties = {
        "driver": "org.apache.derby.iapi.jdbc.AutoloadedDriver",
        "user": "app",
        "password": "s3cret",
    }
    jdbc = f"jdbc.table/jdbc:derby:memory:{database}/people_t"
    lake.names[jdbc] = "jdbc"

    def job() -> None:
        people.write.jdbc(url, "PEOPLE_T", mode="overwrite", properties=properties)
        lake.spark.read.jdbc(url, "PEOPLE_T", properties=properties).select("NAME").write.parquet(out)

    batch = lake.run(job).batch()
    assert lake.edges(batch) == {
        ("people", "jdbc", None),
        ("people#id", "jdbc#id", "IDENTITY"),
        ("people#name", "jdbc#name", "IDENTITY"),
        ("jdbc", "out", None),
        ("jdbc#name", "out#name", "IDENTITY"),
    }
    assert "s3cret" not in repr(batch)
    assert "create=true" not in repr(batch)


def test_reads_without_writes_are_the_runs_inputs(lake: Lake) -> None:
    people, scores = lake.read("people"), lake.read("scores")

    def job() -> None:
        assert people.count() == 3
        assert len(scores.collect()) == 3
        people.filter("amount > 6").show()
        assert people.select("name").first() is not None

    batch = lake.run(job).batch()
    assert batch.edges == []
    assert {a.urn for a in batch.assets} == {lake.urn("people"), lake.urn("scores")}
    assert set(batch.processes[0].metadata["reads"]) == {lake.urn("people"), lake.urn("scores")}
    # the columns each action's result holds or depends on: none for count, all five of people
    # for show (through its casts to text, and amount through the filter), name for first
    [run] = batch.runs
    assert [(lake.short(r.asset), r.columns) for r in batch.reads] == [
        ("people", ("addr", "amount", "id", "name", "tags")),
        ("scores", ("key", "score")),
    ]
    assert {(r.run_id, r.process, r.at, r.user, r.signal) for r in batch.reads} == {
        (run.run_id, run.process, run.started_at, run.user, Signal.SPARK_RUNTIME)
    }
    types = {f.urn: f.data_type for f in batch.fields}
    assert types[lake.urn("people") + "#amount"] == "double"
    assert types[lake.urn("people") + "#addr"] == "struct<city:string,zip:string>"


def test_in_memory_sources_are_not_assets(lake: Lake) -> None:
    out, numbers = lake.output("out"), lake.output("numbers")

    def job() -> None:
        lake.spark.createDataFrame([(1, "x")], "id int, label string").write.parquet(out)
        lake.spark.range(3).withColumn("twice", F.col("id") * 2).write.parquet(numbers)

    batch = lake.run(job).batch()
    assert batch.edges == []
    assert {a.urn for a in batch.assets} == {lake.urn("out"), lake.urn("numbers")}
    assert {f.urn for f in batch.fields} >= {lake.urn("out") + "#label", lake.urn("numbers") + "#twice"}
    assert batch.processes[0].metadata["in_memory_inputs"] == 2


def test_a_table_write_declares_its_column_order_for_positional_sql_inserts(lake: Lake, tmp_path) -> None:
    """A `saveAsTable` of (name, id) declares that order; a later positional INSERT in a SQL log
    maps by it, not by the names its query happens to give."""
    from tracelake.app.service import Tracelake
    from tracelake.store import LineageStore

    people = lake.read("people")
    target = _table(lake, "tl_ordered")

    batch = lake.run(lambda: people.select("name", "id").write.saveAsTable("tl_ordered")).batch()

    (asset,) = [a for a in batch.assets if a.urn == target]
    assert asset.metadata["columns"] == ["name", "id"]
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    store.ingest(batch)
    (tmp_path / "log.sql").write_text("INSERT INTO tl_ordered SELECT s.id, s.label AS name FROM src.s s;")
    Tracelake(store).ingest_sql(tmp_path / "log.sql")
    mapped = {(e.source, e.target) for e in store.edges() if e.source.startswith("hive.table/src.s#")}
    assert mapped == {("hive.table/src.s#id", f"{target}#name"), ("hive.table/src.s#label", f"{target}#id")}
