"""Label propagation on the hand-drawn lake of test_traverse.py, answers read off the drawing:

a ─job1─▶ c ─job3─▶ e ─job4 (spark_runtime)─▶ f   (kafka.topic)
b ─job1─▶ c         e ─job5 (config, LOW)───▶ g   (ai.model) ─job6─▶ h
b ─job2─▶ d ─job3─▶ e

a#user_id ─IDENTITY─▶ c#user_id ─IDENTITY─▶ e#user_id
b#score ─AGGREGATION─▶ c#score_sum ─TRANSFORMATION─▶ e#flag
b#country ─GROUP_BY─▶ c#score_sum
b#country ─IDENTITY─▶ d#x ─FILTER─▶ e#flag
"""

from __future__ import annotations

from tests.graph.test_traverse import A, B, C, D, E, F, G, H, fld
from tracelake.graph.index import GraphIndex
from tracelake.graph.propagate import CARRYING, PropagationRules, propagate
from tracelake.model import Confidence, Transformation


def test_a_label_follows_copies_of_the_value_with_its_path(lake: GraphIndex) -> None:
    result = propagate(lake, {fld(A, "user_id"): ["identity.user_id"]})

    assert [(i.node, i.depth, i.path) for i in result.inferred] == [
        (fld(C, "user_id"), 1, (fld(A, "user_id"), fld(C, "user_id"))),
        (fld(E, "user_id"), 2, (fld(A, "user_id"), fld(C, "user_id"), fld(E, "user_id"))),
    ]
    assert {i.source for i in result.inferred} == {fld(A, "user_id")}


def test_computations_carry_a_label_and_indirect_uses_do_not(lake: GraphIndex) -> None:
    result = propagate(lake, {fld(B, "score"): ["religion"], fld(B, "country"): ["location"]})

    # score → score_sum (AGGREGATION) → flag (TRANSFORMATION): carried all the way
    assert result.nodes_with("religion") == {fld(C, "score_sum"), fld(E, "flag")}
    # country is copied into d.x, but only GROUPs BY into score_sum and FILTERs e.flag
    assert result.nodes_with("location") == {fld(D, "x")}


def test_indirect_transformations_can_be_allowed(lake: GraphIndex) -> None:
    rules = PropagationRules(transformations=CARRYING | {Transformation.FILTER})
    result = propagate(lake, {fld(B, "country"): ["location"]}, rules)

    assert result.nodes_with("location") == {fld(D, "x"), fld(E, "flag")}
    [flag] = [i for i in result.inferred if i.node == fld(E, "flag")]
    assert flag.path == (fld(B, "country"), fld(D, "x"), fld(E, "flag"))


def test_low_confidence_edges_stop_a_label_unless_allowed(lake: GraphIndex) -> None:
    declared = {E: ["religion"]}

    assert propagate(lake, declared).nodes_with("religion") == {F}
    low = propagate(lake, declared, PropagationRules(min_confidence=Confidence.LOW))
    assert low.nodes_with("religion") == {F, G, H}


def test_a_stop_kind_or_zone_is_reached_but_not_left(lake: GraphIndex) -> None:
    declared = {E: ["religion"]}
    allow_low = PropagationRules(min_confidence=Confidence.LOW, stop_kinds=frozenset({"ai.model"}))

    stopped = propagate(lake, declared, allow_low)
    assert stopped.nodes_with("religion") == {F, G}
    assert [i.node for i in stopped.inferred if i.stopped] == [G]

    zoned = propagate(lake, {A: ["pii"]}, PropagationRules(stop_zones=("hive.table/db.c",)))
    assert zoned.nodes_with("pii") == {C}


def test_max_depth(lake: GraphIndex) -> None:
    result = propagate(lake, {A: ["pii"]}, PropagationRules(max_depth=2))

    assert result.nodes_with("pii") == {C, E}


def test_labels_walk_separately_and_a_node_can_get_several(lake: GraphIndex) -> None:
    result = propagate(lake, {A: ["pii"], B: ["religion", "pii"]})

    # table edges: a → c → e → f (g is behind a LOW edge); b → c, d → e → f
    assert result.nodes_with("pii") == {C, D, E, F}
    assert result.nodes_with("religion") == {C, D, E, F}
    assert result.labels_of(E) == {"pii", "religion"}
    # e is two hops from both a and b: its path starts at whichever start the walk met first
    [e_pii] = [i for i in result.inferred if i.node == E and i.label == "pii"]
    assert e_pii.depth == 2 and e_pii.path[0] in {A, B}
