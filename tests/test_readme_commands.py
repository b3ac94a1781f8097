"""Every `tracelake …` line of the README's code blocks runs, as written, in README order, on one
store the README's own commands build (issue 19): the exit code it documents (a comment saying
`exit N`; 0 where none is said), and never a traceback.

The README stays the truth: lines are read from it when the test runs, and a command the test
does not know how to run fails it. What a line names that cannot exist here is stood in for, each
stand-in made in `stand_ins`: the lake folder (as a path or a file: URI), the discovery session a
previous line started, the `…` the README writes for "the same arguments", the server's port.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner

from tests.api.test_api import run_event
from tests.net import free_port
from tracelake.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^\s*```(\w*)\s*$")
EXIT = re.compile(r"^\s*exit (\d)\b")  # a comment that starts "exit N" documents the line's exit
# A line of the README whose exit here is not the one it documents, and why.
EXITS_HERE = {
    "tracelake reconcile --from 2024-03-01 --to 2024-04-01 --airflow-url http://airflow:8080": (
        2,
        "no Airflow at that address here: one line says it cannot be reached (reconcile against a live "
        "Airflow is tests/temporal/test_airflow_live.py)",
    ),
}

pytestmark = pytest.mark.usefixtures("spark")


def readme_commands() -> list[tuple[int, str, str]]:
    """(line number, command, its comment) for each `tracelake` line in a sh/bash block."""
    found: list[tuple[int, str, str]] = []
    block: str | None = None  # the language of the fenced block we are in
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            block = fence.group(1) if block is None else None
            continue
        if block not in ("sh", "bash"):
            continue
        # a pipe into tracelake is a tracelake command too: its input is given by the test
        command = line.split("|", 1)[1] if "| tracelake " in line else line
        command, _, comment = command.strip().partition("  #")
        if command.startswith("tracelake "):
            found.append((number, command.strip(), comment))
    return found


@pytest.fixture
def workspace(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    """A folder to run the README from: the examples beside it, a small lake, the files the
    README's commands read."""
    from pyspark.sql import functions as F

    from tracelake.privacy import write

    (tmp_path / "examples").symlink_to(ROOT / "examples")
    lake = tmp_path / "lake" / "events"
    rows = (
        spark.range(0, 200, numPartitions=2)
        .withColumn("user_id", F.concat(F.lit("u"), (F.col("id") % 150).cast("string")))
        .withColumn(
            "identity_map",
            F.create_map(
                F.lit("email"),
                F.array(F.struct(F.concat(F.lit("e"), F.col("id").cast("string")).alias("id"))),
            ),
        )
    )
    write(rows, lake, identity=["user_id", "identity_map"])
    (tmp_path / "erase.txt").write_text("u7\nu8\n")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "dating.yml").write_text((ROOT / "examples/dating/policies.yml").read_text())
    events = "".join(json.dumps(run_event(f"readme.{n}")) + "\n" for n in range(3))
    (tmp_path / "events.jsonl").write_text(events)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    yield {"lake": str(lake), "events": events}


def stand_ins(command: str, workspace: dict[str, str], state: dict[str, str]) -> tuple[list[str], str | None]:
    """The command's arguments with what cannot exist here stood in for, and its standard input."""
    args = shlex.split(command)[1:]
    if args[:2] == ["taint", "…"]:
        args = [*state["taint"], *args[2:]]  # "…": the taint line before it, again
    elif args[:1] == ["taint"]:
        state["taint"] = args
    lake = {"/lake/events": workspace["lake"], "file:///lake/events": "file://" + workspace["lake"]}
    args = [lake.get(arg, state.get("session", arg) if arg == "<id>" else arg) for arg in args]
    stdin = workspace["events"] if args[:3] == ["ingest", "openlineage", "-"] else None
    return args, stdin


def run_server(args: list[str]) -> tuple[int, str]:
    """`tracelake serve …` for as long as it takes to answer one request, on a free port."""
    port = free_port()
    args = list(args)
    if "--port" in args:
        args[args.index("--port") + 1] = str(port)
    else:
        args += ["--port", str(port)]
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "tracelake"), *args],  # the console script, as typed
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/openapi.json", timeout=2)
                return (0 if answer.status_code == 200 else answer.status_code), ""
            except requests.ConnectionError:
                time.sleep(0.2)
        return server.wait(timeout=5), server.stderr.read() if server.stderr else ""
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_every_command_the_readme_shows_runs_as_documented(workspace: dict[str, str]) -> None:
    commands = readme_commands()
    assert len(commands) > 40  # the tour, privacy, labels, entities, the API
    state: dict[str, str] = {}
    ran = []
    for number, command, comment in commands:
        args, stdin = stand_ins(command, workspace, state)
        documented = EXIT.search(comment)
        expected = EXITS_HERE.get(command, (int(documented.group(1)) if documented else 0, ""))[0]
        if args[0] == "serve":
            code, err = run_server(args)
        else:
            result = CliRunner().invoke(app, args, input=stdin)
            code, err = result.exit_code, result.stderr
            assert not (result.exception and not isinstance(result.exception, SystemExit)), (
                f"README line {number}: {command}: {result.exception!r}"
            )
            if args[:2] == ["discover", "start"]:
                state["session"] = re.findall(r"discovery-[0-9a-f]+", result.stdout)[-1]
        assert "Traceback" not in err, f"README line {number}: {command}\n{err}"
        assert code == expected, f"README line {number}: {command}: exit {code}, not {expected}\n{err}"
        ran.append(command)
    assert ran == [command for _, command, _ in commands]
