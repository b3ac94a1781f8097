"""Root cause (`tracelake why`) on a hand-made lake whose every change is known.

    raw.events ─p_clean─▶ stg.events ─┐
    raw.events_v2 ─p_clean (from day 12)┘                       ┌─p_export─▶ ext.dash
                                      ├─p_daily─▶ mart.daily ─p_report─▶ rpt.kpi
    raw.users ──p_users─▶ stg.users ──┘ (until day 16)
    raw.other ──p_other─▶ stg.other            (not upstream of rpt.kpi)

Days are counted from a base 20 days before now; the window asked about is (day 10, now].
Each expected score is SEVERITY × 0.8^distance, worked out below by hand from the module's
table: distance is hops upstream of rpt.kpi (mart.daily 1, stg.* 2, raw.* 3).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tracelake.app.entities import EntityOperations
from tracelake.app.root_cause import why
from tracelake.app.service import Tracelake
from tracelake.model import AssetChange, FlowEdge, InputError, Lifecycle, LineageBatch, Process, Run, Signal
from tracelake.store import LineageStore

NOW = datetime.now(UTC).replace(microsecond=0)
BASE = NOW - timedelta(days=20)


def soon() -> datetime:
    """The window's end: a minute from now, when the test runs (a taint is stored at its own now,
    which in a long suite is well after this module was imported)."""
    return datetime.now(UTC) + timedelta(minutes=1)


def day(n: float) -> datetime:
    return BASE + timedelta(days=n)


def t(name: str) -> str:
    return f"hive.table/{name}"


def p(name: str) -> str:
    return f"sql.query/{name}"


def flows(process: str, *pairs: tuple[str, str], at: datetime) -> LineageBatch:
    edges = [FlowEdge(t(a), t(b), p(process), Signal.SQL_STATIC) for a, b in pairs]
    return LineageBatch(processes=[Process(p(process), process)], edges=edges, observed_at=at)


def run(process: str, run_id: str, start: datetime, minutes: float, status: str) -> LineageBatch:
    ended = start + timedelta(minutes=minutes)
    # the process is not listed: a batch that lists one observes its flows (here: none)
    return LineageBatch(runs=[Run(run_id, p(process), started_at=start, ended_at=ended, status=status)])


def change(asset: str, kind: Lifecycle, at: datetime, *columns: str) -> LineageBatch:
    described = tuple((c, "string") for c in columns) if columns else None
    return LineageBatch(changes=[AssetChange(t(asset), kind, at, Signal.SQL_STATIC, columns=described)])


@pytest.fixture
def lake(store: LineageStore, tmp_path: Path) -> Tracelake:
    service = Tracelake(store)
    batches = [
        flows("p_clean", ("raw.events", "stg.events"), at=day(1)),
        flows("p_users", ("raw.users", "stg.users"), at=day(1)),
        flows("p_daily", ("stg.events", "mart.daily"), ("stg.users", "mart.daily"), at=day(1)),
        flows("p_report", ("mart.daily", "rpt.kpi"), at=day(1)),
        flows("p_export", ("rpt.kpi", "ext.dash"), at=day(1)),
        flows("p_other", ("raw.other", "stg.other"), at=day(1)),
        change("mart.daily", Lifecycle.CREATE, day(1), "day", "country", "sessions"),
        change("stg.users", Lifecycle.ALTER, day(5), "id"),  # before the window: not a cause
        # p_report's usual run: 10 minutes, five times before the window
        *(run("p_report", f"report-{n}", day(n), 10, "COMPLETE") for n in range(3, 8)),
        run("p_report", "report-11", day(11), 10, "COMPLETE"),  # in the window, as usual
        # in the window
        run("p_daily", "daily-fail", day(11), 5, "FAIL"),
        run("p_daily", "daily-retry", day(11.5), 5, "COMPLETE"),
        flows("p_clean", ("raw.events", "stg.events"), ("raw.events_v2", "stg.events"), at=day(12)),
        run("p_users", "users-fail", day(13), 3, "FAIL"),
        run("p_other", "other-fail", day(13), 3, "FAIL"),  # not upstream
        run("p_export", "export-fail", day(13), 3, "FAIL"),  # downstream: not a cause
        change("mart.daily", Lifecycle.ALTER, day(14), "day", "sessions", "device"),
        run("p_report", "report-slow", day(15), 40, "COMPLETE"),
        flows("p_daily", ("stg.events", "mart.daily"), at=day(16)),  # stops reading stg.users
    ]
    for batch in batches:
        store.ingest([batch])
    entities = tmp_path / "entities.yml"
    entities.write_text(
        "entities:\n  - name: daily\n    period: daily\n    start: 2020-01-01\n"
        "    asset: hive.table/mart.daily\n"
    )
    operations = EntityOperations(service)
    assert operations.load([entities]).ok
    taint_day = NOW - timedelta(days=2)
    operations.taint(
        "daily",
        f"{taint_day:%Y-%m-%d}",
        f"{taint_day + timedelta(days=1):%Y-%m-%d}",
        reason="bad country codes",
        apply=True,
        actor="ana",
    )
    return service


def test_causes_are_the_upstream_changes_in_the_window_ranked_by_hand(lake: Tracelake) -> None:
    view = why(lake, "rpt.kpi", since=day(10), until=soon())
    found = [(c.kind, c.subject, round(c.score, 4)) for c in view.causes]
    assert found == [
        ("instance_tainted", t("mart.daily"), 0.8),  # 1.0 × 0.8
        ("process_changed", p("p_daily"), 0.72),  # 0.9 × 0.8 (day 16: stg.users dropped)
        ("input_removed", p("p_daily"), 0.68),  # 0.85 × 0.8
        ("run_failed", p("p_users"), 0.64),  # 1.0 × 0.8², day 13
        ("schema_changed", t("mart.daily"), 0.64),  # 0.8 × 0.8, day 14: the tie goes to the earlier
        ("run_slow", p("p_report"), 0.6),  # 0.6 × 1: 40 min against a usual 10
        ("process_changed", p("p_clean"), 0.576),  # 0.9 × 0.8², day 12
        ("input_added", p("p_clean"), 0.448),  # 0.7 × 0.8²
        ("run_failed_then_recovered", p("p_daily"), 0.4),  # 0.5 × 0.8: the retry completed
    ]
    by_kind = {c.kind: c for c in view.causes}
    assert by_kind["schema_changed"].detail == "ALTER: +device, -country"
    assert by_kind["run_slow"].detail == "took 40 min, usually 10 min"
    assert by_kind["input_removed"].detail == f"{t('mart.daily')} no longer reads {t('stg.users')}"
    assert by_kind["input_added"].detail == f"{t('stg.events')} now reads {t('raw.events_v2')}"
    assert "bad country codes" in by_kind["instance_tainted"].detail
    assert by_kind["run_failed"].run_id == "users-fail"
    assert by_kind["run_failed"].at == day(13) + timedelta(minutes=3)


def test_each_cause_carries_its_distance_and_route_down_to_the_asset(lake: Tracelake) -> None:
    view = why(lake, "rpt.kpi", since=day(10), until=soon())
    failed = next(c for c in view.causes if c.kind == "run_failed")
    assert failed.distance == 2
    assert [(h.source, h.target, h.process) for h in failed.route] == [
        (t("stg.users"), t("mart.daily"), p("p_daily")),
        (t("mart.daily"), t("rpt.kpi"), p("p_report")),
    ]
    added = next(c for c in view.causes if c.kind == "input_added")
    assert [h.source for h in added.route] == [t("raw.events_v2"), t("stg.events"), t("mart.daily")]
    assert view.upstream_nodes == 6  # mart.daily, stg.events, stg.users, raw.events, raw.events_v2, raw.users
    assert view.upstream_processes == 4  # p_report, p_daily, p_clean, p_users


def test_nothing_outside_the_window_or_off_the_upstream_is_a_cause(lake: Tracelake) -> None:
    view = why(lake, "rpt.kpi", since=day(10), until=soon())
    subjects = {c.subject for c in view.causes}
    assert not subjects & {p("p_other"), p("p_export"), t("stg.users"), t("stg.other")}
    assert all(c.at > day(10) for c in view.causes)
    # a window before any of it: only the ALTER of day 5 upstream, and the p_report runs are usual
    early = why(lake, "rpt.kpi", since=day(2), until=day(9))
    assert [(c.kind, c.subject) for c in early.causes] == [("schema_changed", t("stg.users"))]


def test_depth_limits_the_walk(lake: Tracelake) -> None:
    view = why(lake, "rpt.kpi", since=day(10), until=soon(), depth=1)
    assert {c.distance for c in view.causes} <= {0, 1}
    assert p("p_users") not in {c.subject for c in view.causes}


def test_an_empty_window_or_unknown_asset_is_a_user_error(lake: Tracelake) -> None:
    with pytest.raises(InputError, match="window is empty"):
        why(lake, "rpt.kpi", since=day(10), until=day(9))
    with pytest.raises(InputError):
        why(lake, "no_such.table")


def test_a_window_before_year_one_is_a_user_error(lake: Tracelake) -> None:
    with pytest.raises(InputError, match="years 1 to 9999"):
        why(lake, "rpt.kpi", until=datetime(1, 1, 3, tzinfo=UTC))
