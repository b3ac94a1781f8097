"""Every way a statement writes a table: INSERT (partitions, column lists, positional), CTAS,
views, MERGE, Hive multi-insert, and the statements that write nothing.

Expected edges are worked out by hand from the SQL of each test.
"""

from __future__ import annotations

from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.sql import collect_sql
from tracelake.model import Confidence, Signal

from . import column_edges, confidences, direct_edges, indirect_edges, lineage, table_edges, to_all

DATING = """
INSERT OVERWRITE TABLE dating.safety_training_tbl PARTITION (ds='2024-03-10')
SELECT user_id AS target_user_id,
       religion AS target_religion,
       severity
FROM dating.safety_log_tbl
WHERE report_reason = 'religion' AND severity >= 2
"""


def test_insert_overwrite_static_partition_dating_example() -> None:
    c = lineage(DATING)
    assert table_edges(c) == {("dating.safety_log_tbl", "dating.safety_training_tbl")}
    targets = [
        "dating.safety_training_tbl#target_user_id",
        "dating.safety_training_tbl#target_religion",
        "dating.safety_training_tbl#severity",
    ]
    assert direct_edges(c) == {
        ("dating.safety_log_tbl#user_id", "dating.safety_training_tbl#target_user_id", "IDENTITY"),
        ("dating.safety_log_tbl#religion", "dating.safety_training_tbl#target_religion", "IDENTITY"),
        ("dating.safety_log_tbl#severity", "dating.safety_training_tbl#severity", "IDENTITY"),
    }
    # WHERE columns influence every output column; the static partition column gets nothing
    assert indirect_edges(c) == to_all(
        ["dating.safety_log_tbl#report_reason", "dating.safety_log_tbl#severity"], targets, "FILTER"
    )
    assert all(e.signal is Signal.SQL_STATIC for b in c.batches for e in b.edges)
    assert all(e.confidence is Confidence.HIGH for b in c.batches for e in b.edges)


def test_dynamic_partition_takes_the_last_select_column() -> None:
    c = lineage("INSERT OVERWRITE TABLE d.daily PARTITION (dt) SELECT uid, amount, event_day FROM d.events")
    assert direct_edges(c) == {
        ("d.events#uid", "d.daily#uid", "IDENTITY"),
        ("d.events#amount", "d.daily#amount", "IDENTITY"),
        ("d.events#event_day", "d.daily#dt", "IDENTITY"),
    }


def test_mixed_static_and_dynamic_partitions_in_hive() -> None:
    c = lineage(
        "INSERT OVERWRITE TABLE d.t PARTITION (dt='2024-01-01', hr) SELECT a, b, hour(ts) FROM d.s",
        dialect="hive",
    )
    assert direct_edges(c) == {
        ("d.s#a", "d.t#a", "IDENTITY"),
        ("d.s#b", "d.t#b", "IDENTITY"),
        ("d.s#ts", "d.t#hr", "TRANSFORMATION"),
    }


def test_insert_with_an_explicit_column_list_maps_by_position() -> None:
    c = lineage("INSERT INTO d.dst (name, id) SELECT a, b + 1 FROM d.src")
    assert direct_edges(c) == {
        ("d.src#a", "d.dst#name", "IDENTITY"),
        ("d.src#b", "d.dst#id", "TRANSFORMATION"),
    }


def test_insert_without_a_list_maps_onto_the_known_schema_minus_static_partitions() -> None:
    schema = SchemaCatalog({"d.dst": ["id", "name", "amount", "ds"]})
    c = lineage(
        "INSERT OVERWRITE TABLE d.dst PARTITION (ds='2024-01-01') SELECT uid, uname, amt FROM d.src",
        schema=schema,
    )
    assert direct_edges(c) == {
        ("d.src#uid", "d.dst#id", "IDENTITY"),
        ("d.src#uname", "d.dst#name", "IDENTITY"),
        ("d.src#amt", "d.dst#amount", "IDENTITY"),
    }


def test_positional_insert_with_a_dynamic_partition_and_a_known_schema() -> None:
    schema = SchemaCatalog({"d.dst": ["id", "ds", "amount"]})
    c = lineage("INSERT OVERWRITE TABLE d.dst PARTITION (ds) SELECT uid, amt, day FROM d.src", schema=schema)
    # Hive lays dynamic partition columns out last, whatever the schema file's order
    assert direct_edges(c) == {
        ("d.src#uid", "d.dst#id", "IDENTITY"),
        ("d.src#amt", "d.dst#amount", "IDENTITY"),
        ("d.src#day", "d.dst#ds", "IDENTITY"),
    }


def test_insert_values_reads_no_table() -> None:
    c = lineage("INSERT INTO d.t VALUES (1, 'a'), (2, 'b')")
    assert c.parsed == 1 and c.edges == 0


def test_ctas_with_using_and_partitioned_by() -> None:
    c = lineage(
        "CREATE TABLE d.stage USING parquet PARTITIONED BY (dt) AS "
        "SELECT id, lower(email) AS email, dt FROM d.raw WHERE valid"
    )
    targets = ["d.stage#id", "d.stage#email", "d.stage#dt"]
    assert table_edges(c) == {("d.raw", "d.stage")}
    assert direct_edges(c) == {
        ("d.raw#id", "d.stage#id", "IDENTITY"),
        ("d.raw#email", "d.stage#email", "TRANSFORMATION"),
        ("d.raw#dt", "d.stage#dt", "IDENTITY"),
    }
    assert indirect_edges(c) == to_all(["d.raw#valid"], targets, "FILTER")


def test_create_view_is_a_table_urn_marked_as_a_view() -> None:
    c = lineage("CREATE OR REPLACE VIEW d.active AS SELECT id, name FROM d.users WHERE active = true")
    assert direct_edges(c) == {
        ("d.users#id", "d.active#id", "IDENTITY"),
        ("d.users#name", "d.active#name", "IDENTITY"),
    }
    (batch,) = c.batches
    assets = {a.urn: a for a in batch.assets}
    assert set(assets) == {"hive.table/d.users", "hive.table/d.active"}
    assert assets["hive.table/d.active"].metadata == {"type": "view", "columns": ["id", "name"]}
    assert assets["hive.table/d.users"].metadata == {}


def test_create_view_with_a_column_list_renames_outputs() -> None:
    c = lineage("CREATE VIEW d.v (user_key, label) AS SELECT id, upper(name) FROM d.users")
    assert direct_edges(c) == {
        ("d.users#id", "d.v#user_key", "IDENTITY"),
        ("d.users#name", "d.v#label", "TRANSFORMATION"),
    }


def test_merge_into_update_and_insert_clauses() -> None:
    c = lineage(
        """
        MERGE INTO d.customers t USING d.updates s ON t.id = s.id
        WHEN MATCHED AND s.op = 'u' THEN UPDATE SET t.email = s.email, t.score = s.score + 1
        WHEN NOT MATCHED THEN INSERT (id, email, score) VALUES (s.id, s.email, 0)
        """
    )
    assert table_edges(c) == {("d.updates", "d.customers")}
    assert direct_edges(c) == {
        ("d.updates#email", "d.customers#email", "IDENTITY"),
        ("d.updates#score", "d.customers#score", "TRANSFORMATION"),
        ("d.updates#id", "d.customers#id", "IDENTITY"),
    }
    # ON columns join into every column a clause writes (the target's own t.id is not a
    # source of itself); the WHEN … AND condition decides the values of its clause only
    assert indirect_edges(c) == to_all(
        ["d.updates#id"], ["d.customers#email", "d.customers#score", "d.customers#id"], "JOIN"
    ) | to_all(["d.updates#op"], ["d.customers#email", "d.customers#score"], "CONDITIONAL")


def test_merge_with_update_set_star_copies_same_named_columns() -> None:
    schema = SchemaCatalog({"d.updates": ["id", "email"]})
    c = lineage(
        "MERGE INTO d.customers t USING d.updates s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
        schema=schema,
    )
    assert direct_edges(c) == {
        ("d.updates#id", "d.customers#id", "IDENTITY"),
        ("d.updates#email", "d.customers#email", "IDENTITY"),
    }


def test_hive_multi_insert_reads_the_shared_from() -> None:
    c = lineage(
        "FROM d.src INSERT OVERWRITE TABLE d.a SELECT x WHERE k = 1 INSERT OVERWRITE TABLE d.b SELECT y",
        dialect="hive",
    )
    assert table_edges(c) == {("d.src", "d.a"), ("d.src", "d.b")}
    assert column_edges(c) == {
        ("d.src#x", "d.a#x", "IDENTITY"),
        ("d.src#k", "d.a#x", "FILTER"),
        ("d.src#y", "d.b#y", "IDENTITY"),
    }


def test_statements_that_move_no_data_parse_and_add_nothing() -> None:
    script = """
    SET spark.sql.shuffle.partitions=200;
    DROP TABLE IF EXISTS d.x;
    ALTER TABLE d.x ADD COLUMNS (c INT);
    ANALYZE TABLE d.x COMPUTE STATISTICS;
    CACHE TABLE d.x;
    UNCACHE TABLE d.x;
    REFRESH TABLE d.x;
    SELECT a, b FROM d.x WHERE a > 1;
    """
    c = collect_sql(script)
    assert (c.statements, c.parsed, c.failed, c.edges) == (8, 8, 0, 0)
    assert c.problems == []


def test_batch_holds_assets_fields_with_types_process_and_run() -> None:
    schema = SchemaCatalog({"d.src": {"id": "bigint", "name": "string"}})
    c = lineage("INSERT INTO d.dst SELECT id, name FROM d.src", schema=schema, source="jobs/load.sql")
    (batch,) = c.batches
    assert {a.urn for a in batch.assets} == {"hive.table/d.src", "hive.table/d.dst"}
    fields = {f.urn: f.data_type for f in batch.fields}
    assert fields == {
        "hive.table/d.src#id": "bigint",
        "hive.table/d.src#name": "string",
        "hive.table/d.dst#id": None,
        "hive.table/d.dst#name": None,
    }
    (process,) = batch.processes
    assert process.urn == "sql.script/jobs/load.sql"
    assert process.metadata["dialect"] == "spark"
    assert process.metadata["statements"] == 1
    assert "sql" not in process.metadata
    (run,) = batch.runs
    assert run.process == process.urn
    assert batch.observed_at is None
    assert {e.process for e in batch.edges} == {process.urn}
    assert c.edges == len(batch.edges) == 1 + 2  # one table edge, two column edges


def test_update_from_another_table() -> None:
    c = lineage("UPDATE d.t SET a = s.x, b = 1 FROM d.s WHERE t.id = s.id")
    assert table_edges(c) == {("d.s", "d.t")}
    # the target's own columns are not sources of itself (t.id in the WHERE)
    assert column_edges(c) == {("d.s#x", "d.t#a", "IDENTITY")} | to_all(
        ["d.s#id"], ["d.t#a", "d.t#b"], "FILTER"
    )


def test_alter_view_as_select_redefines_the_view() -> None:
    c = lineage("ALTER VIEW d.v AS SELECT k AS key FROM d.s")
    assert column_edges(c) == {("d.s#k", "d.v#key", "IDENTITY")}
    assert {a.urn: a.metadata for a in c.batches[0].assets}["hive.table/d.v"] == {
        "type": "view",
        "columns": ["key"],
    }


def test_tables_named_by_their_files_are_file_nodes() -> None:
    c = lineage("INSERT INTO delta.`/lake/Out` SELECT id FROM parquet.`s3://bucket/Events/2024` e")
    assert {(e.source, e.target, e.transformation) for e in c.batches[0].edges} == {
        ("file.dataset/s3://bucket/Events/2024", "file.dataset//lake/Out", None),
        ("file.dataset/s3://bucket/Events/2024#id", "file.dataset//lake/Out#id", "IDENTITY"),
    }


def test_run_details_given_by_the_caller() -> None:
    from datetime import UTC, datetime

    moment = datetime(2024, 3, 10, 5, 0, tzinfo=UTC)
    c = lineage(
        "INSERT INTO d.t SELECT a FROM d.s",
        observed_at=moment,
        job_id="nightly-42",
        user="etl",
        dialect="hive",
    )
    (batch,) = c.batches
    assert batch.observed_at == moment
    assert batch.processes[0].urn == "sql.job/nightly-42"
    assert batch.processes[0].metadata["dialect"] == "hive"
    (run,) = batch.runs
    assert (run.job_id, run.user, run.started_at) == ("nightly-42", "etl", moment)
    named = lineage("INSERT INTO d.t SELECT a FROM d.s", process="sql.script/custom")
    assert named.batches[0].processes[0].urn == "sql.script/custom"
    assert {e.process for e in named.batches[0].edges} == {"sql.script/custom"}


def test_insert_whose_column_count_disagrees_with_the_schema_matches_names_with_medium_confidence() -> None:
    schema = SchemaCatalog({"d.dst": ["a", "b", "c"]})
    c = lineage("INSERT INTO d.dst SELECT a, x AS b FROM d.s", schema=schema)
    assert confidences(c) == {
        ("d.s#a", "d.dst#a", "IDENTITY"): Confidence.MEDIUM,
        ("d.s#x", "d.dst#b", "IDENTITY"): Confidence.MEDIUM,
    }


def test_an_untraceable_star_leaves_a_note_on_the_process() -> None:
    c = lineage("INSERT INTO d.dst SELECT * FROM d.src")
    (note,) = c.batches[0].processes[0].metadata["notes"]
    assert note.startswith("hive.table/d.dst:")
    assert c.problems == []
