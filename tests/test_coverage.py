"""Coverage figures on a hand-made lake, counted by hand.

    raw.a ─p1 (sql)─▶ stg.x ─p2 (sql)─▶ mart.y ─p3 (spark, from day 4.5)─▶ rpt.z     raw.b (no flow)
    column flows: raw.a#k → stg.x#k (p1), mart.y#v → rpt.z#v (p3); mart.y also has a column w

Assets 5 (raw.a, raw.b, stg.x, mart.y, rpt.z), columns 5 (raw.a#k, stg.x#k, mart.y#v, mart.y#w,
rpt.z#v). A run reads rpt.z without writing (day 5). Days count from a base 10 days ago.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tracelake.app.coverage import coverage
from tracelake.app.service import Tracelake
from tracelake.model import Asset, AssetRead, Field, FlowEdge, InputError, LineageBatch, Signal
from tracelake.store import LineageStore

NOW = datetime.now(UTC).replace(microsecond=0)
BASE = NOW - timedelta(days=10)


def t(name: str) -> str:
    return f"hive.table/{name}"


def day(n: float) -> datetime:
    return BASE + timedelta(days=n)


def flows(process: str, signal: Signal, *pairs: tuple[str, str], at: datetime) -> LineageBatch:
    return LineageBatch(
        edges=[FlowEdge(t(a), t(b), f"sql.query/{process}", signal) for a, b in pairs], observed_at=at
    )


@pytest.fixture
def lake(store: LineageStore) -> Tracelake:
    store.ingest(
        [
            LineageBatch(
                assets=[
                    Asset(t("raw.a"), layer="raw"),
                    Asset(t("raw.b"), layer="raw"),
                    Asset(t("stg.x"), layer="stg", owner="bob"),
                    Asset(t("mart.y"), layer="mart", owner="ana"),
                    Asset(t("rpt.z"), layer="rpt", owner="ana"),
                ],
                fields=[Field(t("mart.y#w"))],
            ),
            flows("p1", Signal.SQL_STATIC, ("raw.a", "stg.x"), ("raw.a#k", "stg.x#k"), at=day(1)),
            flows("p2", Signal.SQL_STATIC, ("stg.x", "mart.y"), at=day(1)),
            flows("p3", Signal.SPARK_RUNTIME, ("mart.y", "rpt.z"), ("mart.y#v", "rpt.z#v"), at=day(4.5)),
            LineageBatch(
                reads=[
                    AssetRead(t("rpt.z"), "dash-1", "sql.query/dashboard", day(5), "eve", Signal.SQL_STATIC)
                ]
            ),
        ]
    )
    return Tracelake(store)


def test_the_shares_now_as_counted_by_hand(lake: Tracelake) -> None:
    view = coverage(lake).to_json()
    assert view["assets"] == {"covered": 3, "total": 5, "share": 0.6}  # stg.x, mart.y, rpt.z
    assert view["columns"] == {"covered": 2, "total": 5, "share": 0.4}  # stg.x#k, rpt.z#v
    # the columns of the three assets with upstream: stg.x#k, mart.y#v, mart.y#w, rpt.z#v
    assert view["columns_of_written_assets"] == {"covered": 2, "total": 4, "share": 0.5}
    assert {k: v["covered"] for k, v in view["by_signal"].items()} == {"sql_static": 2, "spark_runtime": 1}
    assert {k: (v["covered"], v["total"]) for k, v in view["by_layer"].items()} == {
        "mart": (1, 1),
        "raw": (0, 2),
        "rpt": (1, 1),
        "stg": (1, 1),
    }
    assert {k: (v["covered"], v["total"]) for k, v in view["by_owner"].items()} == {
        "(none)": (0, 2),
        "ana": (2, 2),
        "bob": (1, 1),
    }


def test_the_lists_as_counted_by_hand(lake: Tracelake) -> None:
    view = coverage(lake).to_json()
    assert view["table_level_only"] == {"count": 1, "first": [t("mart.y")]}
    assert view["read_never_written"] == {"count": 1, "first": [t("raw.a")]}
    assert view["written_never_read"] == {"count": 0, "first": []}  # a run read rpt.z
    assert view["no_lineage"] == {"count": 1, "first": [t("raw.b")]}
    # before the dashboard read it (day 5), rpt.z was written and never read
    earlier = coverage(lake, at=day(4.8)).to_json()
    assert earlier["written_never_read"] == {"count": 1, "first": [t("rpt.z")]}


def test_the_history_follows_what_was_true_then(lake: Tracelake) -> None:
    history = coverage(lake, points=2, every=timedelta(days=3)).to_json()["history"]
    # day 4 (6 days ago): raw.a, stg.x, mart.y known through their flows (raw.b only since it was
    # stored today, rpt.z since day 4.5); day 7: rpt.z too; now: all five
    assert [(p["assets"]["covered"], p["assets"]["total"]) for p in history] == [(2, 3), (3, 4), (3, 5)]
    # columns: on day 4 only raw.a#k and stg.x#k had been in a flow (mart.y#v's first is p3's,
    # day 4.5); day 7 adds mart.y#v and rpt.z#v; mart.y#w was only stored today
    assert [(p["columns"]["covered"], p["columns"]["total"]) for p in history] == [(1, 2), (2, 4), (2, 5)]
    # by signal: p3 (spark) only from day 4.5; mart.y is table-level only throughout
    assert [{s: v["covered"] for s, v in p["by_signal"].items()} for p in history] == [
        {"sql_static": 2},
        {"sql_static": 2, "spark_runtime": 1},
        {"sql_static": 2, "spark_runtime": 1},
    ]
    assert [p["table_level_only"] for p in history] == [1, 1, 1]


def test_timeliness_is_when_lineage_was_stored_against_when_it_was_true(lake: Tracelake) -> None:
    stored = lake.store.node(t("stg.x"))  # stored by the fixture's ingest, as p1 and p2 were
    assert stored is not None
    lags = coverage(lake).to_json()["timeliness"]
    assert lags["sql_static"]["observations"] == 2  # p1 and p2, true on day 1
    expected = (stored.first_seen - day(1)).total_seconds()
    assert abs(lags["sql_static"]["median_seconds"] - expected) < 60
    assert lags["spark_runtime"]["observations"] == 1  # p3, true on day 4.5
    assert abs(lags["spark_runtime"]["max_seconds"] - (expected - 3.5 * 86400)) < 60


def test_a_history_reaching_before_year_one_is_a_user_error(lake: Tracelake) -> None:
    # found by the OpenAPI fuzzing: GET /coverage?at=0021-07-11T13:22:47Z&history=46&every_days=281
    with pytest.raises(InputError, match=r"is not a date \(years 1 to 9999\)"):
        coverage(lake, at=datetime(21, 7, 11, 13, 22, 47, tzinfo=UTC), points=46, every=timedelta(days=281))
