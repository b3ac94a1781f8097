"""Issue 18's forms in one file, ingested as a user would (`tracelake ingest sql … --var`): no
statement silent, each one's lineage as written beside it in `data/forms.sql`, worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tracelake.cli import app
from tracelake.collect.sql import collect_path

from . import direct_edges, table_edges

FORMS = Path(__file__).parent / "data" / "forms.sql"

DIRECT = {
    ("src.s1#a", "dw.t1#a", "IDENTITY"),
    ("src.s1#b", "dw.t1#b", "IDENTITY"),
    ("src.s1#a", "dw.t2#a", "IDENTITY"),
    ("src.s1#b", "dw.t2#b", "IDENTITY"),
    ("src.s1#a", "dw.v#a", "IDENTITY"),
    *{(f"src.c#{n}", f"dw.t3#{n}", "IDENTITY") for n in "xyz"},
    *{(f"src.c#{n}", f"src.c2#{n}", "IDENTITY") for n in "xyz"},
    *{(f"src.c2#{n}", f"dw.cl#{n}", "IDENTITY") for n in "xyz"},
    ("src.kv#key", "dw.s1#key", "IDENTITY"),
    ("src.kv#value", "dw.s1#value", "IDENTITY"),
    ("src.ids#id", "dw.vals#top", "AGGREGATION"),
    ("src.x#a", "dw.o#a", "IDENTITY"),
    ("src.y#a", "dw.o#a", "IDENTITY"),
    ("src.x#b", "dw.o#b", "IDENTITY"),
    ("src.y#c", "dw.o#c", "IDENTITY"),
    ("src.s1#a", "dw.p#a", "IDENTITY"),
    ("src.kv#key", "dw.f#key", "IDENTITY"),
    ("src.s1#a", "file.dataset//exports/x#a", "IDENTITY"),
    ("dw.t1#a", "dw.t1#b", "TRANSFORMATION"),
    ("src.users#id", "dw.lat#id", "IDENTITY"),
    ("src.orders#amount", "dw.lat#amount", "IDENTITY"),
    ("src.tree#id", "dw.tree_all#id", "IDENTITY"),
    ("src.s1#a", "dw.var_target#a", "IDENTITY"),
}


def test_every_form_in_one_file_through_the_cli(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["ingest", "sql", str(FORMS), "--var", "target=dw.var_target", "--db", str(tmp_path / "l.db")],
        env={"COLUMNS": "250"},
    )
    assert result.exit_code == 0, result.stderr
    # counted by hand from the file: 18 writes, the SELECT, and 7 that move no data
    assert (
        "26 statements: 26 parsed (18 with lineage, 1 read-only, 7 moving no data, 0 not traced)"
        in result.stdout
    )
    assert "problem" not in result.stderr


def test_every_form_in_one_file_has_its_lineage() -> None:
    c = collect_path(FORMS, variables={"target": "dw.var_target"})
    assert c.problems == []
    assert direct_edges(c) == DIRECT
    assert ("file.dataset//landing/kv.txt", "src.kv") in table_edges(c)
    assert ("src.gone", "dw.t1") in table_edges(c)  # the DELETE's condition
    (process,) = c.batches[0].processes
    assert process.metadata["reads"] == ["hive.table/src.s1"]
