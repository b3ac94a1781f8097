"""The `tracelake` command line: a thin typer layer over the application's front door
(`tracelake.app`). Each command parses its options, calls one operation and prints the result;
user mistakes end with a one-line message and exit code 2, never a traceback (`common`).
"""

from __future__ import annotations

import typer

from tracelake.cli import answers, entities, labels, lineage, privacy, serve

app = typer.Typer(
    name="tracelake",
    help="Privacy-aware data lineage for Spark data lakes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help pages, for every command: typer's rich ones import a Markdown parser, which
    # took a third of `tracelake --help` (issue 21: under 0.3 s).
    rich_markup_mode=None,
)
lineage.register(app)
answers.register(app)
app.add_typer(privacy.privacy_app, name="privacy")
entities.register(app)
labels.register(app)
serve.register(app)

__all__ = ["app"]
