"""The everyday questions: `why` (what changed upstream of an asset that looks wrong)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli.common import (
    DbOption,
    ExitCode,
    OutputFormat,
    UserError,
    friendly_errors,
    new_table,
    open_service,
    out,
    parse_time,
    print_error,
    short,
)
from tracelake.cli.tabular import (
    ListFormat,
    OutputPath,
    check_list_format,
    export,
    printed,
)

if TYPE_CHECKING:
    from rich.table import Table

    from tracelake.app.coverage import Share
    from tracelake.app.critical_path import PathStep
    from tracelake.app.root_cause import Cause

deadlines_app = typer.Typer(help="By when tables must be ready each day.", no_args_is_help=True)


@friendly_errors
def why(
    node: Annotated[str, typer.Argument(help="The table (or column) that looks wrong")],
    since: Annotated[
        str | None, typer.Option(help="Start of the window (ISO date/time) [default: 7 days ago]")
    ] = None,
    until: Annotated[str | None, typer.Option(help="End of the window [default: now]")] = None,
    depth: Annotated[int | None, typer.Option(help="At most this many hops upstream")] = None,
    limit: Annotated[int, typer.Option(help="Show the first N causes")] = 20,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """What changed upstream of a table within a window, most likely cause first: failed or slow
    runs, replaced process versions, schema changes, new or vanished inputs, tainted instances."""
    from tracelake.app.root_cause import why as root_cause

    check_list_format(output)
    view = root_cause(
        open_service(db),
        node,
        since=parse_time(since, "--since", day_starts=True),
        until=parse_time(until, "--until"),
        depth=depth,
        limit=limit,
    )
    document = view.to_json()
    if printed(output, path, document, {"causes": document["causes"]}):
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


def parse_day(text: str | None, option: str) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option} {text!r} is not an ISO date (e.g. 2024-03-11)") from None


@friendly_errors
def critical_path(
    node: Annotated[str, typer.Argument(help="The table")],
    day: Annotated[str, typer.Option("--date", help="The day it became ready (ISO date)")],
    timezone: Annotated[str, typer.Option(help="The day's time zone")] = "UTC",
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """The chain of upstream runs that decided when a table became ready on a day: each run
    waited for the one before it; beside each, its usual length and how late it was."""
    from tracelake.app.critical_path import critical_path as find_path

    check_list_format(output)
    on = parse_day(day, "--date")
    assert on is not None
    view = find_path(open_service(db), node, on, timezone)
    document = view.to_json()
    if printed(output, path, document, {"steps": document["steps"]}):
        return
    if view.ready_at is None:
        out.print(f"no run that writes {short(view.asset)} completed on {on} ({timezone})", highlight=False)
        return
    out.print(_steps_table(view.steps, f"critical path of {short(view.asset)} on {on} ({timezone})"))
    out.print(f"ready at {view.ready_at.isoformat()}, after {len(view.steps)} runs", highlight=False)


def _steps_table(steps: list[PathStep], title: str) -> Table:
    table = new_table(title=title)
    for column in ("wrote", "process", "started", "ready", "waited", "took (usual)", "late", "added"):
        table.add_column(column, overflow="fold")
    for step in steps:
        table.add_row(
            short(step.asset),
            short(step.process),
            f"{step.started_at:%Y-%m-%d %H:%M}" if step.started_at else "",
            f"{step.ready_at:%Y-%m-%d %H:%M}",
            _minutes(step.waited_seconds),
            f"{_minutes(step.took_seconds)} ({_minutes(step.usual_seconds)})" if step.took_seconds else "",
            _minutes(step.late_seconds, signed=True),
            _minutes(step.added_seconds, signed=True),
        )
    return table


def _minutes(seconds: float | None, *, signed: bool = False) -> str:
    if seconds is None:
        return ""
    return f"{seconds / 60:+.0f} min" if signed else f"{seconds / 60:.0f} min"


@deadlines_app.command("load")
@friendly_errors
def load_deadlines(
    paths: Annotated[list[Path], typer.Argument(help="YAML files or folders of them")],
    db: DbOption = None,
) -> None:
    """Check deadline files and store their deadlines; nothing is stored if any has a problem."""
    from tracelake.app.deadlines import DeadlineError, DeadlineOperations

    try:
        stored = DeadlineOperations(open_service(db)).load(paths)
    except DeadlineError as error:
        for problem in error.problems:
            print_error(str(problem))
        print_error(f"nothing stored: {len(error.problems)} problem(s)")
        raise typer.Exit(ExitCode.NO) from None
    out.print(f"stored {len(stored)} deadlines", highlight=False)


@deadlines_app.command("check")
@friendly_errors
def check_deadlines(
    day: Annotated[str | None, typer.Option("--date", help="One day [default: today, UTC]")] = None,
    first: Annotated[str | None, typer.Option("--from", help="First day of a range")] = None,
    last: Annotated[str | None, typer.Option("--to", help="Last day of a range")] = None,
    margin: Annotated[int, typer.Option(help="Minutes to spare below which a deadline is at risk")] = 30,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Each deadline on each day: met, at risk, missed or pending, and the upstream runs that put
    it at risk. Exit 1 when one was missed."""
    from tracelake.app.deadlines import DeadlineOperations
    from tracelake.model import utcnow

    check_list_format(output)
    if day is not None and (first is not None or last is not None):
        raise UserError("give --date, or --from and --to, not both")
    if margin < 0:
        raise UserError("--margin must be 0 or more")
    start = parse_day(day or first, "--date" if day else "--from") or utcnow().date()
    end = parse_day(last, "--to") or (start if first is None else utcnow().date())
    checks = DeadlineOperations(open_service(db)).check(start, end, margin=timedelta(minutes=margin))
    rows = [check.to_json() for check in checks]
    if not printed(output, path, {"checks": rows}, {"checks": rows}):
        table = new_table(title=f"deadlines, {start} to {end}" if end != start else f"deadlines on {start}")
        for column in ("date", "table", "due", "ready", "status", "to spare", "put at risk by"):
            table.add_column(column, overflow="fold")
        for check in checks:
            table.add_row(
                check.day.isoformat(),
                short(check.asset or check.deadline.asset),
                f"{check.due:%H:%M} {check.deadline.timezone}",
                f"{check.ready_at.astimezone(check.due.tzinfo):%H:%M}" if check.ready_at else "",
                check.status.replace("_", " "),
                _minutes(check.margin_seconds, signed=True),
                ", ".join(
                    f"{short(s.process)} ({_minutes(s.added_seconds, signed=True)})" for s in check.culprits
                ),
            )
        out.print(table)
        counts = ", ".join(
            f"{sum(c.status == status for c in checks)} {status.replace('_', ' ')}"
            for status in ("met", "at_risk", "missed", "pending", "unknown_asset")
        )
        out.print(f"{len(checks)} checked: {counts}", highlight=False)
    if any(check.status == "missed" for check in checks):
        raise typer.Exit(ExitCode.NO)


@friendly_errors
def coverage(
    at: Annotated[str | None, typer.Option(help="As it was then (ISO date/time) [default: now]")] = None,
    history: Annotated[int, typer.Option(help="Also this many earlier points, --every apart")] = 0,
    every: Annotated[int, typer.Option(help="Days between the history's points")] = 7,
    output: Annotated[OutputFormat, typer.Option("--format", help="table or json")] = OutputFormat.table,
    db: DbOption = None,
) -> None:
    """How much of the lake lineage covers: assets and columns with upstream lineage (by signal,
    layer and owner), tables with table- but no column-level lineage, assets read but never
    written and written but never read, and how long each signal's lineage takes to arrive."""
    from tracelake.app.coverage import coverage as measure

    if output not in (OutputFormat.table, OutputFormat.json):
        raise UserError("--format must be table or json")
    view = measure(open_service(db), at=parse_time(at, "--at"), points=history, every=timedelta(days=every))
    if output is OutputFormat.json:
        print(json.dumps(view.to_json(), indent=2))
        return
    out.print(f"coverage at {view.at.isoformat(timespec='seconds')}", highlight=False)
    shares = new_table(title="with upstream lineage")
    for column in ("of", "covered", "total", "share"):
        shares.add_column(column)
    rows = [
        ("assets", view.assets),
        ("columns", view.columns),
        ("columns of those assets", view.columns_of_written),
    ]
    rows += [(f"assets, by {signal}", share) for signal, share in view.by_signal.items()]
    rows += [(f"layer {layer}", share) for layer, share in view.by_layer.items()]
    rows += [(f"owner {owner}", share) for owner, share in view.by_owner.items()]
    for label, share in rows:
        shares.add_row(label, f"{share.covered:,}", f"{share.total:,}", _percent(share))
    out.print(shares)
    for label, listed in (
        ("table-level lineage only", view.table_only),
        ("read, never written", view.read_never_written),
        ("written, never read", view.written_never_read),
        ("no lineage at all", view.no_lineage),
    ):
        names = ", ".join(short(name) for name in listed.names[:5])
        more = f" and {listed.count - 5:,} more" if listed.count > 5 else ""
        out.print(f"{label}: {listed.count:,}" + (f" ({names}{more})" if names else ""), highlight=False)
    if view.timeliness:
        lags = new_table(title="timeliness: from true to stored")
        for column in ("signal", "observations", "median", "p90", "max"):
            lags.add_column(column)
        for signal, lag in view.timeliness.items():
            lags.add_row(
                signal, f"{lag.observations:,}", _seconds(lag.median_seconds), _seconds(lag.p90_seconds),
                _seconds(lag.max_seconds),
            )  # fmt: skip
        out.print(lags)
    if len(view.history) > 1:
        past = new_table(title="history")
        for column in ("at", "assets", "columns"):
            past.add_column(column)
        for point in view.history:
            past.add_row(point["at"][:16], _fraction(point["assets"]), _fraction(point["columns"]))
        out.print(past)


def _percent(share: Share) -> str:
    return f"{share.share:.1%}" if share.share is not None else "-"


def _fraction(share: dict[str, int | float | None]) -> str:
    value = share["share"]
    return f"{share['covered']:,}/{share['total']:,}" + (f" ({value:.1%})" if value is not None else "")


def _seconds(value: float) -> str:
    return (
        f"{value:.1f} s"
        if value < 120
        else f"{value / 60:.1f} min"
        if value < 7200
        else f"{value / 3600:.1f} h"
    )


def register(app: typer.Typer) -> None:
    app.command()(why)
    app.command()(export)
    app.command("critical-path")(critical_path)
    app.add_typer(deadlines_app, name="deadlines")
    app.command()(coverage)
