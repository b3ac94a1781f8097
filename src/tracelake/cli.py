"""The `tracelake` command line: a thin typer layer over `tracelake.service.Tracelake`.

Each command parses its options, calls one service operation and prints the result as a
rich table or as JSON/DOT/Mermaid. User mistakes (a missing file, an unknown node, a bad
date) end with a one-line message and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, time
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import sqlalchemy as sa
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracelake import render
from tracelake.api.auth import TokenFileError
from tracelake.collect.openlineage_log import log_lines
from tracelake.collect.schema import SchemaFileError
from tracelake.collect.sql import UnknownDialectError
from tracelake.graph.index import UnknownNodeError
from tracelake.model import AssetChange, AssetRead, Confidence, Signal, UrnError
from tracelake.names import DEFAULT_SYSTEM
from tracelake.review import ReviewError
from tracelake.service import DiffView, Direction, Tracelake, TraversalFilters
from tracelake.spark import recover as spark_recover
from tracelake.store import LineageStore
from tracelake.store.location import StoreError
from tracelake.store.reads import ReadCounts
from tracelake.temporal.operations import EntityError
from tracelake.textfile import TextFileError
from tracelake.views import EdgeView, GraphView

app = typer.Typer(
    name="tracelake",
    help="Privacy-aware data lineage for Spark data lakes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
ingest_app = typer.Typer(help="Collect lineage signals into the store.", no_args_is_help=True)
app.add_typer(ingest_app, name="ingest")

out = Console(soft_wrap=True)
# Messages on stderr are never wrapped: a path cut in two is a message a script cannot match.
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    dot = "dot"
    mermaid = "mermaid"


class ExitCode(IntEnum):
    """What a command's exit status says; the README's "Exit codes" lists the same."""

    OK = 0
    NO = 1  # the command ran and its answer is no: a policy violated, not ready, drift found
    USAGE = 2  # a user mistake (an option, a missing file, an unknown node, a store): nothing done
    PROBLEMS = 3  # ingested, but some input was recorded as problems (see `tracelake problems`)


# A message quoting a 100,000-character name stays readable.
MAX_MESSAGE_CHARS = 1000


class UserError(Exception):
    """A mistake in what the user asked for; printed as one line."""


def friendly_errors(command: F) -> F:
    """Turn user mistakes into a message on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (
            UserError,
            UnknownNodeError,
            UnknownDialectError,
            SchemaFileError,
            FileNotFoundError,
            ReviewError,
            EntityError,
            TextFileError,
            TokenFileError,
            StoreError,
            UrnError,
        ) as exc:
            print_error(str(exc))
            raise typer.Exit(ExitCode.USAGE) from None
        except sa.exc.OperationalError as exc:
            print_error(f"cannot use the lineage store: {exc.orig}")
            raise typer.Exit(ExitCode.USAGE) from None

    return wrapper  # type: ignore[return-value]


def print_error(message: str) -> None:
    """`error: <message>` on stderr as one line, however long or multi-line the message was."""
    print_line("[red]error:[/red]", message)


def print_line(prefix: str, message: str) -> None:
    """`prefix` (rich markup) and `message` (plain text, never markup) as one line on stderr."""
    text = " ".join(message.split())
    if len(text) > MAX_MESSAGE_CHARS:
        suffix = f"… ({len(text):,} characters)"
        text = text[: MAX_MESSAGE_CHARS - len(suffix)] + suffix
    err.print(f"{prefix} {escape(text)}", highlight=False)


def exit_with_problems(problems: Sequence[object]) -> None:
    """Exit 3 after an ingest that recorded problems: done, but not with all of its input."""
    if problems:
        raise typer.Exit(ExitCode.PROBLEMS)


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="TRACELAKE_DB", help="Store URL or SQLite file [default: .tracelake/lineage.db]"
    ),
]


def open_service(db: str | None) -> Tracelake:
    store = LineageStore(db)
    # runs whose Spark driver died before storing them are stored and ended before anything reads them
    for found in spark_recover(store):
        err.print(f"[yellow]note:[/yellow] {found.describe()}", highlight=False)
    return Tracelake(store)


def parse_time(text: str | None, option: str) -> datetime | None:
    """ISO dates and times; a bare date means the end of that day (UTC): "as it was on 2024-03-11"."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(
            f"{option} {text!r} is not an ISO date or time (e.g. 2024-03-11 or 2024-03-11T06:00Z)"
        ) from None
    if len(text) == 10:  # a date alone
        moment = datetime.combine(moment.date(), time.max)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ---------------------------------------------------------------------- ingest


@ingest_app.command("configs")
@friendly_errors
def ingest_configs(
    paths: Annotated[list[Path], typer.Argument(help="ML config files (YAML/JSON) or folders of them")],
    shapes: Annotated[
        Path | None, typer.Option(help="YAML of config shapes: where inputs and outputs sit")
    ] = None,
    db: DbOption = None,
) -> None:
    """Lineage from ML training and serving configs: tables and features → models → services."""
    for path in [*paths, *([shapes] if shapes else [])]:
        if not path.exists():
            raise UserError(f"{path}: no such file or folder")
    try:
        collection = open_service(db).ingest_configs(paths, shapes_file=shapes)
    except ValueError as error:
        raise UserError(str(error)) from None
    for problem in collection.problems:
        print_line("[yellow]skipped:[/yellow]", str(problem))
    edges = len(collection.batch.edges)
    read = collection.configs - len(collection.problems)
    out.print(f"{collection.configs} configs: {read} read, {edges} edges", highlight=False)
    exit_with_problems(collection.problems)


@ingest_app.command("openlineage")
@friendly_errors
def ingest_openlineage(
    path: Annotated[
        str,
        typer.Argument(
            help="JSON lines of events (the client's file transport), a JSON array, Marquez's "
            '{"events": [...]} page, or - for standard input'
        ),
    ],
    db: DbOption = None,
) -> None:
    """Ingest OpenLineage events from a file or a stream, as POST /api/v1/lineage takes them."""
    service = open_service(db)
    if path == "-":
        summary = service.ingest_openlineage(log_lines(sys.stdin.buffer, "<stdin>"), source="<stdin>")
    else:
        file = Path(path)
        if not file.is_file():
            raise UserError(f"{file}: no such file")
        with file.open("rb") as handle:
            summary = service.ingest_openlineage(log_lines(handle, str(file)), source=str(file))
    for problem in summary.problems:
        print_line("[yellow]problem:[/yellow]", str(problem))
    accepted = summary.events - summary.refused
    out.print(
        f"{summary.events} events: {accepted} accepted, {summary.refused} refused; {summary.edges} edges",
        highlight=False,
    )
    exit_with_problems(summary.problems)


@ingest_app.command("sql")
@friendly_errors
def ingest_sql(
    path: Annotated[
        Path, typer.Argument(help="A .sql file, a folder of .sql files, or a JSON-lines query log")
    ],
    dialect: Annotated[str, typer.Option(help="sqlglot dialect: spark, hive, presto, trino, …")] = "spark",
    schema: Annotated[
        Path | None, typer.Option(help="YAML/JSON table schemas, for SELECT * and INSERTs")
    ] = None,
    default_db: Annotated[str, typer.Option(help="Database of unqualified table names")] = "default",
    var: Annotated[
        list[str] | None,
        typer.Option(help="NAME=VALUE for ${NAME} and ${hivevar:NAME} in the SQL; repeatable"),
    ] = None,
    db: DbOption = None,
) -> None:
    """Parse SQL into table- and column-level lineage and store it."""
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    if not (path.is_dir() or path.is_file() or path.is_fifo()):
        raise UserError(f"{path}: not a regular file")  # /dev/zero would be read forever
    variables: dict[str, str] = {}
    for pair in var or ():
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise UserError(f"--var {pair!r}: expected NAME=VALUE")
        variables[name.strip()] = value
    service = open_service(db)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task(f"parsing {path}", total=None)
        summary = service.ingest_sql(
            path,
            dialect=dialect,
            schema_file=schema,
            default_db=default_db,
            progress=lambda n: progress.update(task, completed=n),
            variables=variables,
        )
    for problem in summary.problems:
        print_line("[yellow]problem:[/yellow]", str(problem))
        if problem.excerpt:
            err.print(f"    {problem.excerpt}", highlight=False, markup=False)
    report = summary.report
    outcomes = summary.outcomes
    out.print(
        f"{summary.statements} statements: {summary.parsed} parsed ({outcomes.get('lineage', 0)} with "
        f"lineage, {outcomes.get('read', 0)} read-only, {outcomes.get('no lineage', 0)} moving no data, "
        f"{outcomes.get('untraced', 0)} not traced), {summary.failed} failed; "
        f"{summary.edges} edges ({report.edges_added} new, {report.edges_closed} closed, "
        f"{report.versions_added} process versions new, {report.versions_unchanged} unchanged)",
        highlight=False,
    )
    exit_with_problems(summary.problems)


# ---------------------------------------------------------------------- explore


def _filters(
    depth: int | None,
    as_of: str | None,
    min_confidence: Confidence | None,
    signal: list[Signal] | None,
    kind: list[str] | None,
    direct_only: bool = False,
) -> TraversalFilters:
    if depth is not None and depth < 0:
        raise UserError("--depth must be 0 or more")
    return TraversalFilters(
        depth=depth,
        as_of=parse_time(as_of, "--as-of"),
        min_confidence=min_confidence,
        signals=frozenset(signal) if signal else None,
        asset_kinds=frozenset(kind) if kind else None,
        direct_only=direct_only,
    )


@app.command()
@friendly_errors
def lineage(
    nodes: Annotated[list[str], typer.Argument(help="URNs or table names, e.g. dating.users#religion")],
    up: Annotated[bool, typer.Option("--up", help="Upstream only")] = False,
    down: Annotated[bool, typer.Option("--down", help="Downstream only")] = False,
    depth: Annotated[int | None, typer.Option(help="At most this many hops")] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The graph as it was then (ISO date/time)")
    ] = None,
    min_confidence: Annotated[Confidence | None, typer.Option(help="Stop at edges below this")] = None,
    signal: Annotated[list[Signal] | None, typer.Option(help="Only edges from these signals")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Only these asset kinds, e.g. hive.table")] = None,
    direct_only: Annotated[
        bool, typer.Option(help="Only edges that carry values (no filters, joins…)")
    ] = False,
    output: Annotated[OutputFormat, typer.Option("--format", help="Output format")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """Upstream and downstream lineage of tables or columns."""
    if up and down:
        raise UserError("give --up or --down, not both (neither means both directions)")
    direction: Direction = "upstream" if up else "downstream" if down else "both"
    filters = _filters(depth, as_of, min_confidence, signal, kind, direct_only)
    view = open_service(db).lineage(nodes, direction, filters)
    print_graph(view, output, title=f"{direction} of {', '.join(nodes)}")


@app.command()
@friendly_errors
def impact(
    nodes: Annotated[list[str], typer.Argument(help="URNs or table names you plan to change")],
    depth: Annotated[int | None, typer.Option(help="At most this many hops")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of")] = None,
    min_confidence: Annotated[Confidence | None, typer.Option()] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """Downstream assets a change would touch, with their owners."""
    impacted = open_service(db).impact(nodes, _filters(depth, as_of, min_confidence, None, None))
    if output is OutputFormat.json:
        print(json.dumps({"impacted": [i.to_json() for i in impacted]}, indent=2))
        return
    table = Table(title=f"impact of {', '.join(nodes)}")
    for column in ("asset", "distance", "owner", "layer", "via fields"):
        table.add_column(column)
    for item in impacted:
        table.add_row(
            short(item.asset),
            str(item.distance),
            item.owner or "",
            item.layer or "",
            ", ".join(item.via_fields[:4]),
        )
    out.print(table)
    out.print(f"{len(impacted)} downstream assets", highlight=False)


@app.command()
@friendly_errors
def paths(
    source: Annotated[str, typer.Argument()],
    target: Annotated[str, typer.Argument()],
    max_depth: Annotated[int, typer.Option(help="Longest path, in hops")] = 10,
    as_of: Annotated[str | None, typer.Option("--as-of")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """Every path between two nodes (how does data get from A to B?)."""
    found = open_service(db).paths(
        source, target, max_depth=max_depth, filters=_filters(None, as_of, None, None, None)
    )
    if output is OutputFormat.json:
        print(json.dumps({"paths": [[e.to_json() for e in path] for path in found]}, indent=2))
        return
    for number, path in enumerate(found, 1):
        hops = " → ".join(
            [short(path[0].source), *(f"{short(e.target)} [{e.transformation or 'table'}]" for e in path)]
        )
        out.print(f"{number}. {hops}", highlight=False)
    out.print(f"{len(found)} paths", highlight=False)


@app.command()
@friendly_errors
def show(
    node: Annotated[str, typer.Argument(help="A URN or table name")],
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The edges as they were then (ISO date/time)")
    ] = None,
    db: DbOption = None,
) -> None:
    """A node's properties, its fields and the edges in and out of it now (or then, with --as-of);
    a table's lifecycle and who read it (the latest 20 reads)."""
    details = open_service(db).show(node, as_of=parse_time(as_of, "--as-of"))
    record = details.node
    if output is OutputFormat.json:
        print(json.dumps(details.to_json(), indent=2))
        return
    facts = Table(show_header=False, title=record.urn)
    for key, value in (
        ("kind", f"{record.node_type} ({record.kind})"),
        ("owner", record.owner),
        ("layer", record.layer),
        ("security level", record.security_level),
        ("labels", ", ".join(record.labels)),
        ("data type", record.data_type),
        ("first seen", record.first_seen.isoformat(timespec="seconds")),
        ("last seen", record.last_seen.isoformat(timespec="seconds")),
    ):
        if value not in (None, ""):
            facts.add_row(key, str(value))
    out.print(facts)
    if details.fields:
        out.print("fields: " + ", ".join(f.urn.partition("#")[2] for f in details.fields), highlight=False)
    for title, edges in (("inputs", details.inputs), ("outputs", details.outputs)):
        if edges:
            out.print(edge_table(edges, title=title, with_process=True))
    if details.changes:
        out.print(change_table(details.changes))
    if details.readers:
        out.print(reader_table(details.readers, details.reads))


@app.command()
@friendly_errors
def diff(
    since: Annotated[str, typer.Option("--from", help="Earlier time (ISO date/time)")],
    until: Annotated[str | None, typer.Option("--to", help="Later time [default: now]")] = None,
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """Edges added and removed between two times."""
    start = parse_time(since, "--from")
    end = parse_time(until, "--to") or datetime.now(UTC)
    assert start is not None
    if end < start:
        raise UserError("--to is before --from")
    changes: DiffView = open_service(db).diff(start, end)
    if output is OutputFormat.json:
        print(
            json.dumps(
                {
                    "from": start.isoformat(),
                    "to": end.isoformat(),
                    "added": [e.to_json() for e in changes.added],
                    "removed": [e.to_json() for e in changes.removed],
                },
                indent=2,
            )
        )
        return
    out.print(
        edge_table(changes.added, title=f"added between {start:%Y-%m-%d %H:%M} and {end:%Y-%m-%d %H:%M}")
    )
    out.print(edge_table(changes.removed, title="removed"))
    out.print(f"{len(changes.added)} added, {len(changes.removed)} removed", highlight=False)


@app.command()
@friendly_errors
def problems(
    limit: Annotated[int, typer.Option(help="How many, newest first")] = 50,
    db: DbOption = None,
) -> None:
    """Input that could not be read (bad SQL, malformed log lines), as recorded at ingest."""
    recorded = open_service(db).problems(limit)
    table = Table(title="recorded problems")
    for column in ("source", "where", "reason"):
        table.add_column(column, overflow="fold")
    for problem in recorded:
        table.add_row(problem.source, problem.location, problem.reason)
    out.print(table)


# ---------------------------------------------------------------------- output


def short(urn: str) -> str:
    """Hive tables, the common case, without their `hive.table/` prefix; other URNs in full."""
    return urn.removeprefix(f"{DEFAULT_SYSTEM}.table/")


def edge_table(edges: list[EdgeView], *, title: str, with_process: bool = False) -> Table:
    table = Table(title=title)
    columns = ("source", "target", "transformation", "confidence", "signal")
    for column in (*columns, "process") if with_process else columns:
        table.add_column(column, overflow="fold")
    for edge in edges:
        cells = [
            short(edge.source),
            short(edge.target),
            edge.transformation or "(table)",
            edge.confidence,
            edge.signal,
        ]
        table.add_row(*cells, short(edge.process)) if with_process else table.add_row(*cells)
    return table


def change_table(changes: list[AssetChange]) -> Table:
    """A dataset's lifecycle: what DDL (or a producer's lifecycle facet) did to it, and when."""
    table = Table(title="lifecycle")
    for column in ("at", "change", "columns after", "by"):
        table.add_column(column, overflow="fold")
    for change in changes:
        columns = ", ".join(f"{name} {data_type or ''}".strip() for name, data_type in change.columns or ())
        if change.previous:
            columns = f"was {short(change.previous)}" + (f"; {columns}" if columns else "")
        table.add_row(
            change.at.isoformat(timespec="seconds"), str(change.change), columns, short(change.process or "")
        )
    return table


def reader_table(reads: list[AssetRead], counts: ReadCounts) -> Table:
    """Who read a dataset without writing from it (newest first): user, job, when, which columns."""
    shown = f"; the latest {len(reads)}" if len(reads) < counts.runs else ""
    table = Table(title=f"readers ({counts.runs} reading runs by {counts.readers} readers{shown})")
    for column in ("at", "user", "process", "columns", "signal"):
        table.add_column(column, overflow="fold")
    for read in reads:
        table.add_row(
            read.at.isoformat(timespec="seconds"),
            read.user or "",
            short(read.process),
            ", ".join(read.columns),
            str(read.signal),
        )
    return table


def print_graph(view: GraphView, output: OutputFormat, *, title: str) -> None:
    if output is OutputFormat.json:
        sys.stdout.write(render.to_json(view) + "\n")
    elif output is OutputFormat.dot:
        sys.stdout.write(render.to_dot(view))
    elif output is OutputFormat.mermaid:
        sys.stdout.write(render.to_mermaid(view))
    else:
        nodes = Table(title=title)
        for column in ("distance", "node", "kind", "owner"):
            nodes.add_column(column, overflow="fold")
        for node in view.nodes:
            kind = "field" if node.kind == "field" else node.type
            nodes.add_row(str(node.distance), short(node.id), kind, node.owner or "")
        out.print(nodes)
        out.print(edge_table(view.edges, title="edges"))
        out.print(f"{len(view.nodes)} nodes, {len(view.edges)} edges", highlight=False)


# The privacy commands use the helpers above, so they are registered once those exist.
from tracelake.cli_api import register as register_api  # noqa: E402
from tracelake.cli_labels import register as register_labels  # noqa: E402
from tracelake.cli_privacy import privacy_app  # noqa: E402
from tracelake.cli_temporal import register as register_temporal  # noqa: E402

app.add_typer(privacy_app, name="privacy")
register_temporal(app)
register_labels(app)
register_api(app)


def main() -> None:  # pragma: no cover - the console script entry point
    app()
