"""The privacy engineer's commands: `label`, `propagate`, `discover`, `check` and `hot`.

A thin typer layer over `tracelake.app.review.Review` (labels, propagation, discovery sessions,
policies, hotness): declare labels, spread them, review their flows in sessions, check policies
against the graph, and rank assets by reliance.
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.app.whole_graph import Engine
from tracelake.cli.common import (
    DbOption,
    OutputFormat,
    UserError,
    friendly_errors,
    new_table,
    open_service,
    out,
)
from tracelake.cli.tabular import (
    ListFormat,
    OutputPath,
    check_list_format,
    printed,
)
from tracelake.model import Confidence, Transformation

if TYPE_CHECKING:
    from tracelake.app.review import Review
    from tracelake.graph.discovery import Session
    from tracelake.graph.policy import Violation

EngineOption = Annotated[
    Engine, typer.Option("--engine", help="memory: this process's index; spark: a Spark job over the lake")
]
LakeOption = Annotated[
    Path | None,
    typer.Option(
        "--lake",
        help="The lake --engine spark exports to and reads [default: $TRACELAKE_LAKE or .tracelake/lake]",
    ),
]

label_app = typer.Typer(help="Labels declared on assets and fields, and those inferred from them.")


@label_app.command("add")
@friendly_errors
def add_command(
    node: Annotated[str, typer.Argument(help="An asset or field (a URN or a table name: db.tbl#col)")],
    labels: Annotated[list[str], typer.Argument(help="Labels to declare, e.g. religion identity.user_id")],
    db: DbOption = None,
) -> None:
    """Declare labels on a node."""
    urn, held = _review(db).declare(node, labels)
    out.print(f"{urn}: {', '.join(held)}", highlight=False)


@label_app.command("remove")
@friendly_errors
def remove_command(
    node: Annotated[str, typer.Argument(help="An asset or field")],
    labels: Annotated[list[str], typer.Argument(help="Labels to take off")],
    db: DbOption = None,
) -> None:
    """Take declared labels off a node."""
    urn, held = _review(db).undeclare(node, labels)
    out.print(f"{urn}: {', '.join(held) or 'no declared label'}", highlight=False)


@label_app.command("list")
@friendly_errors
def list_command(
    label: Annotated[str | None, typer.Option(help="Only this label")] = None,
    node: Annotated[str | None, typer.Option(help="Only this node")] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Declared and inferred labels, with where each inferred one came from."""
    check_list_format(output)
    found = _review(db).assignments(node=node, label=label)
    rows = [
        {"label": a.label, "node": a.urn, "provenance": a.provenance, "from": a.source, "path": list(a.path)}
        for a in found
    ]
    if printed(output, path, {"labels": rows}, {"labels": rows}):
        return
    table = new_table(title="labels")
    for column in ("label", "node", "provenance", "from", "hops"):
        table.add_column(column, overflow="fold")
    for item in found:
        hops = str(len(item.path) - 1) if item.provenance != "declared" else ""
        source = item.source if item.provenance != "declared" else ""
        table.add_row(item.label, item.urn, item.provenance, source, hops)
    out.print(table)


def propagate_command(
    min_confidence: Annotated[
        Confidence, typer.Option("--min-confidence", help="Edges below it do not carry labels")
    ] = Confidence.MEDIUM,
    carry: Annotated[
        list[Transformation] | None,
        typer.Option("--carry", help="Column transformations that carry a label (repeatable)"),
    ] = None,
    stop_kind: Annotated[
        list[str] | None, typer.Option("--stop-kind", help="Asset kinds a label reaches but does not leave")
    ] = None,
    stop_zone: Annotated[
        list[str] | None, typer.Option("--stop-zone", help="URN prefixes a label reaches but does not leave")
    ] = None,
    max_depth: Annotated[int | None, typer.Option("--max-depth", help="Hops at most")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", help="Only these labels")] = None,
    engine: EngineOption = Engine.memory,
    lake: LakeOption = None,
    db: DbOption = None,
) -> None:
    """Spread declared labels downstream and store what they reach, with the path of each."""
    if max_depth is not None and max_depth < 1:
        raise UserError("--max-depth must be at least 1")
    outcome = _review(db).propagate(
        min_confidence=min_confidence,
        carry=carry or None,
        stop_kinds=stop_kind or (),
        stop_zones=stop_zone or (),
        max_depth=max_depth,
        only=set(label or ()),
        engine=engine,
        lake=lake,
        actor=getpass.getuser(),
    )
    changes, declared = outcome.changes, outcome.declared
    table = new_table(title="propagation")
    for column in ("label", "declared on", "inferred on"):
        table.add_column(column)
    for name, reached in outcome.reached.items():
        sources = sum(1 for names in declared.values() if name in names)
        table.add_row(name, str(sources), str(reached))
    out.print(table)
    out.print(
        f"{len(changes.added)} label(s) added, {len(changes.removed)} removed, {changes.kept} unchanged",
        highlight=False,
    )


SessionArgument = Annotated[str, typer.Argument(help="The session id")]
discover_app = typer.Typer(help="Discovery sessions: review where labelled data flows, round by round.")


def _print_session(session: Session, new: list[str] | None = None) -> None:
    table = new_table(title=f"{session.id}: {session.label}, round {session.round}")
    for column in ("node", "state", "round", "from", "reason"):
        table.add_column(column, overflow="fold")
    for urn, member in sorted(session.members.items(), key=lambda item: (item[1].round, item[0])):
        mark = " (new)" if new and urn in new else ""
        table.add_row(urn + mark, member.state, str(member.round), ", ".join(member.via), member.reason)
    out.print(table)
    if session.stable:
        out.print(f"stable: {len(session.confirmed)} node(s) confirmed", highlight=False)
    else:
        then = f"then `tracelake discover next {session.id}`"
        out.print(f"{len(session.candidates)} candidate(s) to decide; {then}", highlight=False)


def _review(db: str | None) -> Review:
    from tracelake.app.review import Review

    return Review(open_service(db))


@discover_app.command("start")
@friendly_errors
def discover_start(
    label: Annotated[str, typer.Option(help="The label to follow, e.g. religion")],
    source: Annotated[
        list[str] | None, typer.Option("--from", help="Start here [default: every node declaring the label]")
    ] = None,
    threshold: Annotated[
        Confidence, typer.Option(help="Flows below it stop the walk: their targets become candidates")
    ] = Confidence.HIGH,
    db: DbOption = None,
) -> None:
    """Start a session and run its first round."""
    started = _review(db).start(label, source, threshold=threshold, actor=getpass.getuser())
    _print_session(started.session, started.new)


@discover_app.command("next")
@friendly_errors
def discover_next(session_id: SessionArgument, db: DbOption = None) -> None:
    """Run the next round from the candidates included since the last one."""
    done = _review(db).next_round(session_id, actor=getpass.getuser())
    _print_session(done.session, done.new)


@discover_app.command("decide")
@friendly_errors
def discover_decide(
    session_id: SessionArgument,
    node: Annotated[str, typer.Argument(help="A candidate to include, or any non-source node to exclude")],
    include: Annotated[bool, typer.Option("--include/--exclude", help="Include or exclude it")],
    reason: Annotated[str, typer.Option(help="Why: kept with the decision")],
    db: DbOption = None,
) -> None:
    """Include or exclude a node; an exclusion takes out what was reached only through it."""
    urn, gone = _review(db).decide(session_id, node, include, reason=reason, actor=getpass.getuser())
    verb = "included" if include else "excluded"
    out.print(f"{urn} {verb}" + (f"; also excluded: {', '.join(gone)}" if gone else ""), highlight=False)


@discover_app.command("rule")
@friendly_errors
def discover_rule(
    session_id: SessionArgument,
    include_kind: Annotated[
        list[str] | None, typer.Option("--include-kind", help="Include candidates of this asset kind")
    ] = None,
    exclude_zone: Annotated[
        list[str] | None, typer.Option("--exclude-zone", help="Exclude candidates under this URN prefix")
    ] = None,
    name: Annotated[str, typer.Option(help="The rule's name, kept with each decision")] = "rule",
    db: DbOption = None,
) -> None:
    """Decide the candidates a heuristic rule covers (exclusions cascade); the rest wait."""
    session, decided = _review(db).apply_rule(
        session_id,
        include_kinds=include_kind or (),
        exclude_zones=exclude_zone or (),
        name=name,
        actor=getpass.getuser(),
    )
    out.print(
        f"included {len(decided['included'])}, excluded {len(decided['excluded'])}; "
        f"{len(session.candidates)} candidate(s) left",
        highlight=False,
    )


@discover_app.command("show")
@friendly_errors
def discover_show(session_id: SessionArgument, db: DbOption = None) -> None:
    """A session's nodes, states, flows and decisions."""
    _print_session(_review(db).session(session_id))


@discover_app.command("export")
@friendly_errors
def discover_export(
    session_id: SessionArgument,
    confirm: Annotated[
        bool, typer.Option("--confirm", help="Also store the set as confirmed labels")
    ] = False,
    db: DbOption = None,
) -> None:
    """The confirmed set and the flows that justify it, as JSON."""
    document = _review(db).export(session_id, confirm=confirm, actor=getpass.getuser())
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def check_command(
    policies: Annotated[Path, typer.Argument(help="A YAML file of policies")],
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    engine: EngineOption = Engine.memory,
    lake: LakeOption = None,
    db: DbOption = None,
) -> None:
    """Check policies against the lineage graph; exit 1 when one is violated (a CI gate)."""
    check_list_format(output)
    if not policies.is_file():
        raise UserError(f"{policies}: no such file")
    review = _review(db)
    loaded, problems = review.policies_from_file(policies)
    if problems:
        raise UserError("; ".join(str(problem) for problem in problems))
    violations = review.check(loaded, engine=engine, lake=lake)
    document = [{**vars(v), "path": list(v.path)} for v in violations]
    if not printed(output, path, document, {"violations": document}):
        _print_violations(violations, len(loaded))
    if violations:
        raise typer.Exit(1)


def _print_violations(violations: list[Violation], policies: int) -> None:
    if not violations:
        out.print(f"{policies} policies, no violation", highlight=False)
        return
    table = new_table(title="policy violations")
    for column in ("policy", "kind", "violation", "path"):
        table.add_column(column, overflow="fold")
    for v in violations:
        table.add_row(v.policy, v.kind, v.message, " → ".join(v.path))
    out.print(table)


def hot_command(
    limit: Annotated[int, typer.Option(help="How many assets")] = 20,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    engine: EngineOption = Engine.memory,
    lake: LakeOption = None,
    db: DbOption = None,
) -> None:
    """The hottest assets: PageRank over what depends on what, reads voting too (the most
    relied-upon first), with how many runs read each without writing from it, and by how many readers."""
    check_list_format(output)
    ranked = _review(db).hottest(limit, engine=engine, lake=lake)
    rows = [
        {"rank": n, "asset": h.asset, "score": h.score, "reading_runs": h.reading_runs, "readers": h.readers}
        for n, h in enumerate(ranked, 1)
    ]
    if printed(output, path, {"hottest": rows}, {"hottest": rows}):
        return
    table = new_table(title="hottest assets")
    for column in ("#", "asset", "score", "reading runs", "readers"):
        table.add_column(column)
    for number, hot in enumerate(ranked, 1):
        table.add_row(str(number), hot.asset, f"{hot.score:.4f}", str(hot.reading_runs), str(hot.readers))
    out.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(label_app, name="label")
    app.add_typer(discover_app, name="discover")
    app.command("propagate")(friendly_errors(propagate_command))
    app.command("check")(friendly_errors(check_command))
    app.command("hot")(friendly_errors(hot_command))
