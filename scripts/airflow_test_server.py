#!/usr/bin/env python3
"""Start a throwaway Apache Airflow 3 or 2 (SQLite) for integration tests, and keep it running.

    python3 scripts/airflow_test_server.py [--major 3|2] [--venv DIR] --home /tmp/af-home \
        --dags tests/temporal/airflow_dags --port 0 [--install] [--scheduler] [--dag-processor]
    python3 scripts/airflow_test_server.py --install-only             # Airflow 3, what CI does
    python3 scripts/airflow_test_server.py --major 2 --install-only   # and Airflow 2

The venv defaults to `.tracelake/airflow-venv` (Airflow 3) or `.tracelake/airflow2-venv`
(Airflow 2): Airflow's pins would fight Tracelake's own, so it never shares the project's venv.
Without --major, the major version is the one installed in --venv, else 3.

What it does, in order:
  1. with --install, creates the venv and pip-installs apache-airflow, with its OpenLineage and
     Postgres providers, if they are missing (PyPI only, no constraints file: GitHub is not
     reachable here);
  2. `airflow db migrate` into `<home>/airflow.db` (a fresh home gives a fresh database), and on
     Airflow 2 `airflow users create` for the one user;
  3. `airflow dags reserialize`, which parses `--dags` once and writes the DAGs to the database,
     so the REST API knows them without a DAG processor running (Airflow 3: skipped with
     --dag-processor);
  4. starts the API: Airflow 3's `airflow api-server` (one uvicorn worker) or Airflow 2's
     `airflow webserver` (one gunicorn worker), on 127.0.0.1; with --scheduler (and on Airflow 3
     --dag-processor) those too; each in its own process group, logs in `<home>/logs/*.out`;
  5. waits until the health endpoint (`/api/v2/monitor/health`, `/api/v1/health`) answers 200
     and every DAG named by --expect-dag is known, and prints ONE JSON line: {"url", "api",
     "token", "username", "password", "pids", "home", "logs", "startup_seconds"};
  6. stays in the foreground until SIGTERM/SIGINT (or a child dies), then stops its children
     (their process groups). SIGKILL it and they live on: stop it with SIGTERM.

Authentication: Airflow 3 (`/api/v2`) uses its default simple auth manager with one user whose
password this script writes into the passwords file before the server starts; the JSON line
carries a token from `POST /auth/token`. Airflow 2 (`/api/v1`) uses FAB with HTTP basic auth
for that user (the token is null). Without a scheduler, runs made through the API stay `queued`
and their task instances keep the state the API gives them (PATCH), which is what deterministic
tests want. Stdlib only.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

AIRFLOW_VERSIONS = {3: "3.3.2", 2: "2.10.5"}
# Airflow's OpenLineage provider sends lineage as it does to Marquez, from SQL tasks on PostgreSQL
# (tests/api/test_airflow_openlineage_live.py); pinned to versions each Airflow resolves with.
PROVIDERS = {
    3: ("apache-airflow-providers-openlineage==2.20.3", "apache-airflow-providers-postgres==7.1.1"),
    2: ("apache-airflow-providers-openlineage==2.8.0", "apache-airflow-providers-postgres==6.4.1"),
}
_PROVIDER_MODULES = "import airflow.providers.openlineage, airflow.providers.postgres"
TRACELAKE_DIR = Path(__file__).resolve().parents[1] / ".tracelake"
DEFAULT_VENVS = {3: TRACELAKE_DIR / "airflow-venv", 2: TRACELAKE_DIR / "airflow2-venv"}
APIS = {3: "v2", 2: "v1"}  # the REST API each major speaks


def log(message: str) -> None:
    print(f"[airflow_test_server] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def installed_major(venv_dir: Path) -> int | None:
    """The major version of the apache-airflow installed in `venv_dir`, read from its metadata."""
    for info in venv_dir.glob("lib/python*/site-packages/apache_airflow-*.dist-info"):
        if found := re.match(r"apache_airflow-(\d+)\.", info.name):
            return int(found.group(1))
    return None


def ensure_airflow(venv_dir: Path, version: str, install: bool, *, numpy: bool) -> Path:
    """The venv's `airflow` executable; with `install`, first installs what is missing: Airflow
    and its OpenLineage and Postgres providers, and with `numpy` numpy (Tracelake's store imports
    it, and Airflow 3's live tests run Tracelake in Airflow's tasks)."""
    airflow, python = venv_dir / "bin" / "airflow", venv_dir / "bin" / "python"
    if not install:
        if not airflow.exists():
            raise SystemExit(f"{airflow} not found: pass --install to create the venv and install Airflow")
        return airflow
    if not python.exists():
        log(f"creating venv {venv_dir}")
        venv.create(venv_dir, with_pip=True)

    def imports(code: str) -> bool:
        return subprocess.run([str(python), "-c", code], capture_output=True).returncode == 0

    if airflow.exists() and (not numpy or imports("import numpy")) and imports(_PROVIDER_MODULES):
        return airflow
    providers = PROVIDERS.get(int(version.split(".")[0]), ())
    command = [str(python), "-m", "pip", "install", "-q", f"apache-airflow=={version}", *providers]
    command += ["numpy>=1.26,<3"] if numpy else []
    log(f"installing: {' '.join(command)} (about 40 s and 350 MB)")
    subprocess.run(command, check=True)
    return airflow


def airflow_env(home: Path, dags: Path, extra: list[str], config: dict[str, str]) -> dict[str, str]:
    """The environment of every Airflow process: the settings both majors share, then `config`
    (the major's own), then --env."""
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("AIRFLOW")]:  # no outside config leaks in
        del env[key]
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            # the scheduler's and triggerer's log servers default to 8793 and 8794: two test
            # Airflows (or an API on 8794) would collide there
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "PYTHONUNBUFFERED": "1",
            **config,
        }
    )
    for item in extra:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def airflow3_config(home: Path, port: int, user: str) -> dict[str, str]:
    return {
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # LocalExecutor forks `parallelism` workers up front: 32 by default, 4.8 GB of RSS
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{user}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        # one secret shared by every process, or tokens made by one are refused by another
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        # task runners (scheduler + LocalExecutor) reach the execution API here, not :8080
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
    }


def airflow2_config(home: Path, port: int) -> dict[str, str]:
    return {
        # Airflow 2 refuses SQLite with any executor that runs tasks in parallel
        "AIRFLOW__CORE__EXECUTOR": "SequentialExecutor",
        # /api/v1 takes HTTP basic auth only when told to (the default is the UI's session)
        "AIRFLOW__API__AUTH_BACKENDS": ",".join(
            f"airflow.providers.fab.auth_manager.api.auth.backend.{name}"
            for name in ("basic_auth", "session")
        ),
        "AIRFLOW__WEBSERVER__SECRET_KEY": secrets.token_urlsafe(32),
        "AIRFLOW__WEBSERVER__WEB_SERVER_HOST": "127.0.0.1",
        "AIRFLOW__WEBSERVER__WEB_SERVER_PORT": str(port),
        "AIRFLOW__WEBSERVER__WORKERS": "1",
        # where recent gunicorns put their control socket, else ~/.gunicorn/: shared, so it collides
        "XDG_RUNTIME_DIR": str(home),
    }


def http_json(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def auth_headers(token: str | None, user: str, password: str) -> dict[str, str]:
    """A bearer token's header (Airflow 3), or HTTP basic auth's (Airflow 2, no token)."""
    if token is not None:
        return {"Authorization": f"Bearer {token}"}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


class AirflowProcesses:
    """The background Airflow processes of one home, each in its own process group."""

    def __init__(self, airflow: Path, env: dict[str, str], logs: Path) -> None:
        self.airflow, self.env, self.logs = airflow, env, logs
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def run(self, name: str, *args: str) -> None:
        """Run an airflow command to completion (its output goes to logs/<name>.out)."""
        with open(self.logs / f"{name}.out", "wb") as out:
            code = subprocess.run([str(self.airflow), *args], env=self.env, stdout=out, stderr=out).returncode
        if code != 0:
            raise SystemExit(f"`airflow {' '.join(args)}` failed ({code}): see {self.logs / f'{name}.out'}")

    def start(self, name: str, *args: str) -> None:
        out = open(self.logs / f"{name}.out", "wb")  # noqa: SIM115 - lives as long as the child
        self.children[name] = subprocess.Popen(
            [str(self.airflow), *args], env=self.env, stdout=out, stderr=out, start_new_session=True
        )

    def dead(self) -> str | None:
        """The name of a child that has exited, if any."""
        return next((name for name, child in self.children.items() if child.poll() is not None), None)

    def stop(self, grace: float = 15.0) -> None:
        for child in self.children.values():
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in self.children.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):  # the group too: workers, log servers
                os.killpg(child.pid, signal.SIGKILL)


def poll(ready: Callable[[], bool], procs: AirflowProcesses, deadline: float) -> None:
    """Ask `ready()` every half second until it says yes; fail if a child dies or at `deadline`."""
    while time.monotonic() < deadline:
        if name := procs.dead():
            raise SystemExit(f"airflow {name} exited early: see {procs.logs / f'{name}.out'}")
        with contextlib.suppress(OSError):  # not listening yet
            if ready():
                return
        time.sleep(0.5)
    raise SystemExit(f"Airflow not ready within --timeout: see the logs in {procs.logs}")


def wait_ready(
    api: str, health: str, login: Callable[[], str | None], args: argparse.Namespace, procs: AirflowProcesses
) -> str | None:
    """Wait until GET `<api>/<health>` answers 200, log in, then wait until the API knows every
    DAG of --expect-dag; return the token `login()` gave (None: HTTP basic auth)."""
    deadline = time.monotonic() + args.timeout
    poll(lambda: http_json("GET", f"{api}/{health}")[0] == 200, procs, deadline)
    token = login()
    headers = auth_headers(token, args.user, args.password)
    poll(
        lambda: all(
            http_json("GET", f"{api}/dags/{dag}", headers=headers)[0] == 200 for dag in args.expect_dag
        ),
        procs,
        deadline,
    )
    return token


def fetch_token(url: str, user: str, password: str) -> str:
    """A bearer token from Airflow 3's simple auth manager."""
    status, body = http_json("POST", f"{url}/auth/token", {"username": user, "password": password})
    if status != 201:
        raise SystemExit(f"POST /auth/token: HTTP {status}: {body}")
    return str(body["access_token"])


def start_airflow3(procs: AirflowProcesses, args: argparse.Namespace, url: str, port: int) -> str | None:
    """Airflow 3: migrate, reserialize, start the API server (and the DAG processor and scheduler
    if asked); return a bearer token once it is ready."""
    (args.home / "passwords.json").write_text(json.dumps({args.user: args.password}) + "\n")
    log(f"airflow db migrate (home {args.home})")
    procs.run("db-migrate", "db", "migrate")
    if not args.dag_processor:
        log(f"airflow dags reserialize ({args.dags})")
        procs.run("reserialize", "dags", "reserialize")
    log(f"starting api-server on {url}")
    procs.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
    if args.dag_processor:
        procs.start("dag-processor", "dag-processor")
    if args.scheduler:
        procs.start("scheduler", "scheduler")
    login = functools.partial(fetch_token, url, args.user, args.password)
    return wait_ready(f"{url}/api/{APIS[3]}", "monitor/health", login, args, procs)


def start_airflow2(procs: AirflowProcesses, args: argparse.Namespace, url: str, port: int) -> str | None:
    """Airflow 2: migrate, create the user, reserialize, start the webserver (and the scheduler if
    asked, which parses the DAGs itself); return None (no token: HTTP basic auth) once it is ready."""
    log(f"airflow db migrate (home {args.home})")
    procs.run("db-migrate", "db", "migrate")
    log(f"airflow users create ({args.user}, role Admin)")
    procs.run(
        "users-create", "users", "create", "--username", args.user, "--password", args.password,
        "--role", "Admin", "--firstname", "Test", "--lastname", "Admin",
        "--email", f"{args.user}@example.com",
    )  # fmt: skip
    log(f"airflow dags reserialize ({args.dags})")
    procs.run("reserialize", "dags", "reserialize")
    log(f"starting webserver on {url}")
    procs.start("webserver", "webserver", "--hostname", "127.0.0.1", "--port", str(port), "--workers", "1")
    if args.scheduler:
        procs.start("scheduler", "scheduler")
    return wait_ready(f"{url}/api/{APIS[2]}", "health", lambda: None, args, procs)


STARTERS = {3: start_airflow3, 2: start_airflow2}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--major",
        type=int,
        choices=(3, 2),
        help="Airflow 3 or 2 (default: --airflow-version's, the venv's, else 3)",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        help="venv with apache-airflow (default .tracelake/airflow-venv, airflow2-venv for 2)",
    )
    parser.add_argument("--home", type=Path, help="AIRFLOW_HOME (SQLite db and logs go here)")
    parser.add_argument("--dags", type=Path, help="the DAGs folder")
    parser.add_argument(
        "--install-only", action="store_true", help="create the venv / install Airflow if missing, then exit"
    )
    parser.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--install", action="store_true", help="create the venv / install Airflow if missing")
    parser.add_argument(
        "--airflow-version",
        help=f"the version to install (default {AIRFLOW_VERSIONS[3]}, {AIRFLOW_VERSIONS[2]} for 2)",
    )
    parser.add_argument("--scheduler", action="store_true", help="also run a scheduler")
    parser.add_argument(
        "--dag-processor",
        action="store_true",
        help="Airflow 3: run a DAG processor instead of one reserialize",
    )
    parser.add_argument(
        "--expect-dag", action="append", default=[], metavar="DAG_ID", help="wait until known"
    )
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", default="admin")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra Airflow config"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for readiness")
    args = parser.parse_args(argv)
    if args.major is None:
        from_version = args.airflow_version and int(args.airflow_version.split(".")[0])
        args.major = from_version or (args.venv and installed_major(args.venv)) or 3
    args.venv = (args.venv or DEFAULT_VENVS[args.major]).resolve()
    args.airflow_version = args.airflow_version or AIRFLOW_VERSIONS[args.major]
    if args.major == 2 and args.dag_processor:
        parser.error("--dag-processor is for Airflow 3 (Airflow 2's scheduler parses the DAGs itself)")
    if not args.install_only and (args.home is None or args.dags is None):
        parser.error("--home and --dags are needed to start Airflow")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    numpy = args.major == 3
    if args.install_only:
        ensure_airflow(args.venv, args.airflow_version, True, numpy=numpy)
        return 0

    started = time.monotonic()
    airflow = ensure_airflow(args.venv, args.airflow_version, args.install, numpy=numpy)
    args.home, args.dags = args.home.resolve(), args.dags.resolve()
    logs = args.home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    if args.major == 3:
        config = airflow3_config(args.home, port, args.user)
    else:
        config = airflow2_config(args.home, port)
    procs = AirflowProcesses(airflow, airflow_env(args.home, args.dags, args.env, config), logs)

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        token = STARTERS[args.major](procs, args, url, port)
        ready = {
            "url": url,
            "api": APIS[args.major],
            "token": token,
            "username": args.user,
            "password": args.password,
            "pids": {name: child.pid for name, child in procs.children.items()},
            "home": str(args.home),
            "logs": str(logs),
            "startup_seconds": round(time.monotonic() - started, 1),
        }
        print(json.dumps(ready), flush=True)
        while (name := procs.dead()) is None:
            time.sleep(1)
        log(f"airflow {name} exited: see {logs / f'{name}.out'}; stopping the others")
        return 1
    except KeyboardInterrupt:
        log("stopping")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.stop()


if __name__ == "__main__":
    sys.exit(main())
