"""`tracelake privacy …`: identity indexes, privacy targets, and access/delete requests.

A thin typer layer over `tracelake.privacy`: each command parses its options, calls one
operation and prints a table. Requests go through the store's queue, so a command line
request and a batch run leave the same audit trail; `access`/`delete` queue and then run
at once unless told `--queue-only`.
"""

from __future__ import annotations

import getpass
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tracelake.cli import DbOption, UserError, err, friendly_errors, out
from tracelake.local_spark import quiet_log_option
from tracelake.privacy.filters import DEFAULT_FPP
from tracelake.privacy.identity import IdentityError
from tracelake.privacy.queue import RequestQueue
from tracelake.privacy.runner import MAX_IDS, RunReport, SubJob, run_requests
from tracelake.privacy.search import Bounds, RequestError
from tracelake.privacy.targets import declare, find_targets
from tracelake.privacy.verify import verify
from tracelake.privacy.writer import build_index
from tracelake.store import LineageStore
from tracelake.textfile import read_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
MAX_ID_LENGTH = 1024


@privacy_app.command("index")
@friendly_errors
def index_command(
    path: Annotated[Path, typer.Argument(help="A Parquet dataset folder")],
    identity: IdentityOption,
    fpp: Annotated[float, typer.Option(help="Target false-positive rate of the filters")] = DEFAULT_FPP,
) -> None:
    """Build identity filters for a Parquet dataset's files that have none (or a stale one)."""
    with _spark() as spark, _user_errors():
        report = build_index(spark, path, identity=identity, fpp=fpp)
    table = Table(title=f"identity index of {report.path}")
    for column in ("files indexed", "left unindexed", "distinct ids", "index bytes", "bits/id", "seconds"):
        table.add_column(column, justify="right")
    table.add_row(
        str(report.indexed),
        str(len(report.unindexed)),
        str(sum(report.distinct_ids.values())),
        str(report.index_bytes),
        f"{report.bits_per_id:.2f}",
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
) -> None:
    """Check that each file's identity filters hold every id in it; --repair rebuilds those that do not.

    Exits 1 while a wrong filter remains: a request could skip a file holding a requested id.
    """
    with _user_errors():
        if repair:
            with _spark() as spark:
                report = verify(path, identity or (), repair_with=spark, fpp=fpp)
        else:
            report = verify(path, identity or ())
    table = Table(title=f"identity index of {report.root} ({', '.join(report.columns)})")
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
    with LineageStore(db) as store, _user_errors():
        target = declare(store, path, identity)
    out.print(f"declared {target.asset} with identity columns {', '.join(target.identity)}")


@privacy_app.command("targets")
@friendly_errors
def targets_command(db: DbOption = None) -> None:
    """The datasets privacy requests cover: declared, or reached by identities through lineage."""
    with LineageStore(db) as store:
        targets = find_targets(store)
    table = Table(title=f"{len(targets)} privacy targets")
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
    bounds = Bounds(max_files, None if max_gb is None else int(max_gb * 1e9))
    with LineageStore(db) as store:
        _run(store, kind, egress, max_ids=max_ids, bounds=bounds)


@privacy_app.command("requests")
@friendly_errors
def requests_command(
    status: Annotated[str | None, typer.Option(help="pending, running, done or failed")] = None,
    limit: Annotated[int, typer.Option(help="At most this many")] = 50,
    db: DbOption = None,
) -> None:
    """Privacy requests, newest first."""
    with LineageStore(db) as store, _user_errors():
        requests = RequestQueue(store).list(status=status, limit=limit)
    table = Table(title=f"{len(requests)} privacy requests")
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
    db: DbOption = None,
) -> None:
    """The audit trail of privacy requests: who asked what, when, and what it touched."""
    with LineageStore(db) as store:
        events = RequestQueue(store).audit(request, limit=limit)
    table = Table(title=f"{len(events)} audit events")
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
    with LineageStore(db) as store, _user_errors():
        queue = RequestQueue(store)
        # An id already asked for by an open request is that request (finished below if a run
        # that died left it), never a second one.
        again = [queue.open_request(kind, [value], datasets) for value in ids]
        submitted = [queue.submit(kind, [value], requester=who, datasets=datasets) for value in ids]
        new = len(submitted) - sum(1 for request in again if request is not None)
        out.print(f"queued {new} {kind} request{'s' if new != 1 else ''}", highlight=False)
        for request in again:
            if request is not None:
                out.print(f"{request.id} already asks for this id ({request.status})", highlight=False)
        if not queue_only:
            _run(store, kind, egress or DEFAULT_EGRESS)


def _run(
    store: LineageStore,
    kind: str,
    egress: Path,
    *,
    max_ids: int = MAX_IDS,
    bounds: Bounds | None = None,
) -> None:
    if kind not in ("access", "delete"):
        raise UserError(f"kind must be access or delete, not {kind!r}")
    with (
        _spark() as spark,
        _user_errors(),
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=not err.is_terminal,  # a bar is for a person watching, not for a log
        ) as bar,
    ):
        task = bar.add_task(f"{kind} requests", total=None)

        def advance(job: SubJob, number: int, total: int) -> None:
            bar.update(task, total=total, completed=number - 1, description=f"{kind}: {job.ids} ids")

        report = run_requests(
            spark, store, kind, egress=egress, max_ids=max_ids, bounds=bounds, progress=advance
        )
        bar.update(task, completed=bar.tasks[0].total or 0)
    _print_run(kind, report, egress)


def _print_run(kind: str, report: RunReport, egress: Path) -> None:
    if not report.done and not report.failed:
        out.print(f"no {kind} request waiting")
        return
    table = Table(title=f"{kind} requests run")
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


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except (RequestError, IdentityError, ValueError) as error:
        raise UserError(str(error)) from None


@contextmanager
def _spark() -> Iterator[SparkSession]:
    """The running Spark session, or a local one for this command (`local[*]`, quiet, then stopped)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logs = Path(tempfile.gettempdir()) / f"tracelake-{getpass.getuser()}"
    try:
        session = (
            SparkSession.builder.master(os.environ.get("TRACELAKE_SPARK_MASTER", "local[*]"))
            .appName("tracelake-privacy")
            .config("spark.driver.extraJavaOptions", quiet_log_option(logs))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
    except (RuntimeError, OSError) as error:  # no Java, or a JVM that could not start
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        needs = "a Java runtime, 17 or newer, must be installed"
        raise UserError(f"cannot start Spark: {reason} ({needs})") from None
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
