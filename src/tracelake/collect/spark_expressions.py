"""Column lineage inside one Catalyst expression: which input columns reach it, and how.

Spark names every column by a unique `exprId`, so resolving a column is a dictionary look-up in
the `Scope` of the operator (and, for correlated subqueries, of the enclosing queries). The walk
types each dependency with the rules of the SQL collector (`sql_lineage.py`): a bare column
carried through is IDENTITY, anything computed (a CAST included) TRANSFORMATION, whatever sits
inside an aggregate AGGREGATION; a CASE/IF condition and a window's PARTITION BY / ORDER BY are
CONDITIONAL and WINDOW influences of the column holding them; a subquery's columns arrive with
the role of the place the subquery sits in (FILTER in a WHERE). Python and Scala UDFs are
opaque: every argument is a TRANSFORMATION of the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracelake.collect.spark_plan import Expr, PlanNode, nested_expression
from tracelake.collect.sql_relation import INDIRECT, Deps, T, add_composed, extend_paths
from tracelake.model import Transformation

_LEAVES = frozenset({"Literal", "NamedLambdaVariable", "UnboundedPreceding$", "UnboundedFollowing$"})
# Window functions whose value is a row's position: Catalyst gives rank() and its kin the
# window's ORDER BY as children, which are no input of the value.
_RANKING = frozenset({"Rank", "DenseRank", "PercentRank", "CumeDist", "RowNumber", "NTile"})
# Aggregates that, over a window, copy one row's value (first_value, last_value).
_ROW_OFFSET = frozenset({"First", "Last"})
_LEAVES_SUFFIX = ("Row$",)  # CurrentRow$
_TRANSPARENT = frozenset(
    {
        "Alias",
        "SortOrder",
        "KnownNotNull",
        "KnownNullable",
        "KnownFloatingPointNormalized",
        "PromotePrecision",
    }
)
_SUBQUERIES = frozenset({"ScalarSubquery", "ListQuery", "Exists", "LateralSubquery"})


def descend(mode: Transformation) -> Transformation:
    """Below any operator a bare copy becomes a computed value; other kinds stick."""
    return T.TRANSFORMATION if mode is T.IDENTITY else mode


def influence(mode: Transformation, kind: Transformation) -> Transformation:
    """An indirect role (condition, window key) unless already inside an indirect clause."""
    return mode if mode in INDIRECT else kind


@dataclass(eq=False, slots=True)
class Scope:
    """Where column exprIds resolve: the inputs of one operator, then the enclosing queries'.

    `memory` is the run's record of every column seen so far, for leaves whose origin an
    earlier action showed (a checkpointed or cached DataFrame keeps its columns' exprIds).
    """

    deps: dict[int, Deps]
    outer: Scope | None = None
    memory: dict[int, Deps] = field(default_factory=dict)

    def lookup(self, expr_id: int | None, *, outer_only: bool = False) -> Deps | None:
        if expr_id is None:
            return None
        scope = self.outer if outer_only else self
        while scope is not None:
            found = scope.deps.get(expr_id)
            if found is not None:
                return found
            scope = scope.outer
        return self.memory.get(expr_id)


# Evaluates a subquery plan with the given outer scope; returns (deps of its columns, its
# row-level influences, the datasets it read).
SubqueryEvaluator = Callable[[PlanNode, Scope], tuple[list[Deps], Deps, set[str]]]


@dataclass(eq=False, slots=True)
class ExpressionWalker:
    """Walks expressions against one scope; collects the datasets subqueries read."""

    scope: Scope
    subquery: SubqueryEvaluator
    tables: set[str] = field(default_factory=set)

    def deps(self, expr: Expr | None, mode: Transformation = T.IDENTITY) -> Deps:
        out: Deps = {}
        self.walk(expr, mode, out)
        return out

    def walk(self, expr: Expr | None, mode: Transformation, out: Deps) -> None:
        """Add to `out` every source column `expr` reads, typed by how it reaches the result.

        A work list, not recursion: generated expressions nest thousands deep.
        """
        stack: list[tuple[Expr | None, Transformation]] = [(expr, mode)]
        while stack:
            node, mode = stack.pop()
            if node is None:
                continue
            cls = node.cls
            if cls == "AttributeReference":
                add_composed(out, self.scope.lookup(node.expr_id) or {}, mode)
            elif cls == "OuterReference":
                inner = nested_expression(node, "e")
                found = self.scope.lookup(inner.expr_id, outer_only=True) if inner is not None else None
                add_composed(out, found or {}, mode)
            elif cls == "GetStructField":
                self._struct_field(node, mode, out, stack)
            elif cls in _LEAVES or cls.endswith(_LEAVES_SUFFIX):
                continue
            elif cls in _TRANSPARENT:
                # SortOrder's other children repeat equivalent keys; only the first is the key
                stack.append((node.children[0] if node.children else None, mode))
            elif cls == "AggregateExpression" and node.children:
                inner_mode = mode if mode in INDIRECT else T.AGGREGATION
                stack.append((node.children[0], inner_mode))
                # `agg(x) FILTER (WHERE c)`: c picks the rows aggregated
                stack.extend((c, influence(mode, T.CONDITIONAL)) for c in node.children[1:])
            elif cls == "WindowExpression" and len(node.children) == 2:
                function, spec = node.children
                if function.cls in _RANKING:
                    pass  # its children are the window's ORDER BY again: WINDOW, just below
                elif (
                    function.cls == "AggregateExpression"
                    and function.children[:1]
                    and (function.children[0].cls in _ROW_OFFSET)
                ):
                    # first_value/last_value copy another row's value, as lag and lead do: no
                    # aggregation (the SQL collector's rule), though Catalyst models them so
                    stack.append((function.children[0], descend(mode)))
                else:
                    stack.append((function, descend(mode)))
                stack.extend((c, influence(mode, T.WINDOW)) for c in spec.children)
            elif cls == "CaseWhen":
                branches = len(node.data.get("branches") or ())
                for index, child in enumerate(node.children):
                    is_condition = index < 2 * branches and index % 2 == 0
                    stack.append((child, influence(mode, T.CONDITIONAL) if is_condition else descend(mode)))
            elif cls == "If" and len(node.children) == 3:
                stack.append((node.children[0], influence(mode, T.CONDITIONAL)))
                stack.extend((c, descend(mode)) for c in node.children[1:])
            elif cls == "PivotFirst" and node.children:
                # the pivot column only picks which output a value lands in
                stack.append((node.children[0], influence(mode, T.CONDITIONAL)))
                stack.extend((c, mode) for c in node.children[1:])
            elif cls in _SUBQUERIES and node.plan is not None:
                # outer columns it uses are OuterReferences inside its plan, not its children
                self._subquery(node.plan, descend(mode), out)
            else:
                stack.extend((c, descend(mode)) for c in node.children)

    def _struct_field(
        self,
        node: Expr,
        mode: Transformation,
        out: Deps,
        stack: list[tuple[Expr | None, Transformation]],
    ) -> None:
        """`addr.city` of a column: the source's `…#addr.city` field, when the column is a copy."""
        path: list[str] = []
        current: Expr = node
        while current.cls == "GetStructField" and current.children:
            path.append(_field_name(current))
            current = current.children[0]
        if current.cls == "AttributeReference" and all(path):
            found = self.scope.lookup(current.expr_id) or {}
            add_composed(out, extend_paths(found, tuple(reversed(path))), mode)
            return
        stack.append((node.children[0] if node.children else None, descend(mode)))

    def _subquery(self, plan: PlanNode, later: Transformation, out: Deps) -> None:
        columns, indirect, tables = self.subquery(plan, self.scope)
        self.tables |= tables
        for deps in columns:
            add_composed(out, deps, later)
        add_composed(out, indirect, later)


def _field_name(node: Expr) -> str:
    name = node.data.get("name")
    if name:
        return str(name).lower()
    # unnamed: the ordinal into the struct type of the child column
    child = node.children[0] if node.children else None
    data_type = child.data_type if child is not None else None
    fields = data_type.get("fields") if isinstance(data_type, dict) else None
    ordinal = node.data.get("ordinal")
    if isinstance(fields, list) and isinstance(ordinal, int) and 0 <= ordinal < len(fields):
        return str(fields[ordinal].get("name", "")).lower()
    return ""
