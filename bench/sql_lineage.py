"""Column lineage of Spark SQL: Tracelake against sqllineage and sqlglot.lineage.

The three tools read the same corpus (`bench/corpus/*.sql`, fed one statement at a time,
with the table schemas of `bench/corpus/schema.json`). For each tool the script prints its
throughput over the whole corpus (median of `--repeat` runs), how many statements it failed
on or does not take, and, on the statements whose DIRECT column edges were worked out by hand
in `bench/corpus/expected.yaml`, its precision, recall and exact-match rate.

    .venv/bin/python bench/sql_lineage.py [--repeat N] [--quick] [--diff TOOL]

Timing covers lineage work only: files are read, schemas built and each tool warmed up on one
statement before the clock starts. `--quick` runs sqllineage (the slow one) once, on the
hand-checked statements only; the output says so. `--diff TOOL` lists, per hand-checked
statement, the edges TOOL missed and the ones it added.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.lineage import Node, lineage
from sqlglot.schema import MappingSchema

CORPUS = Path(__file__).resolve().parent / "corpus"
SCHEMA_FILE = CORPUS / "schema.json"
EXPECTED_FILE = CORPUS / "expected.yaml"
DIALECT = "spark"
DEFAULT_DB = "default"
# Catalog names that mean the session catalog: `spark_catalog.db.t` is `db.t`.
DEFAULT_CATALOGS = frozenset({"spark_catalog", "hive", "hive_metastore"})
_QUOTES = '`"'
_STATEMENT_HEADER = re.compile(r"^-- @id: (\S+)[^\n]*\n", re.MULTILINE)

Edge = tuple[str, str]  # (source `db.table.column`, target `db.table.column`)


# -- the corpus --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Statement:
    id: str
    file: str
    sql: str


def load_statements(corpus: Path = CORPUS) -> list[Statement]:
    """Every statement of every `*.sql` file, in file order; each starts with `-- @id: <id>`."""
    statements: list[Statement] = []
    for path in sorted(corpus.glob("*.sql")):
        parts = _STATEMENT_HEADER.split(path.read_text(encoding="utf-8"))
        for statement_id, body in zip(parts[1::2], parts[2::2], strict=True):
            sql = body.strip().removesuffix(";").strip()
            statements.append(Statement(statement_id, path.name, sql))
    return statements


def load_schema(path: Path = SCHEMA_FILE) -> dict[str, dict[str, str]]:
    """`db.table` → ordered {column: type}."""
    return json.loads(path.read_text(encoding="utf-8"))


def load_expected(path: Path = EXPECTED_FILE) -> dict[str, frozenset[Edge]]:
    """Statement id → its hand-worked direct edges (target columns listed with [] add none)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {
        statement_id: frozenset(
            (source, target) for target, sources in columns.items() for source in sources or ()
        )
        for statement_id, columns in data.items()
    }


def qualified(*parts: str | None) -> str:
    """`db.table[.column…]` the way Spark compares names: unquoted, lower-case, session catalog
    dropped, `default` for an unqualified table. Every tool's output goes through this."""
    names = [p.strip().strip('`"').lower() for p in parts if p and p.strip() and p != "<default>"]
    if len(names) >= 3 and names[0] in DEFAULT_CATALOGS:
        names = names[1:]
    return ".".join(names)


def table_name(parts: Iterable[str | None]) -> str:
    """`db.table`, with `default` for an unqualified table."""
    table = qualified(*parts)
    return table if "." in table else f"{DEFAULT_DB}.{table}"


def column_name(table_parts: Iterable[str | None], column: str) -> str:
    return f"{table_name(table_parts)}.{column.strip(_QUOTES).lower()}"


# -- the tools ---------------------------------------------------------------------------------


class Unsupported(Exception):
    """The tool does not take this kind of statement (not counted as a failure)."""


class Tool(Protocol):
    name: str

    def edges(self, sql: str) -> set[Edge]:
        """Direct column edges of one statement; raises Unsupported, or anything on failure."""
        ...

    def session(self) -> contextlib.AbstractContextManager[Any]:
        """Wraps a whole timed run (for tools configured through global state)."""
        ...


class TracelakeTool:
    """`tracelake.collect.sql.collect_sql`, keeping the edges typed as direct."""

    name = "tracelake"

    def __init__(self, schema_file: Path) -> None:
        from tracelake.collect.catalog import SchemaCatalog
        from tracelake.collect.sql import collect_sql

        self._collect = collect_sql
        self._catalog = SchemaCatalog.from_file(schema_file)

    def edges(self, sql: str) -> set[Edge]:
        result = self._collect(sql, dialect=DIALECT, schema=self._catalog)
        if result.failed:
            raise RuntimeError("; ".join(str(problem) for problem in result.problems) or "failed")
        return {
            (_urn_column(edge.source), _urn_column(edge.target))
            for batch in result.batches
            for edge in batch.edges
            if edge.transformation is not None and edge.transformation.is_direct
        }

    def session(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


def _urn_column(urn: str) -> str:
    """`hive.table/db.tbl#col` → `db.tbl.col`."""
    asset, _, path = urn.partition("#")
    return f"{qualified(*asset.partition('/')[2].split('.'))}.{path}"


class SqllineageTool:
    """sqllineage's LineageRunner (sqlfluff `sparksql`), with the schema as its metadata."""

    name = "sqllineage"

    def __init__(self, schema: dict[str, dict[str, str]]) -> None:
        from sqllineage.config import SQLLineageConfig
        from sqllineage.core.metadata.dummy import DummyMetaDataProvider
        from sqllineage.core.models import Table
        from sqllineage.runner import LineageRunner

        self._config = SQLLineageConfig
        self._runner = LineageRunner
        self._table = Table
        self._provider = DummyMetaDataProvider({table: list(columns) for table, columns in schema.items()})

    def edges(self, sql: str) -> set[Edge]:
        runner = self._runner(sql, dialect="sparksql", metadata_provider=self._provider, silent_mode=True)
        found: set[Edge] = set()
        for path in runner.get_column_lineage():
            source, target = path[0], path[-1]
            # `count(*)` comes out as an edge from `table.*`: a table-level edge, not a column one
            if source.raw_name == "*":
                continue
            if isinstance(source.parent, self._table) and isinstance(target.parent, self._table):
                found.add((self._column(source), self._column(target)))
        return found

    def _column(self, column: Any) -> str:
        table = column.parent
        return column_name((*str(table.schema.raw_name).split("."), table.raw_name), column.raw_name)

    def session(self) -> contextlib.AbstractContextManager[Any]:
        # Unqualified tables live in `default`, as in Spark; sqllineage's own default is `<default>`.
        return self._config(DEFAULT_SCHEMA=DEFAULT_DB)


class SqlglotTool:
    """`sqlglot.lineage.lineage` on the query part of each write.

    lineage() only takes queries, so the SELECT is cut out of INSERT / CTAS / CREATE VIEW and
    its output columns are mapped onto the target's: by the column list when there is one, by
    position onto schema.json for an INSERT without one, by name for CREATE. lineage() is called
    once per statement with `column=None`, its documented way to get every output column with
    shared work. MERGE, UPDATE, DELETE and INSERT … VALUES are unsupported.
    """

    name = "sqlglot.lineage"

    def __init__(self, schema: dict[str, dict[str, str]]) -> None:
        self._columns = {table: list(columns) for table, columns in schema.items()}
        nested: dict[str, dict[str, dict[str, str]]] = {}
        for table, columns in schema.items():
            db, name = table.split(".")
            nested.setdefault(db, {})[name] = columns
        self._schema = MappingSchema(nested, dialect=DIALECT)

    def edges(self, sql: str) -> set[Edge]:
        tree = sqlglot.parse_one(sql, dialect=DIALECT)
        target, target_columns, query = self._write(tree)
        if target is None:
            return set()  # a plain query: lineage but no written column
        nodes = lineage(None, query, schema=self._schema, dialect=DIALECT, db=DEFAULT_DB)
        outputs = list(nodes)
        found: set[Edge] = set()
        for output, target_column in zip(outputs, target_columns or outputs, strict=False):
            for source in _leaf_columns(nodes[output]):
                found.add((source, f"{target}.{target_column.lower()}"))
        return found

    def session(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def _write(self, tree: exp.Expr) -> tuple[str | None, list[str] | None, exp.Query | None]:
        """(target table, target columns or None for "by name", the query)."""
        if isinstance(tree, exp.Query):
            return None, None, tree
        if isinstance(tree, exp.Insert | exp.Create) and isinstance(tree.expression, exp.Query):
            query = tree.expression
            ctes = tree.args.get("with_") or tree.args.get("with")
            if ctes is not None:  # `WITH … INSERT …`: the CTEs belong to the query
                query = query.copy()
                query.set("with_", ctes.copy())
            table, listed = _target_of(tree.this)
            target = table_name((table.catalog, table.db, table.name))
            if listed is None and isinstance(tree, exp.Insert):
                listed = self._insert_columns(target, table)
            return target, listed, query
        raise Unsupported(type(tree).__name__)

    def _insert_columns(self, target: str, table: exp.Table) -> list[str] | None:
        """An INSERT without a column list fills the table's columns in order, skipping the
        partition columns given a static value."""
        known = self._columns.get(target)
        if known is None:
            return None
        partition = table.args.get("partition")
        static = {
            p.this.name.lower()
            for p in (partition.expressions if partition else ())
            if isinstance(p, exp.EQ) and isinstance(p.this, exp.Column)
        }
        return [c for c in known if c not in static]


def _target_of(node: exp.Expr) -> tuple[exp.Table, list[str] | None]:
    if isinstance(node, exp.Schema):
        return node.this, [column.name for column in node.expressions]
    return node, None


def _leaf_columns(node: Node) -> Iterator[str]:
    """Columns of physical tables at the bottom of a sqlglot lineage tree."""
    for child in node.walk():
        table = child.expression
        if child.downstream or not isinstance(table, exp.Table) or child.name.endswith("*"):
            continue
        _alias, _, column = child.name.partition(".")
        if column:
            yield column_name((table.catalog, table.db, table.name), column)


# -- running and scoring -----------------------------------------------------------------------


@dataclass
class Outcome:
    tool: str
    statements: int
    seconds: list[float] = field(default_factory=list)
    edges: dict[str, set[Edge]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)
    note: str = ""

    @property
    def rate(self) -> float:
        return self.statements / statistics.median(self.seconds)


def run(tool: Tool, statements: list[Statement], repeat: int, note: str = "") -> Outcome:
    """Time `repeat` passes over the statements; the first pass's edges are kept."""
    outcome = Outcome(tool.name, len(statements), note=note)
    with tool.session():
        _warm_up(tool, statements)
        for attempt in range(repeat):
            started = time.perf_counter()
            for statement in statements:
                try:
                    found = tool.edges(statement.sql)
                except Unsupported:
                    outcome.unsupported.add(statement.id)
                    continue
                except Exception as error:  # a tool's failure on one statement is a data point
                    outcome.failed[statement.id] = f"{type(error).__name__}: {error}"
                    continue
                if attempt == 0:
                    outcome.edges[statement.id] = found
            outcome.seconds.append(time.perf_counter() - started)
    return outcome


def _warm_up(tool: Tool, statements: list[Statement]) -> None:
    with contextlib.suppress(Exception):
        tool.edges(statements[0].sql)


@dataclass(frozen=True)
class Score:
    statements: int
    expected: int
    predicted: int
    correct: int
    exact: int

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected if self.expected else 0.0


def score(outcome: Outcome, expected: dict[str, frozenset[Edge]]) -> Score:
    """Micro-averaged over the hand-checked statements the tool was run on; a failed or
    unsupported statement predicts nothing."""
    checked = [
        sid for sid in expected if sid in outcome.edges or sid in outcome.failed or sid in outcome.unsupported
    ]
    predicted = correct = exact = total = 0
    for sid in checked:
        found = outcome.edges.get(sid, set())
        predicted += len(found)
        total += len(expected[sid])
        correct += len(found & expected[sid])
        exact += found == expected[sid]
    return Score(len(checked), total, predicted, correct, exact)


# -- output ------------------------------------------------------------------------------------


def machine() -> str:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cpu = f"{os.cpu_count()} cores ({usable} usable){', ' + model if model else ''}"
    return f"{platform.system()} {platform.machine()}, {cpu}, Python {platform.python_version()}"


def versions() -> str:
    found = []
    for package in ("tracelake", "sqlglot", "sqllineage", "sqlfluff"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} (not installed)")
    with contextlib.suppress(ImportError):
        import tracelake

        found[0] += f" (from {Path(tracelake.__file__).parent})"
    return ", ".join(found)


def table(outcomes: list[Outcome], expected: dict[str, frozenset[Edge]]) -> str:
    header = (
        f"{'tool':<16} {'stmts/s':>8} {'stmts':>6} {'failed':>7} {'unsupp.':>8} "
        f"{'precision':>10} {'recall':>7} {'exact match':>16}"
    )
    lines = [header, "-" * len(header)]
    for outcome in outcomes:
        s = score(outcome, expected)
        exact = f"{s.exact / s.statements:.1%} ({s.exact}/{s.statements})" if s.statements else "-"
        lines.append(
            f"{outcome.tool:<16} {outcome.rate:>8.1f} {outcome.statements:>6} {len(outcome.failed):>7} "
            f"{len(outcome.unsupported):>8} {s.precision:>10.3f} {s.recall:>7.3f} {exact:>16}"
        )
    return "\n".join(lines)


def by_file(
    outcomes: list[Outcome], expected: dict[str, frozenset[Edge]], statements: list[Statement]
) -> str:
    """Exact matches per corpus file (holdout.sql was written after the collector was tuned)."""
    files = sorted({s.file for s in statements if s.id in expected})
    lines = [f"{'exact match by file':<20}" + "".join(f"{f:>16}" for f in files)]
    for outcome in outcomes:
        cells = []
        for file in files:
            subset = {s.id: expected[s.id] for s in statements if s.file == file and s.id in expected}
            s = score(outcome, subset)
            cells.append(f"{s.exact}/{s.statements}" if s.statements else "-")
        lines.append(f"{outcome.tool:<20}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


def diff(outcome: Outcome, expected: dict[str, frozenset[Edge]]) -> str:
    """Per hand-checked statement: what the tool missed (-) and added (+)."""
    lines = [f"\n{outcome.tool}: differences from the hand-worked expectations"]
    for sid, wanted in expected.items():
        if sid in outcome.failed:
            lines.append(f"{sid}: FAILED {outcome.failed[sid][:200]}")
            continue
        if sid not in outcome.edges and sid not in outcome.unsupported:
            continue
        found = outcome.edges.get(sid, set())
        if found == wanted:
            continue
        lines.append(f"{sid}:{' (unsupported)' if sid in outcome.unsupported else ''}")
        lines += [f"  - {s} -> {t}" for s, t in sorted(wanted - found, key=lambda e: (e[1], e[0]))]
        lines += [f"  + {s} -> {t}" for s, t in sorted(found - wanted, key=lambda e: (e[1], e[0]))]
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def tools(schema: dict[str, dict[str, str]], say: Callable[[str], None]) -> list[Tool]:
    """The tools that can be loaded here, Tracelake first."""
    loaded: list[Tool] = []
    factories: list[tuple[str, Callable[[], Tool]]] = [
        ("tracelake collector", lambda: TracelakeTool(SCHEMA_FILE)),
        ("sqllineage", lambda: SqllineageTool(schema)),
        ("sqlglot", lambda: SqlglotTool(schema)),
    ]
    for label, factory in factories:
        try:
            loaded.append(factory())
        except ImportError as error:
            say(f"{label} not available ({error}); skipped")
    return loaded


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per tool (median; default 3)")
    parser.add_argument(
        "--quick", action="store_true", help="run sqllineage once, on the hand-checked statements only"
    )
    parser.add_argument("--diff", metavar="TOOL", action="append", default=[], help="list TOOL's differences")
    parser.add_argument(
        "--wide",
        type=int,
        metavar="N",
        help="instead, time one N-column CREATE TABLE AS SELECT in each tool (issue 18: 2,000 in under 2 s)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def wide_statement(columns: int) -> str:
    """A CTAS of `columns` computed columns over one table, filtered: the widest statement."""
    selected = ", ".join(f"upper(c{i}) AS o{i}" for i in range(columns))
    return f"CREATE TABLE mart.wide AS SELECT {selected} FROM dating.wide WHERE c0 > 0"


def time_wide(columns: int, schema: dict[str, dict[str, str]]) -> None:
    """Each tool's time on one `columns`-wide statement, and whether it found every column."""
    sql = wide_statement(columns)
    print(f"one CREATE TABLE AS SELECT of {columns} computed columns, {len(sql):,} characters\n")
    for tool in tools(schema, print):
        started = time.perf_counter()
        try:
            found = tool.edges(sql)
        except Exception as error:  # a tool that cannot do it says so, the others go on
            print(f"{tool.name:<16} failed: {type(error).__name__}")
            continue
        elapsed = time.perf_counter() - started
        print(f"{tool.name:<16} {elapsed:8.2f} s   {len(found):,} direct column edges (expected {columns:,})")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.disable(logging.WARNING)  # sqllineage and sqlfluff warn per statement
    warnings.simplefilter("ignore")
    if args.wide is not None:
        print(f"machine: {machine()}")
        print(f"versions: {versions()}")
        time_wide(args.wide, load_schema())
        return 0
    statements = load_statements()
    schema = load_schema()
    expected = load_expected()
    checked = [s for s in statements if s.id in expected]
    edges = sum(len(e) for e in expected.values())
    print(
        f"SQL column lineage: {len(statements)} Spark SQL statements in bench/corpus, "
        f"{len(checked)} with hand-worked direct edges ({edges} edges)"
    )
    print(f"machine: {machine()}")
    print(f"versions: {versions()}")
    print(f"timing: median of {args.repeat} run(s) per tool, one statement at a time, lineage work only\n")

    outcomes = []
    for tool in tools(schema, print):
        if args.quick and tool.name == "sqllineage":
            note = f"--quick: sqllineage ran once on the {len(checked)} hand-checked statements only"
            outcomes.append(run(tool, checked, 1, note))
        else:
            outcomes.append(run(tool, statements, args.repeat))
    print(table(outcomes, expected))
    print()
    print(by_file(outcomes, expected, statements))
    for outcome in outcomes:
        if outcome.note:
            print(f"note: {outcome.note}")
    rates = {o.tool: o.rate for o in outcomes}
    if "tracelake" in rates and "sqllineage" in rates:
        print(f"\nspeed, Tracelake / sqllineage: {rates['tracelake'] / rates['sqllineage']:.1f}x")
    if "tracelake" in rates and "sqlglot.lineage" in rates:
        print(f"speed, Tracelake / sqlglot.lineage: {rates['tracelake'] / rates['sqlglot.lineage']:.2f}x")
    for outcome in outcomes:
        if outcome.failed and outcome.tool not in args.diff:
            print(f"{outcome.tool} failed on: {', '.join(sorted(outcome.failed))}")
    for outcome in outcomes:
        if outcome.tool in args.diff:
            print(diff(outcome, expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
