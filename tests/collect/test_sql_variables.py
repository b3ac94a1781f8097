"""`${var}` placeholders (issue 18): values from `--var`, then from the script's own SETs, as
Hive and Spark substitute them before parsing; a placeholder without a value stays as written."""

from __future__ import annotations

from pathlib import Path

from tracelake.collect.sql import collect_sql, substitute_variables

from ..test_cli import run


def test_given_values_and_sets_from_their_place_on() -> None:
    text = (
        "SELECT '${ds}' FROM ${db}.t;\n"
        "SET hivevar:db=raw;\n"
        "SELECT * FROM ${hivevar:db}.t WHERE x = ${hiveconf:n};"
    )
    variables = {"ds": "2024-01-01", "db": "dw"}
    assert substitute_variables(text, variables) == (
        "SELECT '2024-01-01' FROM dw.t;\nSET hivevar:db=raw;\nSELECT * FROM raw.t WHERE x = ${hiveconf:n};"
    )
    assert variables["db"] == "raw"  # a SET updates the run's values


def test_a_templated_insert_lands_in_the_named_tables() -> None:
    c = collect_sql(
        "INSERT OVERWRITE TABLE ${target}.daily SELECT id FROM ${src}.events",
        dialect="hive",
        variables={"target": "dw", "src": "raw"},
    )
    assert {(e.source, e.target) for b in c.batches for e in b.edges} == {
        ("hive.table/raw.events", "hive.table/dw.daily"),
        ("hive.table/raw.events#id", "hive.table/dw.daily#id"),
    }


def test_the_cli_takes_var_and_refuses_a_bad_one(tmp_path: Path) -> None:
    script = tmp_path / "daily.sql"
    script.write_text("INSERT INTO ${db}.daily SELECT id FROM raw.events;\n", encoding="utf-8")
    db = str(tmp_path / "lineage.db")
    code, out, err = run("ingest", "sql", str(script), "--var", "db=dw", "--db", db)
    assert code == 0, err
    code, out, _ = run("lineage", "dw.daily", "--up", "--format", "json", "--db", db)
    assert code == 0 and "raw.events" in out
    code, _, err = run("ingest", "sql", str(script), "--var", "db", "--db", db)
    assert code == 2 and "--var 'db': expected NAME=VALUE" in err and "Traceback" not in err
