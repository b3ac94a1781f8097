"""The database under a lineage store: its engine (SQLite's pragmas), its tables created once
whoever else opens it at the same time, a transaction run again when the database gave it up over
a lock, and the driver-level statements the hot paths use (docs/decisions.md, "Many writers")."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from tracelake.store import owed
from tracelake.store import schema as s
from tracelake.store.location import StoreError, StoreUnavailable, store_url

# Keeps IN (...) lists under every backend's bound-parameter limit.
CHUNK = 5000
# What the database gave up over a lock (an ingest, switching SQLite to WAL) is run this many
# times in all before its error is raised (`until_won`).
ATTEMPTS = 5
# PostgreSQL's advisory lock key for creating the schema: any constant, the same in every process.
_SCHEMA_LOCK = 0x7472616365  # "trace"
_SQLITE_BUSY = 5  # SQLite's primary result code for a lock it could not get
_T = TypeVar("_T")
_LOG_SINCE = (
    "INSERT INTO store_state (key, value) SELECT 'graph_log_since', COALESCE(MAX(value), 0) "
    "FROM store_state WHERE key = 'graph_version' ON CONFLICT (key) DO NOTHING"
)


def open_engine(url: str, *, echo: bool = False) -> sa.Engine:
    """An engine on the store at `url` (checked first: `location.store_url`), its tables made."""
    sa_url = store_url(url)
    if sa_url.get_backend_name() == "sqlite" and sa_url.database not in (None, "", ":memory:"):
        Path(sa_url.database).parent.mkdir(parents=True, exist_ok=True)
    try:
        # hide_parameters: an error names the statement that failed, never the values it carried
        engine = sa.create_engine(url, echo=echo, hide_parameters=True)
    except (ImportError, sa.exc.NoSuchModuleError) as error:
        shown = sa_url.render_as_string(hide_password=True)
        raise StoreError(f"{shown}: its database driver is not installed ({error})") from None
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    sa.event.listen(engine, "handle_error", _unavailable)
    # what another thread of this process owes the store is written before this one reads it
    sa.event.listen(engine, "engine_connect", lambda _conn: owed.settle(url))
    _prepare(engine)
    return engine


def _unavailable(context: sa.engine.ExceptionContext) -> BaseException | None:
    """SQLAlchemy's errors as `unavailable` says (a `handle_error` hook)."""
    error = context.sqlalchemy_exception
    return unavailable(error.orig) if isinstance(error, sa.exc.OperationalError) else None


def unavailable(cause: BaseException | None) -> StoreUnavailable | None:
    """What the database cannot do now (the driver's error behind an `OperationalError`: a server
    down, a read-only file, a full disk) is a `StoreUnavailable` saying why in one line; a
    transaction given up over a lock is left to `until_won` to run again."""
    if _lost_over_a_lock(cause):
        return None
    return StoreUnavailable(f"cannot use the lineage store: {cause}")


def _prepare(engine: sa.Engine) -> None:
    """Create the tables the store lacks and backfill observations, whoever else opens it now.

    Checked first without a lock, so that opening a ready store (every command) writes
    nothing and waits for no writer; then, if anything is to do, checked again and done
    under the schema lock, which makes processes opening a new store at once take turns.
    """
    with engine.connect() as conn:
        if not _setup_due(conn):
            return
    with engine.connect() as conn:
        _lock_schema(conn)
        s.metadata.create_all(conn)  # checks each table first: a turn before ours made them
        for index in _missing_indexes(conn):  # of tables an older Tracelake made without them
            index.create(conn)
        # the graph's change log starts now: an index of an older version cannot catch up from it
        driver_execute(conn, _LOG_SINCE)
        if _backfill_due(conn):
            # a store from before observations were kept: each version's start was one
            o, v = s.process_observations, s.process_versions
            conn.execute(
                o.insert().from_select(
                    ["process_id", "at", "content_hash", "first_seen"],
                    sa.select(v.c.process_id, v.c.valid_from, v.c.content_hash, v.c.first_seen),
                )
            )
        conn.commit()


def _setup_due(conn: sa.Connection) -> bool:
    """Whether the store lacks a table or an index, or observations to backfill."""
    missing = set(s.metadata.tables) - set(sa.inspect(conn).get_table_names())
    return bool(missing) or bool(_missing_indexes(conn)) or _backfill_due(conn)


def _missing_indexes(conn: sa.Connection) -> list[sa.Index]:
    """The schema's indexes the database does not have (one catalog query)."""
    if conn.dialect.name == "postgresql":
        names = sa.text("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
    else:
        names = sa.text("SELECT name FROM sqlite_master WHERE type = 'index'")
    present = set(conn.execute(names).scalars())
    return [
        index for table in s.metadata.sorted_tables for index in table.indexes if index.name not in present
    ]


def _backfill_due(conn: sa.Connection) -> bool:
    """Versions but no observation: a store from before observations were kept.

    One statement, so one snapshot: asked in two, an ingest committing its first version and
    observation in between (a writer into the new store) made a new store look old."""
    o, v = s.process_observations, s.process_versions
    versions, observations = sa.exists(sa.select(v.c.valid_from)), sa.exists(sa.select(o.c.at))
    return bool(conn.execute(sa.select(sa.and_(versions, ~observations))).scalar())


def _lock_schema(conn: sa.Connection) -> None:
    """Begin `conn`'s transaction holding the store's one schema lock, until it ends.

    Two processes creating the same tables at once otherwise both find them missing: SQLite
    then refuses the second CREATE ("table nodes already exists"), PostgreSQL even with IF NOT
    EXISTS (a duplicate key in its catalog). SQLite's lock is its write lock, PostgreSQL's an
    advisory lock in the transaction that creates the tables (DDL is transactional in both).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SCHEMA_LOCK)))
    else:
        driver_execute(conn, "BEGIN IMMEDIATE")


def until_won(run: Callable[[], _T]) -> _T:
    """`run()`, run again while the database gives it up over a lock, up to `ATTEMPTS` runs.

    Given up over a lock: PostgreSQL's deadlock_detected or serialization_failure, SQLite's
    SQLITE_BUSY (whatever its extended code). Between runs it waits 0.05–0.1 s, doubling each
    time, jittered so that writers that collided do not collide again in step.
    """
    attempt = 1
    while True:
        try:
            return run()
        except (sa.exc.DBAPIError, sqlite3.OperationalError) as error:
            cause = error.orig if isinstance(error, sa.exc.DBAPIError) else error
            if attempt >= ATTEMPTS or not _lost_over_a_lock(cause):
                raise
        time.sleep(random.uniform(0.5, 1.0) * 0.1 * 2 ** (attempt - 1))
        attempt += 1


def _lost_over_a_lock(cause: BaseException | None) -> bool:
    """PostgreSQL's deadlock_detected or serialization_failure, SQLite's SQLITE_BUSY (whatever
    its extended code): the transaction wrote nothing and may be run again."""
    return getattr(cause, "sqlstate", None) in ("40P01", "40001") or (
        (getattr(cause, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # First, so that the statements after it wait for a lock too. A minute: writers queue for
    # SQLite's one write lock, and one behind a few large ingests waits for all of them.
    cursor.execute("PRAGMA busy_timeout=60000")
    # Of connections switching a new file to WAL at once, SQLite fails the others at once rather
    # than waiting (as it would for a write); the switch is made once, and stays.
    until_won(lambda: cursor.execute("PRAGMA journal_mode=WAL"))
    cursor.execute("PRAGMA synchronous=NORMAL")
    # The commit that takes the WAL past this many pages copies it into the database first.
    # SQLite's default, 1,000 (4 MB), made one commit in a dozen pay for it under a steady
    # stream of small transactions (the server's): 4,000 took OpenLineage ingest over HTTP
    # from ~980 to ~1,150 events/s, the WAL staying under ~17 MB.
    cursor.execute("PRAGMA wal_autocheckpoint=4000")
    cursor.close()


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def markers(count: int) -> str:
    """`count` placeholders of driver SQL (`?`, as `driver_execute` takes them)."""
    return ", ".join("?" * count)


def rows_where_in(
    conn: sa.Connection, select: str, column: str, values: Sequence[Any], also: str = "", *params: Any
) -> Iterator[tuple[Any, ...]]:
    """The rows of driver SQL `select` whose `column` is one of `values` (and `also`, a further
    condition written with `?`, bound to `params`), a chunk of values a statement."""
    for chunk in chunks(values):
        yield from driver_execute(
            conn, f"{select} WHERE {column} IN ({markers(len(chunk))}){also}", (*chunk, *params)
        )


def driver_execute(conn: sa.Connection, sql: str, params: Sequence[Any] = (), *, many: bool = False) -> Any:
    """Run driver SQL `sql` (placeholders written `?`) on the connection's own DBAPI cursor, in its
    transaction, and return the cursor (its rows, its rowcount); `many`: once for each of
    `params`. An ingest makes ~20 statements a transaction, and SQLAlchemy's execution context
    cost 10–33 µs each beyond the driver's 2–6 µs (2026-11-27, SQLite). A failure is raised as
    SQLAlchemy raises it (its `DBAPIError` of the same kind, parameters hidden), and what the
    database cannot do now as a `StoreUnavailable` (`unavailable`)."""
    cursor = conn.connection.cursor()
    statement = sql if conn.dialect.paramstyle == "qmark" else sql.replace("?", "%s")
    try:
        if many:
            cursor.executemany(statement, params)
        else:
            cursor.execute(statement, params)
    except conn.dialect.loaded_dbapi.Error as error:
        raised = sa.exc.DBAPIError.instance(
            statement,
            params,
            error,
            conn.dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=conn.dialect,
        )
        refusal = unavailable(error) if isinstance(raised, sa.exc.OperationalError) else None
        raise (refusal or raised) from error
    return cursor


def json_param(value: Any) -> str:
    """A value for a JSON column, as SQLAlchemy's JSON type writes it (None is JSON null)."""
    return json.dumps(value)


def json_result(conn: sa.Connection, value: Any) -> Any:
    """A JSON column as the driver returns it, decoded: SQLite gives its text, psycopg decodes
    it already."""
    return json.loads(value) if isinstance(value, str) and conn.dialect.name == "sqlite" else value


def driver_insert(
    conn: sa.Connection,
    table: sa.Table,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    on_conflict: str | None = None,
) -> None:
    """An executemany of plain tuples straight to the driver.

    Bulk ingest spends more time in SQLAlchemy's per-row parameter processing than in the
    database itself; the hot inserts (nodes, edges) skip it. Values must already be in their
    stored form (no JSON, no datetimes).
    """
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({markers(len(columns))})"
    if on_conflict:
        sql += f" ON CONFLICT {on_conflict}"
    for chunk in chunks(rows, 50_000):
        driver_execute(conn, sql, chunk, many=True)
