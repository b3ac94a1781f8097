"""`tracelake privacy …`: identity indexes, privacy targets, and access/delete requests.

A thin typer layer over `tracelake.app.privacy.PrivacyOperations`: each command parses its
options, calls one operation and prints a table. Requests go through the store's queue, so a command line
request and a batch run leave the same audit trail; `access`/`delete` queue and then run
at once unless told `--queue-only`.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.app.limits import DEFAULT_FPP, MAX_ID_LENGTH, MAX_IDS
from tracelake.cli.common import (
    DbOption,
    OutputFormat,
    UserError,
    err,
    friendly_errors,
    new_table,
    open_service,
    out,
    progress_bar,
)
from tracelake.cli.tabular import ListFormat, OutputPath, check_list_format, printed
from tracelake.model.textfile import read_text

if TYPE_CHECKING:
    from tracelake.app.privacy import PrivacyOperations
    from tracelake.privacy.runner import RunReport, SubJob

privacy_app = typer.Typer(
    help="Identity indexes and GDPR/CCPA access and delete requests.", no_args_is_help=True
)

IdentityOption = Annotated[
    list[str], typer.Option("--identity", "-i", help="An identity column (repeatable)")
]
UserOption = Annotated[str | None, typer.Option("--user", help="One user id")]
UsersOption = Annotated[Path | None, typer.Option("--users", help="A file with one user id a line")]
DatasetOption = Annotated[
    list[str] | None, typer.Option("--dataset", help="Only this dataset (repeatable) [default: every target]")
]
RequesterOption = Annotated[str | None, typer.Option("--requester", help="Who asks [default: your login]")]
EgressOption = Annotated[
    Path, typer.Option("--egress", help="Where access requests write the records they find")
]
DEFAULT_EGRESS = Path(".tracelake") / "egress"


@privacy_app.command("index")
@friendly_errors
def index_command(
    path: Annotated[Path, typer.Argument(help="A Parquet dataset folder")],
    identity: IdentityOption,
    fpp: Annotated[float, typer.Option(help="Target false-positive rate of the filters")] = DEFAULT_FPP,
) -> None:
    """Build identity filters for a Parquet dataset's files that have none (or a stale one)."""
    from tracelake.app.privacy import index_dataset

    report = index_dataset(path, identity, fpp=fpp)
    table = new_table(title=f"identity index of {report.path}")
    columns = (
        "files indexed",
        "left unindexed",
        "distinct ids",
        "index bytes",
        "bits/id",
        "false positives",
        "seconds",
    )
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        str(report.indexed),
        str(len(report.unindexed)),
        str(report.distinct_ids),
        str(report.index_bytes),
        f"{report.bits_per_id:.2f}",
        "-" if report.measured_fpp is None else f"{report.measured_fpp:.3%}",
        f"{report.seconds:.1f}",
    )
    out.print(table)


@privacy_app.command("verify")
@friendly_errors
def verify_command(
    path: Annotated[Path, typer.Argument(help="A Parquet dataset folder")],
    identity: Annotated[
        list[str] | None,
        typer.Option("--identity", "-i", help="An identity column (repeatable) [default: the index's]"),
    ] = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="Rebuild wrong filters and index unindexed files (Spark)")
    ] = False,
    fpp: Annotated[float, typer.Option(help="Target false-positive rate of rebuilt filters")] = DEFAULT_FPP,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample", min=1, help="Check this many indexed files, drawn at random each run [default: all]"
        ),
    ] = None,
) -> None:
    """Check that each file's identity filters hold every id in it; --repair rebuilds those that do not.

    Exits 1 while a wrong filter remains: a request could skip a file holding a requested id.
    """
    from tracelake.app.privacy import verify_index

    report = verify_index(path, identity or (), repair=repair, fpp=fpp, sample=sample)
    table = new_table(title=f"identity index of {report.root} ({', '.join(report.columns)})")
    for column in (
        "files",
        "checked",
        "wrong",
        "legacy",
        "repaired",
        "newly indexed",
        "unindexed",
        "seconds",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        str(report.files),
        str(report.checked),
        str(len({wrong.path for wrong in report.wrong})),
        str(len(report.legacy)),
        str(len(report.repaired)),
        str(len(report.indexed)),
        str(len(report.unindexed)),
        f"{report.seconds:.1f}",
    )
    out.print(table)
    if report.sampled:
        out.print(f"checked a random sample of {report.checked} of {report.indexed_files} indexed files")
    for problem in report.index_problems:
        err.print(f"index segment skipped: {problem}", soft_wrap=True)
    for wrong in report.wrong:
        err.print(f"wrong filter: {wrong.describe()}", soft_wrap=True)
    if report.unindexed:
        out.print(f"{len(report.unindexed)} files have no fresh filter: every request reads them")
    if report.legacy:
        out.print(
            f"{len(report.legacy)} files have filters built before null lists were handled: every request "
            "reads them until --repair rebuilds them",
            soft_wrap=True,
        )
    if not report.ok:
        err.print(f"run `tracelake privacy verify {report.root} --repair` to rebuild them", soft_wrap=True)
        raise typer.Exit(1)


@privacy_app.command("declare")
@friendly_errors
def declare_command(
    path: Annotated[Path, typer.Argument(help="A dataset folder")],
    identity: IdentityOption,
    db: DbOption = None,
) -> None:
    """Record that a dataset holds identities in these columns (a privacy target)."""
    with _privacy(db) as privacy:
        target = privacy.declare(path, identity)
    out.print(f"declared {target.asset} with identity columns {', '.join(target.identity)}")


@privacy_app.command("targets")
@friendly_errors
def targets_command(
    output: ListFormat = OutputFormat.table, path: OutputPath = None, db: DbOption = None
) -> None:
    """The datasets privacy requests cover: declared, or reached by identities through lineage."""
    from tracelake.app.privacy import target_json

    check_list_format(output)
    with _privacy(db) as privacy:
        targets = privacy.targets()
    rows = [target_json(target) for target in targets]
    if printed(output, path, {"targets": rows}, {"targets": rows}):
        return
    table = new_table(title=f"{len(targets)} privacy targets")
    for column in ("dataset", "identity columns", "searchable", "why"):
        table.add_column(column)
    for target in targets:
        why = "declared" if target.declared else " → ".join(target.reason)
        searchable = "yes" if target.path is not None else "no (not a file dataset)"
        table.add_row(target.asset, ", ".join(target.identity), searchable, why)
    out.print(table)


@privacy_app.command("access")
@friendly_errors
def access_command(
    user: UserOption = None,
    users: UsersOption = None,
    dataset: DatasetOption = None,
    requester: RequesterOption = None,
    egress: EgressOption = DEFAULT_EGRESS,
    queue_only: Annotated[bool, typer.Option("--queue-only", help="Queue the requests, do not run")] = False,
    db: DbOption = None,
) -> None:
    """Find and export every record of a user (or of each user of a file)."""
    _submit_and_run("access", user, users, dataset, requester, egress, queue_only, db)


@privacy_app.command("delete")
@friendly_errors
def delete_command(
    user: UserOption = None,
    users: UsersOption = None,
    dataset: DatasetOption = None,
    requester: RequesterOption = None,
    queue_only: Annotated[bool, typer.Option("--queue-only", help="Queue the requests, do not run")] = False,
    db: DbOption = None,
) -> None:
    """Erase every record of a user (or of each user of a file), rewriting only the files holding them."""
    _submit_and_run("delete", user, users, dataset, requester, None, queue_only, db)


@privacy_app.command("run")
@friendly_errors
def run_command(
    kind: Annotated[str, typer.Argument(help="access or delete")],
    egress: EgressOption = DEFAULT_EGRESS,
    max_ids: Annotated[int, typer.Option(help="User ids per sub-job")] = MAX_IDS,
    max_files: Annotated[int | None, typer.Option(help="Data files one Spark pass may read")] = None,
    max_gb: Annotated[float | None, typer.Option(help="Gigabytes one Spark pass may read")] = None,
    db: DbOption = None,
) -> None:
    """Run every queued request of a kind, in batches (sub-jobs bounded by ids, files, bytes),
    after finishing any request a run that died left running."""
    max_bytes = None if max_gb is None else int(max_gb * 1e9)
    with _privacy(db) as privacy:
        _run(privacy, kind, egress, max_ids=max_ids, max_files=max_files, max_bytes=max_bytes)


@privacy_app.command("requests")
@friendly_errors
def requests_command(
    status: Annotated[str | None, typer.Option(help="pending, running, done or failed")] = None,
    limit: Annotated[int, typer.Option(help="At most this many")] = 50,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """Privacy requests, newest first."""
    from tracelake.app.privacy import request_json

    check_list_format(output)
    with _privacy(db) as privacy:
        requests = privacy.requests(status=status, limit=limit)
    listed = [request_json(request) for request in requests]
    if printed(output, path, {"requests": listed}, {"requests": listed}):
        return
    table = new_table(title=f"{len(requests)} privacy requests")
    for column in ("request", "kind", "status", "requester", "ids", "submitted", "rows", "error"):
        table.add_column(column)
    for request in requests:
        rows = "" if request.receipt is None else str(request.receipt.get("rows", ""))
        table.add_row(
            request.id,
            request.kind,
            request.status,
            request.requester,
            str(request.id_count),
            request.submitted_at.strftime("%Y-%m-%d %H:%M:%S"),
            rows,
            request.error or "",
        )
    out.print(table)


@privacy_app.command("audit")
@friendly_errors
def audit_command(
    request: Annotated[str | None, typer.Option("--request", help="One request's events")] = None,
    limit: Annotated[int, typer.Option(help="At most this many events")] = 100,
    output: ListFormat = OutputFormat.table,
    path: OutputPath = None,
    db: DbOption = None,
) -> None:
    """The audit trail of privacy requests: who asked what, when, and what it touched."""
    from tracelake.app.privacy import audit_json

    check_list_format(output)
    with _privacy(db) as privacy:
        events = privacy.audit(request, limit=limit)
    rows = [audit_json(event) for event in events]
    if printed(output, path, {"events": rows}, {"events": rows}):
        return
    table = new_table(title=f"{len(events)} audit events")
    for column in ("at", "request", "event", "requester", "details"):
        table.add_column(column)
    for event in events:
        details = ", ".join(f"{key}={value}" for key, value in sorted(event.details.items()))
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S"), event.request_id, event.event, event.requester, details
        )
    out.print(table)


def _submit_and_run(
    kind: str,
    user: str | None,
    users: Path | None,
    datasets: list[str] | None,
    requester: str | None,
    egress: Path | None,
    queue_only: bool,
    db: str | None,
) -> None:
    ids = _read_ids(user, users)
    who = requester or getpass.getuser()
    with _privacy(db) as privacy:
        # An id already asked for by an open request is that request (finished below if a run that
        # died left it), never a second one.
        submitted = privacy.submit_each(kind, ids, requester=who, datasets=datasets)
        new = submitted.new
        out.print(f"queued {new} {kind} request{'s' if new != 1 else ''}", highlight=False)
        for request in submitted.again:
            out.print(f"{request.id} already asks for this id ({request.status})", highlight=False)
        if not queue_only:
            _run(privacy, kind, egress or DEFAULT_EGRESS)


@contextmanager
def _privacy(db: str | None) -> Iterator[PrivacyOperations]:
    """The store's privacy operations, the store closed at the end: closing is what folds SQLite's
    write-ahead log into the database, and a delete's ids must not outlive it there."""
    from tracelake.app.privacy import PrivacyOperations

    service = open_service(db)
    try:
        yield PrivacyOperations(service)
    finally:
        service.close()


def _run(
    privacy: PrivacyOperations,
    kind: str,
    egress: Path,
    *,
    max_ids: int = MAX_IDS,
    max_files: int | None = None,
    max_bytes: int | None = None,
) -> None:
    with progress_bar() as bar:
        task = bar.add_task(f"{kind} requests", total=None)

        def advance(job: SubJob, number: int, total: int) -> None:
            bar.update(task, total=total, completed=number - 1, description=f"{kind}: {job.ids} ids")

        report = privacy.run(
            kind, egress=egress, max_ids=max_ids, max_files=max_files, max_bytes=max_bytes, progress=advance
        )
        bar.update(task, completed=bar.tasks[0].total or 0)
    _print_run(kind, report, egress)


def _print_run(kind: str, report: RunReport, egress: Path) -> None:
    if not report.done and not report.failed:
        out.print(f"no {kind} request waiting")
        return
    table = new_table(title=f"{kind} requests run")
    for column in ("request", "status", "datasets", "files read", "files skipped", "rows", "seconds"):
        table.add_column(column)
    for request_id, receipt in report.receipts.items():
        table.add_row(
            request_id,
            f"done (resumed {receipt.kind}: its run had died)" if request_id in report.resumed else "done",
            str(len(receipt.datasets)),
            str(sum(scan.read for scan in receipt.datasets)),
            str(sum(scan.skipped for scan in receipt.datasets)),
            str(receipt.rows),
            f"{receipt.seconds:.1f}",
        )
    for request_id, error in report.failed.items():
        table.add_row(request_id, f"[red]failed[/red]: {error}", "", "", "", "", "")
    out.print(table)
    if any(receipt.kind == "access" for receipt in report.receipts.values()):
        out.print(f"records and receipts under {egress.absolute()}/<request>/")
    if report.failed:
        raise typer.Exit(1)


def _read_ids(user: str | None, users: Path | None) -> list[str]:
    """The ids asked for: --user, or the lines of --users (blank lines skipped)."""
    if (user is None) == (users is None):
        raise UserError("give either --user ID or --users FILE")
    if user is not None:
        if not user.strip():
            raise UserError("--user is empty")
        return [user.strip()]
    assert users is not None
    if not users.is_file():
        raise UserError(f"no such file: {users}")
    ids = []
    text = read_text(users)
    for number, line in enumerate(text.splitlines(), 1):
        value = line.strip()
        if not value:
            continue
        if len(value) > MAX_ID_LENGTH or "\x00" in value:
            raise UserError(f"{users}:{number}: not a user id (over {MAX_ID_LENGTH} characters or binary)")
        ids.append(value)
    if not ids:
        raise UserError(f"{users} holds no user id")
    return list(dict.fromkeys(ids))
