"""Where a write lands: which target column each output of a query feeds, and how tables are named.

Pure functions over sqlglot's statement trees: the PARTITION spec of an INSERT, positional
versus by-name mapping onto a target's columns, the assignments of a MERGE clause, column
definitions of a CREATE TABLE, and Spark's file-backed tables (`parquet.`/path``,
`USING … OPTIONS (path …)`), which become `file.<format>/<path>` nodes.
"""

from __future__ import annotations

import json

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from tracelake.collect.sql_relation import Deps, Relation
from tracelake.model import Confidence
from tracelake.model.names import location_urn

# Spark's `format.`/path`` names a table by its files: it becomes a `file.<format>/<path>` node.
FILE_FORMATS = frozenset(
    {"parquet", "orc", "json", "csv", "avro", "text", "delta", "iceberg", "hudi", "binaryfile"}
)


def file_urn(node: exp.Table) -> str | None:
    db = node.text("db").lower()
    path = node.name
    if db in FILE_FORMATS and ("/" in path or ":" in path):
        return location_urn(path)
    return None


def file_location(properties: exp.Expr | None) -> str | None:
    """`USING parquet OPTIONS (path '/data/x')` / `LOCATION '/data/x'` → `file.dataset//data/x`."""
    if properties is None:
        return None
    path: str | None = None
    for option in properties.find_all(exp.Property):
        if option.name.lower() == "path" and isinstance(option.args.get("value"), exp.Literal):
            path = option.args["value"].name
    location = properties.find(exp.LocationProperty)
    if path is None and location is not None and isinstance(location.this, exp.Literal):
        path = location.this.name
    if path is None:
        return None
    return location_urn(path)


def location_text(node: exp.Expr | None) -> str | None:
    """The place a COPY, UNLOAD or export names: a quoted path or URI, or a Snowflake stage
    (`@stage/path`); None for anything else (a table)."""
    if isinstance(node, exp.Table) and not node.args.get("db"):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string and node.name.strip():
        return _folder_of_glob(node.name)
    if isinstance(node, exp.Var) and node.name.startswith("@"):
        return _folder_of_glob(node.name)
    return None


def _folder_of_glob(place: str) -> str:
    """Files named by a pattern (`gs://b/export/*.csv`) are the dataset of their folder."""
    folder, _, last = place.rstrip("/").rpartition("/")
    return folder if "*" in last and folder and not folder.endswith(":/") else place


def option_values(options: exp.Expr | None, key: str) -> list[exp.Expr]:
    """The value(s) of option `key` in `OPTIONS (key = v)` / `FILES (key = [v, …])`."""
    if options is None:
        return []
    for option in options.find_all(exp.Property):
        if option.name.lower() == key:
            value = option.args.get("value")
            return list(value.expressions) if isinstance(value, exp.Array) else [value] if value else []
    return []


def avro_columns(properties: exp.Expr | None) -> list[tuple[str, str | None]]:
    """A table's columns from the Avro schema in its TBLPROPERTIES or SERDEPROPERTIES
    (`'avro.schema.literal' = '{"type": "record", "fields": […]}'`), as Hive derives them."""
    literal = next(iter(option_values(properties, "avro.schema.literal")), None)
    if not isinstance(literal, exp.Literal):
        return []
    try:
        schema = json.loads(literal.name)
    except ValueError:
        return []
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return []
    return [
        (str(f["name"]).lower(), _avro_type(f.get("type")))
        for f in fields
        if isinstance(f, dict) and isinstance(f.get("name"), str)
    ]


def _avro_type(avro: object) -> str | None:
    """Hive's name for an Avro field type: a nullable union is its other branch."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        return _avro_type(branches[0]) if len(branches) == 1 else None
    if isinstance(avro, dict):
        return _avro_type(avro.get("logicalType") or avro.get("type"))
    return str(avro) if isinstance(avro, str) else None


def column_definition(node: exp.Expr, dialect: Dialect) -> tuple[str, str | None]:
    if isinstance(node, exp.ColumnDef):
        kind = node.args.get("kind")
        return node.name.lower(), kind.sql(dialect=dialect) if isinstance(kind, exp.DataType) else None
    return node.name.lower(), None


def partition_spec(partition: exp.Expr | None) -> tuple[list[str], list[str]]:
    """(static, dynamic) partition column names of `PARTITION (ds='…', hr)`."""
    static: list[str] = []
    dynamic: list[str] = []
    if isinstance(partition, exp.Partition):
        for item in partition.expressions:
            if isinstance(item, exp.EQ | exp.PropertyEQ):
                static.append(item.this.name.lower())
            elif isinstance(item, exp.Column | exp.Identifier):
                dynamic.append(item.name.lower())
    return static, dynamic


def output_columns(relation: Relation, names: list[str] | None) -> list[tuple[str, Deps, Confidence]]:
    """CTAS / views: the query's outputs, renamed by an explicit column list if there is one."""
    return [
        (names[i] if names and i < len(names) else name, deps, Confidence.HIGH)
        for i, (name, deps) in enumerate(relation.columns)
    ]


def insert_columns(
    relation: Relation,
    explicit: list[str] | None,
    known: list[str] | None,
    static: list[str],
    dynamic: list[str],
    by_name: bool,
    *,
    ordered: bool = True,
) -> list[tuple[str, Deps, Confidence]] | None:
    """Which target column each output of an INSERT's query feeds; None when it cannot be told.

    An explicit column list maps by position; so does the target's known schema (minus
    static partition columns, with dynamic ones last, as Hive lays them out) — but only an
    order that was declared (`ordered`: DDL, a schema file), never the order in which columns
    happened to be seen. Without a declared order the query's own output names are used, its
    last outputs feeding the dynamic partitions — as on a store that has seen nothing, so a
    second ingest maps as the first did. A query whose own output order is unknown (a `*` over
    columns only seen) maps by name onto the positions' names when all of them match, else
    not at all (None: table-level lineage only). An unexpanded `*` leaves positions unknown:
    then known target columns are matched by name, with low confidence.
    """
    outputs = relation.columns
    if by_name:
        return [(name, deps, Confidence.HIGH) for name, deps in outputs if name not in static]
    if explicit is not None:
        names = explicit + [d for d in dynamic if d not in explicit]
    elif known is not None and ordered:
        names = [c for c in known if c not in static and c not in dynamic] + dynamic
    else:
        names = None
    if not relation.complete:
        wanted = names or known or [name for name, _ in outputs]
        return [
            (name, deps, Confidence.LOW) for name in wanted if (deps := relation.lookup(name)) is not None
        ]
    if names is not None and not relation.ordered:
        present = set(names)
        if all(name in present for name, _ in outputs):
            return [(name, deps, Confidence.HIGH) for name, deps in outputs]
        return None
    if names is not None and (explicit is not None or len(names) == len(outputs)):
        return [(name, deps, Confidence.HIGH) for name, (_, deps) in zip(names, outputs, strict=False)]
    if names is not None:
        # the schema and the query disagree on the column count: trust matching names only
        present = set(names)
        return [(name, deps, Confidence.MEDIUM) for name, deps in outputs if name in present]
    cut = len(outputs) - len(dynamic)
    mapped = [(name, deps, Confidence.HIGH) for name, deps in outputs[:cut] if name not in static]
    mapped += [(name, deps, Confidence.HIGH) for name, (_, deps) in zip(dynamic, outputs[cut:], strict=False)]
    return mapped


def merge_assignments(then: exp.Expr | None) -> tuple[list[str] | None, list[exp.Expr]]:
    """Target column names and value expressions of a WHEN clause (["*"] for `UPDATE SET *`)."""
    if isinstance(then, exp.Update):
        if any(isinstance(e, exp.Star) for e in then.expressions):
            return ["*"], []
        pairs = [(e.this, e.expression) for e in then.expressions if isinstance(e, exp.EQ)]
        return [c.name.lower() for c, _ in pairs], [v for _, v in pairs]
    if isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return ["*"], []
        columns = then.this.expressions if isinstance(then.this, exp.Tuple) else []
        values = then.expression.expressions if isinstance(then.expression, exp.Tuple) else []
        return [c.name.lower() for c in columns], list(values)
    return None, []
