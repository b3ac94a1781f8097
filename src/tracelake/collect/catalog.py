"""Known table schemas for the SQL collector: which columns each table has, in order.

Static SQL rarely says which columns a table holds, yet `SELECT *`, positional INSERTs and
unqualified columns in joins all need to know. A `SchemaCatalog` maps table URNs to their
ordered columns (optionally typed; nested struct paths like `address.city` are allowed). It
is built from a plain dict (the store builds one from the fields it already holds), or read
from a YAML/JSON file in either the flat form `{"db.tbl": {"col": "type"}}` / `{"db.tbl":
["col", ...]}` or sqlglot's nested MappingSchema form `{"db": {"tbl": {"col": "type"}}}`;
a malformed file raises `SchemaFileError` with a message meant for the person who wrote it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tracelake.model import InputError, UrnError, parse_urn
from tracelake.model.names import DEFAULT_CATALOGS, DEFAULT_DATABASE, resolve_node
from tracelake.model.textfile import TextFileError, read_text

# sqlglot needs a type per column; it only reads it for dialects that annotate types, and
# an unparseable type would abort qualification there, so unknown types stay neutral.
_UNKNOWN_TYPE = "UNKNOWN"
_SQLGLOT_DEFAULT_CATALOG = "spark_catalog"

ColumnSpec = Mapping[str, Any] | Iterable[str]


class SchemaFileError(InputError):
    """A schema file that cannot be read as a table → columns mapping."""


class SchemaCatalog:
    """Ordered columns (with optional types) per table URN."""

    def __init__(
        self, tables: Mapping[str, ColumnSpec] | None = None, *, default_db: str = DEFAULT_DATABASE
    ) -> None:
        self.default_db = default_db
        self._tables: dict[str, dict[str, str | None]] = {}
        self._resolved: dict[str, str] = {}
        self._top_level: dict[str, list[str]] = {}
        self._unordered: set[str] = set()
        # column orders declared over time (DDL, CREATE … AS SELECT, a table write)
        self._declared: dict[str, list[tuple[datetime, list[str]]]] = {}
        for name, columns in (tables or {}).items():
            self.add(name, columns)

    # -- building -------------------------------------------------------------------------

    def add(self, table: str, columns: ColumnSpec, *, ordered: bool = True) -> str:
        """Add (or extend) a table; `table` is a URN or a plain `db.tbl` name. Returns its URN.

        `ordered=False` says the columns are known by name only (seen, not declared): no INSERT
        is mapped onto them by position. Declared columns replace names known only so.
        """
        urn = self._table_urn(table)
        self._top_level.pop(urn, None)
        if ordered and urn in self._unordered:
            self._unordered.discard(urn)
            self._tables.pop(urn, None)
        elif not ordered and urn not in self._tables:
            self._unordered.add(urn)
        known = self._tables.setdefault(urn, {})
        for path, data_type in _flatten_columns(columns, table):
            key = path.strip().lower()
            if key not in known or data_type is not None:
                known[key] = data_type
        return urn

    def replace(self, table: str, columns: ColumnSpec) -> str:
        """Declare a table's columns anew, in this order, for all time (a schema file)."""
        urn = self._table_urn(table)
        self._tables.pop(urn, None)
        self._unordered.discard(urn)
        self._declared.pop(urn, None)
        return self.add(urn, columns)

    def declare(self, table: str, columns: Iterable[str], at: datetime) -> str:
        """A column order declared at `at` by DDL, a CREATE … AS SELECT or a table write."""
        urn = self._table_urn(table)
        names = [name.lower() for name in columns]
        if urn not in self._tables:
            self.add(urn, names, ordered=False)
        versions = self._declared.setdefault(urn, [])
        if (at, names) not in versions:
            versions.append((at, names))
            # by time; two at one instant in a fixed order, whichever arrived first
            versions.sort(key=lambda version: (version[0], version[1]))
        return urn

    @classmethod
    def from_file(cls, path: Path | str, *, default_db: str = DEFAULT_DATABASE) -> SchemaCatalog:
        path = Path(path)
        try:
            text = read_text(path)
        except TextFileError as error:
            raise SchemaFileError(f"{path}: cannot read the schema file ({error.reason})") from None
        try:
            data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError, ValueError) as error:
            raise SchemaFileError(
                f"{path}: not a valid schema file ({_format_name(path)}): {error}"
            ) from error
        except RecursionError:
            raise SchemaFileError(f"{path}: not a valid schema file: it nests too deep") from None
        if data is None:
            return cls(default_db=default_db)
        try:
            return cls.from_mapping(data, default_db=default_db)
        except SchemaFileError as error:
            raise SchemaFileError(f"{path}: not a valid schema file: {error}") from error

    @classmethod
    def from_mapping(
        cls, data: Any, *, default_db: str = DEFAULT_DATABASE, ordered: bool = True
    ) -> SchemaCatalog:
        """Read the flat or the nested (sqlglot MappingSchema) form; raises SchemaFileError."""
        if not isinstance(data, Mapping):
            raise SchemaFileError(
                f"expected a mapping of table → columns at the top level, got {type(data).__name__}"
            )
        catalog = cls(default_db=default_db)
        for table, columns in _tables_of(data, ()):
            try:
                catalog.add(table, columns, ordered=ordered)
            except UrnError as error:
                raise SchemaFileError(f"table {table!r}: {error}") from error
        return catalog

    # -- reading --------------------------------------------------------------------------

    def columns(self, table_urn: str) -> list[str] | None:
        """Every known column path of the table, in order; None when the table is unknown."""
        known = self._tables.get(self._table_urn(table_urn))
        return None if known is None else list(known)

    def top_level_columns(self, table_urn: str) -> list[str] | None:
        """The table's top-level columns in order (`address.city` contributes `address`)."""
        urn = self._table_urn(table_urn)
        top = self._top_level.get(urn)
        if top is None:
            known = self._tables.get(urn)
            if known is None:
                return None
            top = self._top_level[urn] = list(dict.fromkeys(path.split(".", 1)[0] for path in known))
        return list(top)

    def declared_order(self, table_urn: str, at: datetime | None = None) -> list[str] | None:
        """The table's top-level columns in their declared order as of `at` (None:
        the latest), or None when no order was declared by then: a schema file's holds for all
        time, a declaration kept by the store from its moment on. Positional INSERTs need it."""
        urn = self._table_urn(table_urn)
        versions = self._declared.get(urn)
        if versions is None:
            return self.top_level_columns(urn) if urn in self._tables and urn not in self._unordered else None
        chosen = [names for when, names in versions if at is None or when <= at]
        return list(chosen[-1]) if chosen else None

    def column_type(self, table_urn: str, path: str) -> str | None:
        known = self._tables.get(self._table_urn(table_urn))
        return None if known is None else known.get(path.lower())

    def tables(self) -> list[str]:
        return list(self._tables)

    def __contains__(self, table_urn: object) -> bool:
        return isinstance(table_urn, str) and self._table_urn(table_urn) in self._tables

    def __len__(self) -> int:
        return len(self._tables)

    def to_sqlglot_mapping(self) -> dict[str, Any]:
        """The nested `{db: {tbl: {col: type}}}` form sqlglot's qualify takes.

        sqlglot wants one nesting depth for every table, so as soon as one table lives in a
        non-default catalog every table gets a catalog level (`spark_catalog` for the rest).
        """
        entries: list[tuple[str, str, str, dict[str, str]]] = []
        for urn, known in self._tables.items():
            catalog, db, table = _name_parts(urn)
            structs = {path.split(".", 1)[0] for path in known if "." in path}
            top = {
                head: known.get(head) or ("STRUCT" if head in structs else _UNKNOWN_TYPE)
                for head in dict.fromkeys(path.split(".", 1)[0] for path in known)
            }
            entries.append((catalog, db, table, top))
        with_catalog = any(catalog for catalog, *_ in entries)
        mapping: dict[str, Any] = {}
        for catalog, db, table, top in entries:
            level = mapping.setdefault(catalog or _SQLGLOT_DEFAULT_CATALOG, {}) if with_catalog else mapping
            level.setdefault(db, {})[table] = top
        return mapping

    def _table_urn(self, name: str) -> str:
        # the collector asks with canonical URNs, many times per statement: skip re-parsing them
        if name in self._tables:
            return name
        urn = self._resolved.get(name)
        if urn is None:
            urn = self._resolved[name] = resolve_node(name, default_db=self.default_db)
        return urn


def _name_parts(urn: str) -> tuple[str, str, str]:
    """(catalog or '', db, table) of a table URN."""
    parts = parse_urn(urn).name.split(".")
    if len(parts) >= 3:
        catalog = parts[-3]
        return ("" if catalog in DEFAULT_CATALOGS else catalog), parts[-2], parts[-1]
    return "", parts[0], parts[1]


def _format_name(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"


def _is_column_map(value: Mapping[str, Any]) -> bool:
    return all(isinstance(v, str | type(None)) for v in value.values())


def _tables_of(data: Mapping[str, Any], prefix: tuple[str, ...]) -> Iterable[tuple[str, ColumnSpec]]:
    """Walk either schema form, yielding (table name, columns).

    A key holding a list or a column → type map is a table. A key holding a mapping of
    mappings is a table with struct columns when the key is already a qualified name (it has
    a dot or is a URN), otherwise a database (or catalog) level of the nested form.
    """
    for key, value in data.items():
        if not isinstance(key, str) or not key.strip():
            raise SchemaFileError(f"table and database names must be non-empty strings, got {key!r}")
        name = ".".join((*prefix, key))
        if isinstance(value, list):
            yield name, value
        elif isinstance(value, Mapping):
            if not value:
                yield name, {}
            elif _is_column_map(value) or "/" in key or "." in key or len(prefix) >= 2:
                yield name, value
            else:
                yield from _tables_of(value, (*prefix, key))
        else:
            raise SchemaFileError(
                f"{name!r} should map to a list of column names or a mapping of column → type, "
                f"got {type(value).__name__} {value!r}"
            )


def _flatten_columns(columns: ColumnSpec, table: str) -> Iterable[tuple[str, str | None]]:
    """(path, type) pairs; a nested mapping is a struct whose fields become `parent.child`."""
    if isinstance(columns, str):
        raise SchemaFileError(
            f"table {table!r}: columns must be a list or a mapping, got the string {columns!r}"
        )
    if isinstance(columns, Mapping):
        for name, data_type in columns.items():
            if not isinstance(name, str) or not name.strip():
                raise SchemaFileError(
                    f"table {table!r}: column names must be non-empty strings, got {name!r}"
                )
            if isinstance(data_type, Mapping):
                yield name, None
                for child, child_type in _flatten_columns(data_type, table):
                    yield f"{name}.{child}", child_type
            elif data_type is None or isinstance(data_type, str | int | float | bool):
                yield name, None if data_type is None else str(data_type)
            else:
                raise SchemaFileError(
                    f"table {table!r}, column {name!r}: the type should be a string, got {data_type!r}"
                )
        return
    for item in columns:
        if isinstance(item, str) and item.strip():
            yield item, None
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            # the `[{name: ..., type: ...}]` shape many catalogs export
            data_type = item.get("type")
            yield item["name"], None if data_type is None else str(data_type)
        else:
            raise SchemaFileError(f"table {table!r}: a column should be a name, got {item!r}")
