"""`tracelake why` on the dating example's query log (examples/dating/query_log.jsonl).

The log: on 2024-03-12 at 03:00 the safety.training_build job's temporary view recent_reports
began joining dating.user_profile (it read safety_log_tbl alone on the 10th and 11th); every
other job ran the same statements each day. So the day of the 12th holds exactly two changes
upstream of safety_training_tbl, both of that job, which writes it (0 hops); the 11th none.
"""

from __future__ import annotations

import json

import pytest

from tests.test_cli import ingest_example, run

TRAINING, PROFILE = "hive.table/dating.safety_training_tbl", "hive.table/dating.user_profile"
JOB = "sql.job/safety.training_build"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("why") / "lineage.db")
    ingest_example(path)
    return path


def test_why_names_the_job_that_changed_and_its_new_input(db: str) -> None:
    code, out, err = run(
        "why", "dating.safety_training_tbl", "--since", "2024-03-12", "--until", "2024-03-12T23:59:59",
        "--format", "json", "--db", db,
    )  # fmt: skip
    assert code == 0, err
    answer = json.loads(out)
    assert answer["asset"] == TRAINING and answer["since"] == "2024-03-12T00:00:00+00:00"
    assert [(c["kind"], c["subject"], c["distance"], c["at"]) for c in answer["causes"]] == [
        ("process_changed", JOB, 0, "2024-03-12T03:00:00+00:00"),  # 0.9
        ("input_added", JOB, 0, "2024-03-12T03:00:00+00:00"),  # 0.7
    ]
    assert answer["causes"][1]["detail"] == f"{TRAINING} now reads {PROFILE}"
    assert answer["causes"][1]["route"] == [{"source": PROFILE, "target": TRAINING, "process": JOB}]
    # upstream in that window: safety_log_tbl, user_profile, abuse_reports, user_profile_raw,
    # profile_update_log, raw.web_profile_events
    assert answer["upstream_nodes"] == 6


def test_why_as_a_table_and_when_nothing_changed(db: str) -> None:
    code, out, _ = run(
        "why", "dating.safety_training_tbl", "--since", "2024-03-12", "--until", "2024-03-13", "--db", db
    )
    assert code == 0
    assert "process changed" in out and "input added" in out
    assert "dating.user_profile → dating.safety_training_tbl" in out
    assert "2 changes over 6 upstream nodes and 4 processes; 2 shown" in out
    code, out, _ = run(
        "why", "dating.safety_training_tbl", "--since", "2024-03-11", "--until", "2024-03-11", "--db", db
    )
    assert code == 0 and out.startswith("nothing changed upstream of dating.safety_training_tbl")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "2024-03-13", "--until", "2024-03-12"], "the window is empty"),
        (["--since", "last tuesday"], "--since 'last tuesday' is not an ISO date or time"),
        (["--format", "dot"], "--format must be table or json"),
        (["--depth", "-1"], "depth must be 0 or more"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(db: str, args: list[str], message: str) -> None:
    code, out, err = run("why", "dating.safety_training_tbl", *args, "--db", db)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_an_unknown_table_is_a_user_error(db: str) -> None:
    code, _, err = run("why", "dating.no_such_table", "--db", db)
    assert code == 2 and "no_such_table" in err
