"""Lineage collapsed to groups and narrowed to labels or layers, on a hand-made lake.

    a1 ─▶ a2 ─▶ b1 ─▶ x        a1, a2: owner ana, domain growth (a1 only), layer stg
     └──────────▶ b1            b1: owner bob, layer mart;  x: no owner, layer mart
    column flow a1#c → a2#c; label pii on the column a2#c and on the table x

Downstream of a1 by owner, worked out by hand: ana {a1, a2} with one flow inside (a1→a2), bob
{b1}, (none) {x}; between groups ana→bob two table flows (a1→b1, a2→b1), bob→(none) one.
"""

from __future__ import annotations

import json

import pytest

from tests.test_cli import run
from tracelake.app.abstraction import GroupedView, lineage_at_level
from tracelake.app.service import Tracelake
from tracelake.model import Asset, Field, FlowEdge, InputError, LineageBatch, Signal
from tracelake.store import LineageStore


def t(name: str) -> str:
    return f"hive.table/db.{name}"


@pytest.fixture
def lake(store: LineageStore) -> Tracelake:
    edges = [("a1", "a2"), ("a2", "b1"), ("a1", "b1"), ("b1", "x"), ("a1#c", "a2#c")]
    store.ingest(
        [
            LineageBatch(
                assets=[
                    Asset(t("a1"), owner="ana", layer="stg", metadata={"domain": "growth"}),
                    Asset(t("a2"), owner="ana", layer="stg"),
                    Asset(t("b1"), owner="bob", layer="mart"),
                    Asset(t("x"), layer="mart", labels=frozenset({"pii"})),
                ],
                fields=[Field(t("a2#c"), labels=frozenset({"pii"}))],
                edges=[FlowEdge(t(a), t(b), "sql.query/job", Signal.SQL_STATIC) for a, b in edges],
            )
        ]
    )
    return Tracelake(store)


def test_grouped_by_owner_as_counted_by_hand(lake: Tracelake) -> None:
    view = lineage_at_level(lake, ["db.a1"], "downstream", group_by="owner")
    assert isinstance(view, GroupedView)
    found = {g.id: (g.members, g.internal_flows, g.holds_start) for g in view.groups}
    assert found == {
        "owner:ana": ((t("a1"), t("a2")), 1, True),
        "owner:bob": ((t("b1"),), 0, False),
        "owner:(none)": ((t("x"),), 0, False),
    }
    assert view.flows == [("owner:ana", "owner:bob", 2), ("owner:bob", "owner:(none)", 1)]


def test_grouped_by_a_property_and_by_layer(lake: Tracelake) -> None:
    by_domain = lineage_at_level(lake, ["db.a1"], "downstream", group_by="domain")
    assert {g.id: len(g.members) for g in by_domain.groups} == {"domain:growth": 1, "domain:(none)": 3}
    assert by_domain.flows == [("domain:growth", "domain:(none)", 2)]  # a1→a2, a1→b1
    by_layer = lineage_at_level(lake, ["db.a1"], "downstream", group_by="layer")
    assert by_layer.flows == [("layer:stg", "layer:mart", 2)]  # a1→b1 and a2→b1
    assert {g.id: g.internal_flows for g in by_layer.groups} == {"layer:mart": 1, "layer:stg": 1}


def test_narrowed_to_a_label_or_a_layer(lake: Tracelake) -> None:
    pii = lineage_at_level(lake, ["db.a1"], "downstream", labels=["pii"])
    # a2 carries pii on a column, x on itself; a1 is the start
    assert {n.id.partition("#")[0] for n in pii.nodes} == {t("a1"), t("a2"), t("x")}
    assert {(e.source, e.target) for e in pii.edges} == {(t("a1"), t("a2"))}  # a table-level walk
    mart = lineage_at_level(lake, ["db.a1"], "downstream", layers=["mart"])
    assert {(e.source, e.target) for e in mart.edges} == {(t("a1"), t("b1")), (t("b1"), t("x"))}


def test_an_unknown_grouping_is_a_user_error(lake: Tracelake) -> None:
    with pytest.raises(InputError, match="group by one of owner, layer, kind, domain, team, product"):
        lineage_at_level(lake, ["db.a1"], group_by="colour")


def test_the_cli_draws_and_lists_the_groups(lake: Tracelake) -> None:
    db = str(lake.store.engine.url.render_as_string(hide_password=False))
    code, out, err = run("lineage", "db.a1", "--down", "--group-by", "owner", "--format", "json", "--db", db)
    assert code == 0, err
    document = json.loads(out)
    assert document["edges"] == [
        {"source": "owner:ana", "target": "owner:bob", "flows": 2},
        {"source": "owner:bob", "target": "owner:(none)", "flows": 1},
    ]
    code, out, _ = run("lineage", "db.a1", "--down", "--group-by", "owner", "--format", "dot", "--db", db)
    assert code == 0 and '"owner:ana" -> "owner:bob" [label="2"];' in out
    code, _, err = run("lineage", "db.a1", "--group-by", "colour", "--db", db)
    assert code == 2 and "group by one of" in err
