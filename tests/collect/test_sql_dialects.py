"""Hive and Presto/Trino syntax, catalogs in names, and other sqlglot dialects.

Expected edges are worked out by hand from the SQL of each test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelake.collect.sql import collect_path, supported_dialects
from tracelake.collect.sql_statements import Outcome

from . import column_edges, direct_edges, indirect_edges, lineage, table_edges, to_all

DATA = Path(__file__).parent / "data"


def test_trino_ctas_with_properties_and_unnest() -> None:
    c = lineage(
        """
        CREATE TABLE hive.mart.user_tags WITH (format = 'ORC') AS
        SELECT u.id, t.tag FROM hive.raw.users u CROSS JOIN UNNEST(u.tags) AS t(tag)
        """,
        dialect="trino",
    )
    # `hive` is the default catalog: the same node as plain mart.user_tags
    assert table_edges(c) == {("raw.users", "mart.user_tags")}
    assert column_edges(c) == {
        ("raw.users#id", "mart.user_tags#id", "IDENTITY"),
        ("raw.users#tags", "mart.user_tags#tag", "TRANSFORMATION"),
    }


def test_presto_non_default_catalog_stays_in_the_name() -> None:
    c = lineage(
        "INSERT INTO iceberg.mart.events (id, kind) SELECT id, lower(kind) FROM hive.raw.events "
        "WHERE date_trunc('day', ts) = DATE '2024-01-01'",
        dialect="presto",
    )
    assert table_edges(c) == {("raw.events", "iceberg.mart.events")}
    assert column_edges(c) == {
        ("raw.events#id", "iceberg.mart.events#id", "IDENTITY"),
        ("raw.events#kind", "iceberg.mart.events#kind", "TRANSFORMATION"),
        ("raw.events#ts", "iceberg.mart.events#id", "FILTER"),
        ("raw.events#ts", "iceberg.mart.events#kind", "FILTER"),
    }


def test_hive_script_from_a_file() -> None:
    c = collect_path(DATA / "hive_etl.sql", dialect="hive")
    assert c.problems == []
    assert (c.statements, c.parsed) == (5, 5)
    assert table_edges(c) == {("ods.orders", "dw.order_items"), ("ods.users", "dw.order_items")}
    assert direct_edges(c) == {
        ("ods.orders#order_id", "dw.order_items#order_id", "IDENTITY"),
        ("ods.users#country", "dw.order_items#country", "IDENTITY"),
        ("ods.orders#items", "dw.order_items#sku", "TRANSFORMATION"),
        ("ods.orders#items", "dw.order_items#qty", "TRANSFORMATION"),
    }
    targets = [f"dw.order_items#{c}" for c in ("order_id", "country", "sku", "qty")]
    assert indirect_edges(c) == to_all(["ods.orders#dt"], targets, "FILTER") | to_all(
        ["ods.orders#user_id", "ods.users#user_id"], targets, "JOIN"
    )
    (batch,) = c.batches
    assert batch.processes[0].urn == f"sql.script/{DATA / 'hive_etl.sql'}"


def test_backquoted_and_mixed_case_names_are_one_node() -> None:
    c = lineage("INSERT INTO `Dw`.`Target` SELECT `UserId`, Amount FROM spark_catalog.ODS.Source")
    assert column_edges(c) == {
        ("ods.source#userid", "dw.target#userid", "IDENTITY"),
        ("ods.source#amount", "dw.target#amount", "IDENTITY"),
    }


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("spark", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("spark2", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("databricks", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("hive", "INSERT INTO TABLE d.t SELECT a, b FROM d.s"),
        ("presto", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("trino", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("bigquery", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("snowflake", "INSERT INTO D.T SELECT A, B FROM D.S"),
        ("postgres", "INSERT INTO d.t SELECT a, b FROM d.s"),
        ("mysql", "INSERT INTO d.t SELECT a, b FROM d.s"),
    ],
)
def test_a_plain_insert_in_many_dialects(dialect: str, sql: str) -> None:
    c = lineage(sql, dialect=dialect)
    assert column_edges(c) == {("d.s#a", "d.t#a", "IDENTITY"), ("d.s#b", "d.t#b", "IDENTITY")}


def test_supported_dialects_lists_the_usual_engines() -> None:
    assert {"spark", "hive", "presto", "trino", "databricks"} <= set(supported_dialects())


def test_unexpanded_variables_stay_in_table_names() -> None:
    c = lineage(
        "INSERT OVERWRITE TABLE ${out_db}.daily PARTITION (ds='${ds}') "
        "SELECT a FROM ${src_db}.events WHERE ds = '${hivevar:ds}'",
        dialect="hive",
    )
    assert table_edges(c) == {("${src_db}.events", "${out_db}.daily")}
    assert column_edges(c) == {
        ("${src_db}.events#a", "${out_db}.daily#a", "IDENTITY"),
        ("${src_db}.events#ds", "${out_db}.daily#a", "FILTER"),
    }


def test_statements_sqlglot_keeps_as_commands_parse_quietly(caplog: pytest.LogCaptureFixture) -> None:
    c = lineage(
        "SET hivevar:ds=2024-01-01; ADD JAR /tmp/udf.jar; MSCK REPAIR TABLE d.t; SHOW TABLES", dialect="hive"
    )
    assert (c.statements, c.parsed, c.edges) == (4, 4, 0)
    assert c.outcomes[Outcome.NO_LINEAGE] == 4 and not c.problems  # each a known kind, none silent
    assert "Falling back" not in caplog.text


# -- issue 18's forms in the dialects people write them in -------------------------------

# `a, b` of src.s1 through a CTE that keeps rows with a > 0, into dw.t: worked out by hand
THROUGH_Q = {
    ("src.s1#a", "dw.t#a", "IDENTITY"),
    ("src.s1#b", "dw.t#b", "IDENTITY"),
    *to_all(["src.s1#a"], ["dw.t#a", "dw.t#b"], "FILTER"),
}
Q = "SELECT a, b FROM src.s1 WHERE a > 0"
CTE = f"q AS ({Q})"

# (dialect, a CTE feeding an INSERT, a CREATE … AS / SELECT … INTO over a parenthesised query)
FORMS = [
    ("spark", f"WITH {CTE} INSERT INTO dw.t SELECT a, b FROM q", "CREATE TABLE dw.t AS (SELECT a, b FROM q)"),
    (
        "hive",
        f"WITH {CTE} INSERT OVERWRITE TABLE dw.t SELECT a, b FROM q",
        "CREATE TABLE dw.t AS SELECT a, b FROM q",
    ),
    ("postgres", f"WITH {CTE} INSERT INTO dw.t (a, b) SELECT a, b FROM q", "SELECT a, b INTO dw.t FROM q"),
    ("tsql", f"WITH {CTE} INSERT INTO dw.t (a, b) SELECT a, b FROM q", "SELECT a, b INTO dw.t FROM q"),
    (
        "snowflake",
        f"INSERT INTO dw.t (a, b) WITH {CTE} SELECT a, b FROM q",
        "CREATE TABLE dw.t AS (SELECT a, b FROM q)",
    ),
    (
        "bigquery",
        f"INSERT INTO dw.t (a, b) WITH {CTE} SELECT a, b FROM q",
        "CREATE TABLE dw.t AS (SELECT a, b FROM q)",
    ),
    (
        "trino",
        f"INSERT INTO dw.t (a, b) WITH {CTE} SELECT a, b FROM q",
        "CREATE TABLE dw.t AS (SELECT a, b FROM q)",
    ),
]


@pytest.mark.parametrize(("dialect", "insert", "create"), FORMS, ids=[f[0] for f in FORMS])
def test_a_cte_is_never_a_table_in_any_dialect(dialect: str, insert: str, create: str) -> None:
    c = lineage(insert, dialect=dialect)
    assert table_edges(c) == {("src.s1", "dw.t")}
    assert column_edges(c) == THROUGH_Q
    # the CTE of the statement before, not a table `q`, and in parentheses or not
    c = lineage(
        f"WITH {CTE} SELECT a, b FROM q;\n{create.replace('FROM q', f'FROM ({Q}) AS q')}", dialect=dialect
    )
    assert table_edges(c) == {("src.s1", "dw.t")}
    assert column_edges(c) == THROUGH_Q
    assert c.outcomes[Outcome.READ] == 1 and c.outcomes[Outcome.LINEAGE] == 1
    (process,) = c.batches[0].processes
    assert process.metadata["reads"] == ["hive.table/src.s1"]  # never `q`


@pytest.mark.parametrize(
    ("dialect", "update"),
    [
        ("postgres", "UPDATE dw.t SET b = s.b FROM src.s1 AS s WHERE t.a = s.a"),
        ("tsql", "UPDATE t SET t.b = s.b FROM dw.t t JOIN src.s1 s ON t.a = s.a"),
        ("snowflake", "UPDATE dw.t SET b = s.b FROM src.s1 AS s WHERE t.a = s.a"),
        ("bigquery", "UPDATE dw.t SET b = s.b FROM src.s1 AS s WHERE t.a = s.a"),
    ],
)
def test_an_update_from_another_table_in_its_dialect(dialect: str, update: str) -> None:
    c = lineage(update, dialect=dialect)
    assert table_edges(c) == {("src.s1", "dw.t")}
    kind = "JOIN" if " ON " in update else "FILTER"  # which target rows get which value
    assert column_edges(c) == {("src.s1#b", "dw.t#b", "IDENTITY"), ("src.s1#a", "dw.t#b", kind)}
