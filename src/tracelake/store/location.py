"""Where a lineage store lives: a SQLite file or a PostgreSQL URL, checked before anything
connects, so a wrong `--db` is one line saying what is wrong rather than a driver's traceback."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from tracelake.model import InputError

BACKENDS = ("sqlite", "postgresql")
SQLITE_HEADER = b"SQLite format 3\x00"
DEFAULT_DB_PATH = Path(".tracelake") / "lineage.db"


class StoreError(InputError):
    """The store named cannot be used; the message says which and why (passwords left out)."""


class StoreUnavailable(StoreError):
    """The database cannot do what was asked now: a server down, a read-only file, a full disk.
    The HTTP API answers it with 503."""

    status = 503


def default_url() -> str:
    """`TRACELAKE_DB` (a SQLAlchemy URL or a file path), else `.tracelake/lineage.db`."""
    return as_url(os.environ.get("TRACELAKE_DB", "").strip() or str(DEFAULT_DB_PATH))


def as_url(text: str) -> str:
    """A store given as a SQLAlchemy URL or as the path of a SQLite file, as a URL."""
    return text if "://" in text else f"sqlite:///{text}"


def store_url(url: str) -> sa.URL:
    """`url` parsed, when it names a backend Tracelake stores lineage in, else a StoreError."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise StoreError(f"{url!r} is not a store: give a SQLite file or a postgresql:// URL") from None
    backend = parsed.get_backend_name()
    if backend not in BACKENDS:
        shown = parsed.render_as_string(hide_password=True)
        raise StoreError(f"{shown}: {backend} is not supported; give a SQLite file or a postgresql:// URL")
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:"):
        check_sqlite_file(parsed.database)
    return parsed


def check_sqlite_file(path: str) -> None:
    """A file that exists must be a SQLite database already: never write tables into something else."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise StoreError(f"{path}: is a folder, not a SQLite file") from None
    except OSError as error:
        raise StoreError(f"{path}: cannot open the store ({error.strerror or error})") from None
    if header and header != SQLITE_HEADER:
        raise StoreError(f"{path}: not a SQLite database")
