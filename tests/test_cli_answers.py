"""`tracelake why` on the dating example's query log (examples/dating/query_log.jsonl).

The log: on 2024-03-12 at 03:00 the safety.training_build job's temporary view recent_reports
began joining dating.user_profile (it read safety_log_tbl alone on the 10th and 11th); every
other job ran the same statements each day. So the day of the 12th holds exactly two changes
upstream of safety_training_tbl, both of that job, which writes it (0 hops); the 11th none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import EXAMPLE, ingest_example, run

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
        (["--format", "dot"], "--format must be one of table, json, csv, xlsx, parquet here, not dot"),
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


# ---------------------------------------------------------------- critical path and deadlines
# The log's jobs on 2024-03-12 (start times only: a SQL log says when a statement ran, so a run is
# ready when it starts): raw.profile_events 00:00 writes profile_update_log, profile_etl.load
# 01:00 reads it into user_profile, ads.segments 08:00 reads user_profile; safety.log_ingest
# 02:00 reads user_profile into safety_log_tbl, safety.training_build 03:00 reads that.


def test_critical_path_of_the_ads_segments_on_a_day(db: str) -> None:
    code, out, err = run(
        "critical-path", "ads.user_segments", "--date", "2024-03-12", "--format", "json", "--db", db
    )
    assert code == 0, err
    answer = json.loads(out)
    assert answer["ready_at"] == "2024-03-12T08:00:00+00:00"
    assert [
        (s["asset"], s["process"], s["ready_at"][11:16], s["waited_seconds"]) for s in answer["steps"]
    ] == [
        ("hive.table/dating.profile_update_log", "sql.job/raw.profile_events", "00:00", None),
        ("hive.table/dating.user_profile", "sql.job/profile_etl.load", "01:00", 3600),
        ("hive.table/ads.user_segments", "sql.job/ads.segments", "08:00", 7 * 3600),
    ]
    code, out, _ = run("critical-path", "dating.safety_training_tbl", "--date", "2024-03-12", "--db", db)
    assert code == 0 and "ready at 2024-03-12T03:00:00+00:00, after 4 runs" in out
    code, out, _ = run("critical-path", "ads.user_segments", "--date", "2024-03-20", "--db", db)
    assert code == 0 and out.startswith("no run that writes ads.user_segments completed on 2024-03-20")


def test_deadlines_of_the_example_over_three_days(db: str) -> None:
    code, out, err = run("deadlines", "load", str(EXAMPLE / "deadlines.yml"), "--db", db)
    assert code == 0 and out.strip() == "stored 2 deadlines", err
    code, out, err = run(
        "deadlines", "check", "--from", "2024-03-10", "--to", "2024-03-12", "--format", "json", "--db", db
    )
    assert code == 1, err  # a deadline was missed
    found = {(c["date"], c["asset"]): (c["status"], c["margin_seconds"]) for c in json.loads(out)["checks"]}
    for day in ("2024-03-10", "2024-03-11", "2024-03-12"):
        assert found[(day, "hive.table/ads.user_segments")] == ("missed", -1800)  # ready 08:00 for 07:30
        assert found[(day, TRAINING)] == ("met", 3600)  # ready 03:00 UTC for 05:00 Paris (04:00 UTC)
    code, out, _ = run("deadlines", "check", "--date", "2024-03-12", "--db", db)
    assert code == 1 and "6 checked" not in out and "2 checked: 1 met, 0 at risk, 1 missed" in out


def test_a_deadline_file_with_a_mistake_is_refused_whole(db: str, tmp_path: Path) -> None:
    bad = tmp_path / "deadlines.yml"
    bad.write_text("deadlines:\n  - asset: ads.user_segments\n    by: 'soon'\n")
    code, _, err = run("deadlines", "load", str(bad), "--db", db)
    assert code == 1
    assert err.splitlines() == [
        f"error: {bad}:line 2: `by:` must be a time of day as HH:MM, not 'soon'",
        "error: nothing stored: 1 problem(s)",
    ]


# ---------------------------------------------------------------- coverage
# The log's tables on 2024-03-12: four only read (raw.web_profile_events, user_profile_raw,
# abuse_reports, match_events), eleven written, of which six nothing reads (user_interests,
# safety_training_latest, user_blocklist, daily_match_stats, dating_training_tbl,
# ads.user_segments); every flow from the SQL log.


def test_coverage_of_the_example(db: str) -> None:
    code, out, err = run("coverage", "--at", "2024-03-12", "--format", "json", "--db", db)
    assert code == 0, err
    view = json.loads(out)
    assert view["assets"] == {"covered": 11, "total": 15, "share": 0.7333}
    assert view["by_signal"] == {"sql_static": {"covered": 11, "total": 15, "share": 0.7333}}
    assert view["read_never_written"]["count"] == 4
    assert set(view["read_never_written"]["first"]) == {
        "hive.table/raw.web_profile_events",
        "hive.table/dating.user_profile_raw",
        "hive.table/dating.abuse_reports",
        "hive.table/dating.match_events",
    }
    assert set(view["written_never_read"]["first"]) == {
        f"hive.table/{name}"
        for name in (
            "dating.user_interests",
            "dating.safety_training_latest",
            "dating.user_blocklist",
            "dating.daily_match_stats",
            "dating.dating_training_tbl",
            "ads.user_segments",
        )
    }
    code, out, _ = run("coverage", "--at", "2024-03-12", "--history", "2", "--every", "1", "--db", db)
    assert code == 0 and "read, never written: 4" in out and "11/15 (73.3%)" in out
