"""The entity commands end to end on real SQLite: load, taint (dry run, JSON, --apply), status,
record and ready, and the clear one-line errors for user mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracelake.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "entities" / "wordcount.yml"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "lineage.db")
    code, out, err = run("entities", "load", str(EXAMPLE), "--db", path)
    assert code == 0, err
    assert "stored 5 entities" in out
    return path


def test_load_reports_every_problem_with_file_and_line_and_stores_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "- name: a\n  period: daily\n  depends_on:\n    - entity: b\n- name: b\n  period: weekly\n"
    )
    db = str(tmp_path / "lineage.db")

    code, _, err = run("entities", "load", str(bad), "--db", db)

    assert code == 1
    assert f"{bad}:line 5: b: a weekly entity must declare its `week_start`" in err
    assert f"{bad}:line 4: a: depends on unknown entity 'b'" in err
    assert "nothing stored" in err and "Traceback" not in err
    code, _, err = run("entities", "list", "--db", db)
    assert code == 2 and "no entity definitions" in err


def test_taint_prints_the_plan_as_json_in_topological_order(db: str) -> None:
    code, out, _ = run(
        "taint", "articles_by_author", "--from", "2024-03-13T05:00", "--to", "2024-03-13T15:00",
        "--reason", "bad load", "--until", "2024-06-01", "--format", "json", "--db", db,
    )  # fmt: skip

    assert code == 0
    plan = json.loads(out)
    # 10 hours of one day taint that day, its word count, and the Monday-to-Monday week holding it
    assert [(s["entity"], s["start"], s["end"], s["action"]) for s in plan] == [
        ("articles_by_author", "2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild"),
        ("words_count", "2024-03-13T00:00:00+00:00", "2024-03-14T00:00:00+00:00", "rebuild"),
        ("user_weekly_reads", "2024-03-11T00:00:00+00:00", "2024-03-18T00:00:00+00:00", "rebuild"),
    ]
    assert plan[2]["path"] == ["articles_by_author", "words_count", "user_weekly_reads"]


def test_taint_is_a_dry_run_unless_applied(db: str) -> None:
    args = ["taint", "nb_read_exact", "--from", "2024-03-11", "--to", "2024-03-12", "--reason", "dup"]
    code, out, err = run(*args, "--until", "2024-06-01", "--db", db)
    assert code == 0 and "downgrade (keeps estimated)" in out and "dry run" in err
    assert "no instance of user_weekly_reads on record" in run("status", "user_weekly_reads", "--db", db)[1]

    code, _, err = run(*args, "--until", "2024-06-01", "--apply", "--actor", "oncall", "--db", db)

    assert code == 0 and "1 instance(s) marked for rebuild, 1 downgraded" in err
    code, out, _ = run("status", "user_weekly_reads", "--db", db)
    assert "2024-03-11T00:00:00+00:00" in out and "estimated" in out and "oncall" in out


def test_record_then_ready(db: str) -> None:
    code, out, _ = run("ready", "words_count", "--at", "2024-03-13", "--db", db)
    assert code == 1 and "articles_by_author" in out and "missing" in out

    code, out, _ = run(
        "record", "articles_by_author", "--at", "2024-03-13T08:00", "--run-id", "r1", "--db", db
    )
    assert code == 0 and "2024-03-13T00:00:00+00:00: completed" in out

    code, out, _ = run("ready", "words_count", "--at", "2024-03-13", "--db", db)
    assert code == 0 and "is ready to be completed" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("status", "nope"), "unknown entity 'nope'"),
        (
            ("taint", "words_count", "--from", "yesterday", "--to", "2024-01-02", "--reason", "r"),
            "not an ISO",
        ),
        (
            ("taint", "words_count", "--from", "2024-01-02", "--to", "2024-01-01", "--reason", "r"),
            "not after",
        ),
        (("record", "words_count", "--at", "2024-01-01", "--state", "partial"), "has no state 'partial'"),
        (("entities", "load", "/no/such/place.yml"), "no such file or folder"),
        (("reconcile", "--from", "2024-03-01", "--to", "2024-04-01"), "reconcile needs Airflow"),
        (
            ("reconcile", "--from", "March", "--to", "2024-04-01", "--airflow-url", "http://127.0.0.1:9"),
            "--from 'March' is not an ISO date",
        ),
    ],
)
def test_user_mistakes_get_one_line_and_exit_2(db: str, args: tuple[str, ...], message: str) -> None:
    code, _, err = run(*args, "--db", db)

    assert code == 2
    assert message in err and "Traceback" not in err
