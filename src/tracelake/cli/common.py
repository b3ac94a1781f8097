"""What every `tracelake` command shares: the consoles, the `--db` option, exit codes, and one
way to turn a user's mistake into a one-line message with exit code 2 instead of a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, time
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tracelake.model import InputError
from tracelake.model.names import DEFAULT_SYSTEM

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from tracelake.app.service import Tracelake

out = Console(soft_wrap=True)
# Messages on stderr are never wrapped: a path cut in two is a message a script cannot match.
err = Console(stderr=True, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


# rich's tables and bars load when a command prints one, not for every command and help page
def new_table(title: str | None = None, **options: Any) -> Table:
    from rich.table import Table

    return Table(title=title, **options)


def progress_bar(*, transient: bool = False) -> Progress:
    """A bar on stderr for a person watching; hidden when stderr is not a terminal (a log)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=transient,
        disable=not err.is_terminal,
    )


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    dot = "dot"
    mermaid = "mermaid"
    csv = "csv"
    xlsx = "xlsx"
    parquet = "parquet"


class ExitCode(IntEnum):
    """What a command's exit status says; the README's "Exit codes" lists the same."""

    OK = 0
    NO = 1  # the command ran and its answer is no: a policy violated, not ready, drift found
    USAGE = 2  # a user mistake (an option, a missing file, an unknown node, a store): nothing done
    PROBLEMS = 3  # ingested, but some input was recorded as problems (see `tracelake problems`)


# A message quoting a 100,000-character name stays readable.
MAX_MESSAGE_CHARS = 1000


class UserError(InputError):
    """A mistake in the command line itself (an option, a missing file); printed as one line."""


def friendly_errors(command: F) -> F:
    """Turn user mistakes into a message on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (InputError, FileNotFoundError) as exc:
            print_error(str(exc))
            raise typer.Exit(ExitCode.USAGE) from None

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the command's signature


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
    from tracelake.app.service import Tracelake  # not for `--help`: it loads the whole application

    # runs whose Spark driver died before storing them are stored and ended before anything reads them
    return Tracelake.open(
        db, recovered=lambda note: err.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    )


def parse_time(text: str | None, option: str, *, day_starts: bool = False) -> datetime | None:
    """ISO dates and times; a bare date means the end of that day (UTC): "as it was on 2024-03-11",
    or with `day_starts` its start: "since 2024-03-11"."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(
            f"{option} {text!r} is not an ISO date or time (e.g. 2024-03-11 or 2024-03-11T06:00Z)"
        ) from None
    if len(text) == 10:  # a date alone
        moment = datetime.combine(moment.date(), time.min if day_starts else time.max)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def short(urn: str) -> str:
    """Hive tables, the common case, without their `hive.table/` prefix; other URNs in full."""
    return urn.removeprefix(f"{DEFAULT_SYSTEM}.table/")
