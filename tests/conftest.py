"""Fixtures shared by the whole suite: stores on real SQLite and, where marked, real PostgreSQL."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from tests.postgres import PostgresUnavailable, throwaway_cluster
from tracelake.store import LineageStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server URL (admin database); see tests/postgres.py for where it comes from."""
    configured = os.environ.get("TRACELAKE_TEST_PG_URL")
    if configured:
        yield configured
        return
    try:
        with throwaway_cluster() as url:
            yield url
    except PostgresUnavailable as exc:
        if os.environ.get("TRACELAKE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here but unavailable: {exc}")
        pytest.skip(f"PostgreSQL unavailable: {exc}")


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the test server for one test."""
    with fresh_database(postgres_server) as url:
        yield url


@contextlib.contextmanager
def fresh_database(postgres_server: str) -> Iterator[str]:
    """A new, empty database on the test server, dropped at the end (for fixtures of wider scope)."""
    name = f"tracelake_test_{os.getpid()}_{next(_database_numbers)}"
    admin = sa.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = sa.make_url(postgres_server).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one Spark session of the test run (`local[2]`), created only if a test asks for it.

    Its warehouse and scratch space live in a temporary folder, so tables written by tests
    vanish with it; the UI is off and shuffles are small, so tests stay quick on 2 cores. Every
    tracked run checks the listener's plan JSON against Spark's own (`VERIFY_PLAN_JSON`); one
    plan that differs fails the run at the end.
    """
    from pyspark.sql import SparkSession

    from tracelake.collect.spark_listener import VERIFY_PLAN_JSON, new_listener

    base = tmp_path_factory.mktemp("spark")
    # Python workers run the suite's own interpreter (with pandas), not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tracelake-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.local.dir", str(base / "scratch"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={base / 'derby'}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    os.environ[VERIFY_PLAN_JSON] = "1"
    try:
        yield session
        compared, differing = new_listener(session.sparkContext._gateway).planJsonChecks()
        assert differing == 0, f"{differing} of {compared} plans' JSON differed from Spark's toJSON()"
    finally:
        os.environ.pop(VERIFY_PLAN_JSON, None)
        session.stop()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[LineageStore]:
    with LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}") as store:
        yield store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LineageStore]:
    """The same tests on both backends: the store code must not care which it runs on."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'lineage.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with LineageStore(url) as lineage_store:
        yield lineage_store
