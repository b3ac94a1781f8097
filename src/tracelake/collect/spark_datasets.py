"""What a Spark relation or write command stands for as a Tracelake asset, and its URN.

Files are named by their location (`names.location_urn`: `file.dataset/<absolute path>`, the
`file:` scheme dropped, other schemes kept, Hive-style partition directories `…/ds=2024-03-10`
collapsed into the dataset they belong to), their format a property;
catalog tables are `hive.table/<db>.<table>` through `table_urn`; JDBC tables are
`jdbc.table/<url>/<table>` with the URL cut down to scheme, host and database, so that no
user, password or driver property ever lands in a URN. In-memory sources (`createDataFrame`,
`range`) are no asset at all. The facts come from the plan JSON, plus the `details` the
listener fetched over py4j where the JSON has nulls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tracelake.collect.spark_plan import Expr, PlanNode
from tracelake.model import Lifecycle
from tracelake.model.names import location_urn, split_qualified_name, table_urn

# Leaves that hold data living only in the driver or the job: no asset, no lineage beyond them.
IN_MEMORY_LEAVES = frozenset({"LogicalRDD", "LocalRelation", "Range", "ExternalRDD", "LocalTableScan"})
_TYPE_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


@dataclass(slots=True)
class Dataset:
    """A dataset an action read or wrote: its URN, what kind of store, and what we know of it."""

    urn: str
    kind: str  # files · table · jdbc
    metadata: dict[str, Any] = field(default_factory=dict)
    columns: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class WriteTarget:
    """Where a write command puts its query's rows."""

    dataset: Dataset
    query: PlanNode
    # table inserts put a Project on top that casts columns to the table's types: not the user's
    fits_to_table: bool = False


# -- names --------------------------------------------------------------------------------


def jdbc_url(url: str) -> str:
    """A JDBC URL without credentials or properties: `jdbc:postgresql://u:p@h:5432/db?x=1` →
    `jdbc:postgresql://h:5432/db`; `jdbc:derby:memory:db;create=true` → `jdbc:derby:memory:db`."""
    text = url.strip()
    text = re.split(r"[?;]", text, maxsplit=1)[0]
    text = re.sub(r"//[^/@]*@", "//", text)
    return text.rstrip("/")


def jdbc_urn(url: str, table: str) -> str:
    table = table.strip()
    if table.startswith("("):
        # a pushed-down query, `(SELECT …) SPARK_GEN_SUBQ_0`: its text is not a name
        table = "query"
    return f"jdbc.table/{jdbc_url(url)}/{table.lower()}"


def catalog_table_urn(table: Any) -> str | None:
    """The URN of a CatalogTable (or TableIdentifier) as the JSON has it."""
    if not isinstance(table, dict):
        return None
    ident = table.get("identifier", table)
    if not isinstance(ident, dict) or not ident.get("table"):
        return None
    return table_urn(str(ident["table"]), ident.get("database"), ident.get("catalog"))


def _v2_table_urn(relation: PlanNode | None) -> str | None:
    """A DataSourceV2Relation names its table by catalog and identifier, when it has them."""
    if relation is None:
        return None
    ident = relation.data.get("identifier")
    if not isinstance(ident, dict) or not ident.get("name"):
        return None
    namespace = [str(part) for part in ident.get("namespace") or []]
    catalog = relation.data.get("catalog")
    catalog_name = catalog.get("name") if isinstance(catalog, dict) else None
    return table_urn(str(ident["name"]), namespace[-1] if namespace else None, catalog_name)


# -- types --------------------------------------------------------------------------------


def type_name(data_type: Any) -> str | None:
    """Spark's JSON data type as the short SQL-ish text (`int`, `struct<city:string>`)."""
    if data_type is None:
        return None
    if isinstance(data_type, str):
        return _TYPE_NAMES.get(data_type, data_type)
    if not isinstance(data_type, dict):
        return str(data_type)
    kind = data_type.get("type")
    if kind == "struct":
        inner = ",".join(f"{f.get('name')}:{type_name(f.get('type'))}" for f in data_type.get("fields") or [])
        return f"struct<{inner}>"
    if kind == "array":
        return f"array<{type_name(data_type.get('elementType'))}>"
    if kind == "map":
        return f"map<{type_name(data_type.get('keyType'))},{type_name(data_type.get('valueType'))}>"
    return str(kind) if kind else None


def schema_columns(schema_json: str | None) -> list[tuple[str, str | None]]:
    """Columns of a StructType's JSON (`schema().json()`), in order."""
    if not schema_json:
        return []
    try:
        schema = json.loads(schema_json)
    except ValueError:
        return []
    return [(str(f.get("name")), type_name(f.get("type"))) for f in schema.get("fields") or []]


# -- reads --------------------------------------------------------------------------------


def leaf_output(node: PlanNode) -> list[Expr]:
    """A leaf's output columns. A Hive-format table's relation keeps them in two fields of its
    own: its data columns, then its partition columns (the order of its output)."""
    if node.cls == "HiveTableRelation":
        return node.attributes("dataCols") + node.attributes("partitionCols")
    return node.attributes()


def read_dataset(node: PlanNode, details: dict[str, str] | None) -> list[Dataset]:
    """The datasets a relation leaf reads (a file relation may have several roots); [] if unknown."""
    columns = [(e.name, type_name(e.data_type)) for e in leaf_output(node)]
    if node.cls == "LogicalRelation":
        urn = catalog_table_urn(node.data.get("catalogTable"))
        if urn is not None:
            return [Dataset(urn, "table", _table_metadata(node.data["catalogTable"]), columns)]
        return _relation_datasets(details or {}, columns)
    if node.cls == "HiveTableRelation":
        urn = catalog_table_urn(node.data.get("tableMeta"))
        return [Dataset(urn, "table", _table_metadata(node.data["tableMeta"]), columns)] if urn else []
    if node.cls in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
        urn = _v2_table_urn(node)
        if urn is not None:
            return [Dataset(urn, "table", {}, columns)]
        if details and details.get("type") == "files":
            return _relation_datasets(details, columns)
        name = (details or {}).get("name", "")
        parts = split_qualified_name(name) if name and "/" not in name else []
        if 2 <= len(parts) <= 3:
            urn = table_urn(parts[-1], parts[-2], parts[0] if len(parts) == 3 else None)
            return [Dataset(urn, "table", {}, columns)]
    return []


# How an RDD of Hadoop input was made (its RDDOperationScope) → the format of its files.
_RDD_FORMATS = {
    "textFile": "text",
    "wholeTextFiles": "text",
    "binaryFiles": "binary",
    "sequenceFile": "sequencefile",
    "objectFile": "sequencefile",
}


def rdd_datasets(details: dict[str, str] | None) -> list[Dataset]:
    """The files an RDD reads, from the Hadoop inputs the listener found among its ancestors
    (`textFile(a,b)` reads both); their columns are unknown."""
    found: dict[str, Dataset] = {}
    for line in (details or {}).get("sources", "").split("\n"):
        scope, _, paths = line.partition("\t")
        for path in paths.split(","):
            if path.strip() and path != "null":
                urn = location_urn(path)
                found.setdefault(urn, Dataset(urn, "files", {"format": _RDD_FORMATS.get(scope, "hadoop")}))
    return list(found.values())


def rdd_ancestors(details: dict[str, str] | None) -> list[int]:
    return [int(i) for i in (details or {}).get("ancestors", "").split(",") if i]


def _relation_datasets(details: dict[str, str], columns: list[tuple[str, str | None]]) -> list[Dataset]:
    kind = details.get("type")
    if kind == "files":
        file_format = details.get("format", "files")
        roots = dict.fromkeys(location_urn(p) for p in details.get("paths", "").split("\n") if p)
        return [Dataset(urn, "files", {"format": file_format.lower()}, columns) for urn in roots]
    if kind == "jdbc" and details.get("url"):
        urn = jdbc_urn(details["url"], details.get("table", ""))
        return [Dataset(urn, "jdbc", {"url": jdbc_url(details["url"])}, columns)]
    return []


def _table_metadata(table: Any) -> dict[str, Any]:
    """What a CatalogTable's JSON (a dict; called once `catalog_table_urn` named it) says."""
    metadata: dict[str, Any] = {}
    if table.get("provider"):
        metadata["format"] = str(table["provider"]).lower()
    table_type = table.get("tableType")
    if isinstance(table_type, dict) and table_type.get("name") == "VIEW":
        metadata["type"] = "view"
    partitions = table.get("partitionColumnNames")
    if partitions:
        metadata["partitioned_by"] = [str(p).lower() for p in partitions]
    return metadata


# -- writes -------------------------------------------------------------------------------

# Commands that only wrap another write which reports itself to the listener: counting them too
# would name the target twice, and SaveAsV1TableCommand names it before the database is resolved.
WRAPPER_WRITES = frozenset({"SaveAsV1TableCommand", "InsertIntoDataSourceDirCommand"})


_QUERY_CHILD_WRITES = frozenset(
    {
        "InsertIntoHadoopFsRelationCommand",
        "InsertIntoHiveTable",
        "InsertIntoHiveDirCommand",  # INSERT OVERWRITE [LOCAL] DIRECTORY … STORED AS …
        "AppendData",
        "OverwriteByExpression",
        "OverwritePartitionsDynamic",
    }
)
_QUERY_FIELD_WRITES = frozenset(
    {
        "SaveIntoDataSourceCommand",
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
    }
)
# LOAD DATA [LOCAL] INPATH: files moved into a table, no query
LOAD_DATA = "LoadDataCommand"

# Every root that moves data we follow: other commands (DDL, SET, SHOW…) do not.
WRITE_COMMANDS = _QUERY_CHILD_WRITES | _QUERY_FIELD_WRITES | {"CreateViewCommand", LOAD_DATA}


def write_query(root: PlanNode) -> PlanNode | None:
    """The query a write command writes, or None if `root` is no write we follow."""
    if root.cls in _QUERY_CHILD_WRITES:
        return root.children[0] if root.children else None
    if root.cls in _QUERY_FIELD_WRITES:
        return root.plans.get("query")
    if root.cls == "CreateViewCommand":
        view_type = root.data.get("viewType")
        if isinstance(view_type, dict) and "PersistedView" in str(view_type.get("object")):
            return root.plans.get("plan")
        return None  # a temp view moves no data; readers see through it
    return None


def write_target(root: PlanNode, details: dict[str, str] | None) -> WriteTarget | None:
    """The target of a write command at the root of an action's plan, or None if it cannot
    be named (a path-less data source, the `noop` sink of benchmarks)."""
    query = write_query(root)
    if query is None:
        return None
    details = details or {}
    dataset = _target_dataset(root, details)
    if dataset is None:
        return None
    fits = root.cls in _QUERY_CHILD_WRITES and dataset.kind == "table"
    return WriteTarget(dataset, query, fits_to_table=fits)


def _target_dataset(root: PlanNode, details: dict[str, str]) -> Dataset | None:
    cls = root.cls
    metadata = _write_metadata(root, details)
    if cls == "InsertIntoHadoopFsRelationCommand":
        table = root.data.get("catalogTable")
        urn = catalog_table_urn(table)
        if urn is not None:
            return Dataset(urn, "table", {**metadata, **_table_metadata(table)})
        if "path" not in details:
            return None
        metadata.setdefault("format", "files")
        return Dataset(location_urn(details["path"]), "files", metadata)
    if cls == "SaveIntoDataSourceCommand":
        dataset = _datasource_target(details)
        if dataset is not None:
            dataset.metadata.update(metadata)
        return dataset
    if cls == "InsertIntoHiveTable":
        table = root.data.get("table")
        urn = catalog_table_urn(table)
        mode = "Overwrite" if root.data.get("overwrite") else "Append"
        return Dataset(urn, "table", {**_table_metadata(table), "mode": mode}) if urn else None
    if cls == "InsertIntoHiveDirCommand":
        if "path" not in details:
            return None
        mode = "Overwrite" if root.data.get("overwrite") else "Append"
        return Dataset(location_urn(details["path"]), "files", {"format": "hive", "mode": mode})
    if cls == "CreateViewCommand":
        urn = catalog_table_urn(root.data.get("name"))
        return Dataset(urn, "table", {"type": "view"}) if urn else None
    if cls in ("AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic"):
        urn = _v2_table_urn(root.plans.get("table"))
        mode = "Append" if cls == "AppendData" else "Overwrite"
        return Dataset(urn, "table", {"mode": mode}) if urn else None
    # CTAS, plain or Hive
    table = root.data.get("table") or root.data.get("tableDesc")
    urn = catalog_table_urn(table)
    return Dataset(urn, "table", {**_table_metadata(table), **metadata}) if urn else None


def loaded_files(root: PlanNode) -> tuple[Dataset, Dataset] | None:
    """(the files, the table) of a LOAD DATA command; None if either cannot be named."""
    table = catalog_table_urn(root.data.get("table"))
    path = root.data.get("path")
    if table is None or not isinstance(path, str) or not path:
        return None
    mode = "Overwrite" if root.data.get("isOverwrite") else "Append"
    return Dataset(location_urn(path), "files", {"format": "files"}), Dataset(table, "table", {"mode": mode})


# -- lifecycle ----------------------------------------------------------------------------

# DDL the listener journals, each → (the change, the JSON fields naming its table, in the order
# to try). A change is recorded against the table; no data moves, so it makes no flow edge.
LIFECYCLE_COMMANDS: dict[str, tuple[Lifecycle, tuple[str, ...]]] = {
    "CreateDataSourceTableCommand": (Lifecycle.CREATE, ("table",)),
    "CreateTableCommand": (Lifecycle.CREATE, ("table",)),
    "CreateTableLikeCommand": (Lifecycle.CREATE, ("targetTable",)),
    "DropTableCommand": (Lifecycle.DROP, ("tableName",)),
    "DropTable": (Lifecycle.DROP, ()),  # V2: the listener names its table
    "TruncateTableCommand": (Lifecycle.TRUNCATE, ("tableName",)),
    "AlterTableAddColumnsCommand": (Lifecycle.ALTER, ("table",)),
    "AlterTableChangeColumnCommand": (Lifecycle.ALTER, ("tableName",)),
    "AlterTableReplaceColumnsCommand": (Lifecycle.ALTER, ("tableName", "table")),
    "AlterTableSetPropertiesCommand": (Lifecycle.ALTER, ("tableName",)),
    "AlterTableUnsetPropertiesCommand": (Lifecycle.ALTER, ("tableName",)),
    "AlterTableSetLocationCommand": (Lifecycle.ALTER, ("tableName",)),
    "AlterTableSerDePropertiesCommand": (Lifecycle.ALTER, ("tableName",)),
    "AlterTableRenameCommand": (Lifecycle.RENAME, ("newName",)),
}
# Table writes that make their table (CREATE TABLE … AS SELECT, saveAsTable): a CREATE as well
# as the write, unless the table may have been there already (mode Append or Ignore).
CREATING_WRITES = frozenset(
    {
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
    }
)


@dataclass(frozen=True, slots=True)
class TableChange:
    """What a DDL command did to a table: the change, the table, its schema after (if known),
    the name it had before (a RENAME)."""

    urn: str
    change: Lifecycle
    columns: tuple[tuple[str, str | None], ...] | None = None
    previous: str | None = None


def table_change(root: PlanNode, details: dict[str, str] | None) -> TableChange | None:
    """The lifecycle change a DDL command made; None if it is no table's (a view's) or unnamed.
    `details`: the table's schema after the command, as the listener read it from the catalog."""
    found = LIFECYCLE_COMMANDS.get(root.cls)
    if found is None or root.data.get("isView") is True:
        return None
    change, fields = found
    details = details or {}
    urn = next((u for u in (catalog_table_urn(root.data.get(f)) for f in fields) if u is not None), None)
    if urn is None and details.get("table"):
        urn = table_urn(details["table"], details.get("database"), details.get("catalog"))
    if urn is None:
        return None
    # the schema after the change, where the change is one of the schema
    with_schema = change in (Lifecycle.CREATE, Lifecycle.ALTER, Lifecycle.RENAME)
    columns = schema_columns(details.get("schema")) if with_schema else []
    previous = catalog_table_urn(root.data.get("oldName")) if change == Lifecycle.RENAME else None
    return TableChange(urn, change, tuple(columns) if columns else None, previous)


def is_command(root: PlanNode) -> bool:
    """A command (DDL, SET, SHOW, a write we do not follow…): not a query whose inputs are reads."""
    return root.cls.endswith("Command") or ".command." in root.full_cls


def _write_metadata(root: PlanNode, details: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if details.get("mode"):
        metadata["mode"] = details["mode"]
    if details.get("format"):
        metadata["format"] = details["format"].lower()
    partitions = [e.name.lower() for e in root.expr_list("partitionColumns") if e.name]
    if partitions:
        metadata["partitioned_by"] = partitions
    return metadata


def _datasource_target(details: dict[str, str]) -> Dataset | None:
    """`df.write.format(x).save()` through a V1 data source: JDBC, or anything with a path."""
    provider = details.get("provider", "")
    if "jdbc" in provider.lower() and details.get("url") and details.get("dbtable"):
        url = details["url"]
        return Dataset(jdbc_urn(url, details["dbtable"]), "jdbc", {"url": jdbc_url(url)})
    if details.get("path"):
        file_format = details.get("format") or provider.rsplit(".", 1)[-1]
        return Dataset(location_urn(details["path"]), "files", {"format": file_format.lower()})
    return None
