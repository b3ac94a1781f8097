"""`tracelake label …` and `tracelake propagate`: declared labels, and the labels they spread to.

A thin typer layer over `tracelake.store.labels.LabelStore` and `tracelake.graph.propagate`.
"""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.table import Table

from tracelake.cli import DbOption, UserError, friendly_errors, open_service, out
from tracelake.graph.propagate import CARRYING, PropagationRules, propagate
from tracelake.model import Confidence, Transformation
from tracelake.store.labels import LabelStore

label_app = typer.Typer(help="Labels declared on assets and fields, and those inferred from them.")


@label_app.command("add")
@friendly_errors
def add_command(
    node: Annotated[str, typer.Argument(help="An asset or field (a URN or a table name: db.tbl#col)")],
    labels: Annotated[list[str], typer.Argument(help="Labels to declare, e.g. religion identity.user_id")],
    db: DbOption = None,
) -> None:
    """Declare labels on a node."""
    service = open_service(db)
    [urn] = service.resolve([node])
    held = LabelStore(service.store).declare(urn, labels)
    out.print(f"{urn}: {', '.join(held)}", highlight=False)


@label_app.command("remove")
@friendly_errors
def remove_command(
    node: Annotated[str, typer.Argument(help="An asset or field")],
    labels: Annotated[list[str], typer.Argument(help="Labels to take off")],
    db: DbOption = None,
) -> None:
    """Take declared labels off a node."""
    service = open_service(db)
    [urn] = service.resolve([node])
    held = LabelStore(service.store).undeclare(urn, labels)
    out.print(f"{urn}: {', '.join(held) or 'no declared label'}", highlight=False)


@label_app.command("list")
@friendly_errors
def list_command(
    label: Annotated[str | None, typer.Option(help="Only this label")] = None,
    node: Annotated[str | None, typer.Option(help="Only this node")] = None,
    db: DbOption = None,
) -> None:
    """Declared and inferred labels, with where each inferred one came from."""
    service = open_service(db)
    urn = service.resolve([node])[0] if node else None
    found = LabelStore(service.store).assignments(urn=urn, label=label)
    table = Table(title="labels")
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
    db: DbOption = None,
) -> None:
    """Spread declared labels downstream and store what they reach, with the path of each."""
    if max_depth is not None and max_depth < 1:
        raise UserError("--max-depth must be at least 1")
    service = open_service(db)
    labels = LabelStore(service.store)
    wanted = set(label or ())
    declared = {
        urn: [name for name in names if not wanted or name in wanted]
        for urn, names in labels.declared().items()
    }
    declared = {urn: names for urn, names in declared.items() if names}
    if not declared:
        raise UserError("no declared label to propagate: declare some with `tracelake label add NODE LABEL`")
    rules = PropagationRules(
        min_confidence=min_confidence,
        transformations=frozenset(carry) if carry else CARRYING,
        stop_kinds=frozenset(stop_kind or ()),
        stop_zones=tuple(stop_zone or ()),
        max_depth=max_depth,
    )
    result = propagate(service.index(), declared, rules)
    changes = labels.save_inferred(result, actor=getpass.getuser())
    table = Table(title="propagation")
    for column in ("label", "declared on", "inferred on"):
        table.add_column(column)
    for name, walk in result.walks.items():
        sources = sum(1 for names in declared.values() if name in names)
        table.add_row(name, str(sources), str(len(walk.reached)))
    out.print(table)
    out.print(
        f"{len(changes.added)} label(s) added, {len(changes.removed)} removed, {changes.kept} unchanged",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(label_app, name="label")
    app.command("propagate")(friendly_errors(propagate_command))
