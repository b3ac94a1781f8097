"""The SQL lineage collector: SQL scripts, folders of them and query logs → LineageBatches.

A *run* is what executed together: one `.sql` file, or the entries of one `job_id` in a
JSON-lines query log (an entry without a job id is a run of its own). Each run becomes one
batch with one Process and one Run, so that a temp view created by one statement of a run
connects the statements that read it. Statements are parsed one by one: a statement that
does not parse becomes a `Problem` (with its line and sqlglot's reason) and the rest of the
run still yields lineage. Bad input never raises, except a path that does not exist
(`FileNotFoundError`) and a dialect sqlglot does not know (`UnknownDialectError`, before
anything is read).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlglot.dialects.dialect import Dialect, Dialects

from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.sql_input import Piece, Skipped, open_input, read_pieces
from tracelake.collect.sql_log import LogEntry, read_log
from tracelake.collect.sql_split import ParsedStatement, StatementError, excerpt, parse_statements
from tracelake.collect.sql_statements import Outcome, RunState
from tracelake.model import (
    DECLARED_COLUMNS,
    Asset,
    AssetRead,
    Field,
    FlowEdge,
    InputError,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    UrnError,
    as_utc,
    fingerprint,
    utcnow,
)
from tracelake.model.names import DEFAULT_DATABASE
from tracelake.model.textfile import TextFileError

QUERY_LOG_SUFFIXES = frozenset({".jsonl", ".json", ".log"})
# Engine names seen in query logs that are not sqlglot dialect names themselves.
_ENGINE_ALIASES = {"spark3": "spark", "sparksql": "spark", "spark_sql": "spark", "hiveql": "hive"}


class UnknownDialectError(InputError):
    """A dialect name sqlglot does not know."""


def supported_dialects() -> list[str]:
    return sorted(d.value for d in Dialects if d.value)


def _dialect(name: str) -> Dialect:
    key = _ENGINE_ALIASES.get(name.strip().lower(), name.strip().lower())
    try:
        return Dialect.get_or_raise(key)
    except ValueError as error:
        raise UnknownDialectError(
            f"unknown SQL dialect {name!r}; supported: {', '.join(supported_dialects())}"
        ) from error


@dataclass
class SqlCollection:
    """What a collection produced: one batch per run, plus the statements that failed."""

    batches: list[LineageBatch] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    statements: int = 0
    parsed: int = 0
    failed: int = 0
    # what the parsed statements came to: each one exactly one Outcome
    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))

    @property
    def edges(self) -> int:
        return sum(len(batch.edges) for batch in self.batches)

    def extend(self, other: SqlCollection) -> None:
        self.batches.extend(other.batches)
        self.problems.extend(other.problems)
        self.statements += other.statements
        self.parsed += other.parsed
        self.failed += other.failed
        for outcome, count in other.outcomes.items():
            self.outcomes[outcome] += count


@dataclass
class _RunBuilder:
    """One run being replayed: its state, the shapes of its statements, when and by whom."""

    state: RunState
    dialect_name: str
    shapes: list[str] = field(default_factory=list)
    parsed: int = 0
    started_at: datetime | None = None
    user: str | None = None
    variables: dict[str, str] = field(default_factory=dict)  # `${name}` values: --var, then SETs

    def replay(
        self,
        text: str,
        dialect: Dialect,
        source: str,
        where: Callable[[int, int], str],
        collection: SqlCollection,
    ) -> None:
        """Parse and apply every statement of `text`; failures become problems."""
        self.state.at = self.moment()
        text = spark_directory_writes(substitute_variables(text, self.variables))
        for item in parse_statements(text, dialect):
            collection.statements += 1
            if isinstance(item, StatementError):
                collection.failed += 1
                collection.problems.append(
                    Problem(source, item.reason, where(item.line, item.index), item.excerpt)
                )
                continue
            outcome = self._apply(item, dialect)
            for warning in self.state.warnings:
                collection.problems.append(
                    Problem(source, warning, where(item.line, item.index), excerpt(item.text))
                )
            self.state.warnings.clear()
            if isinstance(outcome, Outcome):
                collection.parsed += 1
                collection.outcomes[outcome] += 1
                self.parsed += 1
                self.shapes.append(item.shape)
            else:
                error = outcome
                collection.failed += 1
                collection.problems.append(
                    Problem(source, error, where(item.line, item.index), excerpt(item.text))
                )

    def _apply(self, item: ParsedStatement, dialect: Dialect) -> Outcome | str:
        """What the statement came to, or why it could not be analysed."""
        if item.expression is None:
            return Outcome.NO_LINEAGE
        self.state.dialect = dialect
        try:
            return self.state.apply(item.expression, templated="${" in item.text)
        except RecursionError:
            return "the statement is nested too deeply to analyse"
        except UrnError as error:
            return str(error)
        except Exception as error:
            # sqlglot can fail on constructs it parsed but cannot scope; one statement's
            # failure must not stop the run
            return f"could not work out the lineage: {type(error).__name__}: {error}"[:500]

    def moment(self) -> datetime:
        """When the run ran: its start, or now for a run without a time."""
        return as_utc(self.started_at) if self.started_at is not None else utcnow()

    def share_declarations(self) -> None:
        """Column orders this run declared, for the runs collected after it (in time order)."""
        schema = self.state.schema
        if schema is None:
            return
        for urn, metadata in self.state.assets.items():
            columns = metadata.get(DECLARED_COLUMNS)
            if isinstance(columns, list):
                schema.declare(urn, columns, self.moment())

    def batch(
        self, process_urn: str, name: str, metadata: dict[str, Any], job_id: str | None
    ) -> LineageBatch:
        state = self.state
        code = fingerprint(*self.shapes)
        started = as_utc(self.started_at) if self.started_at is not None else None
        at = self.moment()  # when its read-only queries read their tables
        # where the run was read from tells apart two runs of one query at unknown times,
        # and keeps the id stable when the same input is collected again
        run_id = fingerprint(process_urn, started.isoformat() if started else "", code, repr(metadata))
        edges = [
            FlowEdge(source, target, process_urn, Signal.SQL_STATIC, confidence, kind)
            for (source, target, kind), confidence in state.edges.items()
        ]
        assets: dict[str, None] = dict.fromkeys(state.assets)
        fields: dict[str, None] = dict.fromkeys(state.field_types)
        for edge in edges:
            for node in (edge.source, edge.target):
                asset, hash_, _ = node.partition("#")
                assets.setdefault(asset)
                if hash_:
                    fields.setdefault(node)
        return LineageBatch(
            assets=[Asset(urn, metadata=dict(state.assets.get(urn, {}))) for urn in assets],
            fields=[Field(urn, data_type=state.field_type(urn)) for urn in fields],
            processes=[
                Process(
                    process_urn,
                    name=name,
                    kind="sql",
                    metadata={
                        **metadata,
                        "dialect": self.dialect_name,
                        "statements": self.parsed,
                        "fingerprint": code,
                        **({"notes": list(dict.fromkeys(state.notes))} if state.notes else {}),
                        **({"reads": list(state.reads)} if state.reads else {}),
                    },
                )
            ],
            runs=[Run(run_id, process_urn, started_at=started, job_id=job_id, user=self.user)],
            edges=edges,
            reads=[
                AssetRead(urn, run_id, process_urn, at, self.user, Signal.SQL_STATIC, tuple(sorted(paths)))
                for urn, paths in state.reads.items()
            ],
            observed_at=started,
        )


def _new_run(
    dialect: Dialect,
    dialect_name: str,
    schema: SchemaCatalog | None,
    default_db: str,
    variables: Mapping[str, str] | None = None,
) -> _RunBuilder:
    run = _RunBuilder(RunState(dialect, schema, default_db.lower()), dialect_name)
    run.variables.update(variables or {})
    return run


_VARIABLE = re.compile(r"\$\{(?:(?:hivevar|hiveconf|var):)?([A-Za-z_][\w.]*)\}")
_SET_VARIABLE = re.compile(
    r"^\s*SET\s+(?:(?:hivevar|hiveconf|var):)?([A-Za-z_][\w.]*)\s*=\s*([^;\n]*?)\s*;",
    re.IGNORECASE | re.MULTILINE,
)


def substitute_variables(text: str, variables: dict[str, str]) -> str:
    """`${name}`, `${hivevar:name}`, `${hiveconf:name}` replaced by their values, as Hive and
    Spark do before parsing: values given (`--var name=value`), then each `SET name=value` of
    the text from its place on (it updates `variables`). Unknown ones stay as written."""
    if "${" not in text and not variables:
        return text
    pieces: list[str] = []
    position = 0
    for found in _SET_VARIABLE.finditer(text):
        pieces.append(_replace(text[position : found.end()], variables))
        variables[found.group(1)] = _replace(found.group(2), variables)
        position = found.end()
    pieces.append(_replace(text[position:], variables))
    return "".join(pieces)


def _replace(text: str, variables: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: variables.get(m.group(1), m.group(0)), text) if "${" in text else text


# Spark's `INSERT OVERWRITE [LOCAL] DIRECTORY ['path'] USING fmt [OPTIONS (…)]`, which sqlglot
# does not parse, and Hive's `… DIRECTORY 'path' STORED AS fmt`, which it does.
_DIRECTORY_USING = re.compile(
    r"(?P<head>INSERT\s+OVERWRITE\s+(?:LOCAL\s+)?DIRECTORY)(?P<path>\s+'[^']*')?\s+USING\s+(?P<format>\w+)"
    r"(?P<options>\s+OPTIONS\s*\((?:[^()']|'[^']*')*\))?",
    re.IGNORECASE,
)
_PATH_OPTION = re.compile(r"'path'\s*=?\s*('[^']*')", re.IGNORECASE)


def spark_directory_writes(text: str) -> str:
    """Spark's directory write spelt as Hive's, which sqlglot reads: the path from the statement
    or its `path` option; the line count kept, so problems keep their places."""

    def hive_form(found: re.Match[str]) -> str:
        path = found["path"]
        if path is None and found["options"]:
            option = _PATH_OPTION.search(found["options"])
            path = f" {option.group(1)}" if option else None
        if path is None:
            return found.group(0)  # no path said: left for the parser to report
        return f"{found['head']}{path} STORED AS {found['format']}" + "\n" * found.group(0).count("\n")

    return _DIRECTORY_USING.sub(hive_form, text) if "DIRECTORY" in text.upper() else text


# -- public API ---------------------------------------------------------------------------


def collect_sql(
    text: str | Iterable[Piece | Skipped],
    *,
    dialect: str = "spark",
    source: str = "<sql>",
    schema: SchemaCatalog | None = None,
    default_db: str = DEFAULT_DATABASE,
    process: str | None = None,
    observed_at: datetime | None = None,
    job_id: str | None = None,
    user: str | None = None,
    variables: Mapping[str, str] | None = None,
) -> SqlCollection:
    """Lineage of one SQL script (one run): its text, or its pieces as `read_pieces` gives them.
    `process` overrides the process URN; `variables` are the values of `${name}` placeholders."""
    parsed_dialect = _dialect(dialect)
    collection = SqlCollection()
    run = _new_run(parsed_dialect, dialect, schema, default_db, variables)
    run.started_at, run.user = observed_at, user
    for item in [Piece(1, text)] if isinstance(text, str) else text:
        if isinstance(item, Skipped):
            collection.statements += 1
            collection.failed += 1
            location = _file_location(item.line, collection.statements)
            collection.problems.append(Problem(source, item.reason, location))
            continue
        lines_before, statements_before = item.first_line - 1, collection.statements

        def where(
            line: int, index: int, lines_before: int = lines_before, before: int = statements_before
        ) -> str:
            return _file_location(line + lines_before, index + before)

        run.replay(item.text, parsed_dialect, source, where, collection)
    if run.parsed:
        urn = process or (f"sql.job/{job_id}" if job_id else f"sql.script/{source}")
        collection.batches.append(run.batch(urn, job_id or source, {"source": source}, job_id))
        run.share_declarations()
    return collection


def collect_path(
    path: Path,
    *,
    dialect: str = "spark",
    schema: SchemaCatalog | None = None,
    default_db: str = DEFAULT_DATABASE,
    progress: Callable[[int], None] | None = None,
    variables: Mapping[str, str] | None = None,
) -> SqlCollection:
    """A `.sql` file, a folder of them (recursive, sorted), or a JSON-lines query log.

    `progress`, when given, is called with the number of statements read so far.
    """
    _dialect(dialect)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(path))
    if path.is_dir():
        collection = SqlCollection()
        for file in sorted(p for p in path.rglob("*.sql") if p.is_file()):
            collection.extend(_collect_file(file, dialect, schema, default_db, variables))
            if progress is not None:
                progress(collection.statements)
        return collection
    if path.suffix.lower() in QUERY_LOG_SUFFIXES:
        return collect_query_log(
            path,
            dialect=dialect,
            schema=schema,
            default_db=default_db,
            progress=progress,
            variables=variables,
        )
    collection = _collect_file(path, dialect, schema, default_db, variables)
    if progress is not None:
        progress(collection.statements)
    return collection


def _collect_file(
    path: Path,
    dialect: str,
    schema: SchemaCatalog | None,
    default_db: str,
    variables: Mapping[str, str] | None,
) -> SqlCollection:
    try:
        handle = open_input(path)
    except TextFileError as error:
        collection = SqlCollection()
        collection.problems.append(Problem(error.source, error.reason))
        return collection
    escapes = "\\" in _dialect(dialect).tokenizer_class.STRING_ESCAPES
    with handle:
        pieces = read_pieces(handle, str(path), backslash_escapes=escapes)
        return collect_sql(
            pieces,
            dialect=dialect,
            source=str(path),
            schema=schema,
            default_db=default_db,
            variables=variables,
        )


def _file_location(line: int, index: int) -> str:
    return f"line {line}, statement {index}"


# -- query logs ---------------------------------------------------------------------------


def collect_query_log(
    path: Path,
    *,
    dialect: str = "spark",
    schema: SchemaCatalog | None = None,
    default_db: str = DEFAULT_DATABASE,
    progress: Callable[[int], None] | None = None,
    variables: Mapping[str, str] | None = None,
) -> SqlCollection:
    """A JSON-lines query log: `{"query", "user", "timestamp", "job_id", "engine"}` per line.

    Entries sharing a job_id are one run, of process `sql.job/<job_name>` when the entries
    name their job, else `sql.job/<job_id>`; any other entry is a run of its own (process
    `sql.query/<fingerprint of the query with literals blanked>`).
    """
    _dialect(dialect)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", str(path))
    collection = SqlCollection()
    source = str(path)
    try:
        handle = open_input(path)
    except TextFileError as error:
        collection.problems.append(Problem(error.source, error.reason))
        return collection
    with handle:
        reading = read_log(handle, source)
    collection.problems.extend(reading.problems)
    collection.statements += reading.rejected
    collection.failed += reading.rejected
    # In time order, so a column order declared by one run holds for the runs after it.
    for entries in sorted(reading.runs, key=_run_start):
        _collect_run(entries, source, dialect, schema, default_db, collection, variables)
        if progress is not None:
            progress(collection.statements)
    return collection


def _collect_run(
    entries: list[LogEntry],
    source: str,
    dialect: str,
    schema: SchemaCatalog | None,
    default_db: str,
    collection: SqlCollection,
    variables: Mapping[str, str] | None,
) -> None:
    first = entries[0]
    dialects = [_entry_dialect(entry, dialect, source, collection) for entry in entries]
    run = _new_run(_dialect(dialects[0]), dialects[0], schema, default_db, variables)
    times = [as_utc(e.timestamp) for e in entries if e.timestamp is not None]
    run.started_at = min(times) if times else None
    run.user = next((e.user for e in entries if e.user), None)
    for entry, entry_dialect in zip(entries, dialects, strict=True):
        run.replay(entry.query, _dialect(entry_dialect), source, _entry_location(entry.number), collection)
    if not run.parsed:
        return
    if first.job_id is not None:
        # a job_id usually names one execution (`etl.load.2024-03-10`); when the log also
        # names the job, the job is the process and each day's run a new version of it
        job = first.job_name or first.job_id
        urn, name = f"sql.job/{job}", job
    else:
        urn = f"sql.query/{fingerprint(*run.shapes)}"
        name = f"query at {source}, entry {first.number}"
    metadata = {"source": source, "entries": [e.number for e in entries]}
    collection.batches.append(run.batch(urn, name, metadata, first.job_id))
    run.share_declarations()


def _run_start(entries: list[LogEntry]) -> datetime:
    times = [as_utc(e.timestamp) for e in entries if e.timestamp is not None]
    return min(times) if times else datetime.max.replace(tzinfo=UTC)


def _entry_dialect(entry: LogEntry, default: str, source: str, collection: SqlCollection) -> str:
    """The entry's `engine` when sqlglot knows it; otherwise the default, with a note."""
    if entry.engine is None:
        return default
    try:
        _dialect(entry.engine)
    except UnknownDialectError:
        collection.problems.append(
            Problem(source, f"unknown engine {entry.engine!r}; read as {default}", f"entry {entry.number}")
        )
        return default
    return entry.engine


def _entry_location(number: int) -> Callable[[int, int], str]:
    def where(line: int, index: int) -> str:
        return f"entry {number}" if index == 1 else f"entry {number}, statement {index}"

    return where
