#!/usr/bin/env python3
"""Start a throwaway Apache Airflow 3 (SQLite) for integration tests, and keep it running.

    python3 scripts/airflow_test_server.py [--venv DIR] --home /tmp/af-home \
        --dags tests/temporal/airflow_dags --port 0 [--install] [--scheduler] [--dag-processor]
    python3 scripts/airflow_test_server.py --install-only      # what CI does before the tests

The venv defaults to `.tracelake/airflow-venv`: Airflow's pins would fight Tracelake's own, so
it never shares the project's venv.

What it does, in order:
  1. with --install, creates the venv and pip-installs apache-airflow if `<venv>/bin/airflow` is
     missing (PyPI only, no constraints file: GitHub is not reachable here);
  2. `airflow db migrate` into `<home>/airflow.db` (a fresh home gives a fresh database);
  3. `airflow dags reserialize`, which parses `--dags` once and writes the DAGs to the database,
     so the REST API knows them without a DAG processor running (skipped with --dag-processor);
  4. starts `airflow api-server` (one uvicorn worker on 127.0.0.1), and with --dag-processor /
     --scheduler those too, each in its own process group, logs in `<home>/logs/*.out`;
  5. waits until `GET /api/v2/monitor/health` answers 200 and every DAG named by --expect-dag
     is known, fetches a token from `POST /auth/token`, and prints ONE JSON line:
     {"url", "token", "username", "password", "pids", "home", "logs", "startup_seconds"};
  6. stays in the foreground until SIGTERM/SIGINT (or a child dies), then stops its children
     (their process groups). SIGKILL it and they live on: stop it with SIGTERM.

Authentication is Airflow 3's default simple auth manager with one user whose password this
script writes into the passwords file before the server starts, so it is known in advance.
Without a scheduler, runs made through the API stay `queued` and their task instances keep the
state the API gives them (PATCH), which is what deterministic tests want. Stdlib only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import venv
from pathlib import Path
from typing import Any

AIRFLOW_VERSION = "3.3.2"
DEFAULT_VENV = Path(__file__).resolve().parents[1] / ".tracelake" / "airflow-venv"


def log(message: str) -> None:
    print(f"[airflow_test_server] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_airflow(venv_dir: Path, version: str, install: bool) -> Path:
    """The venv's `airflow` executable, installing it first when asked and missing."""
    airflow = venv_dir / "bin" / "airflow"
    if airflow.exists():
        return airflow
    if not install:
        raise SystemExit(f"{airflow} not found: pass --install to create the venv and install Airflow")
    if not (venv_dir / "bin" / "python").exists():
        log(f"creating venv {venv_dir}")
        venv.create(venv_dir, with_pip=True)
    command = [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", f"apache-airflow=={version}"]
    log(f"installing: {' '.join(command)} (about 20 s and 300 MB)")
    subprocess.run(command, check=True)
    return airflow


def airflow_env(home: Path, dags: Path, port: int, user: str, extra: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    for key in [k for k in env if k.startswith("AIRFLOW")]:  # no outside config leaks in
        del env[key]
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
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
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            # the scheduler's and triggerer's log servers default to 8793 and 8794: two test
            # Airflows (or an API on 8794) would collide there
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "PYTHONUNBUFFERED": "1",
        }
    )
    for item in extra:
        key, _, value = item.partition("=")
        env[key] = value
    return env


def http_json(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


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


def wait_ready(
    url: str, user: str, password: str, dags: list[str], procs: AirflowProcesses, timeout: float
) -> str:
    """Wait for the API to be healthy and to know `dags`; return a bearer token."""
    deadline = time.monotonic() + timeout
    token = None
    while time.monotonic() < deadline:
        if name := procs.dead():
            raise SystemExit(f"airflow {name} exited early: see {procs.logs / f'{name}.out'}")
        try:
            if token is None and http_json("GET", f"{url}/api/v2/monitor/health")[0] == 200:
                status, body = http_json(
                    "POST", f"{url}/auth/token", {"username": user, "password": password}
                )
                if status != 201:
                    raise SystemExit(f"POST /auth/token: HTTP {status}: {body}")
                token = body["access_token"]
            if token is not None and all(
                http_json("GET", f"{url}/api/v2/dags/{dag}", token=token)[0] == 200 for dag in dags
            ):
                return token
        except OSError:
            pass  # not listening yet
        time.sleep(0.5)
    raise SystemExit(f"Airflow not ready after {timeout:.0f} s: see the logs in {procs.logs}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--venv", type=Path, default=DEFAULT_VENV, help=f"venv with apache-airflow (default {DEFAULT_VENV})"
    )
    parser.add_argument("--home", type=Path, help="AIRFLOW_HOME (SQLite db and logs go here)")
    parser.add_argument("--dags", type=Path, help="the DAGs folder")
    parser.add_argument(
        "--install-only", action="store_true", help="create the venv / install Airflow if missing, then exit"
    )
    parser.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--install", action="store_true", help="create the venv / install Airflow if missing")
    parser.add_argument("--airflow-version", default=AIRFLOW_VERSION)
    parser.add_argument("--scheduler", action="store_true", help="also run a scheduler (LocalExecutor)")
    parser.add_argument(
        "--dag-processor", action="store_true", help="run a DAG processor instead of one reserialize"
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
    if args.install_only:
        ensure_airflow(args.venv.resolve(), args.airflow_version, True)
        return 0
    if args.home is None or args.dags is None:
        parser.error("--home and --dags are needed to start Airflow")

    started = time.monotonic()
    airflow = ensure_airflow(args.venv.resolve(), args.airflow_version, args.install)
    home, dags = args.home.resolve(), args.dags.resolve()
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (home / "passwords.json").write_text(json.dumps({args.user: args.password}) + "\n")
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    procs = AirflowProcesses(airflow, airflow_env(home, dags, port, args.user, args.env), logs)

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        log(f"airflow db migrate (home {home})")
        procs.run("db-migrate", "db", "migrate")
        if not args.dag_processor:
            log(f"airflow dags reserialize ({dags})")
            procs.run("reserialize", "dags", "reserialize")
        log(f"starting api-server on {url}")
        procs.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1")
        if args.dag_processor:
            procs.start("dag-processor", "dag-processor")
        if args.scheduler:
            procs.start("scheduler", "scheduler")
        token = wait_ready(url, args.user, args.password, args.expect_dag, procs, args.timeout)
        ready = {
            "url": url,
            "token": token,
            "username": args.user,
            "password": args.password,
            "pids": {name: child.pid for name, child in procs.children.items()},
            "home": str(home),
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
