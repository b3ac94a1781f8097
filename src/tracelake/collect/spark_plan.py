"""Spark's analyzed-plan JSON (`LogicalPlan.toJSON`) as a tree of plan nodes and expressions.

`toJSON` writes a plan as a pre-order list of nodes, each with its `class`, `num-children` and
constructor fields; fields that are expressions are nested pre-order lists of their own, and a
subquery's plan (or a command's `query` that is not a child) is a nested plan list. This module
rebuilds those trees without recursion (machine-written plans nest deeper than Python's stack).
Some fields are not serialisable and come out null (a relation's files, a write's output path):
`detail_kind` says which nodes need those, which the JVM listener journals beside the plan.
Pure Python, so it runs on captured JSON in tests too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

_EXPRESSION_PACKAGES = (".catalyst.expressions.", ".sql.expressions.")
# Expressions that live outside the expression packages.
_EXPRESSIONS_ELSEWHERE = frozenset(
    {
        "ScalaUDAF",
        "ScalaAggregator",
        "PythonUDF",
        "PythonUDAF",
        "PythonUDTF",
        "TypedAggregateExpression",
        "SimpleTypedAggregateExpression",
        "ComplexTypedAggregateExpression",
    }
)
_SKIPPED_FIELDS = frozenset({"class", "num-children"})


def short_name(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def is_expression_class(cls: str) -> bool:
    return any(p in cls for p in _EXPRESSION_PACKAGES) or short_name(cls) in _EXPRESSIONS_ELSEWHERE


N = TypeVar("N")  # a node of the tree `_build` makes


def _is_node_list(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    return bool(value) and isinstance(value, list) and isinstance(value[0], dict) and "class" in value[0]


@dataclass(eq=False, slots=True)
class Expr:
    """One expression node: its short class name, raw JSON fields, children, and subquery plan."""

    cls: str
    data: dict[str, Any]
    children: list[Expr] = field(default_factory=list)
    plan: PlanNode | None = None

    @property
    def expr_id(self) -> int | None:
        ident = self.data.get("exprId")
        return ident.get("id") if isinstance(ident, dict) else None

    @property
    def name(self) -> str:
        return str(self.data.get("name") or "")

    @property
    def data_type(self) -> Any:
        return self.data.get("dataType")


@dataclass(eq=False, slots=True)
class PlanNode:
    cls: str
    full_cls: str
    data: dict[str, Any]
    children: list[PlanNode] = field(default_factory=list)
    # expression-valued fields, as Expr trees; a Seq field is a list (of lists, for Seq[Seq[…]])
    exprs: dict[str, Any] = field(default_factory=dict)
    # plan-valued fields that are not children (a command's `query`, a view's `plan`)
    plans: dict[str, PlanNode] = field(default_factory=dict)
    subqueries: list[PlanNode] = field(default_factory=list)  # in its expressions' order

    def expr(self, name: str) -> Expr | None:
        value = self.exprs.get(name)
        return value if isinstance(value, Expr) else None

    def expr_list(self, name: str) -> list[Expr]:
        return list(flatten(self.exprs.get(name)))

    def attributes(self, name: str = "output") -> list[Expr]:
        return [e for e in self.expr_list(name) if e.cls in ("AttributeReference", "Alias")]


def nested_expression(expr: Expr, name: str) -> Expr | None:
    """An expression held in a field rather than as a child (`OuterReference.e`)."""
    value = expr.data.get(name)
    if not _is_node_list(value):
        return None
    return _build(value, lambda item: Expr(short_name(item["class"]), item))


def flatten(value: Any) -> Iterator[Expr]:
    """The expressions of a field in Spark's `QueryPlan.expressions` order."""
    if isinstance(value, Expr):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from flatten(item)


def preorder(root: PlanNode) -> Iterator[PlanNode]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def expr_preorder(root: Expr) -> Iterator[Expr]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


# -- building trees -----------------------------------------------------------------------


def _build(items: list[dict[str, Any]], make: Callable[[dict[str, Any]], N]) -> N:
    """Rebuild a tree from a pre-order list with `num-children`, iteratively."""
    root: N | None = None
    stack: list[list[Any]] = []  # [node, children still to come]
    for item in items:
        node = make(item)
        if stack:
            parent = stack[-1]
            parent[0].children.append(node)
            parent[1] -= 1
        else:
            root = node
        count = int(item.get("num-children") or 0)
        if count:
            stack.append([node, count])
        while stack and stack[-1][1] == 0:
            stack.pop()
    if root is None:
        raise ValueError("a plan or expression tree with no node")
    return root


class _Parser:
    """Builds plan and expression trees."""

    def plan(self, items: list[dict[str, Any]]) -> PlanNode:
        nodes: list[PlanNode] = []

        def make(item: dict[str, Any]) -> PlanNode:
            node = PlanNode(short_name(item["class"]), item["class"], item)
            nodes.append(node)
            return node

        root: PlanNode = _build(items, make)
        for node in nodes:
            self._fields(node)
        return root

    def _fields(self, node: PlanNode) -> None:
        for name, value in node.data.items():
            if name in _SKIPPED_FIELDS:
                continue
            if _is_node_list(value):
                if is_expression_class(value[0]["class"]):
                    node.exprs[name] = self.expression(value, node)
                else:
                    node.plans[name] = self.plan(value)
            elif isinstance(value, list) and any(isinstance(v, list) for v in value):
                node.exprs[name] = self._expression_seq(value, node)

    def _expression_seq(self, value: list[Any], node: PlanNode) -> list[Any]:
        out: list[Any] = []
        for item in value:
            if _is_node_list(item) and is_expression_class(item[0]["class"]):
                out.append(self.expression(item, node))
            elif isinstance(item, list):
                out.append(self._expression_seq(item, node))
        return out

    def expression(self, items: list[dict[str, Any]], holder: PlanNode) -> Expr:
        def make(item: dict[str, Any]) -> Expr:
            expr = Expr(short_name(item["class"]), item)
            nested = item.get("plan")
            if _is_node_list(nested) and not is_expression_class(nested[0]["class"]):
                expr.plan = self.plan(nested)  # a subquery
                holder.subqueries.append(expr.plan)
            return expr

        return _build(items, make)


def parse_plan(items: list[dict[str, Any]]) -> PlanNode:
    """The analyzed plan of `LogicalPlan.toJSON()` (already decoded) as a tree of `PlanNode`s."""
    if not items:
        raise ValueError("an empty plan")
    return _Parser().plan(items)


def all_nodes(root: PlanNode) -> Iterator[PlanNode]:
    """Every plan node of the action: the tree, plan-valued fields and subqueries."""
    pending = [root]
    while pending:
        top = pending.pop()
        for node in preorder(top):
            yield node
            pending.extend(node.plans.values())
            pending.extend(node.subqueries)


# -- what the JVM must fill in ------------------------------------------------------------

# Writes whose target, mode or format are nulls in the JSON.
_FS_WRITE = "InsertIntoHadoopFsRelationCommand"
_DATASOURCE_WRITE = "SaveIntoDataSourceCommand"
_OTHER_WRITES = frozenset(
    {
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoHiveTable",
        "InsertIntoHiveDirCommand",  # its directory is in `storage`, which the JSON leaves null
    }
)


def detail_kind(node: PlanNode) -> str | None:
    """Which py4j details a node needs: None when its JSON says all we need."""
    if node.cls == "LogicalRelation" and not node.data.get("catalogTable"):
        return "relation"
    if node.cls in ("DataSourceV2Relation", "DataSourceV2ScanRelation") and not node.data.get("identifier"):
        return "v2_relation"
    if node.cls in ("LogicalRDD", "ExternalRDD"):
        return "rdd"
    if node.cls == _FS_WRITE:
        return "fs_write"
    if node.cls == _DATASOURCE_WRITE:
        return "datasource_write"
    if node.cls in _OTHER_WRITES:
        return "mode"
    return None


def relation_key(node: PlanNode) -> tuple[int, ...]:
    """A relation's output exprIds: unique in the JVM, so the same DataFrame's relation seen by
    several actions is looked at once (the JVM listener keys what it found by them too)."""
    return tuple(-1 if e.expr_id is None else e.expr_id for e in node.expr_list("output"))
