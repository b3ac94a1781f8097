"""Policy checks on a small hand-built warehouse in real SQLite; every expected violation is
read off this drawing:

    ods.events (ods, level 3) ──▶ dwd.sessions (dwd, level 3) ──▶ ads.targeting (ads, level 1)
         │   └──────────────────▶ dws.sessions_copy (dws)            ▲ segment ← religion (TRANSFORMATION)
         └──────────────────────▶ ads.direct (ads)   (user_id only)

    ods.events#religion ─IDENTITY─▶ dwd.sessions#religion ─TRANSFORMATION─▶ ads.targeting#segment
    dwd.sessions and dws.sessions_copy both copy user_id and religion from ods.events
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.graph.test_traverse import flow
from tracelake.cli import app
from tracelake.graph.index import GraphIndex
from tracelake.graph.policy import Policy, check, load_policies
from tracelake.model import Asset, LineageBatch, Transformation
from tracelake.store import LineageStore
from tracelake.store.facts import asset_facts
from tracelake.store.labels import LabelStore

T = "hive.table/"
EVENTS, SESSIONS, COPY, TARGETING, DIRECT = (
    f"{T}ods.events", f"{T}dwd.sessions", f"{T}dws.sessions_copy", f"{T}ads.targeting", f"{T}ads.direct"
)  # fmt: skip
IDENTITY, TRANSFORMATION = Transformation.IDENTITY, Transformation.TRANSFORMATION

POLICIES = """
policies:
  - {name: no-religion-in-ads, kind: purpose, label: religion, zone: "hive.table/ads."}
  - {name: levels, kind: security_level}
  - {name: ads-not-from-ods, kind: layer, from: ods, to: ads}
  - {name: copies, kind: redundant}
"""


@pytest.fixture
def store(tmp_path: Path) -> LineageStore:
    store = LineageStore(str(tmp_path / "lineage.db"))
    assets = [
        Asset(EVENTS, layer="ods", security_level=3),
        Asset(SESSIONS, layer="dwd", security_level=3),
        Asset(COPY, layer="dws"),
        Asset(TARGETING, layer="ads", security_level=1),
        Asset(DIRECT, layer="ads"),
    ]
    edges = [
        flow(EVENTS, SESSIONS, "build_sessions"),
        flow(EVENTS, COPY, "copy_sessions"),
        flow(EVENTS, DIRECT, "direct"),
        flow(SESSIONS, TARGETING, "targeting"),
        flow(f"{EVENTS}#religion", f"{SESSIONS}#religion", "build_sessions", transformation=IDENTITY),
        flow(f"{EVENTS}#user_id", f"{SESSIONS}#user_id", "build_sessions", transformation=IDENTITY),
        flow(f"{EVENTS}#religion", f"{COPY}#religion", "copy_sessions", transformation=IDENTITY),
        flow(f"{EVENTS}#user_id", f"{COPY}#user_id", "copy_sessions", transformation=IDENTITY),
        flow(f"{EVENTS}#user_id", f"{DIRECT}#user_id", "direct", transformation=IDENTITY),
        flow(f"{SESSIONS}#religion", f"{TARGETING}#segment", "targeting", transformation=TRANSFORMATION),
    ]
    store.ingest(LineageBatch(assets=assets, edges=edges))
    LabelStore(store).declare(f"{EVENTS}#religion", ["religion"])
    return store


def violations(store: LineageStore, policies: list[Policy]) -> list[tuple[str, tuple[str, ...]]]:
    found = check(GraphIndex.from_store(store), policies, asset_facts(store), LabelStore(store).declared())
    return [(v.policy, v.path) for v in found]


def test_each_policy_kind_finds_its_violation_with_the_path(store: LineageStore, tmp_path: Path) -> None:
    (tmp_path / "policies.yml").write_text(POLICIES)
    policies, problems = load_policies(tmp_path / "policies.yml")
    assert problems == []

    assert violations(store, policies) == [
        ("no-religion-in-ads", (f"{EVENTS}#religion", f"{SESSIONS}#religion", f"{TARGETING}#segment")),
        ("levels", (SESSIONS, TARGETING)),
        ("ads-not-from-ods", (EVENTS, DIRECT)),
        ("copies", (SESSIONS, COPY)),  # in name order
    ]


def test_a_purpose_policy_by_layer_and_a_clean_graph(store: LineageStore) -> None:
    by_layer = Policy("religion-not-in-dws", "purpose", label="religion", layer="dws")
    assert violations(store, [by_layer]) == [
        ("religion-not-in-dws", (f"{EVENTS}#religion", f"{COPY}#religion"))
    ]
    assert violations(store, [Policy("ok", "layer", source_layer="dwd", target_layer="ods")]) == []


def test_malformed_policies_are_reported_and_the_rest_load(tmp_path: Path) -> None:
    path = tmp_path / "policies.yml"
    path.write_text(
        "- {name: a, kind: purpose, label: religion}\n"
        "- {name: b, kind: nonsense}\n"
        "- {name: c, kind: redundant}\n"
    )

    policies, problems = load_policies(path)

    assert [p.name for p in policies] == ["c"]
    assert [str(p) for p in problems] == [
        f"{path}:policy 1: a: a purpose policy needs a `label` and a `zone` or `layer`",
        f"{path}:policy 2: b: kind must be one of purpose, security_level, layer, redundant, not 'nonsense'",
    ]


def test_tracelake_check_exits_non_zero_on_violations(store: LineageStore, tmp_path: Path) -> None:
    (tmp_path / "policies.yml").write_text(POLICIES)
    runner = CliRunner()

    result = runner.invoke(
        app, ["check", str(tmp_path / "policies.yml"), "--format", "json", "--db", store.url]
    )

    assert result.exit_code == 1
    assert [v["policy"] for v in json.loads(result.stdout)] == [
        "no-religion-in-ads", "levels", "ads-not-from-ods", "copies"
    ]  # fmt: skip
    (tmp_path / "clean.yml").write_text("- {name: ok, kind: layer, from: dwd, to: ods}\n")
    clean = runner.invoke(app, ["check", str(tmp_path / "clean.yml"), "--db", store.url])
    assert clean.exit_code == 0 and "1 policies, no violation" in clean.stdout
    missing = runner.invoke(app, ["check", str(tmp_path / "nope.yml"), "--db", store.url])
    assert missing.exit_code == 2 and "no such file" in missing.stderr
