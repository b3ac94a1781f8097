"""The critical path of a hand-timed set of runs.

    raw.a ─p_ingest_a─▶ stg.a ─┐
                               ├─p_join─▶ mart.m ─p_report─▶ rpt.r
    raw.b ─p_ingest_b─▶ stg.b ─┘

A usual day (June 3 to 9, UTC): p_ingest_a 01:00–01:30, p_ingest_b 01:00–02:00, p_join
02:05–02:35, p_report 02:40–03:00. On June 10 p_ingest_b takes two hours (01:00–03:00), p_join
fails once at 02:05–02:10 and runs again 03:05–03:35, p_report runs 03:40–04:00 and once more
at 10:00–10:20. Worked out by hand: rpt.r was ready at 04:00 (the day's first completed run),
through p_report ← p_join (the retry) ← p_ingest_b (stg.b was ready at 03:00, stg.a at 01:30),
each an hour late in the day, the hour added by p_ingest_b alone.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tracelake.app.critical_path import critical_path
from tracelake.app.deadlines import DeadlineCheck, DeadlineError, DeadlineOperations
from tracelake.app.service import Tracelake
from tracelake.model import FlowEdge, InputError, LineageBatch, Process, Run, Signal
from tracelake.store import LineageStore

DAY = date(2024, 6, 10)
USUAL = {
    "p_ingest_a": ("01:00", 30),
    "p_ingest_b": ("01:00", 60),
    "p_join": ("02:05", 30),
    "p_report": ("02:40", 20),
}


def t(name: str) -> str:
    return f"hive.table/{name}"


def p(name: str) -> str:
    return f"sql.query/{name}"


def at(day: date, hhmm: str) -> datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return datetime(day.year, day.month, day.day, hours, minutes, tzinfo=UTC)


def run(process: str, day: date, start: str, minutes: int, status: str = "COMPLETE") -> Run:
    began = at(day, start)
    return Run(f"{process}@{day}T{start}", p(process), began, began + timedelta(minutes=minutes), status)


@pytest.fixture
def lake(store: LineageStore) -> Tracelake:
    flows = {
        "p_ingest_a": [("raw.a", "stg.a")],
        "p_ingest_b": [("raw.b", "stg.b")],
        "p_join": [("stg.a", "mart.m"), ("stg.b", "mart.m")],
        "p_report": [("mart.m", "rpt.r")],
    }
    store.ingest(
        [
            LineageBatch(
                processes=[Process(p(name), name)],
                edges=[FlowEdge(t(a), t(b), p(name), Signal.SQL_STATIC) for a, b in pairs],
                observed_at=datetime(2024, 6, 1, tzinfo=UTC),
            )
            for name, pairs in flows.items()
        ]
    )
    runs = [
        run(name, DAY - timedelta(days=back), start, minutes)
        for back in range(1, 8)
        for name, (start, minutes) in USUAL.items()
    ]
    runs += [
        run("p_ingest_a", DAY, "01:00", 30),
        run("p_ingest_b", DAY, "01:00", 120),
        run("p_join", DAY, "02:05", 5, "FAIL"),
        run("p_join", DAY, "03:05", 30),
        run("p_report", DAY, "03:40", 20),
        run("p_report", DAY, "10:00", 20),
    ]
    store.ingest([LineageBatch(runs=runs)])
    return Tracelake(store)


def test_the_path_is_the_chain_of_runs_each_waited_for(lake: Tracelake) -> None:
    view = critical_path(lake, "rpt.r", DAY)
    assert view.ready_at == at(DAY, "04:00")
    found = [(s.process, s.asset, s.ready_at, s.waited_seconds) for s in view.steps]
    assert found == [
        (p("p_ingest_b"), t("stg.b"), at(DAY, "03:00"), None),
        (p("p_join"), t("mart.m"), at(DAY, "03:35"), 300.0),
        (p("p_report"), t("rpt.r"), at(DAY, "04:00"), 300.0),
    ]
    assert [s.run_id for s in view.steps][1] == "p_join@2024-06-10T03:05"  # the retry


def test_each_step_beside_its_usual_and_who_added_the_delay(lake: Tracelake) -> None:
    steps = critical_path(lake, "rpt.r", DAY).steps
    assert [(s.took_seconds, s.usual_seconds) for s in steps] == [(7200, 3600), (1800, 1800), (1200, 1200)]
    assert [s.late_seconds for s in steps] == [3600, 3600, 3600]
    assert [s.added_seconds for s in steps] == [3600, 0, 0]


def test_a_usual_day_has_the_usual_path(lake: Tracelake) -> None:
    day = DAY - timedelta(days=1)
    view = critical_path(lake, "rpt.r", day)
    assert view.ready_at == at(day, "03:00")
    assert [s.process for s in view.steps] == [p("p_ingest_b"), p("p_join"), p("p_report")]
    # June 9 is usual against June 3-8 (its own USUAL window): never late
    assert [s.late_seconds for s in view.steps] == [0, 0, 0]


def test_a_day_without_a_completed_run_has_no_path(lake: Tracelake) -> None:
    view = critical_path(lake, "rpt.r", DAY + timedelta(days=1))
    assert view.ready_at is None and view.steps == []
    assert critical_path(lake, "raw.a", DAY).steps == []  # a source: nothing writes it


def test_a_middle_table_starts_its_path_there(lake: Tracelake) -> None:
    view = critical_path(lake, "mart.m", DAY)
    assert [s.process for s in view.steps] == [p("p_ingest_b"), p("p_join")]


def test_an_unknown_time_zone_is_a_user_error(lake: Tracelake) -> None:
    with pytest.raises(InputError, match="unknown time zone"):
        critical_path(lake, "rpt.r", DAY, "Mars/Olympus")


# ---------------------------------------------------------------- deadlines

DEADLINES = """\
deadlines:
  - asset: rpt.r
    by: "03:30"
    owner: reporting
  - asset: mart.m
    by: "05:30"
    timezone: Europe/Paris    # 03:30 UTC in June
  - asset: stg.a
    by: "01:40"
"""


@pytest.fixture
def deadlines(lake: Tracelake, tmp_path: Path) -> DeadlineOperations:
    (tmp_path / "deadlines.yml").write_text(DEADLINES)
    operations = DeadlineOperations(lake)
    assert len(operations.load([tmp_path / "deadlines.yml"])) == 3
    return operations


def statuses(checks: list[DeadlineCheck]) -> dict[tuple[str, str], tuple[str, float | None, list[str]]]:
    return {
        (str(c.day), c.asset or c.deadline.asset): (
            c.status,
            c.margin_seconds,
            [s.process for s in c.culprits],
        )
        for c in checks
    }


def test_deadlines_on_the_late_day_and_the_usual_one(deadlines: DeadlineOperations) -> None:
    found = statuses(deadlines.check(DAY - timedelta(days=1), DAY))
    assert found == {
        # June 9: rpt.r ready 03:00 for 03:30, mart.m 02:35 for 03:30, stg.a 01:30 for 01:40
        ("2024-06-09", t("rpt.r")): ("met", 1800, []),  # 30 min to spare is not under the margin
        ("2024-06-09", t("mart.m")): ("met", 3300, []),
        ("2024-06-09", t("stg.a")): ("at_risk", 600, []),  # on time as usual: nobody to blame
        # June 10: p_ingest_b's extra hour reaches both tables downstream of it
        ("2024-06-10", t("rpt.r")): ("missed", -1800, [p("p_ingest_b")]),
        ("2024-06-10", t("mart.m")): ("missed", -300, [p("p_ingest_b")]),
        ("2024-06-10", t("stg.a")): ("at_risk", 600, []),
    }


def test_a_day_still_running_is_pending_until_the_margin_then_missed(deadlines: DeadlineOperations) -> None:
    day = DAY + timedelta(days=1)  # nothing ran yet
    found = statuses(deadlines.check(day, now=at(day, "02:00")))
    assert found[(str(day), t("rpt.r"))] == ("pending", None, [])  # due in 90 min
    assert found[(str(day), t("mart.m"))] == ("pending", None, [])
    assert found[(str(day), t("stg.a"))] == ("missed", None, [])  # due at 01:40, not ready
    found = statuses(deadlines.check(day, now=at(day, "03:10")))
    assert found[(str(day), t("rpt.r"))][0] == "at_risk"  # 20 min left, under the 30-minute margin


def test_deadline_files_with_mistakes_store_nothing(lake: Tracelake, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "deadlines:\n"
        "  - asset: rpt.r\n    by: '25:00'\n"
        "  - asset: mart.m\n    by: '04:00'\n    timezone: Mars/Olympus\n"
        "  - asset: stg.a\n    by: '04:00'\n    sla: strict\n"
        "  - asset: stg.b\n    by: '04:00'\n"
        "  - asset: stg.b\n    by: '05:00'\n"
    )
    operations = DeadlineOperations(lake)
    with pytest.raises(DeadlineError) as raised:
        operations.load([bad])
    assert [(p.location, p.reason.split(" (")[0]) for p in raised.value.problems] == [
        ("line 2", "`by:` must be a time of day as HH:MM, not '25:00'"),
        ("line 4", "unknown time zone 'Mars/Olympus'"),
        ("line 7", "unknown key 'sla'"),
        ("line 12", "stg.b has a deadline already"),
    ]
    assert operations.deadlines() == []
    with pytest.raises(InputError, match="no deadlines in the store"):
        operations.check(DAY)


def test_days_at_the_ends_of_the_calendar_are_user_errors(lake: Tracelake) -> None:
    with pytest.raises(InputError, match="years 1 to 9999"):
        critical_path(lake, "rpt.r", date(9999, 12, 31))
    with pytest.raises(InputError, match="has no UTC equivalent"):
        critical_path(lake, "rpt.r", date(1, 1, 1), "Asia/Tokyo")
