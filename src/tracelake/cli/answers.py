"""The everyday questions: `why` (what changed upstream of an asset that looks wrong)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli.common import (
    DbOption,
    OutputFormat,
    UserError,
    friendly_errors,
    new_table,
    open_service,
    out,
    parse_time,
    short,
)

if TYPE_CHECKING:
    from tracelake.app.root_cause import Cause


@friendly_errors
def why(
    node: Annotated[str, typer.Argument(help="The table (or column) that looks wrong")],
    since: Annotated[
        str | None, typer.Option(help="Start of the window (ISO date/time) [default: 7 days ago]")
    ] = None,
    until: Annotated[str | None, typer.Option(help="End of the window [default: now]")] = None,
    depth: Annotated[int | None, typer.Option(help="At most this many hops upstream")] = None,
    limit: Annotated[int, typer.Option(help="Show the first N causes")] = 20,
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """What changed upstream of a table within a window, most likely cause first: failed or slow
    runs, replaced process versions, schema changes, new or vanished inputs, tainted instances."""
    from tracelake.app.root_cause import why as root_cause

    if output not in (OutputFormat.table, OutputFormat.json):
        raise UserError("--format must be table or json")
    view = root_cause(
        open_service(db),
        node,
        since=parse_time(since, "--since", day_starts=True),
        until=parse_time(until, "--until"),
        depth=depth,
        limit=limit,
    )
    if output is OutputFormat.json:
        print(json.dumps(view.to_json(), indent=2))
        return
    window = f"{view.since:%Y-%m-%d %H:%M} – {view.until:%Y-%m-%d %H:%M} UTC"
    walked = f"{view.upstream_nodes} upstream nodes and {view.upstream_processes} processes"
    if not view.causes:
        out.print(f"nothing changed upstream of {short(view.asset)}, {window} ({walked})", highlight=False)
        return
    table = new_table(title=f"what changed upstream of {short(view.asset)}, {window}")
    for column in ("#", "score", "what", "where", "when", "hops", "detail", "route"):
        table.add_column(column, overflow="fold")
    for rank, cause in enumerate(view.causes[: view.shown], 1):
        table.add_row(
            str(rank),
            f"{cause.score:.2f}",
            cause.kind.replace("_", " "),
            short(cause.subject),
            f"{cause.at:%Y-%m-%d %H:%M}",
            str(cause.distance),
            cause.detail,
            _route(cause),
        )
    out.print(table)
    shown = min(view.shown, len(view.causes))
    out.print(f"{len(view.causes)} changes over {walked}; {shown} shown", highlight=False)


def _route(cause: Cause) -> str:
    """From where the change happened down to the asset: `a → b → c`."""
    if not cause.route:
        return ""
    return " → ".join([short(cause.route[0].source), *(short(hop.target) for hop in cause.route)])


def register(app: typer.Typer) -> None:
    app.command()(why)
