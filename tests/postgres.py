"""A throwaway PostgreSQL server for the tests that are about PostgreSQL.

`TRACELAKE_TEST_PG_URL` points the tests at a server you already run. Otherwise the suite
starts its own cluster in a temporary folder with the machine's `initdb`/`pg_ctl` (as the
`postgres` user when run as root, since PostgreSQL refuses root) and stops it at the end.
With neither, the Postgres tests are skipped, unless `TRACELAKE_REQUIRE_POSTGRES=1` (set by
CI), where a missing server fails the run instead of hiding the tests.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.net import free_port


class PostgresUnavailable(RuntimeError):
    pass


def _find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh cluster; the cluster is removed afterwards."""
    initdb, pg_ctl = _find_binary("initdb"), _find_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise PostgresUnavailable("no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin")
    run_as: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="tracelake-pg-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PostgresUnavailable("running as root and there is no 'postgres' user") from exc
        os.chown(workdir, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = workdir / "data", free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*run_as, *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(args[:2])} failed: {result.stderr.strip()[-500:]}")

    try:
        run(initdb, "-D", str(data), "-A", "trust", "-U", "tracelake", "--no-sync", "-E", "UTF8")
        options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(pg_ctl, "-D", str(data), "-o", options, "-l", str(workdir / "log"), "-w", "start")
        try:
            yield f"postgresql+psycopg://tracelake@127.0.0.1:{port}/postgres"
        finally:
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
