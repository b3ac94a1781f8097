"""The pure half of the Spark collector, on hand-written plan JSON: no JVM, no session.

Plans here are written the way `LogicalPlan.toJSON()` writes them (pre-order lists with
`num-children`, expressions as nested pre-order lists), small enough to check by eye.
"""

from __future__ import annotations

from typing import Any

from tracelake.collect.spark_datasets import jdbc_url, jdbc_urn
from tracelake.collect.spark_lineage import analyze_action, detail_requests
from tracelake.collect.spark_plan import all_nodes, parse_plan, preorder
from tracelake.model.names import location_urn

CATALYST = "org.apache.spark.sql.catalyst"
EXPR = f"{CATALYST}.expressions"
LOGICAL = f"{CATALYST}.plans.logical"


def attr(name: str, expr_id: int, data_type: str = "integer") -> list[dict[str, Any]]:
    return [
        {
            "class": f"{EXPR}.AttributeReference",
            "num-children": 0,
            "name": name,
            "dataType": data_type,
            "exprId": {"id": expr_id},
        }
    ]


def literal(value: str) -> list[dict[str, Any]]:
    return [{"class": f"{EXPR}.Literal", "num-children": 0, "value": value, "dataType": "integer"}]


def call(cls: str, *children: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    head = {"class": f"{EXPR}.{cls}", "num-children": len(children), **fields}
    return [head, *(item for child in children for item in child)]


def table(name: str, *columns: tuple[str, int]) -> dict[str, Any]:
    return {
        "class": "org.apache.spark.sql.execution.datasources.LogicalRelation",
        "num-children": 0,
        "output": [attr(n, i) for n, i in columns],
        "catalogTable": {"identifier": {"table": name, "database": "dating"}},
    }


def local(*columns: tuple[str, int]) -> dict[str, Any]:
    return {
        "class": f"{LOGICAL}.LocalRelation",
        "num-children": 0,
        "output": [attr(n, i) for n, i in columns],
    }


def plan_node(cls: str, children: int, **fields: Any) -> dict[str, Any]:
    return {"class": f"{LOGICAL}.{cls}", "num-children": children, **fields}


def test_dataset_paths() -> None:
    assert location_urn("file:/data/events/ds=2024-03-10/hr=01/") == "file.dataset//data/events"
    assert location_urn("file:///tmp/x") == "file.dataset//tmp/x"
    assert location_urn("s3a://lake/events/ds=2024-03-10") == "file.dataset/s3://lake/events"
    assert location_urn("/data/x.csv") == "file.dataset//data/x.csv"


def test_jdbc_urls_lose_credentials_and_properties() -> None:
    assert jdbc_url("jdbc:postgresql://bob:pw@db.internal:5432/dating?password=pw&ssl=true") == (
        "jdbc:postgresql://db.internal:5432/dating"
    )
    assert jdbc_url("jdbc:sqlserver://h:1433;user=bob;password=pw") == "jdbc:sqlserver://h:1433"
    assert (
        jdbc_urn("jdbc:derby:memory:x;create=true", "APP.PEOPLE")
        == "jdbc.table/jdbc:derby:memory:x/app.people"
    )
    assert jdbc_urn("jdbc:mysql://h/db", "(SELECT * FROM t) SPARK_GEN_SUBQ_0").endswith("/query")


def test_subqueries_hang_on_the_node_whose_expression_holds_them() -> None:
    """Each subquery plan once, on the node it is written in: one nested in a subquery, on that."""
    nested = call("Exists", plan=[local(("n", 9))])
    scalar_plan = [plan_node("Filter", 1, condition=nested, child=0), local(("s", 8))]
    condition = call("And", call("ScalarSubquery", plan=scalar_plan), call("Exists", plan=[local(("e", 7))]))
    root = parse_plan([plan_node("Filter", 1, condition=condition, child=0), table("users", ("id", 1))])

    scalar, exists = root.subqueries
    assert [n.cls for n in preorder(scalar)] == ["Filter", "LocalRelation"]
    assert [n.cls for n in preorder(exists)] == ["LocalRelation"]
    assert root.children[0].subqueries == [] and exists.subqueries == []
    (inner,) = scalar.subqueries
    assert [n.cls for n in preorder(inner)] == ["LocalRelation"]
    assert len(list(all_nodes(root))) == 6  # Filter, users; Filter, s; e; n


def test_catalog_tables_need_no_jvm_details() -> None:
    """Project(id, upper(name) AS loud) over Filter(age > 18) over a catalog table."""
    project = plan_node(
        "Project",
        1,
        projectList=[
            attr("id", 1),
            call("Alias", call("Upper", attr("name", 2, "string")), name="loud", exprId={"id": 10}),
        ],
        child=0,
    )
    condition = call("GreaterThan", attr("age", 3), literal("18"))
    filter_ = plan_node("Filter", 1, condition=condition, child=0)
    users = table("users", ("id", 1), ("name", 2), ("age", 3))
    root = parse_plan([project, filter_, users])

    assert detail_requests("collect", root) == []
    lineage = analyze_action("collect", root, {})
    assert list(lineage.reads) == ["hive.table/dating.users"]
    assert lineage.edges == {}  # a query writes nothing


def test_nested_writes_and_ddl_are_skipped() -> None:
    command = {
        "class": "org.apache.spark.sql.execution.command.CreateDataSourceTableCommand",
        "num-children": 0,
    }
    assert analyze_action("command", parse_plan([command]), {}).reads == {}
    users = table("users", ("id", 1))
    assert analyze_action("file source write", parse_plan([users]), {}).reads == {}
