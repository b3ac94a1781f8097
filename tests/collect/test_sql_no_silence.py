"""No statement is silent (issue 18): each ends as lineage, a read, a kind that moves no data, or
a recorded problem saying why. One statement per form, expected results worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelake.collect.sql import SqlCollection, collect_sql
from tracelake.collect.sql_statements import Outcome
from tracelake.model import DECLARED_COLUMNS as DECLARED

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "corpus"


def short(urn: str) -> str:
    return urn.removeprefix("hive.table/")


def edges(c: SqlCollection) -> set[tuple[str, str, str | None]]:
    return {
        (short(e.source), short(e.target), e.transformation.value if e.transformation else None)
        for b in c.batches
        for e in b.edges
    }


def outcome(sql: str, dialect: str = "spark") -> tuple[Outcome, SqlCollection]:
    """What the last statement of `sql` came to (the ones before set the stage)."""
    c = collect_sql(sql, dialect=dialect)
    before = (
        collect_sql(sql.rsplit(";", 2)[0] + ";", dialect=dialect) if sql.count(";") > 1 else SqlCollection()
    )
    (last,) = [o for o in Outcome if c.outcomes[o] > before.outcomes[o]]
    return last, c


DECLARE = "CREATE TABLE dw.t1 (a INT, b STRING);\n"


@pytest.mark.parametrize(
    "sql",
    [
        DECLARE + "INSERT INTO dw.t1 (SELECT a, b FROM src.s1);",
        DECLARE + "INSERT INTO dw.t1 ((SELECT a, b FROM src.s1));",
        "CREATE TABLE dw.t1 AS (SELECT a, b FROM src.s1);",
        "CREATE VIEW dw.t1 AS (SELECT a, b FROM src.s1);",
    ],
    ids=["insert", "insert, twice parenthesised", "ctas", "view"],
)
def test_a_query_in_parentheses_is_the_query(sql: str) -> None:
    result, c = outcome(sql)
    assert result is Outcome.LINEAGE
    assert edges(c) == {
        ("src.s1", "dw.t1", None),
        ("src.s1#a", "dw.t1#a", "IDENTITY"),
        ("src.s1#b", "dw.t1#b", "IDENTITY"),
    }
    assert not c.problems


def test_a_parenthesised_query_with_its_own_limit_keeps_it() -> None:
    result, c = outcome(DECLARE + "INSERT INTO dw.t1 (SELECT a, b FROM src.s1 ORDER BY a LIMIT 5);")
    assert result is Outcome.LINEAGE
    assert ("src.s1#a", "dw.t1#a", "IDENTITY") in edges(c)


def test_values_with_a_subquery_read_its_table() -> None:
    result, c = outcome(
        "CREATE TABLE dw.ids (n INT, top BIGINT);\n"
        "INSERT INTO dw.ids VALUES (1, (SELECT max(id) FROM src.ids));"
    )
    assert result is Outcome.LINEAGE
    assert ("src.ids", "dw.ids", None) in edges(c)
    assert ("src.ids#id", "dw.ids#top", "AGGREGATION") in edges(c)
    assert not any(e[1] == "dw.ids#n" for e in edges(c))  # a literal reads nothing


def test_literal_values_move_no_data_and_say_nothing_wrong() -> None:
    result, c = outcome("INSERT INTO dw.t VALUES (1, 'a'), (2, 'b');")
    assert (result, edges(c), c.problems) == (Outcome.NO_LINEAGE, set(), [])


def test_a_select_records_what_it_read() -> None:
    result, c = outcome("SELECT a, count(*) FROM src.s1 JOIN src.s2 USING (a) GROUP BY a;")
    assert result is Outcome.READ
    (process,) = c.batches[0].processes
    assert process.metadata["reads"] == ["hive.table/src.s1", "hive.table/src.s2"]
    assert edges(c) == set()


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("OPTIMIZE dw.t ZORDER BY (a);", "OPTIMIZE"),
        ("VACUUM dw.t RETAIN 168 HOURS;", "VACUUM"),
    ],
    ids=["optimize", "vacuum"],
)
def test_what_is_not_traced_is_a_problem_at_its_place(sql: str, reason: str) -> None:
    result, c = outcome("SELECT 1;\n" + sql)
    assert result is Outcome.UNTRACED
    (problem,) = c.problems
    assert problem.reason.startswith("no lineage:") and reason in problem.reason
    assert problem.location == "line 2, statement 2"


@pytest.mark.parametrize(
    "sql",
    [
        "SET spark.sql.shuffle.partitions = 4;",
        "SHOW TABLES;",
        "DESCRIBE dw.t;",
        "ANALYZE TABLE dw.t COMPUTE STATISTICS;",
        "DROP TABLE IF EXISTS dw.t;",
        "CREATE FUNCTION f AS 'com.example.F';",
        "CREATE TABLE dw.t (a INT);",
        "ALTER TABLE dw.t ADD COLUMNS (z STRING);",
        "DELETE FROM dw.t WHERE a = 1;",
        "USE dw;",
        "EXPLAIN SELECT * FROM src.s1;",
        "MSCK REPAIR TABLE dw.t;",
        "CACHE TABLE dw.t;",
    ],
)
def test_statements_that_move_no_data_are_known_kinds(sql: str) -> None:
    result, c = outcome(sql)
    assert (result, c.problems, edges(c)) == (Outcome.NO_LINEAGE, [], set())


@pytest.mark.parametrize("name", ["dating", "tpcds", "holdout"])
def test_every_corpus_statement_ends_as_one_outcome(name: str) -> None:
    c = collect_sql((CORPUS / f"{name}.sql").read_text(encoding="utf-8"), source=name)
    assert sum(c.outcomes.values()) == c.parsed == c.statements
    untraced = [p for p in c.problems if p.reason.startswith("no lineage:")]
    assert len(untraced) == c.outcomes[Outcome.UNTRACED]
    assert untraced == []  # the corpus is hand-worked: every statement is understood


def test_a_cte_before_hives_from_first_insert_is_no_table() -> None:
    c = collect_sql(
        "WITH q AS (SELECT key, value FROM src.kv WHERE key = '5') "
        "FROM q INSERT OVERWRITE TABLE dw.s1 SELECT * INSERT OVERWRITE TABLE dw.s2 SELECT key",
        dialect="hive",
    )
    assert edges(c) == {
        ("src.kv", "dw.s1", None),
        ("src.kv", "dw.s2", None),
        ("src.kv#key", "dw.s1#key", "IDENTITY"),
        ("src.kv#value", "dw.s1#value", "IDENTITY"),
        ("src.kv#key", "dw.s2#key", "IDENTITY"),
        # WHERE key = '5' decides which rows reach every column
        ("src.kv#key", "dw.s1#key", "FILTER"),
        ("src.kv#key", "dw.s1#value", "FILTER"),
        ("src.kv#key", "dw.s2#key", "FILTER"),
    }


def test_a_cte_an_update_reads_from_is_no_table() -> None:
    c = collect_sql(
        "WITH s AS (SELECT id, name FROM src.people) "
        "UPDATE dw.tgt AS t SET name = s.name FROM s WHERE t.id = s.id",
        dialect="postgres",
    )
    assert edges(c) == {
        ("src.people", "dw.tgt", None),
        ("src.people#name", "dw.tgt#name", "IDENTITY"),
        ("src.people#id", "dw.tgt#name", "FILTER"),  # which rows are updated
    }


@pytest.mark.parametrize("dialect", ["postgres", "tsql"])
def test_select_into_creates_its_table(dialect: str) -> None:
    result, c = outcome("SELECT a, b AS c INTO dw.newt FROM src.s1 WHERE a > 1;", dialect=dialect)
    assert result is Outcome.LINEAGE
    assert edges(c) == {
        ("src.s1", "dw.newt", None),
        ("src.s1#a", "dw.newt#a", "IDENTITY"),
        ("src.s1#b", "dw.newt#c", "IDENTITY"),
        ("src.s1#a", "dw.newt#a", "FILTER"),
        ("src.s1#a", "dw.newt#c", "FILTER"),
    }


def test_select_into_a_tsql_temp_table_flows_through_it() -> None:
    c = collect_sql(
        "SELECT a INTO #tmp FROM src.s1;\nINSERT INTO dw.out (a) SELECT a FROM #tmp;", dialect="tsql"
    )
    assert edges(c) == {("src.s1", "dw.out", None), ("src.s1#a", "dw.out#a", "IDENTITY")}


def test_a_tsql_update_of_an_alias_writes_the_aliased_table() -> None:
    result, c = outcome(
        "UPDATE t SET t.c = s.c FROM dw.tab1 t JOIN src.tab2 s ON t.id = s.id;", dialect="tsql"
    )
    assert result is Outcome.LINEAGE and not c.problems
    assert edges(c) == {
        ("src.tab2", "dw.tab1", None),
        ("src.tab2#c", "dw.tab1#c", "IDENTITY"),
        ("src.tab2#id", "dw.tab1#c", "JOIN"),  # the ON decides which rows get which value
    }


def test_a_using_join_of_two_unnamed_subqueries() -> None:
    result, c = outcome(
        "INSERT INTO dw.o SELECT * FROM (SELECT a, b FROM src.x) JOIN (SELECT a, c FROM src.y) USING (a);"
    )
    assert result is Outcome.LINEAGE and not c.problems
    direct = {e for e in edges(c) if e[2] == "IDENTITY"}
    assert direct == {
        ("src.x#a", "dw.o#a", "IDENTITY"),
        ("src.y#a", "dw.o#a", "IDENTITY"),  # USING's column is either side's
        ("src.x#b", "dw.o#b", "IDENTITY"),
        ("src.y#c", "dw.o#c", "IDENTITY"),
    }
    assert {e[0] for e in edges(c) if e[2] == "JOIN"} == {"src.x#a", "src.y#a"}


def test_a_hive_virtual_column_is_no_column_of_the_table() -> None:
    c = collect_sql("INSERT INTO dw.o SELECT INPUT__FILE__NAME AS f, key FROM src.kv", dialect="hive")
    assert edges(c) == {("src.kv", "dw.o", None), ("src.kv#key", "dw.o#key", "IDENTITY")}
    (process,) = c.batches[0].processes
    assert process.metadata["notes"] == ["hive.table/dw.o#f: from a Hive virtual column of hive.table/src.kv"]


def test_load_data_moves_files_into_the_table() -> None:
    result, c = outcome(
        "LOAD DATA INPATH 'hdfs://nn/landing/kv1.txt' OVERWRITE INTO TABLE src.kv;", dialect="hive"
    )
    assert result is Outcome.LINEAGE
    assert edges(c) == {("file.dataset/hdfs://nn/landing/kv1.txt", "src.kv", None)}


@pytest.mark.parametrize(
    ("alter", "read", "columns"),
    [
        ("ALTER TABLE src.c ADD COLUMNS (z STRING)", "src.c", {"x", "y", "z"}),
        ("ALTER TABLE src.c ADD COLUMN z STRING", "src.c", {"x", "y", "z"}),
        ("ALTER TABLE src.c REPLACE COLUMNS (a INT, b STRING)", "src.c", {"a", "b"}),
        ("ALTER TABLE src.c CHANGE COLUMN x x2 BIGINT", "src.c", {"x2", "y"}),
        ("ALTER TABLE src.c RENAME COLUMN y TO y2", "src.c", {"x", "y2"}),
        ("ALTER TABLE src.c DROP COLUMN y", "src.c", {"x"}),
        ("ALTER TABLE src.c RENAME TO d", "src.d", {"x", "y"}),  # a rename stays in its database
    ],
)
def test_select_star_reads_the_columns_ddl_left(alter: str, read: str, columns: set[str]) -> None:
    c = collect_sql(
        f"CREATE TABLE src.c (x INT, y STRING);\n{alter};\nINSERT OVERWRITE TABLE dw.o SELECT * FROM {read};"
    )
    assert {e for e in edges(c) if e[1].startswith("dw.o#")} == {
        (f"{read}#{n}", f"dw.o#{n}", "IDENTITY") for n in columns
    }
    assert not c.problems


def test_a_renamed_table_holds_the_old_ones_data() -> None:
    """Its upstream goes on through the old name: not a new table with no past."""
    result, c = outcome(
        "CREATE TABLE dw.c (x INT, y STRING);\nINSERT INTO dw.c SELECT a, b FROM src.s1;\n"
        "ALTER TABLE dw.c RENAME TO dw.d;"
    )
    assert result is Outcome.LINEAGE and not c.problems
    assert {e for e in edges(c) if e[1].startswith("dw.d")} == {
        ("dw.c", "dw.d", None),
        ("dw.c#x", "dw.d#x", "IDENTITY"),
        ("dw.c#y", "dw.d#y", "IDENTITY"),
    }
    assert ("src.s1#a", "dw.c#x", "IDENTITY") in edges(c)


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        (
            "CREATE PROCEDURE dbo.load AS BEGIN INSERT INTO dw.t (a) SELECT a FROM src.s; "
            "UPDATE dw.u SET b = CASE WHEN b > 1 THEN 2 END; END;",
            "tsql",
        ),
        (
            "CREATE PROCEDURE load() BEGIN INSERT INTO dw.t SELECT a FROM src.s; "
            "IF 1 = 1 THEN INSERT INTO dw.u SELECT b FROM src.s2; END IF; END;",
            "spark",
        ),
        (
            "CREATE FUNCTION load() RETURNS void AS $$ DECLARE n int; "
            "BEGIN INSERT INTO dw.t (a) SELECT a FROM src.s; "
            "IF n > 0 THEN INSERT INTO dw.u (b) SELECT b FROM src.s2; END IF; END; $$ LANGUAGE plpgsql;",
            "postgres",
        ),
    ],
    ids=["t-sql", "spark scripting", "pl/pgsql"],
)
def test_a_procedure_body_is_read_as_one_statement_with_its_writes(sql: str, dialect: str) -> None:
    c = collect_sql(sql + "\nINSERT INTO dw.z (a) SELECT a FROM src.y;", dialect=dialect)
    assert c.statements == 2  # the body's semicolons do not cut the procedure
    assert c.outcomes[Outcome.LINEAGE] == 2 and not c.problems
    tables = {e for e in edges(c) if "#" not in e[0]}
    assert {("src.s", "dw.t", None), ("src.y", "dw.z", None)} <= tables
    if dialect != "tsql":  # the write inside IF … THEN, which sqlglot keeps as text
        assert ("src.s2", "dw.u", None) in tables


def test_begin_transaction_still_ends_at_its_semicolon() -> None:
    c = collect_sql("BEGIN TRANSACTION; INSERT INTO dw.t (a) SELECT a FROM src.s; COMMIT;", dialect="tsql")
    assert c.statements == 3
    assert ("src.s", "dw.t", None) in edges(c)


@pytest.mark.parametrize(
    "alter", ["ALTER TABLE dw.t SET TBLPROPERTIES ('team' = 'x')", "ALTER TABLE dw.t ADD COLUMNS (z INT)"]
)
def test_an_alter_declares_no_order_for_columns_only_seen(alter: str) -> None:
    """Columns the store has only seen have no known order; an ALTER must not make one up."""
    from tracelake.collect.catalog import SchemaCatalog

    seen = SchemaCatalog.from_mapping({"dw.t": {"a": "int", "b": "int"}}, ordered=False)
    c = collect_sql(f"{alter};\nINSERT INTO dw.t SELECT y, x FROM src.s;", schema=seen)
    # mapped by name (no a/b in the query), never by position onto a, b
    assert not {e for e in edges(c) if e[1] in ("dw.t#a", "dw.t#b")}
    assert all(DECLARED not in a.metadata for b in c.batches for a in b.assets if a.urn.endswith("dw.t"))


# -- files as sources and targets, copies of tables ---------------------------------------

S1 = {("src.s1", None), ("src.s1#a", "IDENTITY"), ("src.s1#b", "IDENTITY")}  # read by `SELECT a, b`


def into(target: str, sources: set[tuple[str, str | None]]) -> set[tuple[str, str, str | None]]:
    """Edges from `sources` into `target`, a column source feeding the target column of its name."""
    return {(s, target + ("#" + s.partition("#")[2] if "#" in s else ""), kind) for s, kind in sources}


@pytest.mark.parametrize(
    ("sql", "dialect", "files"),
    [
        (
            "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/out' ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' "
            "SELECT a, b FROM src.s1;",
            "hive",
            "file.dataset//tmp/out",
        ),
        (
            "INSERT OVERWRITE DIRECTORY 'hdfs://nn/exports/x/' STORED AS ORC SELECT a, b FROM src.s1;",
            "hive",
            "file.dataset/hdfs://nn/exports/x",
        ),
        (
            "INSERT OVERWRITE DIRECTORY '/exports/x' USING parquet SELECT a, b FROM src.s1;",
            "spark",
            "file.dataset//exports/x",
        ),
        (
            "INSERT OVERWRITE DIRECTORY USING csv OPTIONS ('path' '/exports/y', header 'true') "
            "SELECT a, b FROM src.s1;",
            "spark",
            "file.dataset//exports/y",
        ),
        (
            "COPY (SELECT a, b FROM src.s1) TO '/data/s1.csv' WITH (FORMAT csv);",
            "postgres",
            "file.dataset//data/s1.csv",
        ),
        (
            "COPY INTO 's3://bkt/out/' FROM (SELECT a, b FROM src.s1);",
            "snowflake",
            "file.dataset/s3://bkt/out",
        ),
        (
            "UNLOAD ('SELECT a, b FROM src.s1') TO 's3://bkt/unload/' IAM_ROLE 'arn:aws:iam::1:role/r';",
            "redshift",
            "file.dataset/s3://bkt/unload",
        ),
        # the files are `part-*.csv` in the folder: the folder is the dataset
        (
            "EXPORT DATA OPTIONS (uri = 'gs://bkt/export/*.csv', format = 'CSV') AS SELECT a, b FROM src.s1;",
            "bigquery",
            "file.dataset/gs://bkt/export",
        ),
    ],
    ids=[
        "hive local directory",
        "hive directory stored as",
        "spark directory",
        "spark directory, path option",
        "postgres copy to",
        "snowflake copy into a location",
        "redshift unload",
        "bigquery export",
    ],
)
def test_a_query_written_to_files_feeds_their_columns(sql: str, dialect: str, files: str) -> None:
    result, c = outcome(sql, dialect=dialect)
    assert result is Outcome.LINEAGE and not c.problems
    assert edges(c) == into(files, S1)


def test_a_table_copied_to_files_by_its_declared_columns() -> None:
    result, c = outcome(
        "CREATE TABLE src.s1 (a INT, b TEXT);\nCOPY src.s1 TO '/data/s1.csv';", dialect="postgres"
    )
    assert result is Outcome.LINEAGE
    assert edges(c) == into("file.dataset//data/s1.csv", S1)
    result, c = outcome("COPY src.s1 (b) TO '/data/b.csv';", dialect="postgres")
    assert edges(c) == {
        ("src.s1", "file.dataset//data/b.csv", None),
        ("src.s1#b", "file.dataset//data/b.csv#b", "IDENTITY"),
    }


@pytest.mark.parametrize(
    ("sql", "dialect", "files"),
    [
        ("COPY dw.t FROM '/data/t.csv' WITH (FORMAT csv);", "postgres", ["file.dataset//data/t.csv"]),
        ("COPY dw.t (a, b) FROM 's3://bkt/t.csv';", "postgres", ["file.dataset/s3://bkt/t.csv"]),
        (
            "COPY dw.t FROM 's3://bkt/data/' IAM_ROLE 'arn:aws:iam::1:role/r' FORMAT AS PARQUET;",
            "redshift",
            ["file.dataset/s3://bkt/data"],
        ),
        (
            "COPY INTO dw.t FROM 's3://bkt/data/' FILE_FORMAT = (TYPE = CSV);",
            "snowflake",
            ["file.dataset/s3://bkt/data"],
        ),
        (
            "COPY INTO dw.t FROM @landing/t/ FILE_FORMAT = (TYPE = CSV);",
            "snowflake",
            ["file.dataset/@landing/t"],
        ),
        (
            "LOAD DATA INTO dw.t FROM FILES (format = 'CSV', uris = ['gs://bkt/a.csv', 'gs://bkt/b.csv']);",
            "bigquery",
            ["file.dataset/gs://bkt/a.csv", "file.dataset/gs://bkt/b.csv"],
        ),
    ],
    ids=[
        "postgres copy from",
        "postgres copy from, columns",
        "redshift copy",
        "snowflake copy into",
        "snowflake copy from a stage",
        "bigquery load data",
    ],
)
def test_files_loaded_into_a_table_as_they_are(sql: str, dialect: str, files: list[str]) -> None:
    result, c = outcome(sql, dialect=dialect)
    assert result is Outcome.LINEAGE and not c.problems
    assert edges(c) == {(f, "dw.t", None) for f in files}  # no column of a file is known


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("CREATE TABLE dw.t2 CLONE src.s1;", "snowflake"),
        ("CREATE TABLE dw.t2 CLONE src.s1;", "bigquery"),
        ("CREATE TABLE dw.t2 SHALLOW CLONE src.s1;", "databricks"),
        ("CREATE OR REPLACE TABLE dw.t2 DEEP CLONE src.s1;", "databricks"),
    ],
)
def test_a_clone_copies_every_column(sql: str, dialect: str) -> None:
    c = collect_sql("CREATE TABLE src.s1 (a INT, b STRING);\n" + sql, dialect=dialect)
    assert edges(c) == into("dw.t2", S1) and not c.problems
    # the clone has the source's columns, in order, for what reads it later
    c = collect_sql(
        f"CREATE TABLE src.s1 (a INT, b STRING);\n{sql}\nINSERT INTO dw.o SELECT * FROM dw.t2;",
        dialect=dialect,
    )
    assert {e for e in edges(c) if e[1].startswith("dw.o#")} == {
        ("dw.t2#a", "dw.o#a", "IDENTITY"),
        ("dw.t2#b", "dw.o#b", "IDENTITY"),
    }


def test_a_clone_of_a_table_of_unknown_columns_is_table_level_and_says_so() -> None:
    result, c = outcome("CREATE TABLE dw.t2 CLONE src.s1;", dialect="snowflake")
    assert result is Outcome.LINEAGE
    assert edges(c) == {("src.s1", "dw.t2", None)}
    (process,) = c.batches[0].processes
    assert process.metadata["notes"] == [
        "hive.table/dw.t2: copied from hive.table/src.s1, whose columns are unknown: table level only"
    ]


def test_an_exchanged_partition_moves_from_the_table_after_with() -> None:
    # Hive: ALTER TABLE <destination> EXCHANGE PARTITION (…) WITH TABLE <source>
    c = collect_sql(
        "CREATE TABLE src.s1 (a INT, b STRING);\n"
        "ALTER TABLE dw.t EXCHANGE PARTITION (ds = '2024-01-01') WITH TABLE src.s1;",
        dialect="hive",
    )
    assert edges(c) == into("dw.t", S1) and not c.problems


@pytest.mark.parametrize(
    "properties",
    [
        "STORED AS AVRO TBLPROPERTIES ('avro.schema.literal' = '{schema}')",
        "ROW FORMAT SERDE 'org.apache.hadoop.hive.serde2.avro.AvroSerDe' "
        "WITH SERDEPROPERTIES ('avro.schema.literal' = '{schema}') STORED AS AVRO",
    ],
    ids=["tblproperties", "serdeproperties"],
)
def test_an_avro_schema_literal_declares_the_columns(properties: str) -> None:
    schema = (
        '{"type": "record", "name": "r", "fields": [{"name": "Id", "type": "long"}, '
        '{"name": "email", "type": ["null", "string"]}]}'
    )
    ddl = "CREATE TABLE dw.t " + properties.replace("{schema}", schema)
    c = collect_sql(f"{ddl};\nINSERT INTO dw.t SELECT x, y FROM src.s;", dialect="hive")
    # positional: x feeds the first Avro field, y the second
    assert {e for e in edges(c) if "#" in e[0]} == {
        ("src.s#x", "dw.t#id", "IDENTITY"),
        ("src.s#y", "dw.t#email", "IDENTITY"),
    }
    (field_types,) = [{f.urn: f.data_type for f in b.fields} for b in c.batches]
    assert field_types["hive.table/dw.t#email"] == "string"


@pytest.mark.parametrize(
    ("sql", "dialect", "read"),
    [
        (
            "DELETE FROM dw.t WHERE id IN (SELECT id FROM src.gone WHERE reason = 'gdpr');",
            "spark",
            {"id", "reason"},
        ),
        ("DELETE FROM dw.t USING src.gone g WHERE t.id = g.id;", "postgres", {"id"}),
        (
            "DELETE FROM dw.t AS x WHERE EXISTS (SELECT 1 FROM src.gone g WHERE g.id = x.id);",
            "postgres",
            {"id"},
        ),
    ],
    ids=["in a subquery", "postgres using", "exists"],
)
def test_a_delete_reading_another_table_filters_every_column(sql: str, dialect: str, read: set[str]) -> None:
    """Which rows of dw.t remain depends on what the condition reads of src.gone."""
    result, c = outcome("CREATE TABLE dw.t (id INT, v STRING);\n" + sql, dialect=dialect)
    assert result is Outcome.LINEAGE and not c.problems
    assert edges(c) == {("src.gone", "dw.t", None)} | {
        (f"src.gone#{r}", f"dw.t#{column}", "FILTER") for r in read for column in ("id", "v")
    }


def test_a_delete_of_a_table_of_unknown_columns_is_table_level() -> None:
    result, c = outcome("DELETE FROM dw.t WHERE id IN (SELECT id FROM src.gone);")
    assert result is Outcome.LINEAGE
    assert edges(c) == {("src.gone", "dw.t", None)}


def test_an_update_without_from_reads_its_own_columns() -> None:
    """`SET a = b + 1` computes a from b: lineage inside the table; a column kept as it was
    (`SET c = c`) or choosing rows (`WHERE c > 0`) is none."""
    result, c = outcome("UPDATE dw.t SET a = b + 1, c = c WHERE c > 0;")
    assert result is Outcome.LINEAGE and not c.problems
    assert edges(c) == {("dw.t#b", "dw.t#a", "TRANSFORMATION")}


@pytest.mark.parametrize(
    ("join", "dialect"),
    [
        ("CROSS JOIN LATERAL", "postgres"),
        (", LATERAL", "postgres"),
        ("JOIN LATERAL", "spark"),
    ],
)
def test_a_lateral_subquery_correlates_with_the_tables_before_it(join: str, dialect: str) -> None:
    result, c = outcome(
        "INSERT INTO dw.o (id, last_amount, last_ts) SELECT u.id, l.amount, l.ts FROM src.users u "
        f"{join} (SELECT o.amount, o.ts FROM src.orders o WHERE o.user_id = u.id "
        "ORDER BY o.ts DESC LIMIT 1) l;",
        dialect=dialect,
    )
    assert result is Outcome.LINEAGE and not c.problems
    # each column of the lateral from its own source column (not all from all), and `u.id`
    # is the users' id, not a field `u.id` of orders
    assert {e for e in edges(c) if e[2] == "IDENTITY"} == {
        ("src.users#id", "dw.o#id", "IDENTITY"),
        ("src.orders#amount", "dw.o#last_amount", "IDENTITY"),
        ("src.orders#ts", "dw.o#last_ts", "IDENTITY"),
    }
    # which order row is kept: the correlation on both sides, and the ordering
    assert {(e[0], e[2]) for e in edges(c) if e[1] == "dw.o#last_amount" and e[2] != "IDENTITY"} == {
        ("src.users#id", "FILTER"),
        ("src.orders#user_id", "FILTER"),
        ("src.orders#ts", "SORT"),
    }
    assert {e[0].partition("#")[0] for e in edges(c)} == {"src.users", "src.orders"}
