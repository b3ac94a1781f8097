"""Bad input never raises: a broken statement is a problem with its line, and its neighbours
still give lineage. Only a missing path and an unknown dialect raise.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tracelake.collect.sql import UnknownDialectError, collect_path, collect_sql

from . import column_edges, direct_edges, table_edges

BROKEN_MIDDLE = """INSERT INTO d.a SELECT x FROM d.s;

-- the next statement misspells SELECT
INSERT INTO d.b
SELEC y FROM d.s;
INSERT INTO d.c SELECT z FROM d.s;
"""


def test_a_broken_middle_statement_costs_only_itself() -> None:
    c = collect_sql(BROKEN_MIDDLE, source="etl.sql")
    assert (c.statements, c.parsed, c.failed) == (3, 2, 1)
    assert table_edges(c) == {("d.s", "d.a"), ("d.s", "d.c")}
    assert column_edges(c) == {("d.s#x", "d.a#x", "IDENTITY"), ("d.s#z", "d.c#z", "IDENTITY")}
    (problem,) = c.problems
    assert problem.source == "etl.sql"
    assert problem.location == "line 4, statement 2"
    assert problem.excerpt == "INSERT INTO d.b SELEC y FROM d.s"
    assert problem.reason  # sqlglot's message
    assert "\x1b" not in problem.reason


def test_semicolons_inside_strings_and_comments_do_not_split() -> None:
    c = collect_sql(
        "INSERT INTO d.a SELECT concat(x, ';') AS x FROM d.s -- a comment; with a semicolon\n;"
        "/* another; one */ INSERT INTO d.b SELECT y FROM d.s"
    )
    assert (c.statements, c.parsed, c.failed) == (2, 2, 0)
    assert direct_edges(c) == {("d.s#x", "d.a#x", "TRANSFORMATION"), ("d.s#y", "d.b#y", "IDENTITY")}


def test_a_text_the_tokenizer_rejects_is_a_problem_not_an_exception() -> None:
    c = collect_sql(
        "INSERT INTO d.a SELECT x FROM d.s;\nSELECT 'unterminated FROM t;\nINSERT INTO d.c SELECT z FROM d.s;"
    )
    assert table_edges(c) == {("d.s", "d.a"), ("d.s", "d.c")}
    (problem,) = c.problems
    assert problem.location == "line 2, statement 2"
    assert c.failed == 1 and c.parsed == 2


def test_empty_and_comment_only_texts_have_no_statements() -> None:
    for text in ("", "   \n\n", "-- nothing here\n/* nor here */\n", ";;;"):
        c = collect_sql(text)
        assert (c.statements, c.parsed, c.failed, c.problems, c.batches) == (0, 0, 0, [], [])


def test_an_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.sql").write_text("", encoding="utf-8")
    c = collect_path(tmp_path / "empty.sql")
    assert (c.statements, c.problems, c.batches) == (0, [], [])


def test_a_folder_with_a_binary_and_a_non_utf8_file(tmp_path: Path) -> None:
    (tmp_path / "a_good.sql").write_text("INSERT INTO d.t SELECT a FROM d.s", encoding="utf-8")
    (tmp_path / "b_binary.sql").write_bytes(b"\x00\x01\x02SELECT\xff")
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "c_latin1.sql").write_bytes("SELECT 'café' FROM d.s".encode("latin-1"))
    (nested / "d_good.sql").write_text("INSERT INTO d.u SELECT b FROM d.s", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("INSERT INTO d.x SELECT c FROM d.s", encoding="utf-8")
    seen: list[int] = []
    c = collect_path(tmp_path, progress=seen.append)
    assert table_edges(c) == {("d.s", "d.t"), ("d.s", "d.u")}
    reasons = {Path(p.source).name: p.reason for p in c.problems}
    assert reasons == {
        "b_binary.sql": "line 1: not text: a NUL byte at column 1; the statement is skipped",
        "c_latin1.sql": "line 1: not UTF-8 text at column 12; the statement is skipped",
    }
    # one batch per file, each its own process named by the path as given
    assert [b.processes[0].urn for b in c.batches] == [
        f"sql.script/{tmp_path / 'a_good.sql'}",
        f"sql.script/{nested / 'd_good.sql'}",
    ]
    # the two unreadable statements count, as failed
    assert seen == sorted(seen) and seen[-1] == c.statements == 4 and c.failed == 2


def test_a_missing_path_raises_file_not_found_with_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sql"
    with pytest.raises(FileNotFoundError, match=r"nope\.sql"):
        collect_path(missing)


def test_an_unknown_dialect_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UnknownDialectError, match="spark") as raised:
        collect_path(tmp_path / "does-not-exist.sql", dialect="sparkle")
    assert "sparkle" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(UnknownDialectError):
        collect_sql("SELECT 1", dialect="nonsense")


def test_a_five_thousand_column_select_works_quickly() -> None:
    columns = ", ".join(f"c{i}" for i in range(5000))
    started = time.perf_counter()
    c = collect_sql(f"INSERT INTO d.wide SELECT {columns} FROM d.src")
    assert time.perf_counter() - started < 5
    assert len(direct_edges(c)) == 5000
    assert ("d.src#c4999", "d.wide#c4999", "IDENTITY") in direct_edges(c)


def test_a_five_thousand_term_expression_works_quickly() -> None:
    started = time.perf_counter()
    c = collect_sql("INSERT INTO d.t SELECT " + " + ".join(f"c{i}" for i in range(5000)) + " AS s FROM d.src")
    assert time.perf_counter() - started < 5
    assert c.failed == 0
    assert len(direct_edges(c)) == 5000


def test_two_megabytes_of_sql_end_within_seconds() -> None:
    values = ", ".join(f"'v{i:07d}'" for i in range(180_000))
    sql = f"INSERT INTO d.t SELECT a FROM d.s WHERE a IN ({values})"
    assert len(sql) > 2_000_000
    started = time.perf_counter()
    c = collect_sql(sql)
    assert time.perf_counter() - started < 8
    assert column_edges(c) == {("d.s#a", "d.t#a", "IDENTITY"), ("d.s#a", "d.t#a", "FILTER")}


def test_nesting_too_deep_to_parse_is_a_problem() -> None:
    c = collect_sql("SELECT " + "(" * 5000 + "1" + ")" * 5000 + ";\nINSERT INTO d.a SELECT x FROM d.s")
    assert c.failed == 1 and c.parsed == 1
    assert "deep" in c.problems[0].reason
    assert table_edges(c) == {("d.s", "d.a")}


def test_a_statement_whose_lineage_cannot_be_worked_out_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracelake.collect import sql_statements

    original = sql_statements.RunState.apply

    def apply(self: sql_statements.RunState, statement: object, **options: object) -> sql_statements.Outcome:
        if "boom" in str(statement):
            raise KeyError("boom")
        return original(self, statement, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(sql_statements.RunState, "apply", apply)
    c = collect_sql("INSERT INTO d.a SELECT x FROM d.s;\nINSERT INTO d.boom SELECT y FROM d.s;")
    assert (c.parsed, c.failed) == (1, 1)
    (problem,) = c.problems
    assert problem.location == "line 2, statement 2"
    assert "KeyError" in problem.reason
    assert table_edges(c) == {("d.s", "d.a")}
