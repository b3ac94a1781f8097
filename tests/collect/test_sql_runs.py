"""What one statement of a run leaves for the next: temp views and tables (lineage flows
through them, composed), USE db, and the columns CREATE TABLE / CTAS teach.

Expected edges are worked out by hand from the SQL of each test.
"""

from __future__ import annotations

from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.sql_relation import compose
from tracelake.model import Transformation as T

from . import column_edges, direct_edges, indirect_edges, lineage, table_edges, to_all

TEMP_VIEW_SCRIPT = """
CREATE OR REPLACE TEMPORARY VIEW v AS
SELECT user_id, upper(name) AS uname, amount FROM d.src WHERE ds = '2024-01-01';

INSERT INTO d.dst
SELECT user_id, uname, sum(amount) AS total FROM v GROUP BY user_id, uname;
"""


def test_lineage_flows_through_a_temp_view_and_composes() -> None:
    c = lineage(TEMP_VIEW_SCRIPT)
    targets = ["d.dst#user_id", "d.dst#uname", "d.dst#total"]
    assert table_edges(c) == {("d.src", "d.dst")}
    assert direct_edges(c) == {
        ("d.src#user_id", "d.dst#user_id", "IDENTITY"),  # IDENTITY then IDENTITY
        ("d.src#name", "d.dst#uname", "TRANSFORMATION"),  # TRANSFORMATION then IDENTITY
        ("d.src#amount", "d.dst#total", "AGGREGATION"),  # IDENTITY then AGGREGATION
    }
    assert indirect_edges(c) == (
        to_all(["d.src#ds"], targets, "FILTER")  # the view's WHERE still chooses the rows
        | to_all(["d.src#user_id", "d.src#name"], targets, "GROUP_BY")
    )


def test_temp_objects_are_never_nodes() -> None:
    c = lineage(TEMP_VIEW_SCRIPT)
    (batch,) = c.batches
    nodes = {a.urn for a in batch.assets} | {f.urn for f in batch.fields}
    nodes |= {e.source for e in batch.edges} | {e.target for e in batch.edges}
    assert not any("/default.v" in n or n.endswith("/v") or "/v#" in n for n in nodes)
    assert {a.urn for a in batch.assets} == {"hive.table/d.src", "hive.table/d.dst"}


def test_two_temp_hops_and_an_indirect_later_hop() -> None:
    c = lineage(
        """
        CREATE TEMP VIEW agg AS SELECT k, sum(x) AS s FROM d.src GROUP BY k;
        CREATE TEMP VIEW scaled AS SELECT k, s * 2 AS s2 FROM agg;
        INSERT INTO d.dst SELECT k, s2 FROM scaled WHERE s2 > 10;
        """
    )
    targets = ["d.dst#k", "d.dst#s2"]
    assert column_edges(c) == (
        {
            ("d.src#k", "d.dst#k", "IDENTITY"),
            ("d.src#x", "d.dst#s2", "AGGREGATION"),  # AGGREGATION then TRANSFORMATION
        }
        | to_all(["d.src#k"], targets, "GROUP_BY")
        | to_all(["d.src#x"], targets, "FILTER")  # the last hop filters on a value built from x
    )


def test_composition_rule() -> None:
    assert compose(T.IDENTITY, T.IDENTITY) is T.IDENTITY
    assert compose(T.IDENTITY, T.TRANSFORMATION) is T.TRANSFORMATION
    assert compose(T.TRANSFORMATION, T.IDENTITY) is T.TRANSFORMATION
    assert compose(T.AGGREGATION, T.IDENTITY) is T.AGGREGATION
    assert compose(T.TRANSFORMATION, T.AGGREGATION) is T.AGGREGATION
    assert compose(T.FILTER, T.IDENTITY) is T.FILTER
    assert compose(T.IDENTITY, T.JOIN) is T.JOIN
    assert compose(T.GROUP_BY, T.SORT) is T.SORT  # the later indirect hop wins


def test_temp_view_shadows_a_real_table_of_the_same_name() -> None:
    c = lineage(
        """
        CREATE TEMP VIEW orders AS SELECT id, amount FROM d.raw_orders;
        INSERT INTO d.a SELECT id FROM orders;
        INSERT INTO d.b SELECT id FROM default.orders;
        """
    )
    assert table_edges(c) == {("d.raw_orders", "d.a"), ("default.orders", "d.b")}
    assert column_edges(c) == {
        ("d.raw_orders#id", "d.a#id", "IDENTITY"),
        ("default.orders#id", "d.b#id", "IDENTITY"),
    }


def test_global_temp_view_cache_table_and_temporary_table() -> None:
    c = lineage(
        """
        CREATE GLOBAL TEMPORARY VIEW g AS SELECT id FROM d.s1;
        CACHE TABLE c AS SELECT id FROM d.s2;
        CREATE TEMPORARY TABLE t AS SELECT id FROM d.s3;
        INSERT INTO d.dst SELECT g.id FROM global_temp.g g
          UNION ALL SELECT id FROM c
          UNION ALL SELECT id FROM t;
        """
    )
    assert table_edges(c) == {("d.s1", "d.dst"), ("d.s2", "d.dst"), ("d.s3", "d.dst")}
    assert column_edges(c) == {
        ("d.s1#id", "d.dst#id", "IDENTITY"),
        ("d.s2#id", "d.dst#id", "IDENTITY"),
        ("d.s3#id", "d.dst#id", "IDENTITY"),
    }


def test_hive_temporary_table_filled_by_several_inserts() -> None:
    c = lineage(
        """
        CREATE TEMPORARY TABLE tmp (id BIGINT);
        INSERT INTO tmp SELECT uid FROM d.a;
        INSERT INTO tmp SELECT user_key FROM d.b;
        INSERT OVERWRITE TABLE d.dst SELECT id FROM tmp;
        """,
        dialect="hive",
    )
    assert table_edges(c) == {("d.a", "d.dst"), ("d.b", "d.dst")}
    assert column_edges(c) == {
        ("d.a#uid", "d.dst#id", "IDENTITY"),
        ("d.b#user_key", "d.dst#id", "IDENTITY"),
    }


def test_star_over_a_temp_view_of_an_unknown_table_passes_names_through() -> None:
    c = lineage(
        """
        CREATE TEMP VIEW v AS SELECT * FROM d.src WHERE active;
        INSERT INTO d.dst SELECT id, name FROM v;
        """
    )
    targets = ["d.dst#id", "d.dst#name"]
    assert column_edges(c) == {
        ("d.src#id", "d.dst#id", "IDENTITY"),
        ("d.src#name", "d.dst#name", "IDENTITY"),
    } | to_all(["d.src#active"], targets, "FILTER")


def test_dropped_temp_view_no_longer_shadows() -> None:
    c = lineage(
        """
        CREATE TEMP VIEW v AS SELECT id FROM d.a;
        DROP VIEW v;
        INSERT INTO d.dst SELECT id FROM v;
        """
    )
    assert table_edges(c) == {("default.v", "d.dst")}


def test_use_changes_the_default_database() -> None:
    c = lineage(
        """
        INSERT INTO summary SELECT id FROM orders;
        USE sales;
        INSERT INTO summary SELECT id FROM orders;
        USE other;
        INSERT INTO x SELECT id FROM sales.summary;
        """,
        default_db="start",
    )
    assert table_edges(c) == {
        ("start.orders", "start.summary"),
        ("sales.orders", "sales.summary"),
        ("sales.summary", "other.x"),
    }


def test_columns_of_a_ctas_are_learnt_for_later_stars() -> None:
    c = lineage(
        """
        CREATE TABLE d.stage AS SELECT id, name FROM d.src;
        INSERT INTO d.dst SELECT * FROM d.stage;
        """
    )
    assert column_edges(c) == {
        ("d.src#id", "d.stage#id", "IDENTITY"),
        ("d.src#name", "d.stage#name", "IDENTITY"),
        ("d.stage#id", "d.dst#id", "IDENTITY"),
        ("d.stage#name", "d.dst#name", "IDENTITY"),
    }


def test_create_table_columns_are_learnt_with_their_types() -> None:
    c = lineage(
        """
        CREATE TABLE d.t2 (a INT, b STRING) USING parquet;
        INSERT INTO d.t2 SELECT x, y FROM d.src;
        """
    )
    assert column_edges(c) == {
        ("d.src#x", "d.t2#a", "IDENTITY"),
        ("d.src#y", "d.t2#b", "IDENTITY"),
    }
    (batch,) = c.batches
    types = {f.urn: f.data_type for f in batch.fields}
    assert types["hive.table/d.t2#a"] == "INT"
    assert types["hive.table/d.t2#b"] == "STRING"


def test_create_table_like_copies_known_columns() -> None:
    schema = SchemaCatalog({"d.template": ["k", "v"]})
    c = lineage(
        """
        CREATE TABLE d.copy LIKE d.template;
        INSERT INTO d.copy SELECT a, b FROM d.src;
        """,
        schema=schema,
    )
    assert column_edges(c) == {
        ("d.src#a", "d.copy#k", "IDENTITY"),
        ("d.src#b", "d.copy#v", "IDENTITY"),
    }


def test_temp_views_do_not_leak_between_runs() -> None:
    first = lineage("CREATE TEMP VIEW v AS SELECT id FROM d.a")
    second = lineage("INSERT INTO d.dst SELECT id FROM v")
    assert first.edges == 0
    assert table_edges(second) == {("default.v", "d.dst")}


def test_temp_view_over_files_reads_those_files() -> None:
    c = lineage(
        """
        CREATE TEMPORARY VIEW raw USING parquet OPTIONS (path '/data/Raw');
        INSERT INTO d.dst SELECT id FROM raw;
        """
    )
    assert {(e.source, e.target, e.transformation) for e in c.batches[0].edges} == {
        ("file.dataset//data/Raw", "hive.table/d.dst", None),
        ("file.dataset//data/Raw#id", "hive.table/d.dst#id", "IDENTITY"),
    }


def test_use_catalog_and_database_in_trino() -> None:
    c = lineage(
        "USE iceberg.mart; INSERT INTO t SELECT a FROM raw.x; INSERT INTO hive.d.u SELECT a FROM t",
        dialect="trino",
    )
    assert table_edges(c) == {("iceberg.raw.x", "iceberg.mart.t"), ("iceberg.mart.t", "d.u")}
