"""`tracelake --help`, and the help of every command, load nothing that answering needs: no Spark,
no numpy, no SQL parser, no store, no web framework (issue 21: a one-off command paid a second of
imports before it did anything). Measured in a fresh interpreter, the way a shell runs it."""

from __future__ import annotations

import json
import subprocess
import sys

# What a command's answer may need, and its help must not load.
HEAVY = (
    "fastapi",
    "numpy",
    "openlineage.client",
    "pyarrow",
    "pyspark",
    "sqlalchemy",
    "sqlglot",
    "yaml",
    "tracelake.app.service",
    "tracelake.graph",
    "tracelake.store",
)

_HELP_OF_EVERY_COMMAND = """
import contextlib, io, json, sys
from typer.main import get_command
from tracelake.cli import app

pages = []
def walk(command, context):
    pages.append(" ".join(context.command_path.split()[1:]) or "tracelake")
    command.get_help(context)
    if hasattr(command, "list_commands"):  # a group (Typer's own click)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            walk(sub, type(context)(sub, info_name=name, parent=context))

with contextlib.redirect_stdout(io.StringIO()):
    root = get_command(app)
    walk(root, root.make_context("tracelake", [], resilient_parsing=True))
print(json.dumps({"pages": pages, "loaded": sorted(m for m in sys.modules)}))
"""


def test_the_help_of_every_command_loads_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HELP_OF_EVERY_COMMAND], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    expected = {"tracelake", "lineage", "privacy run", "entities load", "serve", "token add"}
    assert expected <= set(found["pages"])
    loaded = set(found["loaded"])
    assert [m for m in HEAVY if m in loaded] == []
