"""Lineage of one Spark action from its analyzed plan: datasets read and written, column edges.

Each plan operator becomes a `Rel`: its output columns (by exprId) with the source columns
each derives from (`Deps`), the row-level influences on all of them (FILTER, JOIN, GROUP_BY,
SORT), and the datasets read below it. Operators are evaluated bottom-up without recursion.
A write command turns its query's `Rel` into a table-level edge from every dataset read and
typed field edges onto the target's columns, each target column also receiving the row-level
influences (the OpenLineage Spark convention, and the SQL collector's). A query action (count,
collect, toPandas, show) only records its inputs as reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracelake.collect.spark_datasets import (
    CREATING_WRITES,
    IN_MEMORY_LEAVES,
    LIFECYCLE_COMMANDS,
    LOAD_DATA,
    WRAPPER_WRITES,
    Dataset,
    TableChange,
    WriteTarget,
    is_command,
    leaf_output,
    loaded_files,
    rdd_ancestors,
    rdd_datasets,
    read_dataset,
    schema_columns,
    table_change,
    type_name,
    write_query,
    write_target,
)
from tracelake.collect.spark_expressions import ExpressionWalker, Scope
from tracelake.collect.spark_plan import Expr, PlanNode, all_nodes, detail_kind, relation_key
from tracelake.collect.sql_relation import Deps, T, add_composed, add_dep, column_urn
from tracelake.model import DECLARED_COLUMNS, Confidence, Lifecycle, Transformation
from tracelake.model.names import location_urn

EdgeKey = tuple[str, str, Transformation | None]
# The datasets behind the RDDs `df.rdd` made in a run, by RDD id.
RddOrigins = dict[int, list[Dataset]]
# Why an edge through an RDD is MEDIUM: the evidence an edge carries.
THROUGH_RDD = (
    "through an RDD: its rows pass through Python functions, so which columns feed which is not known"
)
# Leaves holding an RDD's rows (createDataFrame(rdd), rdd.toDF()): their sources are the RDD's.
RDD_LEAVES = frozenset({"LogicalRDD", "ExternalRDD"})
# What the JVM journalled for the plan nodes that need it, by `id()` of the node in the parsed plan
Details = dict[int, dict[str, str]]

# Nested writes a command runs for itself (`DataSource.writeAndRead` inside CTAS and
# saveAsTable): the command's own event names the table, this one only its directory.
NESTED_WRITE = "file source write"
_PASS_THROUGH = frozenset(
    {
        "SubqueryAlias",
        "View",
        "GlobalLimit",
        "LocalLimit",
        "Limit",
        "Tail",
        "Offset",
        "Sample",
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "Distinct",
        "ResolvedHint",
        "CTERelationDef",
        "EventTimeWatermark",
        "CollectMetrics",
        "Subquery",
    }
)
_JOIN_LEFT_ONLY = ("LeftSemi", "LeftAnti", "ExistenceJoin")
_SET_OPERATIONS = frozenset({"Union", "Intersect", "Except"})
_GROUPED_PYTHON = frozenset({"FlatMapGroupsInPandas", "FlatMapGroupsInArrow", "FlatMapCoGroupsInPandas"})
_MAX_MEMORY = 500_000


@dataclass(frozen=True, slots=True)
class Attr:
    expr_id: int | None
    name: str
    data_type: str | None


@dataclass(eq=False, slots=True)
class Rel:
    """What an operator offers its parent: columns, their deps, row influences, datasets read."""

    attrs: list[Attr]
    deps: dict[int, Deps]
    indirect: Deps = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)

    def column_deps(self, attr: Attr) -> Deps:
        return self.deps.get(attr.expr_id, {}) if attr.expr_id is not None else {}


@dataclass(slots=True)
class ActionLineage:
    """What one action did: the datasets it read and wrote, and the edges of its writes."""

    func_name: str
    reads: dict[str, Dataset] = field(default_factory=dict)
    writes: dict[str, Dataset] = field(default_factory=dict)
    edges: dict[EdgeKey, Confidence] = field(default_factory=dict)
    in_memory: set[tuple[int, ...]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    changes: list[TableChange] = field(default_factory=list)  # what DDL did to tables
    descriptions: dict[EdgeKey, str] = field(default_factory=dict)  # why an edge is less than sure
    through_rdd: set[str] = field(default_factory=set)  # datasets read through an RDD…
    read_directly: set[str] = field(default_factory=set)  # …and read as datasets
    # of a query action (count, collect, show): the columns its result holds or depends on
    read_columns: set[str] = field(default_factory=set)
    # of a query action: each column of its result by name, with the source columns it derives
    # from (what a DataFrame handed to pandas holds: `collect.spark_handoff`)
    outputs: list[tuple[str, Deps]] = field(default_factory=list)


# -- which parts of a plan an action's lineage needs ----------------------------------------


def plan_parts(func_name: str, root: PlanNode) -> tuple[PlanNode | None, PlanNode | None]:
    """(the write command, the query whose lineage matters) of an action; (None, None) when the
    action moves no data we follow (DDL, SET, temp views, a nested write reported again)."""
    if func_name == NESTED_WRITE or root.cls in WRAPPER_WRITES:
        return None, None
    query = write_query(root)
    if query is not None:
        return root, query
    if is_command(root):
        return None, None
    return None, root


def detail_requests(func_name: str, root: PlanNode) -> list[tuple[PlanNode, str]]:
    """The nodes the listener must ask the JVM about, with what to ask."""
    if root.cls in LIFECYCLE_COMMANDS:
        return [(root, "lifecycle")]
    command, query = plan_parts(func_name, root)
    nodes = [command] if command is not None else []
    if query is not None:
        nodes.extend(all_nodes(query))
    out: list[tuple[PlanNode, str]] = []
    for node in nodes:
        kind = detail_kind(node)
        if kind is not None:
            out.append((node, kind))
    return out


# -- evaluation ---------------------------------------------------------------------------


class _Evaluator:
    """Evaluates the plan trees of one action; `memory` is the run's exprId → Deps record,
    `origins` the datasets behind RDDs made by `df.rdd` (by RDD id)."""

    def __init__(
        self, details: Details, memory: dict[int, Deps], origins: RddOrigins, result: ActionLineage
    ) -> None:
        self.details = details
        self.memory = memory
        self.origins = origins
        self.result = result
        self.ctes: dict[Any, Rel] = {}
        self.fitting: set[int] = set()  # Projects whose casts the analyzer added (ids of nodes)

    # -- trees ----------------------------------------------------------------------------

    def evaluate(self, root: PlanNode, outer: Scope | None = None) -> Rel:
        rels: dict[int, Rel] = {}
        for node in _postorder(root):
            rel = self._operator(node, [rels.pop(id(c)) for c in node.children], outer)
            rels[id(node)] = rel
            if len(self.memory) > _MAX_MEMORY:
                self.memory.clear()  # continuity matters for recent DataFrames, not old ones
            self.memory.update(rel.deps)
        return rels[id(root)]

    def _subquery(self, plan: PlanNode, scope: Scope) -> tuple[list[Deps], Deps, set[str]]:
        rel = self.evaluate(plan, scope)
        return [rel.column_deps(a) for a in rel.attrs], rel.indirect, rel.tables

    def _walker(self, children: list[Rel], outer: Scope | None) -> ExpressionWalker:
        if len(children) == 1:
            deps = children[0].deps
        else:
            deps = {}
            for child in children:
                deps.update(child.deps)
        return ExpressionWalker(Scope(deps, outer, self.memory), self._subquery)

    # -- operators ------------------------------------------------------------------------

    def _operator(self, node: PlanNode, children: list[Rel], outer: Scope | None) -> Rel:
        cls = node.cls
        if not node.children:
            return self._leaf(node)
        walker = self._walker(children, outer)
        child = children[0]
        if cls in _PASS_THROUGH:
            rel = _inherit(child)
            if cls == "CTERelationDef":
                self.ctes[node.data.get("id")] = rel
        elif cls == "Project":
            rel = self._project(node, child, walker)
        elif cls == "Filter":
            rel = _inherit(child)
            walker.walk(node.expr("condition"), T.FILTER, rel.indirect)
        elif cls == "Sort":
            rel = _inherit(child)
            for order in node.expr_list("order"):
                walker.walk(order, T.SORT, rel.indirect)
        elif cls == "Aggregate":
            rel = _inherit(child, attrs=[])
            self._named(node.expr_list("aggregateExpressions"), walker, rel)
            for key in node.expr_list("groupingExpressions"):
                walker.walk(key, T.GROUP_BY, rel.indirect)
        elif cls == "Window":
            rel = _inherit(child)
            self._named(node.expr_list("windowExpressions"), walker, rel)
        elif cls == "Deduplicate" or cls == "DeduplicateWithinWatermark":
            rel = _inherit(child)
            keys = node.expr_list("keys")
            if len(keys) < len(child.attrs):
                # dropDuplicates(["k"]): one row kept per key, like a GROUP BY k
                for key in keys:
                    walker.walk(key, T.GROUP_BY, rel.indirect)
        elif cls == "Generate":
            rel = self._generate(node, child, walker)
        elif cls == "Expand":
            rel = self._expand(node, child, walker)
        elif cls in ("Join", "AsOfJoin"):
            rel = self._join(node, children, walker)
        elif cls in _SET_OPERATIONS:
            rel = self._set_operation(node, children, walker)
        elif cls == "WithCTE":
            rel = _inherit(children[-1])  # the plan comes after its CTE definitions
        else:
            rel = self._opaque(node, children, walker)
        rel.tables |= walker.tables
        return rel

    def _leaf(self, node: PlanNode) -> Rel:
        attrs = _attrs(leaf_output(node))
        cls = node.cls
        if cls == "CTERelationRef":
            definition = self.ctes.get(node.data.get("cteId"))
            if definition is not None:
                # a reference has columns of its own, in the order of the definition's
                rel = Rel(attrs, {}, dict(definition.indirect), set(definition.tables))
                for attr, source in zip(attrs, definition.attrs, strict=False):
                    _set(rel, attr, definition.column_deps(source))
                return rel
        if cls in RDD_LEAVES:
            datasets = rdd_sources(self.details.get(id(node)), self.origins)
            if datasets:
                # rows made by Python functions: which column came from which is not known
                self.result.through_rdd.update(d.urn for d in datasets)
                self.result.reads.update((d.urn, d) for d in datasets)
                return Rel(attrs, {}, {}, {d.urn for d in datasets})
        datasets = read_dataset(node, self.details.get(id(node)))
        if datasets:
            self.result.read_directly.update(d.urn for d in datasets)
            rel = Rel(attrs, {}, {}, {d.urn for d in datasets})
            for dataset in datasets:
                self.result.reads.setdefault(dataset.urn, dataset)
                for attr in attrs:
                    deps = rel.deps.setdefault(attr.expr_id, {}) if attr.expr_id is not None else {}
                    deps[(column_urn(dataset.urn, attr.name.lower()), T.IDENTITY)] = Confidence.HIGH
            return rel
        # no asset: a column seen by an earlier action keeps its origin (a checkpointed or
        # cached DataFrame keeps its exprIds); anything else is in-memory data
        rel = Rel(attrs, {})
        known = [a for a in attrs if a.expr_id is not None and self.memory.get(a.expr_id)]
        for attr in known:
            deps = self.memory[attr.expr_id]  # type: ignore[index]  # `known` kept only attributes with an expr_id
            _set(rel, attr, deps)
            rel.tables.update(source.partition("#")[0] for source, _ in deps)
        if cls in IN_MEMORY_LEAVES and not known:
            self.result.in_memory.add(relation_key(node))
        elif cls not in IN_MEMORY_LEAVES and cls != "OneRowRelation" and not known:
            self.result.notes.append(f"{cls}: a source Tracelake cannot name; its columns are untraced")
        return rel

    def _project(self, node: PlanNode, child: Rel, walker: ExpressionWalker) -> Rel:
        rel = _inherit(child, attrs=[])
        items = node.expr_list("projectList")
        if id(node) in self.fitting:
            items = [_strip_implicit_cast(item) for item in items]
        self._named(items, walker, rel)
        return rel

    def _named(self, items: list[Expr], walker: ExpressionWalker, rel: Rel) -> None:
        """Output columns of a projection list: attributes carried through, or aliased values."""
        for item in items:
            if item.cls == "AttributeReference":
                attr = Attr(item.expr_id, item.name, type_name(item.data_type))
                deps = walker.deps(item)
            elif item.cls == "Alias":
                attr = Attr(item.expr_id, item.name, None)
                deps = walker.deps(item.children[0] if item.children else None)
            else:
                continue
            rel.attrs.append(attr)
            _set(rel, attr, deps)

    def _generate(self, node: PlanNode, child: Rel, walker: ExpressionWalker) -> Rel:
        unrequired = set(node.data.get("unrequiredChildIndex") or ())
        kept = [a for i, a in enumerate(child.attrs) if i not in unrequired]
        rel = _inherit(child, attrs=kept)
        inputs = walker.deps(node.expr("generator"), T.TRANSFORMATION)
        for attr in _attrs(node.attributes("generatorOutput")):
            rel.attrs.append(attr)
            _set(rel, attr, inputs)
        return rel

    def _expand(self, node: PlanNode, child: Rel, walker: ExpressionWalker) -> Rel:
        """ROLLUP/CUBE/GROUPING SETS: each output column gathers its expressions of every set."""
        projections = node.exprs.get("projections")
        if not isinstance(projections, list):
            # the JSON leaves some projections out (unpivot): every input reaches every new column
            return self._opaque(node, [child], walker)
        outputs = _attrs(node.attributes())
        rel = _inherit(child, attrs=outputs)
        for position, attr in enumerate(outputs):
            merged: Deps = {}
            for projection in projections:
                if isinstance(projection, list) and position < len(projection):
                    walker.walk(projection[position], T.IDENTITY, merged)
            _set(rel, attr, merged)
        return rel

    def _join(self, node: PlanNode, children: list[Rel], walker: ExpressionWalker) -> Rel:
        join_type = str((node.data.get("joinType") or {}).get("object", ""))
        left_only = any(kind in join_type for kind in _JOIN_LEFT_ONLY)
        sides = children[:1] if left_only else children
        rel = Rel([a for side in sides for a in side.attrs], {}, {}, set())
        for side in children:
            rel.tables |= side.tables
            for key, confidence in side.indirect.items():
                add_dep(rel.indirect, key, confidence)
        for side in sides:
            for attr in side.attrs:
                _set(rel, attr, side.column_deps(attr))
        walker.walk(node.expr("condition"), T.JOIN, rel.indirect)
        if "ExistenceJoin" in join_type:
            for attr in _attrs(node.attributes("exists")):
                rel.attrs.append(attr)
        return rel

    def _set_operation(self, node: PlanNode, children: list[Rel], walker: ExpressionWalker) -> Rel:
        first = children[0]
        rel = Rel(list(first.attrs), {}, {}, set())
        for child in children:
            rel.tables |= child.tables
            for key, confidence in child.indirect.items():
                add_dep(rel.indirect, key, confidence)
        if node.cls == "Union":
            # positional: the n-th column of every branch feeds the n-th output column
            for position, attr in enumerate(first.attrs):
                merged: Deps = {}
                for child in children:
                    if position < len(child.attrs):
                        add_composed(merged, child.column_deps(child.attrs[position]), T.IDENTITY)
                _set(rel, attr, merged)
            return rel
        # INTERSECT / EXCEPT: the other side only decides which rows of the first survive
        for attr in first.attrs:
            _set(rel, attr, first.column_deps(attr))
        for child in children[1:]:
            for attr in child.attrs:
                add_composed(rel.indirect, child.column_deps(attr), T.FILTER)
        return rel

    def _opaque(self, node: PlanNode, children: list[Rel], walker: ExpressionWalker) -> Rel:
        """An operator we do not model (mapInPandas, applyInPandas, …): columns it passes on keep
        their lineage; new ones derive from every input column, as with an opaque UDF."""
        declared = _attrs(node.attributes())
        known: dict[int, Deps] = {}
        for child in children:
            known.update(child.deps)
        attrs = declared or [a for child in children for a in child.attrs]
        rel = Rel(attrs, {}, {}, set())
        everything: Deps = {}
        for child in children:
            rel.tables |= child.tables
            for key, confidence in child.indirect.items():
                add_dep(rel.indirect, key, confidence)
            for attr in child.attrs:
                add_composed(everything, child.column_deps(attr), T.TRANSFORMATION)
        for attr in attrs:
            carried = known.get(attr.expr_id) if attr.expr_id is not None else None
            _set(rel, attr, carried if carried is not None else everything)
        if node.cls in _GROUPED_PYTHON:
            for grouping in node.expr_list("groupingAttributes") + node.expr_list("leftGroup"):
                walker.walk(grouping, T.GROUP_BY, rel.indirect)
        return rel


def _postorder(root: PlanNode) -> list[PlanNode]:
    order: list[PlanNode] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    order.reverse()
    return order


def _attrs(items: list[Expr]) -> list[Attr]:
    return [Attr(e.expr_id, e.name, type_name(e.data_type)) for e in items]


def _inherit(child: Rel, attrs: list[Attr] | None = None) -> Rel:
    """A new Rel over the child's rows: its columns (or `attrs`) and its row influences."""
    kept = list(child.attrs) if attrs is None else list(attrs)
    deps = {a.expr_id: child.deps[a.expr_id] for a in kept if a.expr_id in child.deps}
    return Rel(kept, deps, dict(child.indirect), set(child.tables))


def _set(rel: Rel, attr: Attr, deps: Deps) -> None:
    if attr.expr_id is not None:
        rel.deps[attr.expr_id] = deps


def _strip_implicit_cast(item: Expr) -> Expr:
    """`Alias(Cast(col))` the analyzer added to fit a column to a table's or a union's type:
    the value is the column's, not a computation the user wrote."""
    if item.cls == "Alias" and item.children and item.children[0].cls == "Cast":
        cast = item.children[0]
        if cast.children and cast.children[0].cls == "AttributeReference":
            return Expr(item.cls, item.data, [cast.children[0]])
    return item


def _mark_fitting(evaluator: _Evaluator, target: WriteTarget | None, root: PlanNode) -> None:
    """Find the Projects whose casts the analyzer added, before evaluation reaches them."""
    if target is not None and target.fits_to_table and target.query.cls == "Project":
        for item in target.query.expr_list("projectList"):
            if item.cls == "Alias" and "explicitMetadata" in item.data:
                evaluator.fitting.add(id(target.query))
                break
    for node in all_nodes(root):
        if node.cls not in _SET_OPERATIONS:
            continue
        for child in node.children:
            if child.cls == "Project" and all(_is_widening(e) for e in child.expr_list("projectList")):
                evaluator.fitting.add(id(child))


def _is_widening(item: Expr) -> bool:
    """A union branch's column as the analyzer widens it: itself, or a cast of itself."""
    if item.cls == "AttributeReference":
        return True
    stripped = _strip_implicit_cast(item)
    return stripped is not item and stripped.children[0].name.lower() == item.name.lower()


# -- one action ---------------------------------------------------------------------------


def analyze_action(
    func_name: str,
    root: PlanNode,
    details: Details,
    memory: dict[int, Deps] | None = None,
    origins: RddOrigins | None = None,
) -> ActionLineage:
    """The lineage of one action from its parsed plan and the details the listener fetched.

    `memory` is the run's exprId → Deps record; it is read and extended. `origins`: the datasets
    behind the run's `df.rdd` RDDs, by RDD id.
    """
    result = ActionLineage(func_name)
    if root.cls in LIFECYCLE_COMMANDS:
        change = table_change(root, details.get(id(root)))
        if change is not None:
            result.changes.append(change)
        return result
    if root.cls == LOAD_DATA:
        _load(root, result)
        return result
    command, query = plan_parts(func_name, root)
    if query is None:
        return result
    evaluator = _Evaluator(details, {} if memory is None else memory, origins or {}, result)
    target = write_target(command, details.get(id(command))) if command is not None else None
    _mark_fitting(evaluator, target, query)
    if target is not None:
        _write(evaluator, target, details.get(id(root)) or {}, result)
        _write_change(root, target.dataset, result)
        return result
    if command is not None:
        result.notes.append(f"{command.cls}: a write whose target Tracelake cannot name; inputs only")
        evaluator.evaluate(query)
        return result
    rel = evaluator.evaluate(query)
    result.outputs = [(attr.name, rel.column_deps(attr)) for attr in rel.attrs]
    for deps in (*(deps for _, deps in result.outputs), rel.indirect):
        result.read_columns.update(source for source, _ in deps)
    return result


def analyze_rdd_action(
    func_name: str, path: str | None, file_format: str, sources: dict[str, str], origins: RddOrigins
) -> ActionLineage:
    """An RDD action: the datasets its ancestors read — Hadoop inputs (`textFile`, …) and the
    DataFrames behind `df.rdd` — and, for one that saved files at `path`, a table-level edge
    from each into them, MEDIUM, with why."""
    result = ActionLineage(func_name)
    datasets = rdd_sources(sources, origins)
    for dataset in datasets:
        result.reads.setdefault(dataset.urn, dataset)
        result.through_rdd.add(dataset.urn)
    if sources.get("complete") == "false":
        result.notes.append(f"{func_name}: an RDD lineage too long to walk whole; inputs may be missing")
    if path is None:
        return result
    target = Dataset(location_urn(path), "files", {"format": file_format})
    result.writes[target.urn] = target
    for dataset in datasets:
        _add_table_edge(result, dataset.urn, target.urn)
    if not datasets:
        result.notes.append(f"{func_name}: an RDD of no dataset Tracelake can name (parallelize?)")
    return result


def rdd_sources(details: dict[str, str] | None, origins: RddOrigins) -> list[Dataset]:
    """The datasets an RDD's rows come from: Hadoop inputs, and DataFrames turned into RDDs."""
    found = {d.urn: d for d in rdd_datasets(details)}
    for rdd_id in rdd_ancestors(details):
        for dataset in origins.get(rdd_id, ()):
            found.setdefault(dataset.urn, dataset)
    return list(found.values())


def _add_table_edge(result: ActionLineage, source: str, target: str) -> None:
    """A table-level edge: sure, unless its rows came through an RDD (then MEDIUM, with why)."""
    key: EdgeKey = (source, target, None)
    if source not in result.through_rdd or source in result.read_directly:
        add_dep(result.edges, key, Confidence.HIGH)
        result.descriptions.pop(key, None)
        return
    add_dep(result.edges, key, Confidence.MEDIUM)
    if result.edges[key] == Confidence.MEDIUM:
        result.descriptions[key] = THROUGH_RDD


def _write_change(root: PlanNode, dataset: Dataset, result: ActionLineage) -> None:
    """A write that makes its table (CTAS, saveAsTable) is its CREATE; one that replaces what
    was there, an OVERWRITE."""
    mode = str(dataset.metadata.get("mode") or "")
    columns = tuple(dataset.columns) or None
    if root.cls in CREATING_WRITES and mode in ("", "ErrorIfExists", "Overwrite"):
        result.changes.append(TableChange(dataset.urn, Lifecycle.CREATE, columns))
    elif mode == "Overwrite":
        result.changes.append(TableChange(dataset.urn, Lifecycle.OVERWRITE))


def _load(root: PlanNode, result: ActionLineage) -> None:
    """LOAD DATA moves files into a table as they are: a table-level edge, no columns to trace."""
    found = loaded_files(root)
    if found is None:
        result.notes.append(f"{root.cls}: files loaded into a table Tracelake cannot name")
        return
    files, table = found
    result.reads[files.urn] = files
    result.writes[table.urn] = table
    add_dep(result.edges, (files.urn, table.urn, None), Confidence.HIGH)


def _write(
    evaluator: _Evaluator, target: WriteTarget, details: dict[str, str], result: ActionLineage
) -> None:
    rel = evaluator.evaluate(target.query)
    dataset = target.dataset
    typed = dict(schema_columns(details.get("schema")))
    dataset.columns = [(a.name, typed.get(a.name) or a.data_type) for a in rel.attrs]
    if dataset.kind == "table":
        # the analysed write lines its query up with the table's columns: their declared order
        dataset.metadata[DECLARED_COLUMNS] = [a.name.lower() for a in rel.attrs]
    result.writes[dataset.urn] = dataset
    edges = result.edges
    for source in sorted(rel.tables):
        _add_table_edge(result, source, dataset.urn)
    for attr in rel.attrs:
        target_field = column_urn(dataset.urn, attr.name.lower())
        for (source, kind), confidence in (*rel.column_deps(attr).items(), *rel.indirect.items()):
            add_dep(edges, (source, target_field, kind), confidence)
