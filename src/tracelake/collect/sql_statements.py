"""What each kind of SQL statement does to lineage, statement by statement within one run.

A run (one script, or the statements of one job in a query log) is replayed in order on a
`RunState`: `USE db` moves the default database, `CREATE TEMP VIEW` / `CACHE TABLE … AS` /
temporary tables are kept as resolved `Relation`s so later statements read *through* them,
CREATE TABLE / CTAS teach the run their columns, and writes (INSERT, CTAS, CREATE VIEW,
MERGE) turn the query's relation into table- and column-level edges onto real tables. Temp
objects never become nodes: an edge into one is held back and composed with the edge out of
it when something real reads it.

No statement is silent: `apply` says what each one came to (`Outcome`) — lineage, a read-only
query (its tables become the run's reads), a kind that moves no data (`NO_LINEAGE_KINDS`), or
untraced, with the reason in `warnings` for the collector to record as a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import build_scope

from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.sql_lineage import QueryAnalyzer
from tracelake.collect.sql_relation import Deps, Relation, add_composed, add_dep, weakest
from tracelake.collect.sql_targets import (
    avro_columns,
    column_definition,
    file_location,
    file_urn,
    insert_columns,
    location_text,
    merge_assignments,
    option_values,
    output_columns,
    partition_spec,
)
from tracelake.model import DECLARED_COLUMNS, Confidence, Transformation
from tracelake.model.names import DEFAULT_CATALOGS, field_urn, location_urn, table_urn

_GLOBAL_TEMP_DB = "global_temp"
# Where `_resolve_tables` leaves, on each table node, what the name stands for.
_SOURCE = "tracelake_source"

EdgeKey = tuple[str, str, Transformation | None]


class Outcome(StrEnum):
    """What one statement came to; every statement ends as exactly one."""

    LINEAGE = "lineage"  # it moved data: edges, or a temp object's held-back lineage
    READ = "read"  # a query that only reads: its tables are the run's reads
    NO_LINEAGE = "no lineage"  # a kind that moves no data (NO_LINEAGE_KINDS)
    UNTRACED = "untraced"  # not understood: a problem is recorded, with why


# Statements that move no data between tables, by sqlglot class; the README lists them.
NO_LINEAGE_KINDS: tuple[type[exp.Expr], ...] = (
    exp.Use,
    exp.Set,
    exp.Describe,
    exp.Show,
    exp.Grant,
    exp.Revoke,
    exp.Analyze,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Pragma,
    exp.Comment,
    exp.Uncache,
    exp.Refresh,
    exp.Kill,
    exp.Drop,
    exp.TruncateTable,
    exp.Declare,
)
# Columns Hive makes up for every table (the file, the offset of a row): no column holds them.
HIVE_VIRTUAL_COLUMNS = frozenset(
    {"input__file__name", "block__offset__inside__file", "row__offset__inside__block", "raw__data__size"}
)
# Statements sqlglot keeps as text only (`exp.Command`) that move no data, by first words.
NO_LINEAGE_COMMANDS = frozenset(
    {
        "SET",
        "SHOW",
        "EXPLAIN",
        "MSCK REPAIR",
        "ADD JAR",
        "ADD FILE",
        "ADD ARCHIVE",
        "LIST",
        "RESET",
        "CLEAR CACHE",
    }
)


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a statement writes: a real table (urn) or a temp object (temp_key)."""

    urn: str | None = None
    temp_key: str | None = None


@dataclass
class RunState:
    """Everything a run has learnt so far, and the edges it produced."""

    dialect: Dialect
    schema: SchemaCatalog | None
    default_db: str
    default_catalog: str | None = None
    temp: dict[str, Relation] = field(default_factory=dict)
    learnt: dict[str, dict[str, str | None]] = field(default_factory=dict)
    unordered: set[str] = field(default_factory=set)  # learnt tables whose column order is unknown
    edges: dict[EdgeKey, Confidence] = field(default_factory=dict)
    assets: dict[str, dict[str, Any]] = field(default_factory=dict)  # metadata by asset URN
    field_types: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # tables read by read-only queries, each with the columns read from it (paths)
    reads: dict[str, set[str]] = field(default_factory=dict)
    # what the last statement could not trace, for the collector to record as problems
    warnings: list[str] = field(default_factory=list)
    at: datetime | None = None  # when the run ran: which declared column orders hold

    # -- dispatch -------------------------------------------------------------------------

    def apply(self, statement: exp.Expr, *, templated: bool = False) -> Outcome:
        """Replay one parsed statement and say what it came to.

        `templated` says the text holds `${var}` placeholders, which may name tables.
        """
        if templated:
            _name_placeholders(statement)
        _unparenthesize(statement)
        if isinstance(statement, exp.Use):
            self._use(statement)
        if isinstance(statement, exp.Drop):
            self._drop(statement)
        if isinstance(statement, NO_LINEAGE_KINDS):
            return Outcome.NO_LINEAGE
        if isinstance(statement, exp.Insert):
            return self._insert(statement)
        if isinstance(statement, exp.MultitableInserts):
            return self._multi_insert(statement)
        if isinstance(statement, exp.Create):
            return self._create(statement)
        if isinstance(statement, exp.Cache):
            return self._cache(statement)
        if isinstance(statement, exp.Merge):
            return self._merge(statement)
        if isinstance(statement, exp.Update):
            return self._update(statement)
        if isinstance(statement, exp.Alter):
            return self._alter(statement)
        if isinstance(statement, exp.LoadData):
            return self._load(statement)
        if isinstance(statement, exp.Copy):
            return self._copy(statement)
        if isinstance(statement, exp.Export):
            return self._export(statement)
        if isinstance(statement, exp.Select) and isinstance(statement.args.get("into"), exp.Into):
            return self._select_into(statement)
        if isinstance(statement, exp.Query):
            return self._read(statement)
        if isinstance(statement, exp.Delete):
            return self._delete(statement)
        if isinstance(statement, exp.Command):
            return self._command(statement)
        return self._untraced(f"a {type(statement).__name__} statement: its lineage is not traced yet")

    def _untraced(self, reason: str) -> Outcome:
        self.warnings.append(f"no lineage: {reason}")
        return Outcome.UNTRACED

    # -- statements -----------------------------------------------------------------------

    def _use(self, statement: exp.Use) -> None:
        node = statement.this
        if isinstance(node, exp.Table) and node.name:
            self.default_db = node.name.lower()
            catalog = node.text("db").lower()
            if catalog:
                self.default_catalog = None if catalog in DEFAULT_CATALOGS else catalog

    def _insert(self, insert: exp.Insert) -> Outcome:
        node = insert.this
        explicit: list[str] | None = None
        if isinstance(node, exp.Schema):
            explicit = [e.name.lower() for e in node.expressions]
            node = node.this
        if isinstance(node, exp.Directory):
            return self._write_files(node.this, insert.expression, "INSERT OVERWRITE DIRECTORY")
        if not isinstance(node, exp.Table):
            return self._untraced(f"INSERT into a {type(node).__name__}: a target Tracelake cannot name")
        values = insert.expression
        if isinstance(values, exp.Values):
            if values.find(exp.Subquery) is None:
                return Outcome.NO_LINEAGE  # literal rows: nothing is read
            insert.set("expression", _rows_as_query(values))
        if not isinstance(insert.expression, exp.Query):
            return self._untraced("INSERT without a query Tracelake can read")
        target = self._target(node)
        static, dynamic = partition_spec(node.args.get("partition") or insert.args.get("partition"))
        relation = self._analyze(insert)
        if target is None or relation is None:
            return self._untraced("INSERT whose query has no scope to analyse")
        known, ordered = self._known_order(target)
        columns = insert_columns(
            relation, explicit, known, static, dynamic, bool(insert.args.get("by_name")), ordered=ordered
        )
        if columns is None:
            self.warnings.append(
                f"INSERT without a column list into {target.urn or target.temp_key}, whose column order "
                "is unknown: table-level lineage only (a schema file or the table's DDL gives the order)"
            )
            columns = []
        self._write(target, columns, relation, append=True)
        return Outcome.LINEAGE

    def _multi_insert(self, statement: exp.MultitableInserts) -> Outcome:
        """Hive's `FROM src INSERT … SELECT … INSERT … SELECT …`: each insert reads the shared FROM."""
        source, ctes = statement.args.get("source"), statement.args.get("with_")
        outcomes: list[Outcome] = []
        for insert in statement.expressions:
            query = insert.expression
            if isinstance(insert, exp.Insert) and isinstance(query, exp.Select) and source is not None:
                if not query.args.get("from_"):
                    query.set("from_", exp.From(this=source.copy()))
                if ctes is not None and not query.args.get("with_"):
                    # `WITH q AS (…) FROM q INSERT …`: q is the CTE, not a table `q`
                    query.set("with_", ctes.copy())
                outcomes.append(self._insert(insert))
        if Outcome.LINEAGE in outcomes:
            return Outcome.LINEAGE
        return self._untraced("a multi-table INSERT none of whose inserts could be traced")

    def _cache(self, statement: exp.Cache) -> Outcome:
        """CACHE TABLE v AS query: a temp view; CACHE TABLE t: no data moves."""
        if not isinstance(statement.expression, exp.Query):
            return Outcome.NO_LINEAGE
        target = self._target(statement.this, temporary=True)
        relation = self._analyze(statement.expression)
        if target is None or relation is None:
            return self._untraced("CACHE TABLE … AS whose query has no scope to analyse")
        self._write(target, output_columns(relation, None), relation)
        return Outcome.LINEAGE

    def _alter(self, statement: exp.Alter) -> Outcome:
        """ALTER VIEW … AS query redefines a view; other ALTERs change a schema, moving no data."""
        if (statement.args.get("kind") or "").upper() == "TABLE":
            return self._alter_table(statement)
        if (statement.args.get("kind") or "").upper() != "VIEW":
            return Outcome.NO_LINEAGE
        query = next((a for a in statement.args.get("actions") or () if isinstance(a, exp.Query)), None)
        if query is None:
            return Outcome.NO_LINEAGE  # ALTER VIEW … RENAME / SET TBLPROPERTIES
        target = self._target(statement.this)
        relation = self._analyze(query)
        if target is None or relation is None:
            return self._untraced("ALTER VIEW … AS whose query has no scope to analyse")
        self._write(target, output_columns(relation, None), relation, view=True)
        return Outcome.LINEAGE

    def _routine(self, kind: str, body: exp.Expr | None) -> Outcome:
        """A procedure or function whose body writes tables (T-SQL's `AS BEGIN … END`, Spark's
        `BEGIN … END`, PL/pgSQL's `$$ … $$`): the lineage of its statements, as when it runs."""
        statements: list[exp.Expr] = []
        unread = 0
        if isinstance(body, exp.Heredoc):
            statements, unread = _writes_in_text(body.name, self.dialect)
        elif body is not None:
            statements = [node for node in body.find_all(*_WRITES) if not _inside_write(node, body)]
            for command in body.find_all(exp.Command):  # IF … THEN INSERT …, kept as text
                found, missed = _writes_in_text(f"{command.this} {command.text('expression')}", self.dialect)
                statements += found
                unread += missed
        if unread:
            self.warnings.append(
                f"{unread} statement(s) of a {kind.lower()} body look like writes but could not be read"
            )
        if not statements:
            if isinstance(body, exp.Heredoc) and _WRITE_WORDS.search(body.name):
                return self._untraced(f"a {kind.lower()} body that writes tables in a language not read")
            return Outcome.NO_LINEAGE  # CREATE FUNCTION f AS 'com.example.F', a body that writes nothing
        outcomes = [self.apply(statement.copy()) for statement in statements]
        return Outcome.LINEAGE if Outcome.LINEAGE in outcomes else max(outcomes, key=list(Outcome).index)

    def _alter_table(self, statement: exp.Alter) -> Outcome:
        """A table's columns as the ALTER leaves them (ADD, REPLACE, CHANGE, RENAME and DROP
        COLUMN), and under its new name after RENAME TO, for the statements after it. A RENAME
        is lineage: the renamed table holds the old one's data, so its upstream goes on through
        the old name rather than starting anew."""
        target = self._target(statement.this)
        if target is None or target.urn is None:
            return Outcome.NO_LINEAGE
        outcome = Outcome.NO_LINEAGE
        names, ordered = self._known_order(target)
        columns = [(n, self._column_type(target.urn, n)) for n in names] if names is not None else None
        before = list(columns) if columns is not None else None
        for action in statement.args.get("actions") or ():
            if isinstance(action, exp.ReplaceColumns):
                columns = [column_definition(e, self.dialect) for e in action.expressions]
                ordered = True
            elif isinstance(action, exp.Schema | exp.ColumnDef) and columns is not None:
                added = [
                    column_definition(e, self.dialect)
                    for e in getattr(action, "expressions", None) or [action]
                ]
                columns += [c for c in added if c[0] not in {n for n, _ in columns}]
            elif isinstance(action, exp.AlterColumn | exp.RenameColumn) and columns is not None:
                new = action.args.get("rename_to") or action.args.get("to")
                dtype = action.args.get("dtype")
                old_name, new_name = action.this.name.lower(), new.name.lower() if new is not None else None
                columns = [
                    (new_name or n, dtype.sql(dialect=self.dialect) if dtype is not None else t)
                    if n == old_name
                    else (n, t)
                    for n, t in columns
                ]
            elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
                dropped = {c.name.lower() for c in action.args.get("tables") or ()}
                columns = [c for c in columns if c[0] not in dropped] if columns is not None else None
            elif isinstance(action, exp.AlterRename) and isinstance(action.this, exp.Table):
                renamed = action.this.copy()
                if not renamed.args.get("db") and statement.this.args.get("db"):
                    renamed.set("db", statement.this.args["db"].copy())  # a rename stays in its database
                new_target = self._target(renamed)
                self.learnt.pop(target.urn, None)
                if new_target is None or new_target.urn is None:
                    return self._untraced("ALTER TABLE … RENAME TO a name Tracelake cannot read")
                self._copy_edges(target.urn, new_target.urn, [name for name, _ in columns or ()])
                target, outcome = new_target, Outcome.LINEAGE
                before = None  # the columns move to the new name
        if columns is None or columns == before:
            return outcome  # SET TBLPROPERTIES and the like: nothing learnt, no order declared
        if ordered:
            self._define(target, columns)
        else:  # columns only seen, never declared: still no known order
            assert target.urn is not None
            self.learnt[target.urn] = dict(columns)
            self.unordered.add(target.urn)
        return outcome

    def _load(self, load: exp.LoadData) -> Outcome:
        """LOAD DATA [LOCAL] INPATH 'p' INTO TABLE t (Hive), LOAD DATA INTO t FROM FILES (uris = […])
        (BigQuery): the files become the table's, as they are."""
        path = load.args.get("inpath")
        files = load.args.get("files")
        paths: list[exp.Expr] = [path] if isinstance(path, exp.Literal) else option_values(files, "uris")
        return self._load_files(load.this, paths, "LOAD DATA")

    def _load_files(self, node: exp.Expr, paths: list[exp.Expr], kind: str) -> Outcome:
        """Files moved into a table as they are: table-level edges, no column is known of a file."""
        target = self._target(node.this if isinstance(node, exp.Schema) else node)
        locations = [location for location in map(location_text, paths) if location is not None]
        if target is None or target.urn is None or not locations or len(locations) < len(paths):
            return self._untraced(f"{kind} into a table or from a place Tracelake cannot name")
        for location in locations:
            self._edge(location_urn(location), target.urn, None, Confidence.HIGH)
        return Outcome.LINEAGE

    def _copy(self, copy: exp.Copy) -> Outcome:
        """COPY t FROM 'files' / COPY INTO t FROM @stage (load); COPY t|(query) TO 'files' /
        COPY INTO @stage|'files' FROM t|(query) (unload)."""
        node, files = copy.this, list(copy.args.get("files") or ())
        into_files = location_text(node) is not None  # Snowflake's COPY INTO <location> FROM …
        if copy.args.get("kind") and not into_files:
            return self._load_files(node, files, "COPY … FROM")
        other = files[0] if len(files) == 1 else None  # the one place on the far side
        source, destination = (other, node) if into_files else (node, other)
        if source is None or destination is None:
            return self._untraced("COPY with a source or a destination Tracelake cannot name")
        if isinstance(source, exp.Table):
            source = exp.select("*").from_(source.copy())
        elif isinstance(source, exp.Schema) and isinstance(source.this, exp.Table):
            source = exp.select(*(exp.column(c.name) for c in source.expressions)).from_(source.this.copy())
        return self._write_files(destination, source.unnest(), "COPY … TO")

    def _export(self, export: exp.Export) -> Outcome:
        """BigQuery's EXPORT DATA OPTIONS (uri = 'gs://…') AS query: the query's rows to files."""
        uris = option_values(export.args.get("options"), "uri")
        return self._write_files(uris[0] if len(uris) == 1 else None, export.this, "EXPORT DATA")

    def _write_files(self, place: exp.Expr | None, query: exp.Expr | None, kind: str) -> Outcome:
        """A query's rows written to files: the files are a dataset whose columns are the
        query's outputs, as Spark names a directory it writes."""
        location = location_text(place)
        if location is None or not isinstance(query, exp.Query):
            return self._untraced(f"{kind} to a place or from a query Tracelake cannot read")
        relation = self._analyze(query)
        if relation is None:
            return self._untraced(f"{kind} whose query has no scope to analyse")
        self._write(_Target(urn=location_urn(location)), output_columns(relation, None), relation)
        return Outcome.LINEAGE

    def _copy_table(self, source_node: exp.Table, target: _Target, kind: str) -> Outcome:
        """A table copied whole (CLONE, a partition exchanged into another table): every column
        of the source feeds the target column of its name."""
        source = self._target(source_node)
        if source is None or source.urn is None or target.urn is None:
            return self._untraced(f"{kind} of a table Tracelake cannot name")
        names, ordered = self._known_order(source)
        self._copy_edges(source.urn, target.urn, names or [])
        if names is not None and ordered and kind.endswith("CLONE"):
            self._define(target, [(name, self._column_type(source.urn, name)) for name in names])
        elif names is None:
            self.notes.append(
                f"{target.urn}: copied from {source.urn}, whose columns are unknown: table level only"
            )
        return Outcome.LINEAGE

    def _copy_edges(self, source: str, target: str, names: list[str]) -> None:
        """The table, and each column named, copied as it is from `source` into `target`."""
        self._edge(source, target, None, Confidence.HIGH)
        for name in names:
            self._edge(
                field_urn(source, name), field_urn(target, name), Transformation.IDENTITY, Confidence.HIGH
            )

    def _command(self, statement: exp.Command) -> Outcome:
        """Statements sqlglot keeps as text: those that move no data, the few whose text says
        where data goes (UNLOAD, DEEP/SHALLOW CLONE, EXCHANGE PARTITION), and the rest untraced."""
        text = f"{statement.this} {statement.text('expression')}"
        words = " ".join(text.upper().split()[:2])
        if statement.this.upper() in NO_LINEAGE_COMMANDS or words in NO_LINEAGE_COMMANDS:
            return Outcome.NO_LINEAGE
        if (unload := _UNLOAD.match(text)) is not None:
            try:
                query = sqlglot.parse_one(unload["query"].replace("''", "'"), dialect=self.dialect)
            except sqlglot.errors.SqlglotError:
                return self._untraced("UNLOAD whose query does not parse")
            return self._write_files(exp.Literal.string(unload["to"]), query, "UNLOAD")
        # EXCHANGE PARTITION (Hive): the partition moves from the table after WITH into the altered one
        for pattern, kind in ((_CLONE, "CREATE TABLE … CLONE"), (_EXCHANGE, "EXCHANGE PARTITION")):
            if (found := pattern.match(text)) is not None:
                target = self._target(exp.to_table(found["target"], dialect=self.dialect))
                if target is None:
                    return self._untraced(f"{kind} into a table Tracelake cannot name")
                return self._copy_table(exp.to_table(found["source"], dialect=self.dialect), target, kind)
        return self._untraced(f"{statement.this.upper()} …: sqlglot reads this statement only as text")

    def _select_into(self, select: exp.Select) -> Outcome:
        """`SELECT … INTO t FROM …` (Postgres, T-SQL): a CREATE TABLE t AS SELECT."""
        into = select.args["into"]
        temporary = bool(into.args.get("temporary")) or into.this.name.startswith("#")
        target = self._target(into.this, temporary=temporary)
        query = select.copy()
        query.set("into", None)
        relation = self._analyze(query)
        if target is None or relation is None:
            return self._untraced("SELECT … INTO with no table to write or no scope to analyse")
        self._write(target, output_columns(relation, None), relation)
        return Outcome.LINEAGE

    def _read(self, query: exp.Query) -> Outcome:
        """A query that only reads: the real tables it reads are the run's reads."""
        relation = self._analyze(query)
        if relation is None:
            return self._untraced("a query with no scope to analyse")
        tables = [urn for urn in sorted(relation.tables) if "#" not in urn]
        for urn in tables:
            self.reads.setdefault(urn, set())
            self.assets.setdefault(urn, {})
        sources = [source for _, deps in relation.columns for source, _ in deps]
        for source in (*sources, *(source for source, _ in relation.indirect)):
            table, _, path = source.partition("#")
            if path and table in self.reads:
                self.reads[table].add(path)
        return Outcome.READ if tables else Outcome.NO_LINEAGE

    def _create(self, create: exp.Create) -> Outcome:
        kind = (create.args.get("kind") or "").upper()
        if kind in ("PROCEDURE", "FUNCTION"):
            return self._routine(kind, create.expression)
        if kind not in ("TABLE", "VIEW"):
            return Outcome.NO_LINEAGE  # a database, index, macro…: no data moves
        node = create.this
        definitions: list[tuple[str, str | None]] = []
        if isinstance(node, exp.Schema):
            definitions = [column_definition(e, self.dialect) for e in node.expressions]
            node = node.this
        properties = create.args.get("properties")
        temporary = bool(properties and properties.find(exp.TemporaryProperty))
        is_global = bool(properties and properties.find(exp.GlobalProperty))
        target = self._target(node, temporary=temporary or is_global, is_global=is_global)
        if target is None:
            return self._untraced(f"CREATE {kind} of a {type(node).__name__}: a target Tracelake cannot name")
        query = create.expression
        location = file_location(properties)
        if not isinstance(query, exp.Query) and location is not None and target.temp_key is not None:
            # CREATE TEMP VIEW v USING parquet OPTIONS (path '…'): the view reads those files
            self.temp[target.temp_key] = Relation.table(location, None)
            return Outcome.LINEAGE
        clone = create.args.get("clone") or (properties.find(exp.Clone) if properties else None)
        if isinstance(clone, exp.Clone) and isinstance(clone.this, exp.Table):
            return self._copy_table(clone.this, target, f"CREATE {kind} … CLONE")
        if not isinstance(query, exp.Query):
            like = properties.find(exp.LikeProperty) if properties else None
            if like is not None and isinstance(like.this, exp.Table):
                definitions = self._like_columns(like.this)
            elif not definitions:
                definitions = avro_columns(properties)
            self._define(target, definitions)
            return Outcome.NO_LINEAGE  # it declares a table's columns
        relation = self._analyze(create)
        if relation is None:
            return self._untraced(f"CREATE {kind} … AS whose query has no scope to analyse")
        names = [name for name, _ in definitions] or None
        self._write(target, output_columns(relation, names), relation, view=kind == "VIEW")
        if target.urn is not None and definitions:
            for name, data_type in definitions:
                self.learnt.setdefault(target.urn, {})[name] = data_type
        return Outcome.LINEAGE

    def _merge(self, merge: exp.Merge) -> Outcome:
        """MERGE: each WHEN clause is analysed as `SELECT <values> FROM <using> JOIN <target> ON …`."""
        node = merge.this
        using, on, whens = merge.args.get("using"), merge.args.get("on"), merge.args.get("whens")
        target = self._target(node) if isinstance(node, exp.Table) else None
        if target is None or using is None or whens is None:
            return self._untraced("MERGE without a target table, a USING source or WHEN clauses")
        known = self._known_columns(target)
        wrote = False
        for when in whens.expressions:
            then = when.args.get("then")
            names, values = merge_assignments(then)
            if names is None:
                continue
            projections = [v.copy() for v in values]
            condition = when.args.get("condition")
            if condition is not None:
                projections.append(exp.alias_(condition.copy(), "__when__"))
            select = exp.Select(expressions=projections or [exp.Star()]).from_(using.copy())
            select = select.join(node.copy(), on=on.copy() if on is not None else None)
            relation = self._analyze(select)
            if relation is None:
                continue
            outputs = relation.columns[: len(values)]
            conditional: Deps = {}
            if condition is not None:
                add_composed(conditional, relation.columns[-1][1], Transformation.CONDITIONAL)
            if names == ["*"]:
                # UPDATE SET * / INSERT *: every source column into the same-named target column
                star = self._analyze(exp.Select(expressions=[exp.Star()]).from_(using.copy()))
                columns = [(n, d, Confidence.HIGH) for n, d in (star.columns if star else [])]
                if star is not None and not star.complete and known:
                    columns = [(n, star.lookup(n) or {}, Confidence.LOW) for n in known]
            else:
                columns = [(n, deps, Confidence.HIGH) for n, (_, deps) in zip(names, outputs, strict=False)]
            columns = [(n, {**deps, **conditional}, cap) for n, deps, cap in columns]
            self._write(target, columns, relation, append=True, skip_self=True)
            wrote = True
        if wrote:
            return Outcome.LINEAGE
        if all(merge_assignments(w.args.get("then"))[0] is None for w in whens.expressions):
            return Outcome.NO_LINEAGE  # WHEN MATCHED THEN DELETE: rows go, no data moves
        return self._untraced("MERGE none of whose WHEN clauses could be traced")

    def _update(self, update: exp.Update) -> Outcome:
        """UPDATE t SET c = expr [FROM s] WHERE …: analysed as `SELECT expr… FROM t [, s] WHERE …`."""
        node = update.this
        source = update.args.get("from_")
        # T-SQL's `UPDATE t SET … FROM tab1 t JOIN …`: t is the alias of a table in FROM
        aliased = _aliased_table(node, source)
        target = self._target(aliased if aliased is not None else node)
        pairs = [(e.this, e.expression) for e in update.expressions if isinstance(e, exp.EQ)]
        if target is None or not pairs:
            return self._untraced("UPDATE without a table to write or SET pairs to read")
        select = exp.Select(expressions=[value.copy() for _, value in pairs])
        if aliased is None:
            select = select.from_(node.copy())
        if source is not None:
            first = source.this.copy()
            # T-SQL's parser hangs FROM's joins on its first table: they are the query's joins
            nested = list(first.args.get("joins") or ()) if isinstance(first, exp.Table) else []
            if nested:
                first.set("joins", None)
            select = select.from_(first) if aliased is not None else select.join(first)
            for join in [*nested, *(source.args.get("joins") or ())]:
                select = select.join(join.copy())
        for join in update.args.get("joins") or ():
            select = select.join(join.copy())
        where = update.args.get("where")
        if where is not None:
            select = select.where(where.this.copy())
        ctes = update.args.get("with_")
        if ctes is not None:  # `WITH s AS (…) UPDATE t … FROM s`: s is the CTE
            select.set("with_", ctes.copy())
        relation = self._analyze(select)
        if relation is None:
            return self._untraced("UPDATE with no scope to analyse")
        columns = [
            (column.name.lower(), deps, Confidence.HIGH)
            for (column, _), (_, deps) in zip(pairs, relation.columns, strict=False)
        ]
        self._write(target, columns, relation, append=True, skip_self=True)
        return Outcome.LINEAGE

    def _delete(self, delete: exp.Delete) -> Outcome:
        """DELETE FROM t [USING s] WHERE … (SELECT … FROM s): which rows of t remain depends on
        what the condition reads of other tables — a FILTER onto each column of t. A DELETE
        reading only t itself moves no data."""
        node, using = delete.this, delete.args.get("using")
        if delete.find(exp.Select) is None and not using:
            return Outcome.NO_LINEAGE
        target = self._target(node) if isinstance(node, exp.Table) else None
        if target is None or target.urn is None:
            return self._untraced("DELETE from a table Tracelake cannot name")
        known = self._known_columns(target)
        select = exp.Select(
            expressions=[exp.column(n, table=node.alias_or_name) for n in known or ()] or [exp.Star()]
        )
        select = select.from_(node.copy())
        for source in using or ():  # Postgres' DELETE … USING s: s is joined, as in a FROM
            select = select.join(source.copy())
        where = delete.args.get("where")
        if where is not None:
            select = select.where(where.this.copy())
        relation = self._analyze(select)
        if relation is None:
            return self._untraced("DELETE with no scope to analyse")
        columns: list[tuple[str, Deps, Confidence]] = (
            [(name, {}, Confidence.HIGH) for name, _ in relation.columns] if known else []
        )
        self._write(target, columns, relation, append=True, skip_self=True)
        return Outcome.LINEAGE

    def _drop(self, drop: exp.Drop) -> None:
        for node in drop.args.get("tables") or ():
            target = self._name(node)
            if target is not None and target.temp_key is not None:
                del self.temp[target.temp_key]
            elif target is not None and target.urn is not None:
                self.learnt.pop(target.urn, None)

    # -- resolution -----------------------------------------------------------------------

    def _target(self, node: exp.Expr, *, temporary: bool = False, is_global: bool = False) -> _Target | None:
        """What a statement writes: a temp object it creates, or whatever the name stands for."""
        if temporary and isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            name = node.name.lower()
            return _Target(temp_key=f"{_GLOBAL_TEMP_DB}.{name}" if is_global else _temp_key(node))
        return self._name(node)

    def _name(self, node: exp.Expr) -> _Target | None:
        """What a table name stands for: files, a temp object (which shadows a table of the
        same name when unqualified), or a real table."""
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            return None  # a table-valued function
        path_urn = file_urn(node)
        if path_urn is not None:
            return _Target(urn=path_urn)
        db = node.text("db").lower()
        key = _temp_key(node)
        if (not db or db == _GLOBAL_TEMP_DB) and key in self.temp:
            return _Target(temp_key=key)
        return _Target(urn=self._urn(node.name.lower(), db, node.text("catalog").lower()))

    def _urn(self, name: str, db: str, catalog: str) -> str:
        # `USE catalog.db` sets both: a name without a catalog lives in the current one
        return table_urn(name, db or self.default_db, catalog or self.default_catalog)

    def _known_columns(self, target: _Target) -> list[str] | None:
        return self._known_order(target)[0]

    def _known_order(self, target: _Target) -> tuple[list[str] | None, bool]:
        """The target's columns, and whether their order is known (declared, not just seen)."""
        if target.temp_key is not None:
            relation = self.temp.get(target.temp_key)
            if relation is None or not relation.complete:
                return None, False
            return relation.names(), relation.ordered
        assert target.urn is not None
        learnt = self.learnt.get(target.urn)
        if learnt is not None:
            return list(learnt), target.urn not in self.unordered
        if self.schema is None:
            return None, False
        order = self.schema.declared_order(target.urn, self.at)
        if order is not None:
            return order, True
        return self.schema.top_level_columns(target.urn), False

    def _like_columns(self, node: exp.Table) -> list[tuple[str, str | None]]:
        source = self._target(node)
        if source is None:
            return []
        names = self._known_columns(source) or []
        return [(name, self._column_type(source.urn, name) if source.urn else None) for name in names]

    def field_type(self, urn: str) -> str | None:
        """A field's type: declared by a CREATE TABLE of the run, else from the schema catalog."""
        declared = self.field_types.get(urn)
        if declared is not None:
            return declared
        asset, _, path = urn.partition("#")
        return self._column_type(asset, path)

    def _column_type(self, urn: str, path: str) -> str | None:
        learnt = self.learnt.get(urn)
        if learnt is not None and learnt.get(path) is not None:
            return learnt[path]
        return self.schema.column_type(urn, path) if self.schema is not None else None

    def _table_relation(self, node: exp.Table) -> Relation:
        """The relation a FROM/JOIN table stands for, as `_resolve_tables` decided."""
        target = node.meta.get(_SOURCE)
        if not isinstance(target, _Target):
            return Relation(complete=False)  # a table-valued function
        if target.temp_key is not None:
            return self.temp.get(target.temp_key) or Relation(complete=False)
        assert target.urn is not None
        known, ordered = self._known_order(target)
        return Relation.table(target.urn, known, ordered=ordered)

    # -- analysis -------------------------------------------------------------------------

    def _analyze(self, holder: exp.Expr) -> Relation | None:
        """The relation of the query in `holder` (a statement, or a query of its own)."""
        self._resolve_tables(holder)
        _alias_derived_tables(holder)
        # scopes match aliases and CTE names as written: fold them as the dialect does
        normalize_identifiers(holder, dialect=self.dialect)
        root = build_scope(holder)
        if root is None:
            return None
        return QueryAnalyzer(self._table_relation).analyze(root)

    def _resolve_tables(self, holder: exp.Expr) -> None:
        """Decide what each table name stands for (a temp object, files, a real table) while
        the names are still as written: a path keeps its case, a temp view shadows a table."""
        ctes = {cte.alias_or_name.lower() for cte in holder.find_all(exp.CTE)}
        for node in holder.find_all(exp.Table):
            if not node.args.get("db") and not node.args.get("catalog") and node.name.lower() in ctes:
                continue
            target = self._name(node)
            if target is not None:
                node.meta[_SOURCE] = target

    # -- output ---------------------------------------------------------------------------

    def _define(self, target: _Target, definitions: list[tuple[str, str | None]]) -> None:
        """CREATE TABLE without a query: remember the columns; a temp table starts empty."""
        if target.temp_key is not None:
            relation = Relation(complete=bool(definitions))
            for name, _ in definitions:
                relation.add_column(name, {})
            self.temp[target.temp_key] = relation
            return
        assert target.urn is not None
        self.learnt[target.urn] = dict(definitions)
        self.unordered.discard(target.urn)
        if definitions:
            self.assets.setdefault(target.urn, {})[DECLARED_COLUMNS] = [name for name, _ in definitions]
            for name, data_type in definitions:
                self.field_types[field_urn(target.urn, name)] = data_type

    def _write(
        self,
        target: _Target,
        columns: list[tuple[str, Deps, Confidence]],
        relation: Relation,
        *,
        view: bool = False,
        append: bool = False,
        skip_self: bool = False,
    ) -> None:
        if target.temp_key is not None:
            self._write_temp(target.temp_key, columns, relation, append=append)
            return
        urn = target.urn
        assert urn is not None
        metadata = self.assets.setdefault(urn, {})
        if view:
            metadata["type"] = "view"
        if not relation.complete:
            self.notes.append(
                f"{urn}: columns hidden behind a * over a table of unknown columns are not traced; "
                "a schema file would give them"
            )
        if not append and relation.complete:
            self.learnt[urn] = {name: self._column_type(urn, name) for name, _, _ in columns}
            if relation.ordered:  # a CREATE … AS SELECT declares its columns in the query's order
                self.unordered.discard(urn)
                metadata[DECLARED_COLUMNS] = [name for name, _, _ in columns]
            else:
                self.unordered.add(urn)
        for source in relation.tables:
            if not (skip_self and source == urn):
                self._edge(source, urn, None, Confidence.HIGH)
        prefix = urn + "#"
        for name, deps, cap in columns:
            target_field = field_urn(urn, name)
            for (source, kind), confidence in (*deps.items(), *relation.indirect.items()):
                if source.rpartition("#")[2] in HIVE_VIRTUAL_COLUMNS:
                    # the file or offset a row came from: no column of the table holds it
                    self.notes.append(
                        f"{target_field}: from a Hive virtual column of {source.partition('#')[0]}"
                    )
                elif not (
                    skip_self
                    and source.startswith(prefix)
                    and _unchanged_or_row_choice(source, target_field, kind)
                ):
                    self._edge(source, target_field, kind, weakest(confidence, cap))

    def _write_temp(
        self, key: str, columns: list[tuple[str, Deps, Confidence]], relation: Relation, *, append: bool
    ) -> None:
        """Keep a temp object's resolved lineage, so readers compose straight to real tables."""
        previous = self.temp.get(key) if append else None
        stored = Relation(
            complete=previous.complete if previous is not None else relation.complete,
            ordered=relation.ordered and (previous is None or previous.ordered),
            tables=set(relation.tables),
            passthrough=list(relation.passthrough),
        )
        for key_, confidence in relation.indirect.items():
            add_dep(stored.indirect, key_, confidence)
        incoming = {name: (deps, cap) for name, deps, cap in columns}
        names = previous.names() if previous is not None else [name for name, _, _ in columns]
        for name in names:
            merged: Deps = dict(previous.lookup(name) or {}) if previous is not None else {}
            deps, cap = incoming.get(name, ({}, Confidence.HIGH))
            add_composed(merged, deps, Transformation.IDENTITY, cap)
            stored.add_column(name, merged)
        if previous is not None:
            stored.tables |= previous.tables
            for key_, confidence in previous.indirect.items():
                add_dep(stored.indirect, key_, confidence)
        self.temp[key] = stored

    def _edge(self, source: str, target: str, kind: Transformation | None, confidence: Confidence) -> None:
        add_dep(self.edges, (source, target, kind), confidence)


# -- pure helpers -------------------------------------------------------------------------


def _unchanged_or_row_choice(source: str, target: str, kind: Transformation) -> bool:
    """An UPDATE or MERGE of a table reading the table itself: a column kept as it was, or one
    of its columns choosing which rows change, is no lineage; `SET a = b + 1` is (b → a)."""
    return source == target or not kind.is_direct


def _name_placeholders(statement: exp.Expr) -> None:
    """`${db}.events`: a table named by an unexpanded variable keeps the variable as its name,
    rather than losing the part and landing in the default database."""
    for node in statement.find_all(exp.Table):
        for part in ("this", "db", "catalog"):
            value = node.args.get(part)
            if isinstance(value, exp.Parameter):
                node.set(part, exp.to_identifier(f"${{{value.name}}}", quoted=True))


def _unparenthesize(statement: exp.Expr) -> None:
    """`INSERT INTO t (SELECT …)`, `CREATE TABLE t AS (SELECT …)`: the query in parentheses is
    the query (one with its own ORDER BY, LIMIT or alias stays as written)."""
    if not isinstance(statement, exp.Insert | exp.Create | exp.Cache):
        return
    query = unwrapped = statement.args.get("expression")
    while isinstance(unwrapped, exp.Subquery) and not any(
        v for k, v in unwrapped.args.items() if k != "this"
    ):
        unwrapped = unwrapped.this
    if unwrapped is not query:
        statement.set("expression", unwrapped)


_NAME = r"[\w.`\"\[\]]+"
_UNLOAD = re.compile(
    r"UNLOAD\s*\(\s*'(?P<query>(?:[^']|'')*)'\s*\)\s*TO\s*'(?P<to>[^']*)'", re.IGNORECASE | re.DOTALL
)
_CLONE = re.compile(
    rf"CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<target>{_NAME})\s+"
    rf"(?:SHALLOW\s+|DEEP\s+)?CLONE\s+(?P<source>{_NAME})",
    re.IGNORECASE,
)
_EXCHANGE = re.compile(
    rf"ALTER\s+TABLE\s+(?P<target>{_NAME})\s+EXCHANGE\s+PARTITION\s*\(.*?\)\s*WITH\s+TABLE\s+(?P<source>{_NAME})",
    re.IGNORECASE | re.DOTALL,
)

_WRITES = (exp.Insert, exp.Merge, exp.Update, exp.Delete, exp.Create, exp.MultitableInserts)
_WRITE_WORDS = re.compile(r"\b(INSERT|MERGE|UPDATE|DELETE|CREATE)\b", re.IGNORECASE)


def _inside_write(node: exp.Expr, body: exp.Expr) -> bool:
    """True for a statement nested in another write of `body` (an INSERT of a MERGE's WHEN)."""
    parent = node.parent
    while parent is not None and parent is not body:
        if isinstance(parent, _WRITES):
            return True
        parent = parent.parent
    return False


def _writes_in_text(text: str, dialect: Dialect) -> tuple[list[exp.Expr], int]:
    """The writes in a routine body kept as text (PL/pgSQL's `$$ … $$`, an `IF … THEN INSERT …`
    sqlglot did not parse): each `;`-separated piece from its first INSERT/MERGE/UPDATE/DELETE/
    CREATE on, parsed alone; control flow and declarations around it are skipped. Also how many
    such pieces did not parse."""
    found: list[exp.Expr] = []
    missed = 0
    for piece in text.split(";"):
        start = _WRITE_WORDS.search(piece)
        if start is None:
            continue
        try:
            parsed = sqlglot.parse_one(piece[start.start() :], dialect=dialect)
        except sqlglot.errors.SqlglotError:
            missed += 1
            continue
        if isinstance(parsed, _WRITES) or (isinstance(parsed, exp.Select) and parsed.args.get("into")):
            found.append(parsed)
    return found, missed


def _alias_derived_tables(holder: exp.Expr) -> None:
    """Spark reads `FROM (SELECT …) JOIN (SELECT …) USING (k)`; scoping needs each subquery in
    FROM or JOIN to have a name, so an unnamed one gets one no query can mention."""
    for number, subquery in enumerate(holder.find_all(exp.Subquery)):
        if not subquery.alias and isinstance(subquery.parent, exp.From | exp.Join):
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"__derived_{number}")))


def _aliased_table(node: exp.Expr, source: exp.Expr | None) -> exp.Table | None:
    """The table of `source` (an UPDATE's FROM) whose alias is the unqualified name `node`,
    without its alias and joins: the table the UPDATE writes."""
    if source is None or not isinstance(node, exp.Table) or node.args.get("db"):
        return None
    for table in source.find_all(exp.Table):
        if table.alias and table.alias.lower() == node.name.lower():
            found = table.copy()
            found.set("alias", None)
            found.set("joins", None)
            return found
    return None


def _rows_as_query(values: exp.Values) -> exp.Query:
    """`VALUES (1, (SELECT max(id) FROM ids)), …` as `SELECT 1, (SELECT …) UNION ALL SELECT …`:
    a column of the rows depends on what its subqueries read."""
    selects = [
        exp.Select(expressions=[v.copy() for v in (row.expressions if isinstance(row, exp.Tuple) else [row])])
        for row in values.expressions
    ]
    query: exp.Query = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=False)
    return query


def _temp_key(node: exp.Table) -> str:
    """Temp views live outside databases, except Spark's global ones under `global_temp`."""
    db = node.text("db").lower()
    return f"{db}.{node.name.lower()}" if db == _GLOBAL_TEMP_DB else node.name.lower()
