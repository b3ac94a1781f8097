"""`tracelake entities …`, `status`, `ready`, `record` and `taint`: time-partitioned entities.

A thin typer layer over `tracelake.app.entities.EntityOperations`: load and check entity
definitions, read and record instance status, check readiness, and plan (then apply) a taint.
Times without an offset are local to the entity's time zone.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli.common import (
    DbOption,
    OutputFormat,
    UserError,
    err,
    friendly_errors,
    new_table,
    open_service,
    out,
    parse_time,
    print_error,
)
from tracelake.cli.tabular import (
    ListFormat,
    OutputPath,
    check_list_format,
    printed,
)

if TYPE_CHECKING:
    from rich.table import Table

    from tracelake.app.entities import AirflowSettings, EntityOperations
    from tracelake.store.entity_status import InstanceStatus
    from tracelake.temporal.entities import Entity
    from tracelake.temporal.planner import TaintPlan

entities_app = typer.Typer(help="Time-partitioned entity definitions.", no_args_is_help=True)


ActorOption = Annotated[str | None, typer.Option("--actor", help="Who does it [default: your login]")]
AirflowUrlOption = Annotated[
    str | None,
    typer.Option("--airflow-url", envvar="TRACELAKE_AIRFLOW_URL", help="Airflow's base URL (for clears)"),
]
AirflowTokenOption = Annotated[
    str | None, typer.Option("--airflow-token", envvar="TRACELAKE_AIRFLOW_TOKEN", help="A bearer token")
]
AirflowUserOption = Annotated[
    str | None, typer.Option("--airflow-user", envvar="TRACELAKE_AIRFLOW_USER", help="Airflow user name")
]
AirflowPasswordOption = Annotated[
    str | None,
    typer.Option("--airflow-password", envvar="TRACELAKE_AIRFLOW_PASSWORD", help="Airflow password"),
]


def airflow_settings(
    url: str | None, token: str | None, user: str | None, password: str | None
) -> AirflowSettings | None:
    from tracelake.app.entities import AirflowSettings

    return AirflowSettings(url, token=token, username=user, password=password) if url else None


def open_entities(db: str | None) -> EntityOperations:
    from tracelake.app.entities import EntityOperations

    return EntityOperations(open_service(db))


@entities_app.command("load")
@friendly_errors
def load_command(
    paths: Annotated[list[Path], typer.Argument(help="YAML files or folders of them")],
    db: DbOption = None,
) -> None:
    """Check entity definitions and store them; nothing is stored if any has a problem."""
    found = open_entities(db).load(paths)
    if not found.ok:
        for problem in found.problems:
            print_error(str(problem))
        print_error(f"nothing stored: {len(found.problems)} problem(s)")
        raise typer.Exit(1)
    out.print(f"stored {len(found.entities)} entities", highlight=False)


@entities_app.command("list")
@friendly_errors
def list_command(
    output: ListFormat = OutputFormat.table, path: OutputPath = None, db: DbOption = None
) -> None:
    """The stored entities, upstream first."""
    check_list_format(output)
    graph = open_entities(db).graph()
    rows = [graph.entities[name].to_dict() for name in graph.order]
    if printed(output, path, rows, {"entities": rows}):
        return
    table = new_table(title="entities")
    for column in ("entity", "period", "kind", "time zone", "states", "depends on", "airflow"):
        table.add_column(column, overflow="fold")
    for name in graph.order:
        entity = graph.entities[name]
        upstreams = sorted({edge.upstream.name for edge in graph.parents[name]})
        airflow = entity.airflow
        table.add_row(
            name,
            entity.period.value if entity.period else "-",
            entity.kind.value,
            entity.timezone,
            ", ".join(entity.state_names),
            ", ".join(upstreams),
            f"{airflow.dag_id}.{airflow.task_id or '*'}" if airflow else "",
        )
    out.print(table)


@entities_app.command("link")
@friendly_errors
def link_command(db: DbOption = None) -> None:
    """Check entity dependencies against observed lineage; exit 1 if a flow is not covered."""
    findings = open_entities(db).link()
    if not findings:
        out.print("every observed flow between entities is a declared dependency", highlight=False)
        return
    table = new_table(title="entities against lineage")
    for column in ("finding", "upstream", "downstream", "detail", "suggestion"):
        table.add_column(column, overflow="fold")
    for finding in findings:
        table.add_row(finding.kind, finding.upstream, finding.downstream, finding.detail, finding.suggestion)
    out.print(table)
    if any(finding.kind == "missing dependency" for finding in findings):
        raise typer.Exit(1)


def status_command(
    entity: Annotated[str, typer.Argument(help="The entity")],
    at: Annotated[str | None, typer.Option(help="As the table was at this moment (ISO)")] = None,
    start: Annotated[str | None, typer.Option("--from", help="Instances from this time")] = None,
    end: Annotated[str | None, typer.Option("--to", help="Instances before this time")] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """The status of an entity's instances: states held, valid or tainted, who, when and why."""
    from tracelake.app.entities import status_json

    check_list_format(output)
    subject, rows = open_entities(db).status(entity, start=start, end=end, at=parse_time(at, "--at"))
    listed = [status_json(subject, row) for row in rows]
    if printed(output, path, listed, {"instances": listed}):
        return
    if not rows:
        out.print(f"no instance of {entity} on record" + (f" at {at}" if at else ""), highlight=False)
        return
    out.print(_status_table(subject, rows, f"{entity}" + (f" as of {at}" if at else "")))


def _status_table(entity: Entity, rows: list[InstanceStatus], title: str) -> Table:
    table = new_table(title=title)
    for column in ("instance", "states", "valid", "reason", "by", "changed", "run"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            entity.label(row.start),
            ", ".join(row.states) or "-",
            "yes" if row.valid else "[red]no[/red]",
            row.reason or "",
            row.actor,
            row.changed_at.isoformat(timespec="seconds"),
            row.run_id or "",
        )
    return table


def record_command(
    entity: Annotated[str, typer.Argument(help="The entity")],
    at: Annotated[str, typer.Option(help="A moment inside the instance (ISO)")],
    state: Annotated[str, typer.Option(help="The state the instance now holds")] = "completed",
    run_id: Annotated[str | None, typer.Option("--run-id", help="The run that produced it")] = None,
    actor: ActorOption = None,
    db: DbOption = None,
) -> None:
    """Record that an instance now holds a state (what a successful run reports)."""
    subject, row = open_entities(db).record(
        entity, at, state, actor=actor or getpass.getuser(), run_id=run_id
    )
    out.print(f"{entity} {subject.label(row.start)}: {', '.join(row.states)}", highlight=False)


def ready_command(
    entity: Annotated[str, typer.Argument(help="The entity")],
    at: Annotated[str, typer.Option(help="A moment inside the instance (ISO)")],
    state: Annotated[str, typer.Option(help="The state to produce")] = "completed",
    db: DbOption = None,
) -> None:
    """Whether an instance's dependencies for a state are there; exit 1 and list them if not."""
    graph, readiness = open_entities(db).ready(entity, at, state)
    label = graph.entities[entity].label(readiness.start)
    if readiness.ready:
        out.print(f"{entity} {label} is ready to be {state}", highlight=False)
        return
    table = new_table(title=f"{entity} {label} is not ready to be {state}")
    for column in ("upstream", "instance", "problem", "detail"):
        table.add_column(column, overflow="fold")
    for blocker in readiness.blockers:
        instance = graph.entities[blocker.entity].label(blocker.start)
        table.add_row(blocker.entity, instance, blocker.problem, blocker.detail)
    out.print(table)
    raise typer.Exit(1)


def taint_command(
    entity: Annotated[str, typer.Argument(help="The entity whose data is wrong")],
    start: Annotated[str, typer.Option("--from", help="Start of the wrong data (ISO)")],
    end: Annotated[str, typer.Option("--to", help="End of the wrong data, exclusive (ISO)")],
    reason: Annotated[str, typer.Option(help="Why: kept with every instance it taints")],
    until: Annotated[
        str | None, typer.Option(help="Plan instances that have ended by then [default: now]")
    ] = None,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Mark the instances in the status table and clear Airflow's tasks")
    ] = False,
    actor: ActorOption = None,
    airflow_url: AirflowUrlOption = None,
    airflow_token: AirflowTokenOption = None,
    airflow_user: AirflowUserOption = None,
    airflow_password: AirflowPasswordOption = None,
    db: DbOption = None,
) -> None:
    """Plan what to rebuild downstream of wrong data; a dry run unless --apply."""
    check_list_format(output)
    who = actor or getpass.getuser()
    airflow = airflow_settings(airflow_url, airflow_token, airflow_user, airflow_password)
    taint = open_entities(db).taint(
        entity,
        start,
        end,
        reason=reason,
        until=parse_time(until, "--until"),
        apply=apply,
        actor=who,
        airflow=airflow,
    )
    plan = taint.plan
    if not printed(output, path, plan.to_json(), {"plan": plan.to_json()}):
        _print_plan(plan, reason)
    if taint.applied is None:
        if output is OutputFormat.table:
            err.print("dry run: nothing changed (add --apply to mark the instances)", highlight=False)
        return
    report = taint.applied
    err.print(
        f"applied: {report.rebuilt} instance(s) marked for rebuild, {report.downgraded} downgraded",
        highlight=False,
    )
    if taint.airflow_error:
        raise UserError(f"the status table is marked, but clearing Airflow failed: {taint.airflow_error}")
    cleared = taint.cleared
    if cleared is None:
        err.print("no Airflow configured (--airflow-url): no task cleared", highlight=False)
        return
    for index, request in enumerate(cleared.requests):
        tasks = ", ".join(request.task_ids) or "every task"
        err.print(
            f"cleared {len(cleared.cleared[index])} task instance(s) of {request.dag_id} ({tasks}), "
            f"logical dates {request.start.isoformat()} … {request.end.isoformat()}",
            highlight=False,
        )
    if cleared.unbound:
        err.print(f"no Airflow task bound to: {', '.join(cleared.unbound)}", highlight=False)


def reconcile_command(
    start: Annotated[str, typer.Option("--from", help="Instances from this time (ISO, UTC if no offset)")],
    end: Annotated[str, typer.Option("--to", help="Instances before this time")],
    airflow_url: AirflowUrlOption = None,
    airflow_token: AirflowTokenOption = None,
    airflow_user: AirflowUserOption = None,
    airflow_password: AirflowPasswordOption = None,
    db: DbOption = None,
) -> None:
    """Compare the status table with Airflow's task instances; exit 1 and list the drift."""
    airflow = airflow_settings(airflow_url, airflow_token, airflow_user, airflow_password)
    if airflow is None:
        raise UserError("reconcile needs Airflow: give --airflow-url (or TRACELAKE_AIRFLOW_URL)")
    graph, drifts = open_entities(db).reconcile(start, end, airflow)
    if not drifts:
        out.print("the status table and Airflow agree", highlight=False)
        return
    table = new_table(title="drift between the status table and Airflow")
    for column in ("entity", "instance", "airflow", "problem"):
        table.add_column(column, overflow="fold")
    for drift in drifts:
        label = graph.entities[drift.entity].label(drift.start)
        table.add_row(drift.entity, label, drift.airflow_state or "-", drift.problem)
    out.print(table)
    raise typer.Exit(1)


def _print_plan(plan: TaintPlan, reason: str) -> None:
    table = new_table(title=f"taint {plan.entity} [{plan.start}, {plan.end}): {reason}")
    for column in ("#", "entity", "from", "to", "instances", "action", "states", "path"):
        table.add_column(column, overflow="fold")
    for number, step in enumerate(plan.steps, 1):
        action = step.action if step.action == "rebuild" else f"downgrade (keeps {', '.join(step.keeps)})"
        table.add_row(
            str(number),
            step.entity,
            step.start,
            step.end,
            str(step.instances),
            action,
            ", ".join(step.states),
            " → ".join(step.path),
        )
    out.print(table)
    rebuilt = sum(step.instances for step in plan.steps if step.action == "rebuild")
    downgraded = sum(step.instances for step in plan.steps if step.action == "downgrade")
    out.print(
        f"{len(plan.entities())} entities: {rebuilt} instance(s) to rebuild, {downgraded} to downgrade",
        highlight=False,
    )
    if plan.static_reached:
        static = ", ".join(plan.static_reached)
        out.print(f"static entities downstream, not rebuilt: {static}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the entity commands to the main `tracelake` app."""
    app.add_typer(entities_app, name="entities")
    for name, command in (
        ("status", status_command),
        ("record", record_command),
        ("ready", ready_command),
        ("taint", taint_command),
        ("reconcile", reconcile_command),
    ):
        app.command(name)(friendly_errors(command))
