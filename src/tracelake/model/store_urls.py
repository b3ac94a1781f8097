"""A store's URL as Tracelake names it outside the database: its label (the URL, a SQLite file by
its absolute path however it was opened, never a password), and where the files kept beside a
store live (a Spark run's journal, the graph index): next to a SQLite file, or under
`~/.tracelake/` for a database server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import sqlalchemy as sa


def store_label(store_url: str) -> str:
    """The store as the files kept for it name it: its URL (a SQLite file as `sqlite:///` and its
    absolute path, however it was opened), never its password."""
    url = sa.make_url(store_url)
    if url.get_backend_name() == "sqlite":
        path = sqlite_file(url)
        return f"sqlite:///{path}" if path is not None else "sqlite://"
    return url.render_as_string(hide_password=True)


def sqlite_file(url: sa.URL) -> Path | None:
    """The file of a SQLite URL (`/x.db` or a `file:/x.db?mode=ro` URI); None when in memory."""
    database = url.database or ""
    if database.startswith("file:"):
        database = database.removeprefix("file:").partition("?")[0]
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        return None
    return Path(database).expanduser().absolute()


def files_of(store_url: str, kind: str) -> Path | None:
    """The folder of the `kind` files kept for the store: `<file>.<kind>` beside a SQLite file,
    `~/.tracelake/<kind>/<digest of its label>` for a server's; None for a store in memory (no
    later process could use them)."""
    url = sa.make_url(store_url)
    if url.get_backend_name() == "sqlite":
        path = sqlite_file(url)
        return None if path is None else path.with_name(f"{path.name}.{kind}")
    digest = hashlib.sha256(store_label(store_url).encode("utf-8")).hexdigest()[:16]
    return Path.home() / ".tracelake" / kind / digest
