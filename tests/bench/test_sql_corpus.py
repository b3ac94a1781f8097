"""The SQL lineage benchmark's corpus: the files load, the expectations refer to statements
that exist (and to their target table), every table is in schema.json, and every statement
parses as Spark SQL — so a typo in the corpus fails CI rather than the benchmark."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import sqlglot
import yaml
from sqlglot import exp

BENCH_SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "sql_lineage.py"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sql_lineage", BENCH_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
STATEMENTS = bench.load_statements()
BY_ID = {statement.id: statement for statement in STATEMENTS}
SCHEMA: dict[str, dict[str, str]] = bench.load_schema()
EXPECTED_RAW: dict[str, dict[str, list[str]]] = yaml.safe_load(
    bench.EXPECTED_FILE.read_text(encoding="utf-8")
)


def _parse(statement_id: str) -> exp.Expr:
    return sqlglot.parse_one(BY_ID[statement_id].sql, dialect=bench.DIALECT)


def _table(node: exp.Table) -> str:
    return bench.table_name((node.catalog, node.db, node.name))


def _written_table(tree: exp.Expr) -> str:
    if isinstance(tree, exp.MultitableInserts):  # `FROM q INSERT …`: its first insert's table
        tree = tree.expressions[0]
    elif isinstance(tree, exp.Create) and tree.kind == "PROCEDURE":  # the write in its body
        tree = next(tree.expression.find_all(exp.Insert))
    target = tree.this
    return _table(target.this if isinstance(target, exp.Schema) else target)


def test_the_corpus_is_big_enough_and_its_ids_are_unique() -> None:
    ids = [statement.id for statement in STATEMENTS]
    assert len(ids) >= 200
    assert len(ids) == len(set(ids))
    assert all(statement.sql for statement in STATEMENTS)
    assert len(EXPECTED_RAW) >= 50


def test_every_expectation_refers_to_a_statement_that_exists() -> None:
    assert sorted(set(EXPECTED_RAW) - set(BY_ID)) == []


def test_expectations_are_lists_of_fully_qualified_lower_case_columns() -> None:
    for statement_id, columns in EXPECTED_RAW.items():
        for target, sources in columns.items():
            assert isinstance(sources, list), f"{statement_id}: {target} must map to a list"
            for name in (target, *sources):
                assert name == name.lower() and name.count(".") == 2, f"{statement_id}: {name!r}"


def test_expected_columns_exist_in_the_schema() -> None:
    for statement_id, columns in EXPECTED_RAW.items():
        for name in (name for target, sources in columns.items() for name in (target, *sources)):
            table, _, column = name.rpartition(".")
            assert column in SCHEMA.get(table, {}), f"{statement_id}: {name} is not in schema.json"


@pytest.mark.parametrize("statement_id", sorted(EXPECTED_RAW))
def test_expected_targets_are_columns_of_the_table_the_statement_writes(statement_id: str) -> None:
    written = _written_table(_parse(statement_id))
    for target in EXPECTED_RAW[statement_id]:
        assert target.rpartition(".")[0] == written, f"{statement_id} writes {written}, not {target}"


@pytest.mark.parametrize("statement_id", sorted(BY_ID))
def test_each_statement_parses_as_spark_sql(statement_id: str) -> None:
    tree = _parse(statement_id)
    assert not isinstance(tree, exp.Command), "sqlglot fell back to an unparsed command"


@pytest.mark.parametrize("statement_id", sorted(BY_ID))
def test_each_table_a_statement_uses_is_in_the_schema(statement_id: str) -> None:
    tree = _parse(statement_id)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    routines = {
        id(name)
        for create in tree.find_all(exp.Create)
        if create.kind in ("PROCEDURE", "FUNCTION")
        for name in create.this.find_all(exp.Table)
    }
    for node in tree.find_all(exp.Table):
        if not node.name or (not node.db and node.name.lower() in ctes) or id(node) in routines:
            continue  # a CTE, or the name of a procedure
        assert _table(node) in SCHEMA, f"{_table(node)} is not in schema.json"


def test_the_wide_statement_option_runs_and_finds_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    """`--wide N` (issue 18's widest statement) on a small N: each tool's line, Tracelake's complete.
    (`time_wide`, not `main`: main silences logging for the whole process, which other tests use.)"""
    bench.time_wide(5, bench.load_schema())
    out = capsys.readouterr().out
    assert "one CREATE TABLE AS SELECT of 5 computed columns" in out
    (line,) = [line for line in out.splitlines() if line.startswith("tracelake ")]
    assert line.endswith("5 direct column edges (expected 5)")
