"""SQL scripts and query logs are read incrementally (issue 19, items 3 and 4): one bad byte costs
its line (in a log) or its statement (in a script), never the file; a line or statement over the
limit is a problem and is skipped; memory stays bounded on input without end; and a script read in
pieces gives exactly the lineage and problems of the same script read whole.
"""

from __future__ import annotations

import io
import json
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from tracelake.collect.sql import SqlCollection, collect_path, collect_sql
from tracelake.collect.sql_input import Line, Piece, Skipped, read_lines, read_pieces
from tracelake.model import Problem

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "corpus"
FORMS = Path(__file__).resolve().parent / "data"


def entry(number: int) -> bytes:
    return json.dumps(
        {"query": f"INSERT INTO d.t{number} SELECT a FROM d.s", "job_id": f"j{number}"}
    ).encode()


def edges(c: SqlCollection) -> set[tuple[str, str]]:
    return {(e.source, e.target) for b in c.batches for e in b.edges}


def test_one_bad_line_of_a_query_log_costs_that_entry_only(tmp_path: Path) -> None:
    lines = [entry(n) for n in range(1, 11)]
    lines.insert(3, entry(90).replace(b"INSERT", b"INS\x00ERT"))  # entry 4: a NUL byte
    lines.insert(7, "SELECT 'café'".encode("latin-1"))  # entry 8: Latin-1, not UTF-8
    log = tmp_path / "queries.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")

    c = collect_path(log)

    assert {target.split("#")[0] for _, target in edges(c)} == {f"hive.table/d.t{n}" for n in range(1, 11)}
    assert [(p.location, p.reason) for p in c.problems] == [
        ("entry 4", "not text: a NUL byte at column 15"),
        ("entry 8", "not UTF-8 text at column 12"),
    ]
    assert c.failed == 2


def test_a_log_line_over_the_limit_is_skipped_and_the_next_one_read() -> None:
    data = entry(1) + b"\n" + b"x" * 5000 + b"\n" + entry(2) + b"\n"

    items = list(read_lines(io.BytesIO(data), "log", limit=1024))

    assert [type(item) for item in items] == [Line, Problem, Line]
    assert items[1] == Problem("log", "a line over 1,024 bytes", "line 2")
    assert isinstance(items[2], Line) and items[2].number == 3 and items[2].text == entry(2).decode()


def test_a_statement_over_the_limit_is_its_own_problem_and_its_neighbours_land() -> None:
    script = (
        "INSERT INTO d.before SELECT a FROM d.s;\n"
        "INSERT INTO d.huge SELECT\n" + "  a,\n" * 2000 + "  a FROM d.s;\n"
        "INSERT INTO d.after SELECT a FROM d.s;\n"
    ).encode()

    pieces = list(read_pieces(io.BytesIO(script), "etl.sql", backslash_escapes=True, limit=4096))
    c = collect_sql(pieces, source="etl.sql")

    assert [type(p) for p in pieces] == [Piece, Skipped, Piece]
    assert {target.split("#")[0] for _, target in edges(c)} == {"hive.table/d.before", "hive.table/d.after"}
    assert [(p.location, p.reason) for p in c.problems] == [
        ("line 2, statement 2", "a statement over 4,096 bytes; skipped")
    ]
    assert (c.statements, c.parsed, c.failed) == (3, 2, 1)


@pytest.mark.parametrize(
    ("dialect", "script"),
    [
        ("spark", "INSERT INTO d.t SELECT 'a;\nb;' AS x FROM d.s;\nINSERT INTO d.u SELECT a FROM d.s;\n"),
        ("spark", "INSERT INTO d.t SELECT 'it\\'s;\n' AS x FROM d.s;\nINSERT INTO d.u SELECT a FROM d.s;\n"),
        (
            "postgres",
            "INSERT INTO d.t SELECT 'it''s;\n' AS x FROM d.s;\nINSERT INTO d.u SELECT a FROM d.s;\n",
        ),
        (
            "spark",
            "INSERT INTO d.t /* a note;\n still; */ SELECT a FROM d.s;\nINSERT INTO d.u SELECT a FROM d.s;\n",
        ),
        (
            "postgres",
            "INSERT INTO d.t SELECT $x$ a;\n $x$ AS a FROM d.s;\nINSERT INTO d.u SELECT a FROM d.s;\n",
        ),
        (
            "spark",
            "INSERT INTO d.t SELECT `odd;\nname` FROM d.s; -- done;\nINSERT INTO d.u SELECT a FROM d.s;\n",
        ),
    ],
)
def test_pieces_are_never_cut_inside_a_string_a_name_or_a_comment(dialect: str, script: str) -> None:
    # a piece as small as can be: a cut at every line that ends a statement
    pieces = list(
        read_pieces(io.BytesIO(script.encode()), "s.sql", backslash_escapes=dialect == "spark", piece_bytes=1)
    )

    assert [type(p) for p in pieces] == [Piece, Piece]
    assert pieces[1] == Piece(3, "INSERT INTO d.u SELECT a FROM d.s;")
    assert collect_sql(pieces, dialect=dialect).failed == 0


@pytest.mark.parametrize(
    "path",
    [
        CORPUS / "dating.sql",
        CORPUS / "forms.sql",
        CORPUS / "holdout.sql",
        CORPUS / "tpcds.sql",
        FORMS / "forms.sql",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_a_script_read_in_pieces_gives_what_it_gives_read_whole(path: Path) -> None:
    whole = collect_sql(path.read_text(encoding="utf-8"), source=str(path))
    with path.open("rb") as handle:
        pieces = list(read_pieces(handle, str(path), backslash_escapes=True, piece_bytes=1))
    in_pieces = collect_sql(pieces, source=str(path))

    # really cut: a piece for every statement ending a line
    assert len(pieces) == sum(line.rstrip().endswith(";") for line in path.read_text().splitlines())
    assert (in_pieces.statements, in_pieces.parsed, in_pieces.failed) == (
        whole.statements,
        whole.parsed,
        whole.failed,
    )
    assert in_pieces.outcomes == whole.outcomes
    assert in_pieces.problems == whole.problems  # the same places: line and statement numbers
    assert [b.edges for b in in_pieces.batches] == [b.edges for b in whole.batches]


def test_input_without_end_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """64 MiB without a line break through a pipe: one problem, and never more than the limit held."""
    fifo = tmp_path / "endless"
    os.mkfifo(fifo)
    total = 64 * 1024 * 1024

    def feed() -> None:
        with fifo.open("wb") as writer:
            block = b"\x00" * (1024 * 1024)
            for _ in range(total // len(block)):
                writer.write(block)

    feeder = threading.Thread(target=feed)
    feeder.start()
    tracemalloc.start()
    try:
        with fifo.open("rb") as handle:
            items = list(read_pieces(handle, str(fifo), backslash_escapes=True, limit=1024 * 1024))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        feeder.join()

    assert items == [Skipped(1, "line 1: a line over 1 MiB; the statement is skipped")]
    assert peak < 8 * 1024 * 1024  # an eighth of what went through


def test_a_device_is_refused_not_read(tmp_path: Path) -> None:
    c = collect_path(Path("/dev/zero"))

    assert [(p.source, p.reason) for p in c.problems] == [("/dev/zero", "not a regular file")]


def test_a_file_that_is_no_log_at_all_is_one_problem_not_one_a_line(tmp_path: Path) -> None:
    """A 200,000-line script named .jsonl: stopped after 1,000 lines that are not JSON."""
    log = tmp_path / "etl.jsonl"
    log.write_text("INSERT INTO d.t SELECT\n" + "  a,\n" * 200_000 + "  a FROM d.s;\n")

    c = collect_path(log)

    assert [p.reason for p in c.problems] == [
        "not a JSON object: Expecting value",
        "not a query log: its first 1,000 lines are not JSON; stopped",
    ]
    assert c.batches == []
