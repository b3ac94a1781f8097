"""Column lineage through the parts of a query: expressions, aggregates, windows, CASE, joins,
subqueries, CTEs, set operations, generators, struct fields and stars.

Expected edges are worked out by hand from the SQL of each test.
"""

from __future__ import annotations

import pytest

from tracelake.collect.catalog import SchemaCatalog
from tracelake.model import Confidence

from . import column_edges, confidences, direct_edges, indirect_edges, lineage, table_edges, to_all


def test_alias_keeps_identity_cast_and_functions_transform() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT a AS x, (b) AS y, CAST(c AS STRING) AS z, concat(d, e) AS w FROM d.s"
    )
    assert direct_edges(c) == {
        ("d.s#a", "d.out#x", "IDENTITY"),
        ("d.s#b", "d.out#y", "IDENTITY"),
        ("d.s#c", "d.out#z", "TRANSFORMATION"),
        ("d.s#d", "d.out#w", "TRANSFORMATION"),
        ("d.s#e", "d.out#w", "TRANSFORMATION"),
    }
    assert indirect_edges(c) == set()


def test_aggregates_group_by_having_and_order_by_alias() -> None:
    c = lineage(
        """
        INSERT INTO d.out
        SELECT country, count(DISTINCT user_id) AS users, sum(amount) AS total
        FROM d.orders WHERE ds = '2024-01-01'
        GROUP BY country HAVING sum(amount) > 10
        ORDER BY total
        """
    )
    targets = ["d.out#country", "d.out#users", "d.out#total"]
    assert direct_edges(c) == {
        ("d.orders#country", "d.out#country", "IDENTITY"),
        ("d.orders#user_id", "d.out#users", "AGGREGATION"),
        ("d.orders#amount", "d.out#total", "AGGREGATION"),
    }
    assert indirect_edges(c) == (
        to_all(["d.orders#ds"], targets, "FILTER")
        | to_all(["d.orders#country"], targets, "GROUP_BY")
        | to_all(["d.orders#amount"], targets, "FILTER")  # HAVING
        | to_all(["d.orders#amount"], targets, "SORT")  # ORDER BY total = sum(amount)
    )


def test_count_star_has_no_column_source() -> None:
    c = lineage("INSERT INTO d.out SELECT k, count(*) AS n FROM d.s GROUP BY k")
    assert direct_edges(c) == {("d.s#k", "d.out#k", "IDENTITY")}
    assert indirect_edges(c) == to_all(["d.s#k"], ["d.out#k", "d.out#n"], "GROUP_BY")


def test_case_conditions_are_conditional_and_branches_transformation() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT id, CASE WHEN age > 30 THEN tier WHEN vip THEN 'gold' ELSE fallback END "
        "AS bucket FROM d.users"
    )
    assert column_edges(c) == {
        ("d.users#id", "d.out#id", "IDENTITY"),
        ("d.users#tier", "d.out#bucket", "TRANSFORMATION"),
        ("d.users#fallback", "d.out#bucket", "TRANSFORMATION"),
        ("d.users#age", "d.out#bucket", "CONDITIONAL"),
        ("d.users#vip", "d.out#bucket", "CONDITIONAL"),
    }


def test_if_and_aggregate_of_case() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT if(flag, a, b) AS pick, "
        "sum(CASE WHEN kind = 'x' THEN amount END) AS x_total FROM d.s"
    )
    assert column_edges(c) == {
        ("d.s#flag", "d.out#pick", "CONDITIONAL"),
        ("d.s#a", "d.out#pick", "TRANSFORMATION"),
        ("d.s#b", "d.out#pick", "TRANSFORMATION"),
        ("d.s#kind", "d.out#x_total", "CONDITIONAL"),
        ("d.s#amount", "d.out#x_total", "AGGREGATION"),
    }


def test_window_functions() -> None:
    c = lineage(
        """
        INSERT INTO d.out
        SELECT user_id,
               sum(amount) OVER (PARTITION BY country ORDER BY ts) AS running,
               row_number() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn,
               lag(score) OVER (ORDER BY ts) AS previous
        FROM d.payments
        """
    )
    # a window's keys shape only the windowed column (OpenLineage's WINDOW is per expression)
    assert column_edges(c) == {
        ("d.payments#user_id", "d.out#user_id", "IDENTITY"),
        ("d.payments#amount", "d.out#running", "AGGREGATION"),
        ("d.payments#country", "d.out#running", "WINDOW"),
        ("d.payments#ts", "d.out#running", "WINDOW"),
        ("d.payments#user_id", "d.out#rn", "WINDOW"),
        ("d.payments#ts", "d.out#rn", "WINDOW"),
        ("d.payments#score", "d.out#previous", "TRANSFORMATION"),
        ("d.payments#ts", "d.out#previous", "WINDOW"),
    }


def test_join_on_columns_reach_every_output_column() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT u.name, o.amount FROM d.users u LEFT JOIN d.orders o "
        "ON u.id = o.user_id AND o.status = 'paid'"
    )
    assert table_edges(c) == {("d.users", "d.out"), ("d.orders", "d.out")}
    assert column_edges(c) == {
        ("d.users#name", "d.out#name", "IDENTITY"),
        ("d.orders#amount", "d.out#amount", "IDENTITY"),
    } | to_all(["d.users#id", "d.orders#user_id", "d.orders#status"], ["d.out#name", "d.out#amount"], "JOIN")


def test_join_using() -> None:
    schema = SchemaCatalog({"d.a": ["id", "x"], "d.b": ["id", "y"]})
    c = lineage("INSERT INTO d.out SELECT x, y FROM d.a JOIN d.b USING (id)", schema=schema)
    assert column_edges(c) == {
        ("d.a#x", "d.out#x", "IDENTITY"),
        ("d.b#y", "d.out#y", "IDENTITY"),
    } | to_all(["d.a#id", "d.b#id"], ["d.out#x", "d.out#y"], "JOIN")


def test_subquery_in_from() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT q.uid, q.total * 100 AS cents FROM "
        "(SELECT user_id AS uid, sum(amount) AS total FROM d.pay GROUP BY user_id) q WHERE q.total > 0"
    )
    targets = ["d.out#uid", "d.out#cents"]
    assert direct_edges(c) == {
        ("d.pay#user_id", "d.out#uid", "IDENTITY"),
        ("d.pay#amount", "d.out#cents", "AGGREGATION"),
    }
    # the inner GROUP BY shapes the rows of the outer query; the outer WHERE reads an aggregate
    assert indirect_edges(c) == to_all(["d.pay#user_id"], targets, "GROUP_BY") | to_all(
        ["d.pay#amount"], targets, "FILTER"
    )


def test_in_and_exists_subqueries_filter() -> None:
    c = lineage(
        """
        INSERT INTO d.out
        SELECT a.id FROM d.a a
        WHERE a.id IN (SELECT uid FROM d.b WHERE flag = 1)
          AND EXISTS (SELECT 1 FROM d.c c WHERE c.aid = a.id AND c.kind = 'k')
        """
    )
    assert table_edges(c) == {("d.a", "d.out"), ("d.b", "d.out"), ("d.c", "d.out")}
    assert column_edges(c) == {("d.a#id", "d.out#id", "IDENTITY")} | to_all(
        ["d.a#id", "d.b#uid", "d.b#flag", "d.c#aid", "d.c#kind"], ["d.out#id"], "FILTER"
    )


def test_scalar_subquery_in_select() -> None:
    c = lineage("INSERT INTO d.out SELECT id, (SELECT max(price) FROM d.prices) AS top FROM d.items")
    assert direct_edges(c) == {
        ("d.items#id", "d.out#id", "IDENTITY"),
        ("d.prices#price", "d.out#top", "AGGREGATION"),
    }
    assert table_edges(c) == {("d.items", "d.out"), ("d.prices", "d.out")}


def test_ctes_nested_and_chained() -> None:
    c = lineage(
        """
        WITH base AS (SELECT id, amount * 2 AS dbl FROM d.a WHERE ok),
             agg AS (SELECT id, sum(dbl) AS total FROM base GROUP BY id),
             final AS (WITH inner_cte AS (SELECT id, total FROM agg) SELECT id, total FROM inner_cte)
        INSERT INTO d.out SELECT id, total FROM final
        """
    )
    targets = ["d.out#id", "d.out#total"]
    assert table_edges(c) == {("d.a", "d.out")}
    assert direct_edges(c) == {
        ("d.a#id", "d.out#id", "IDENTITY"),
        ("d.a#amount", "d.out#total", "AGGREGATION"),
    }
    assert indirect_edges(c) == to_all(["d.a#ok"], targets, "FILTER") | to_all(
        ["d.a#id"], targets, "GROUP_BY"
    )


def test_cte_inside_the_select_of_a_ctas() -> None:
    c = lineage("CREATE TABLE d.t AS WITH c AS (SELECT k AS key FROM d.s) SELECT key FROM c")
    assert column_edges(c) == {("d.s#k", "d.t#key", "IDENTITY")}


def test_recursive_cte() -> None:
    c = lineage(
        """
        WITH RECURSIVE r AS (
          SELECT id, parent FROM d.tree WHERE parent IS NULL
          UNION ALL
          SELECT t.id, t.parent FROM d.tree t JOIN r ON t.parent = r.id
        )
        INSERT INTO d.out SELECT id FROM r
        """
    )
    assert table_edges(c) == {("d.tree", "d.out")}
    assert column_edges(c) == {
        ("d.tree#id", "d.out#id", "IDENTITY"),
        ("d.tree#parent", "d.out#id", "FILTER"),
        ("d.tree#parent", "d.out#id", "JOIN"),
    }


def test_union_branches_feed_outputs_by_position() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT id, name FROM d.a UNION ALL SELECT uid, upper(title) FROM d.b WHERE live "
        "UNION SELECT 0, label FROM d.c"
    )
    assert table_edges(c) == {("d.a", "d.out"), ("d.b", "d.out"), ("d.c", "d.out")}
    assert column_edges(c) == {
        ("d.a#id", "d.out#id", "IDENTITY"),
        ("d.b#uid", "d.out#id", "IDENTITY"),
        ("d.a#name", "d.out#name", "IDENTITY"),
        ("d.b#title", "d.out#name", "TRANSFORMATION"),
        ("d.c#label", "d.out#name", "IDENTITY"),
    } | to_all(["d.b#live"], ["d.out#id", "d.out#name"], "FILTER")


def test_except_filters_rows_of_the_left_side() -> None:
    c = lineage("INSERT INTO d.out SELECT id FROM d.a EXCEPT SELECT id FROM d.banned")
    assert column_edges(c) == {
        ("d.a#id", "d.out#id", "IDENTITY"),
        ("d.banned#id", "d.out#id", "FILTER"),
    }


def test_lateral_view_explode_posexplode_and_json_tuple() -> None:
    c = lineage(
        """
        INSERT INTO d.out
        SELECT user_id, tag, pos, col, j.a, b
        FROM d.t
        LATERAL VIEW explode(tags) x AS tag
        LATERAL VIEW posexplode(items) p
        LATERAL VIEW json_tuple(payload, 'a', 'b') j AS a, b
        """
    )
    assert column_edges(c) == {
        ("d.t#user_id", "d.out#user_id", "IDENTITY"),
        ("d.t#tags", "d.out#tag", "TRANSFORMATION"),
        ("d.t#items", "d.out#pos", "TRANSFORMATION"),
        ("d.t#items", "d.out#col", "TRANSFORMATION"),
        ("d.t#payload", "d.out#a", "TRANSFORMATION"),
        ("d.t#payload", "d.out#b", "TRANSFORMATION"),
    }


def test_lateral_view_of_an_earlier_lateral_view() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT o.id, item FROM d.t LATERAL VIEW explode(orders) x AS o "
        "LATERAL VIEW explode(o.items) y AS item"
    )
    assert column_edges(c) == {
        ("d.t#orders", "d.out#id", "TRANSFORMATION"),
        ("d.t#orders", "d.out#item", "TRANSFORMATION"),
    }


def test_struct_fields_become_nested_paths() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT event.user_id AS uid, e.event.geo.city AS city, upper(event.kind) AS kind "
        "FROM d.events e"
    )
    assert column_edges(c) == {
        ("d.events#event.user_id", "d.out#uid", "IDENTITY"),
        ("d.events#event.geo.city", "d.out#city", "IDENTITY"),
        ("d.events#event.kind", "d.out#kind", "TRANSFORMATION"),
    }


def test_struct_path_through_a_subquery() -> None:
    schema = SchemaCatalog({"d.events": {"id": "bigint", "addr": "struct<city:string,zip:string>"}})
    c = lineage("INSERT INTO d.out SELECT q.addr.city FROM (SELECT addr FROM d.events) q", schema=schema)
    assert column_edges(c) == {("d.events#addr.city", "d.out#city", "IDENTITY")}


def test_select_star_expanded_from_the_schema() -> None:
    schema = SchemaCatalog({"d.src": ["id", "name"]})
    c = lineage("INSERT INTO d.dst SELECT * FROM d.src", schema=schema)
    assert column_edges(c) == {
        ("d.src#id", "d.dst#id", "IDENTITY"),
        ("d.src#name", "d.dst#name", "IDENTITY"),
    }
    assert set(confidences(c).values()) == {Confidence.HIGH}


def test_qualified_star_next_to_other_columns() -> None:
    schema = SchemaCatalog({"d.a": ["id", "name"]})
    c = lineage("INSERT INTO d.dst SELECT a.*, b.score FROM d.a a JOIN d.b b ON a.id = b.id", schema=schema)
    targets = ["d.dst#id", "d.dst#name", "d.dst#score"]
    assert column_edges(c) == {
        ("d.a#id", "d.dst#id", "IDENTITY"),
        ("d.a#name", "d.dst#name", "IDENTITY"),
        ("d.b#score", "d.dst#score", "IDENTITY"),
    } | to_all(["d.a#id", "d.b#id"], targets, "JOIN")


def test_select_star_with_no_schema_gives_the_table_edge_only() -> None:
    c = lineage("INSERT INTO d.dst SELECT * FROM d.src")
    assert table_edges(c) == {("d.src", "d.dst")}
    assert column_edges(c) == set()


def test_select_star_onto_a_known_target_matches_names_with_low_confidence() -> None:
    schema = SchemaCatalog({"d.dst": ["id", "name"]})
    c = lineage("INSERT INTO d.dst SELECT * FROM d.src", schema=schema)
    assert confidences(c) == {
        ("d.src#id", "d.dst#id", "IDENTITY"): Confidence.LOW,
        ("d.src#name", "d.dst#name", "IDENTITY"): Confidence.LOW,
    }


def test_unqualified_column_over_unknown_schemas_is_a_low_confidence_guess() -> None:
    c = lineage("INSERT INTO d.out SELECT amount FROM d.a JOIN d.b ON a.id = b.id")
    assert {k: v for k, v in confidences(c).items() if k[2] == "IDENTITY"} == {
        ("d.a#amount", "d.out#amount", "IDENTITY"): Confidence.LOW,
        ("d.b#amount", "d.out#amount", "IDENTITY"): Confidence.LOW,
    }
    # the qualified ON columns are certain
    assert confidences(c)[("d.a#id", "d.out#amount", "JOIN")] is Confidence.HIGH


def test_known_schema_settles_an_unqualified_column() -> None:
    schema = SchemaCatalog({"d.a": ["id", "amount"], "d.b": ["id", "score"]})
    c = lineage("INSERT INTO d.out SELECT amount, score FROM d.a JOIN d.b ON a.id = b.id", schema=schema)
    assert {k: v for k, v in confidences(c).items() if k[2] == "IDENTITY"} == {
        ("d.a#amount", "d.out#amount", "IDENTITY"): Confidence.HIGH,
        ("d.b#score", "d.out#score", "IDENTITY"): Confidence.HIGH,
    }


def test_pivot() -> None:
    c = lineage(
        """
        INSERT OVERWRITE TABLE d.pivoted
        SELECT * FROM (SELECT category, quarter, amount FROM d.sales) s
        PIVOT (sum(amount) FOR quarter IN (1 AS q1, 2 AS q2))
        """
    )
    assert direct_edges(c) == {
        ("d.sales#category", "d.pivoted#category", "IDENTITY"),
        ("d.sales#amount", "d.pivoted#q1", "AGGREGATION"),
        ("d.sales#amount", "d.pivoted#q2", "AGGREGATION"),
    }
    assert indirect_edges(c) == to_all(["d.sales#quarter"], ["d.pivoted#q1", "d.pivoted#q2"], "CONDITIONAL")


def test_lambda_parameters_are_not_columns() -> None:
    c = lineage("INSERT INTO d.out SELECT transform(prices, p -> p * rate) AS adjusted FROM d.s")
    assert column_edges(c) == {
        ("d.s#prices", "d.out#adjusted", "TRANSFORMATION"),
        ("d.s#rate", "d.out#adjusted", "TRANSFORMATION"),
    }


def test_group_by_and_order_by_positions() -> None:
    c = lineage("INSERT INTO d.out SELECT country, sum(amount) AS total FROM d.s GROUP BY 1 ORDER BY 2 DESC")
    targets = ["d.out#country", "d.out#total"]
    assert column_edges(c) == (
        {
            ("d.s#country", "d.out#country", "IDENTITY"),
            ("d.s#amount", "d.out#total", "AGGREGATION"),
        }
        | to_all(["d.s#country"], targets, "GROUP_BY")
        | to_all(["d.s#amount"], targets, "SORT")
    )


def test_join_using_column_comes_from_both_sides() -> None:
    c = lineage("INSERT INTO d.out SELECT id, x FROM d.a JOIN d.b USING (id)")
    assert confidences(c) == {
        ("d.a#id", "d.out#id", "IDENTITY"): Confidence.HIGH,
        ("d.b#id", "d.out#id", "IDENTITY"): Confidence.HIGH,
        # x could be either side's: a guess, spread over both
        ("d.a#x", "d.out#x", "IDENTITY"): Confidence.LOW,
        ("d.b#x", "d.out#x", "IDENTITY"): Confidence.LOW,
        ("d.a#id", "d.out#id", "JOIN"): Confidence.HIGH,
        ("d.b#id", "d.out#id", "JOIN"): Confidence.HIGH,
        ("d.a#id", "d.out#x", "JOIN"): Confidence.HIGH,
        ("d.b#id", "d.out#x", "JOIN"): Confidence.HIGH,
    }


def test_star_except_and_replace() -> None:
    schema = SchemaCatalog({"d.s": ["a", "b", "c"]})
    c = lineage(
        "INSERT INTO d.out SELECT * EXCEPT (b) REPLACE (upper(c) AS c) FROM d.s",
        schema=schema,
        dialect="bigquery",
    )
    assert column_edges(c) == {
        ("d.s#a", "d.out#a", "IDENTITY"),
        ("d.s#c", "d.out#c", "TRANSFORMATION"),
    }


def test_names_match_whatever_their_case() -> None:
    c = lineage("WITH Base AS (SELECT ID FROM d.S) INSERT INTO d.Out SELECT base.Id FROM BASE")
    assert column_edges(c) == {("d.s#id", "d.out#id", "IDENTITY")}


def test_named_window_and_aggregate_filter() -> None:
    c = lineage(
        "INSERT INTO d.out SELECT sum(x) OVER w AS running, count(*) FILTER (WHERE y > 0) AS positives "
        "FROM d.t WINDOW w AS (PARTITION BY k ORDER BY ts)"
    )
    assert column_edges(c) == {
        ("d.t#x", "d.out#running", "AGGREGATION"),
        ("d.t#k", "d.out#running", "WINDOW"),
        ("d.t#ts", "d.out#running", "WINDOW"),
        ("d.t#y", "d.out#positives", "CONDITIONAL"),
    }


@pytest.mark.parametrize("schema", [{"d.a": {"k": "int", "v": "int"}, "d.b": {"k": "int", "w": "int"}}, None])
@pytest.mark.parametrize("kind", ["LEFT SEMI", "LEFT ANTI"])
def test_a_semi_or_anti_join_chooses_rows_by_its_right_side(kind: str, schema: dict | None) -> None:
    """Which rows of a remain depends on b (a JOIN influence), though no column of b is output:
    b is read, `b.k` is b's column (not a struct field of a), and `*` and bare names are a's."""
    c = lineage(
        f"INSERT INTO d.o SELECT * FROM d.a {kind} JOIN d.b ON a.k = b.k AND b.w > 0 WHERE k > 1",
        schema=SchemaCatalog.from_mapping(schema) if schema else None,
    )
    assert table_edges(c) == {("d.a", "d.o"), ("d.b", "d.o")}
    if schema is None:  # a's columns unknown: the * hides them, table level only
        assert column_edges(c) == set()
        return
    assert direct_edges(c) == {("d.a#k", "d.o#k", "IDENTITY"), ("d.a#v", "d.o#v", "IDENTITY")}
    assert indirect_edges(c) == (
        to_all(["d.a#k", "d.b#k", "d.b#w"], ["d.o#k", "d.o#v"], "JOIN")
        | to_all(["d.a#k"], ["d.o#k", "d.o#v"], "FILTER")
    )


def test_grouping_flags_read_no_value() -> None:
    """grouping(c) is 1 where the row's grouping set rolled c up, whatever c holds: no edge from
    c (Spark's own plan agrees: tests/spark/test_sql_against_spark.py)."""
    c = lineage(
        "INSERT INTO d.o SELECT a, sum(v) AS s, grouping(a) AS ga, grouping_id(a, b) AS gid "
        "FROM d.t GROUP BY ROLLUP (a, b)"
    )
    assert direct_edges(c) == {("d.t#a", "d.o#a", "IDENTITY"), ("d.t#v", "d.o#s", "AGGREGATION")}
    assert not {e for e in column_edges(c) if e[1] in ("d.o#ga", "d.o#gid") and e[2] != "GROUP_BY"}
