"""Column lineage of one query, computed in a single pass over sqlglot's scope tree.

Every scope (a SELECT, a set operation, a LATERAL VIEW/UNNEST) becomes a `Relation`: its
output columns in order, each with the real table fields it derives from and how
(`Deps`: (field URN, Transformation) → Confidence), plus the row-level influences (JOIN,
FILTER, GROUP_BY, SORT) that reach every output column, and the real tables read. A
relation is built once from the relations of its sources, so CTEs, derived tables, temp
views and unions compose without re-walking, which is what keeps this far faster than
asking `sqlglot.lineage()` column by column. Where a column's source is a guess (an
unqualified name over several tables whose schemas are unknown) the edge's confidence
says so instead of the edge being dropped.

sqlglot's `qualify` is deliberately not run first: it took a third of the collector's time,
gives up on whole statements when schemas are missing, and what it would add (stars
expanded from known schemas, output-alias references, `GROUP BY 1`, `JOIN … USING`) the
resolver here does itself, with a confidence where it has to guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from tracelake.collect.sql_relation import (
    INDIRECT,
    Deps,
    Relation,
    T,
    add_composed,
    add_dep,
    extend_paths,
)
from tracelake.model import Confidence, Transformation


def _descend(mode: Transformation) -> Transformation:
    """Below any operator a bare copy becomes a computed value; other kinds stick."""
    return T.TRANSFORMATION if mode is T.IDENTITY else mode


def _influence(mode: Transformation, kind: Transformation) -> Transformation:
    """An indirect role (CASE condition, window key) unless already in an indirect clause."""
    return mode if mode in INDIRECT else kind


@dataclass(eq=False)
class _Context:
    """Name resolution inside one SELECT: its sources, its output aliases, its outer query."""

    sources: dict[str, Relation]
    parent: _Context | None
    tables: set[str]
    aliases: dict[str, Deps] = field(default_factory=dict)
    lambdas: frozenset[str] = frozenset()
    using: frozenset[str] = frozenset()
    windows: dict[str, exp.Window] = field(default_factory=dict)
    # the right side of LEFT SEMI / ANTI JOINs: it chooses rows, named only in the ON clause
    row_only: frozenset[str] = frozenset()


# Clauses where an output alias may be named: ORDER BY prefers it over a source column.
_ALIAS_FIRST = "order"
_ALIAS_AFTER = frozenset({"select", "group", "having", "qualify"})


class QueryAnalyzer:
    """Builds the `Relation` of a query from its scope tree; one instance per statement."""

    def __init__(self, table_relation: Callable[[exp.Table], Relation]) -> None:
        self._table_relation = table_relation
        self._relations: dict[int, Relation] = {}
        self._contexts: dict[int, _Context] = {}
        self._scopes: dict[int, Scope] = {}
        self._tables: dict[int, Relation] = {}

    def analyze(self, root: Scope) -> Relation:
        for scope in root.traverse():
            self._scopes[id(scope.expression)] = scope
        return self._relation(root)

    # -- scopes ---------------------------------------------------------------------------

    def _relation(self, scope: Scope) -> Relation:
        known = self._relations.get(id(scope))
        if known is not None:
            return known
        expression = scope.expression
        if isinstance(expression, exp.Select):
            relation = self._select(scope)
        elif isinstance(expression, exp.SetOperation):
            relation = self._set_operation(scope)
        elif isinstance(expression, exp.Lateral | exp.Unnest):
            relation = self._generator(scope)
        else:
            relation = Relation(complete=False)
        if scope.outer_columns:
            relation = relation.renamed([name.lower() for name in scope.outer_columns])
        self._relations[id(scope)] = relation
        return relation

    def _source(self, source: exp.Expr | Scope) -> Relation:
        if isinstance(source, Scope):
            return self._relation(source)
        if isinstance(source, exp.Table):
            known = self._tables.get(id(source))
            if known is None:
                known = self._tables[id(source)] = self._table_relation(source)
            return known
        return Relation(complete=False)

    def _sources(self, items: Iterable[tuple[str, exp.Expr | Scope]]) -> dict[str, Relation]:
        return {name.lower(): self._source(source) for name, source in items}

    def _select(self, scope: Scope) -> Relation:
        select = scope.expression
        assert isinstance(select, exp.Select)
        sources = self._sources((name, source) for name, (_, source) in scope.selected_sources.items())
        for name, (node, _) in scope.selected_sources.items():
            for pivot in node.args.get("pivots") or () if isinstance(node, exp.Expr) else ():
                sources[name.lower()] = self._pivot(sources[name.lower()], pivot, name.lower())
                if pivot.alias:
                    sources[pivot.alias.lower()] = sources[name.lower()]
        parent = self._contexts.get(id(scope.parent)) if scope.parent is not None else None
        out = Relation()
        joins = select.args.get("joins") or ()
        using = frozenset(i.name.lower() for join in joins for i in join.args.get("using") or ())
        windows = {w.name.lower(): w for w in select.args.get("windows") or ()}
        # sqlglot leaves a semi or anti join's right side out of the selected sources (none of
        # its columns is output), but which rows remain depends on it
        row_only = {
            join.this.alias_or_name.lower(): scope.sources[join.this.alias_or_name]
            for join in joins
            if (join.args.get("kind") or "").upper() in ("SEMI", "ANTI")
            and join.this.alias_or_name in scope.sources
        }
        sources.update(self._sources(row_only.items()))
        context = _Context(
            sources, parent, out.tables, using=using, windows=windows, row_only=frozenset(row_only)
        )
        self._contexts[id(scope)] = context
        for relation in {id(r): r for r in sources.values()}.values():
            out.tables |= relation.tables
            for key, confidence in relation.indirect.items():
                add_dep(out.indirect, key, confidence)

        for position, projection in enumerate(select.expressions):
            if _is_star(projection):
                self._expand_star(projection, context, out)
                continue
            deps: Deps = {}
            body = projection.this if isinstance(projection, exp.Alias) else projection
            self._walk(body, T.IDENTITY, context, deps, "select")
            name = _output_name(projection, position)
            out.add_column(name, deps)
            context.aliases.setdefault(name, deps)

        for join in joins:
            self._walk(join.args.get("on"), T.JOIN, context, out.indirect, "join")
        for name in using:
            for relation in sources.values():
                if relation.knows(name) is not False:
                    add_composed(out.indirect, relation.lookup(name) or {}, T.JOIN)
        for clause, kind in _ROW_CLAUSES:
            held = select.args.get(clause)
            if held is not None:
                self._clause(held, kind, context, out, clause)
        return out

    def _clause(
        self, node: exp.Expr, kind: Transformation, context: _Context, out: Relation, clause: str
    ) -> None:
        """A row-level clause; `GROUP BY 1` / `ORDER BY 2 DESC` name an output column by position."""
        items = node.expressions if isinstance(node, exp.Group | exp.Order) else [node]
        for item in items:
            key = item.this if isinstance(item, exp.Ordered) else item
            if isinstance(key, exp.Literal) and key.is_int and clause != "where":
                position = int(key.name) - 1
                if 0 <= position < len(out.columns):
                    add_composed(out.indirect, out.columns[position][1], kind)
                continue
            self._walk(item, kind, context, out.indirect, clause)
        if isinstance(node, exp.Group):
            for part in ("grouping_sets", "cube", "rollup"):
                for item in node.args.get(part) or ():
                    self._walk(item, kind, context, out.indirect, clause)

    def _expand_star(self, projection: exp.Expr, context: _Context, out: Relation) -> None:
        qualifier = projection.table.lower() if isinstance(projection, exp.Column) else ""
        star = projection.this if isinstance(projection, exp.Column) else projection
        excluded = {column.name.lower() for column in star.args.get("except_") or ()}
        replaced: dict[str, Deps] = {}
        for alias in star.args.get("replace") or ():
            self._walk(
                alias.this, T.IDENTITY, context, replaced.setdefault(alias.alias.lower(), {}), "select"
            )
        if qualifier in context.sources:
            chosen = [context.sources[qualifier]]
        else:  # a pivoted source is listed under its own name and its alias: expand it once
            shown = [r for name, r in context.sources.items() if name not in context.row_only]
            chosen = list({id(r): r for r in shown}.values())
        for relation in chosen:
            out.ordered = out.ordered and relation.ordered
            for name, deps in relation.columns:
                if name not in excluded:
                    out.add_column(name, replaced.get(name, deps))
            if not relation.complete and relation.fallback is None:
                out.complete = False
                out.passthrough.append(relation)

    def _pivot(self, relation: Relation, pivot: exp.Pivot, name: str) -> Relation:
        """PIVOT: new columns aggregate the values, the FOR column picks which (a condition).
        UNPIVOT: the value column gathers the listed columns; the rest pass through."""
        context = _Context({name: relation}, None, set())
        out = Relation(
            complete=relation.complete, tables=set(relation.tables), indirect=dict(relation.indirect)
        )
        out.passthrough = [] if relation.complete else [relation]
        used = {column.name.lower() for column in pivot.find_all(exp.Column)}
        for column_name, deps in relation.columns:
            if column_name not in used:
                out.add_column(column_name, deps)
        fields = pivot.args.get("fields") or []
        if pivot.args.get("unpivot"):
            values: Deps = {}
            for field_ in fields:
                for listed in field_.expressions:
                    column = listed.this if isinstance(listed, exp.PivotAlias) else listed
                    self._walk(column, T.IDENTITY, context, values, "select")
                out.add_column(field_.this.name.lower(), {})
            for value in pivot.expressions:
                out.add_column(value.name.lower(), values)
            return out
        chooser: Deps = {}
        for field_ in fields:
            self._walk(field_.this, T.CONDITIONAL, context, chooser, "select")
        aggregates: list[tuple[str, Deps]] = []
        for aggregate in pivot.expressions:
            deps = dict(chooser)
            self._walk(aggregate, T.IDENTITY, context, deps, "select")
            aggregates.append((aggregate.alias.lower(), deps))
        names = [c.name.lower() for c in pivot.args.get("columns") or ()] or [
            e.alias_or_name.lower() for field_ in fields for e in field_.expressions
        ]
        for column_name in names:
            # with several aggregates the generated names end in the aggregate's alias
            matching = [d for alias, d in aggregates if alias and column_name.endswith(f"_{alias}")]
            merged: Deps = {}
            for deps in matching or [d for _, d in aggregates]:
                add_composed(merged, deps, T.IDENTITY)
            out.add_column(column_name, merged)
        return out

    def _set_operation(self, scope: Scope) -> Relation:
        operation = scope.expression
        left, right = (self._relation(branch) for branch in scope.set_operation_scopes[:2])
        out = Relation(complete=left.complete and right.complete, ordered=left.ordered and right.ordered)
        out.tables |= left.tables | right.tables
        for key, confidence in (*left.indirect.items(), *right.indirect.items()):
            add_dep(out.indirect, key, confidence)
        if isinstance(operation, exp.Union):
            for position, (name, deps) in enumerate(left.columns):
                merged = dict(deps)
                if position < len(right.columns):
                    add_composed(merged, right.columns[position][1], T.IDENTITY)
                out.add_column(name, merged)
            out.passthrough = [r for r in (left, right) if not r.complete]
        else:
            # INTERSECT / EXCEPT: the right side only decides which left rows survive
            for name, deps in left.columns:
                out.add_column(name, dict(deps))
            for _, deps in right.columns:
                add_composed(out.indirect, deps, T.FILTER)
            out.passthrough = [left] if not left.complete else []
        order = operation.args.get("order")
        if order is not None:
            for column in order.find_all(exp.Column):
                add_composed(out.indirect, out.lookup(column.name.lower()) or {}, T.SORT)
        return out

    def _generator(self, scope: Scope) -> Relation:
        """LATERAL VIEW explode(...) / UNNEST(...): every generated column derives from the input."""
        node = scope.expression
        parent = self._contexts.get(id(scope.parent)) if scope.parent is not None else None
        out = Relation(complete=False)
        # the tables before a LATERAL are what its subquery correlates with (`u.id` of
        # `FROM users u JOIN LATERAL (SELECT … WHERE o.user_id = u.id)`): its enclosing context,
        # known before the subquery — the generator's own body is no source of itself
        context = _Context({}, parent, out.tables)
        self._contexts[id(scope)] = context
        context.sources.update(
            self._sources(
                (name, source)
                for name, source in scope.sources.items()
                if not (isinstance(source, Scope) and _within(source.expression, node))
            )
        )
        body = node.this if isinstance(node, exp.Lateral) else None
        inner = self._scopes.get(id(body.this)) if isinstance(body, exp.Subquery) else None
        if inner is not None:  # LATERAL (SELECT …): its columns, each with its own lineage
            alias = node.args.get("alias")
            names = [c.name.lower() for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
            return self._relation(inner).renamed(names)
        inputs: Deps = {}
        arguments = node.expressions if isinstance(node, exp.Unnest) else [node.this]
        for argument in arguments:
            self._walk(argument, T.TRANSFORMATION, context, inputs, "select")
        alias = node.args.get("alias")
        names = [c.name.lower() for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        for name in names or _default_generator_names(node):
            out.add_column(name, inputs)
        out.fallback = inputs
        return out

    # -- expressions ----------------------------------------------------------------------

    def _walk(
        self, node: exp.Expr | None, mode: Transformation, context: _Context, out: Deps, clause: str
    ) -> None:
        """Add to `out` every source field `node` reads, with how its value reaches the output.

        A work list rather than recursion: machine-written SQL nests `a + b + … ` thousands
        deep, past Python's recursion limit.
        """
        stack: list[tuple[exp.Expr | None, Transformation, _Context]] = [(node, mode, context)]
        while stack:
            node, mode, context = stack.pop()
            if node is None or isinstance(node, _LEAVES):
                continue
            if isinstance(node, exp.Column):
                if not isinstance(node.this, exp.Star):
                    self._column(node, (), mode, context, out, clause)
                continue
            if isinstance(node, exp.Dot):
                column, path = _flatten_dot(node)
                if column is not None:
                    self._column(column, path, mode, context, out, clause)
                    continue
            if isinstance(node, exp.Subquery | exp.Query):
                self._subquery(node, mode, context, out)
                continue
            if isinstance(node, exp.Window):
                window_mode = _influence(mode, T.WINDOW)
                named = context.windows.get(node.alias.lower()) if node.alias else None
                if named is not None:  # `OVER w … WINDOW w AS (PARTITION BY …)`
                    stack.extend((key, window_mode, context) for key in named.args.get("partition_by") or ())
                    stack.append((named.args.get("order"), window_mode, context))
                function = node.this
                while isinstance(function, exp.IgnoreNulls | exp.RespectNulls):
                    function = function.this
                if isinstance(function, _ROW_OFFSET_FUNCTIONS):
                    # lag/lead/first_value copy a value from another row: no aggregation
                    stack.extend((child, _descend(mode), context) for child in function.iter_expressions())
                else:
                    stack.append((function, _descend(mode), context))
                stack.extend((key, window_mode, context) for key in node.args.get("partition_by") or ())
                stack.append((node.args.get("order"), window_mode, context))
                continue
            if isinstance(node, exp.Case | exp.If | exp.Nvl2):
                condition_mode, value_mode = _influence(mode, T.CONDITIONAL), _descend(mode)
                stack.append((node.this, condition_mode, context))
                if isinstance(node, exp.Case):
                    for branch in node.args.get("ifs") or ():
                        stack.append((branch.this, condition_mode, context))
                        stack.append((branch.args.get("true"), value_mode, context))
                    stack.append((node.args.get("default"), value_mode, context))
                else:
                    stack.append((node.args.get("true"), value_mode, context))
                    stack.append((node.args.get("false"), value_mode, context))
                continue
            if isinstance(node, exp.Filter):
                # `count(*) FILTER (WHERE …)`: the condition picks the rows aggregated
                stack.append((node.this, mode, context))
                stack.append((node.expression, _influence(mode, T.CONDITIONAL), context))
                continue
            if isinstance(node, exp.Lambda):
                names = frozenset(e.name.lower() for e in node.expressions)
                inner = _Context(
                    context.sources,
                    context.parent,
                    context.tables,
                    context.aliases,
                    context.lambdas | names,
                    context.using,
                    context.windows,
                )
                stack.append((node.this, _descend(mode), inner))
                continue
            if isinstance(node, exp.AggFunc):
                inner_mode = mode if mode in INDIRECT else T.AGGREGATION
            elif isinstance(node, _TRANSPARENT):
                inner_mode = mode
            else:
                inner_mode = _descend(mode)
            stack.extend((child, inner_mode, context) for child in node.iter_expressions())

    def _subquery(self, node: exp.Expr, mode: Transformation, context: _Context, out: Deps) -> None:
        query = node.this if isinstance(node, exp.Subquery) else node
        scope = self._scopes.get(id(query)) or self._scopes.get(id(node))
        if scope is None:
            return
        relation = self._relation(scope)
        context.tables |= relation.tables
        later = _descend(mode)
        for _, deps in relation.columns:
            add_composed(out, deps, later)
        add_composed(out, relation.indirect, later)

    def _column(
        self,
        column: exp.Column,
        path: tuple[str, ...],
        mode: Transformation,
        context: _Context,
        out: Deps,
        clause: str,
    ) -> None:
        parts = [part.name.lower() for part in column.parts]
        for deps, cap in self._resolve(parts, path, context, clause):
            add_composed(out, deps, mode, cap)

    def _resolve(
        self, parts: list[str], path: tuple[str, ...], context: _Context, clause: str
    ) -> list[tuple[Deps, Confidence]]:
        if len(parts) > 1:
            # `alias.col[.field…]` or `db.tbl.col[.field…]`, here or in an enclosing query
            scope: _Context | None = context
            while scope is not None:
                for skip in (0, 1, 2):
                    if len(parts) > skip + 1 and parts[skip] in scope.sources:
                        relation = scope.sources[parts[skip]]
                        deps = relation.lookup(parts[skip + 1], (*parts[skip + 2 :], *path))
                        return [(deps, Confidence.HIGH)] if deps is not None else []
                scope = scope.parent
        # an unqualified name; any further parts are a struct path below it
        name, path = parts[0], (*parts[1:], *path)
        if name in context.lambdas:
            return []
        if clause == _ALIAS_FIRST and name in context.aliases:
            return [
                (
                    extend_paths(context.aliases[name], path) if path else context.aliases[name],
                    Confidence.HIGH,
                )
            ]
        scope = context
        while scope is not None:
            found = self._unqualified(name, path, scope, clause if scope is context else "")
            if found:
                return found
            scope = scope.parent
        return []

    def _unqualified(
        self, name: str, path: tuple[str, ...], context: _Context, clause: str
    ) -> list[tuple[Deps, Confidence]]:
        sources = context.sources
        if context.row_only and clause != "join":
            sources = {n: r for n, r in sources.items() if n not in context.row_only}
        if name in context.using:
            # `JOIN … USING (id)`: the one `id` column is both sides' id
            owners = [r for r in sources.values() if r.knows(name) is not False]
            return [(deps, Confidence.HIGH) for r in owners if (deps := r.lookup(name, path))]
        sure = [r for r in sources.values() if r.knows(name) is True]
        if sure:
            cap = Confidence.HIGH if len(sure) == 1 else Confidence.LOW
            return [(deps, cap) for r in sure if (deps := r.lookup(name, path)) is not None]
        if clause in _ALIAS_AFTER and name in context.aliases:
            deps = context.aliases[name]
            return [(extend_paths(deps, path) if path else deps, Confidence.HIGH)]
        unsure = [r for r in sources.values() if r.knows(name) is None]
        if not unsure:
            return []
        # one candidate left (every other source is known not to have the name) is a
        # deduction, not a guess; several are a guess spread over all of them
        cap = Confidence.HIGH if len(unsure) == 1 else Confidence.LOW
        return [(deps, cap) for r in unsure if (deps := r.lookup(name, path)) is not None]


# Nothing below these reads a value: grouping(c) and grouping_id(…) say which grouping set
# rolled a row up, whatever c holds (Spark's analyzer makes them bits of spark_grouping_id).
_LEAVES = (
    exp.Literal,
    exp.Identifier,
    exp.Star,
    exp.Null,
    exp.Boolean,
    exp.DataType,
    exp.Var,
    exp.Grouping,
    exp.GroupingId,
)
_TRANSPARENT = (
    exp.Paren,
    exp.Alias,
    exp.Where,
    exp.Having,
    exp.Qualify,
    exp.Group,
    exp.Order,
    exp.Ordered,
    exp.Distinct,
)
_ROW_OFFSET_FUNCTIONS = (exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.NthValue)
_ROW_CLAUSES = (
    ("where", T.FILTER),
    ("group", T.GROUP_BY),
    ("having", T.FILTER),
    ("qualify", T.FILTER),
    ("order", T.SORT),
    ("sort", T.SORT),
    ("cluster", T.SORT),
)


def _within(node: exp.Expr | None, ancestor: exp.Expr) -> bool:
    while node is not None and node is not ancestor:
        node = node.parent
    return node is ancestor


def _default_generator_names(node: exp.Expr) -> list[str]:
    """The column names Spark gives a generator's output when the query names none."""
    function = node.this if isinstance(node, exp.Lateral) else None
    if isinstance(function, exp.Posexplode):
        return ["pos", "col", "key", "value"]
    if isinstance(function, exp.Explode):
        return ["col", "key", "value"]
    if isinstance(function, exp.Anonymous) and function.name.lower() == "json_tuple":
        return [f"c{i}" for i in range(max(len(function.expressions) - 1, 0))]
    if isinstance(function, exp.Stack):
        return [f"col{i}" for i in range(len(function.expressions))]
    return []


def _is_star(projection: exp.Expr) -> bool:
    return isinstance(projection, exp.Star) or (
        isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
    )


def _output_name(projection: exp.Expr, position: int) -> str:
    """The column name a projection produces; unnamed expressions get sqlglot's `_col_N`."""
    if isinstance(projection, exp.Alias | exp.Column | exp.Dot):
        name = projection.alias_or_name
        if name:
            return name.lower()
    return f"_col_{position}"


def _flatten_dot(node: exp.Dot) -> tuple[exp.Column | None, tuple[str, ...]]:
    """`Dot(Dot(col, a), b)` → (col, ("a", "b")); (None, ()) when the root is not a column."""
    path: list[str] = []
    current: exp.Expr = node
    while isinstance(current, exp.Dot):
        if not isinstance(current.expression, exp.Identifier):
            return None, ()
        path.append(current.expression.name.lower())
        current = current.this
    if isinstance(current, exp.Column) and not isinstance(current.this, exp.Star):
        return current, tuple(reversed(path))
    return None, ()
