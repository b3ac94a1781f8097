"""The lineage commands: `ingest …` to collect signals, and `lineage`, `impact`, `paths`, `show`,
`diff`, `problems` to explore what was collected, as rich tables or JSON/DOT/Mermaid.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli import render
from tracelake.cli.common import (
    DbOption,
    OutputFormat,
    UserError,
    err,
    exit_with_problems,
    friendly_errors,
    new_table,
    open_service,
    out,
    parse_time,
    print_line,
    progress_bar,
    short,
)
from tracelake.cli.tabular import (
    FILE_FORMATS,
    ListFormat,
    OutputPath,
    check_list_format,
    printed,
    write_tables,
)
from tracelake.model import AssetChange, AssetRead, Confidence, EdgeVersion, Signal

if TYPE_CHECKING:
    from rich.table import Table

    from tracelake.app.abstraction import GroupedView
    from tracelake.app.service import DiffView, TraversalFilters
    from tracelake.app.views import GraphView
    from tracelake.graph.traverse import Direction
    from tracelake.store.reads import ReadCounts

ingest_app = typer.Typer(help="Collect lineage signals into the store.", no_args_is_help=True)


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
        summary = service.ingest_openlineage(sys.stdin.buffer, source="<stdin>")
    else:
        file = Path(path)
        if not file.is_file():
            raise UserError(f"{file}: no such file")
        with file.open("rb") as handle:
            summary = service.ingest_openlineage(handle, source=str(file))
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
    with progress_bar(transient=True) as progress:
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
    from tracelake.app.service import TraversalFilters

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
    output: Annotated[
        OutputFormat, typer.Option("--format", help="table, json, dot, mermaid, csv, xlsx or parquet")
    ] = OutputFormat.table,
    label: Annotated[
        list[str] | None, typer.Option(help="Only tables carrying this label (or a column that does)")
    ] = None,
    layer: Annotated[list[str] | None, typer.Option(help="Only tables in this layer (zone)")] = None,
    group_by: Annotated[
        str | None, typer.Option(help="Collapse to groups: owner, layer, kind, domain, team or product")
    ] = None,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Upstream and downstream lineage of tables or columns."""
    from tracelake.app.abstraction import GroupedView, lineage_at_level

    if up and down:
        raise UserError("give --up or --down, not both (neither means both directions)")
    direction: Direction = "upstream" if up else "downstream" if down else "both"
    filters = _filters(depth, as_of, min_confidence, signal, kind, direct_only)
    view = lineage_at_level(
        open_service(db), nodes, direction, filters, labels=label or (), layers=layer or (), group_by=group_by
    )
    if isinstance(view, GroupedView):
        print_grouped(view, output, path)
        return
    if output in FILE_FORMATS:
        graph = view.to_json()
        write_tables({"nodes": graph["nodes"], "edges": graph["edges"]}, output, path)
        return
    print_graph(view, output, title=f"{direction} of {', '.join(nodes)}")


@friendly_errors
def impact(
    nodes: Annotated[list[str], typer.Argument(help="URNs or table names you plan to change")],
    depth: Annotated[int | None, typer.Option(help="At most this many hops")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of")] = None,
    min_confidence: Annotated[Confidence | None, typer.Option()] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Downstream assets a change would touch, with their owners."""
    check_list_format(output)
    impacted = open_service(db).impact(nodes, _filters(depth, as_of, min_confidence, None, None))
    rows = [i.to_json() for i in impacted]
    if printed(output, path, {"impacted": rows}, {"impacted": rows}):
        return
    table = new_table(title=f"impact of {', '.join(nodes)}")
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


@friendly_errors
def paths(
    source: Annotated[str, typer.Argument()],
    target: Annotated[str, typer.Argument()],
    max_depth: Annotated[int, typer.Option(help="Longest path, in hops")] = 10,
    as_of: Annotated[str | None, typer.Option("--as-of")] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Every path between two nodes (how does data get from A to B?)."""
    check_list_format(output)
    found = open_service(db).paths(
        source, target, max_depth=max_depth, filters=_filters(None, as_of, None, None, None)
    )
    document = {"paths": [[e.to_json() for e in hops] for hops in found]}
    rows = [
        {"path": n, "hop": h, **e}
        for n, hops in enumerate(document["paths"], 1)
        for h, e in enumerate(hops, 1)
    ]
    if printed(output, path, document, {"paths": rows}):
        return
    for number, hops in enumerate(found, 1):
        line = " → ".join(
            [short(hops[0].source), *(f"{short(e.target)} [{e.transformation or 'table'}]" for e in hops)]
        )
        out.print(f"{number}. {line}", highlight=False)
    out.print(f"{len(found)} paths", highlight=False)


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
    facts = new_table(show_header=False, title=record.urn)
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


@friendly_errors
def diff(
    since: Annotated[str, typer.Option("--from", help="Earlier time (ISO date/time)")],
    until: Annotated[str | None, typer.Option("--to", help="Later time [default: now]")] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Edges added and removed between two times."""
    check_list_format(output)
    start = parse_time(since, "--from")
    end = parse_time(until, "--to") or datetime.now(UTC)
    assert start is not None
    if end < start:
        raise UserError("--to is before --from")
    changes: DiffView = open_service(db).diff(start, end)
    if output in FILE_FORMATS:
        rows = [{"change": "added", **e.to_json()} for e in changes.added]
        rows += [{"change": "removed", **e.to_json()} for e in changes.removed]
        write_tables({"changes": rows}, output, path)
        return
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


@friendly_errors
def problems(
    limit: Annotated[int, typer.Option(help="How many, newest first")] = 50,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Input that could not be read (bad SQL, malformed log lines), as recorded at ingest."""
    check_list_format(output)
    recorded = open_service(db).problems(limit)
    rows = [dataclasses.asdict(problem) for problem in recorded]
    if printed(output, path, {"problems": rows}, {"problems": rows}):
        return
    table = new_table(title="recorded problems")
    for column in ("source", "where", "reason"):
        table.add_column(column, overflow="fold")
    for problem in recorded:
        table.add_row(problem.source, problem.location, problem.reason)
    out.print(table)


# ---------------------------------------------------------------------- output


def edge_table(edges: list[EdgeVersion], *, title: str, with_process: bool = False) -> Table:
    table = new_table(title=title)
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
    table = new_table(title="lifecycle")
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
    table = new_table(title=f"readers ({counts.runs} reading runs by {counts.readers} readers{shown})")
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


def print_grouped(view: GroupedView, output: OutputFormat, path: Path | None) -> None:
    document = view.to_json()
    if output is OutputFormat.json:
        print(json.dumps(document, indent=2))
    elif output is OutputFormat.dot:
        sys.stdout.write(render.grouped_to_dot(view))
    elif output is OutputFormat.mermaid:
        sys.stdout.write(render.grouped_to_mermaid(view))
    elif output in FILE_FORMATS:
        write_tables({"groups": document["groups"], "edges": document["edges"]}, output, path)
    else:
        table = new_table(title=f"lineage by {view.by}")
        for column in ("group", "tables", "flows inside", "members"):
            table.add_column(column, overflow="fold")
        for group in view.groups:
            shown = ", ".join(short(m) for m in group.members[:4])
            more = f" … {len(group.members) - 4} more" if len(group.members) > 4 else ""
            mark = " *" if group.holds_start else ""
            table.add_row(
                group.value + mark, str(len(group.members)), str(group.internal_flows), shown + more
            )
        out.print(table)
        flows = new_table(title="flows between groups")
        for column in ("from", "to", "table flows"):
            flows.add_column(column)
        for source, target, count in view.flows:
            flows.add_row(source.partition(":")[2], target.partition(":")[2], str(count))
        out.print(flows)
        out.print(
            f"{len(view.groups)} groups, {len(view.flows)} flows between them (* holds a start)",
            highlight=False,
        )


def print_graph(view: GraphView, output: OutputFormat, *, title: str) -> None:
    if output is OutputFormat.json:
        sys.stdout.write(render.to_json(view) + "\n")
    elif output is OutputFormat.dot:
        sys.stdout.write(render.to_dot(view))
    elif output is OutputFormat.mermaid:
        sys.stdout.write(render.to_mermaid(view))
    else:
        nodes = new_table(title=title)
        for column in ("distance", "node", "kind", "owner"):
            nodes.add_column(column, overflow="fold")
        for node in view.nodes:
            kind = "field" if node.kind == "field" else node.type
            nodes.add_row(str(node.distance), short(node.id), kind, node.owner or "")
        out.print(nodes)
        out.print(edge_table(view.edges, title="edges"))
        out.print(f"{len(view.nodes)} nodes, {len(view.edges)} edges", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `ingest …` and the exploring commands to the main `tracelake` app."""
    app.add_typer(ingest_app, name="ingest")
    for command in (lineage, impact, paths, show, diff, problems):
        app.command()(command)
