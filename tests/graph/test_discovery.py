"""Discovery sessions on the hand-drawn lake of test_traverse.py (tables only here):

    a ─job1─▶ c ─job3─▶ e ─job4 (HIGH)─▶ f
    b ─job1─▶ c         e ─job5 (LOW)──▶ g ─job6─▶ h
    b ─job2─▶ d ─job3─▶ e

Every edge is HIGH but e → g (LOW, a config signal). Columns: a.user_id → c.user_id → e.user_id
(job1, job3); job4, job5 and job6 give no column lineage. Expected sets are read off the drawing.
"""

from __future__ import annotations

import pytest

from tests.graph.test_traverse import A, B, C, D, E, F, G, H, fld
from tracelake.graph.discovery import (
    DecisionRule,
    DiscoveryError,
    Session,
    apply_rule,
    decide,
    flows,
    next_round,
    start,
)
from tracelake.graph.index import GraphIndex


def test_a_round_follows_strong_flows_and_stops_at_a_weak_one(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])

    new = next_round(lake, session)

    assert set(new) == {C, E, F, G}
    assert session.candidates == [G]  # behind the LOW edge
    assert set(session.confirmed) == {A, C, E, F}
    assert not session.stable


def test_including_a_candidate_makes_it_the_next_frontier_until_stable(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])
    next_round(lake, session)

    decide(session, G, True, reason="the model reads the field", by="ana")
    assert next_round(lake, session) == [H]

    assert session.stable and next_round(lake, session) == []
    assert set(session.confirmed) == {A, C, E, F, G, H}
    assert set(flows(session)) == {(A, C), (C, E), (E, F), (E, G), (G, H)}
    assert session.members[G].reason == "the model reads the field"


def test_including_a_candidate_that_flows_nowhere_ends_the_session(lake: GraphIndex) -> None:
    """H is a sink: the round that follows it finds no flow (it once crashed on the empty round,
    met by running the README's discovery commands)."""
    session = start(lake, "pii", [A])
    next_round(lake, session)
    decide(session, G, True, reason="read", by="ana")
    next_round(lake, session)
    session.frontier = [H]  # as after including H

    assert next_round(lake, session) == []
    assert session.stable and H in session.members


def test_excluding_a_candidate_ends_the_session_without_it(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])
    next_round(lake, session)

    assert decide(session, G, False, reason="config only names it", by="ana") == []

    assert session.stable and set(session.confirmed) == {A, C, E, F}


def test_an_exclusion_cascades_to_what_was_reached_only_through_it(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A, B])
    next_round(lake, session)
    decide(session, G, True, reason="", by="ana")
    next_round(lake, session)
    assert set(session.confirmed) == {A, B, C, D, E, F, G, H}

    # e is also reached through d (b → d → e): excluding c leaves it in
    assert decide(session, C, False, reason="c drops the column", by="ana") == []
    assert E in session.confirmed
    # everything past e comes only through e
    assert set(decide(session, E, False, reason="e hashes it", by="ana")) == {F, G, H}
    assert set(session.confirmed) == {A, B, D}
    assert session.members[H].reason == f"only reached through {E}"


def test_decisions_are_checked(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])
    next_round(lake, session)

    with pytest.raises(DiscoveryError, match="cannot include"):
        decide(session, C, True, reason="", by="ana")  # reached already, not a candidate
    with pytest.raises(DiscoveryError, match="cannot exclude"):
        decide(session, A, False, reason="", by="ana")  # a source
    with pytest.raises(DiscoveryError, match="not in the session"):
        decide(session, H, True, reason="", by="ana")
    with pytest.raises(DiscoveryError, match="nothing to start from"):
        start(lake, "pii", [])


def test_a_session_round_trips_through_plain_data(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])
    next_round(lake, session)
    decide(session, G, True, reason="why", by="ana")

    again = Session.from_dict(session.to_dict())

    assert again == session
    assert next_round(lake, again) == [H]


def test_a_rule_decides_the_candidates_it_covers(lake: GraphIndex) -> None:
    session = start(lake, "pii", [A])
    next_round(lake, session)

    rule = DecisionRule(include_kinds=frozenset({"ai.model"}), name="models-hold-what-they-train-on")
    assert apply_rule(lake, session, rule) == {"included": [G], "excluded": []}
    assert session.members[G].decided_by == "models-hold-what-they-train-on"

    other = start(lake, "pii", [A])
    next_round(lake, other)
    zone = DecisionRule(include_kinds=frozenset({"ai.model"}), exclude_zones=("ai.model/",), name="no-models")
    assert apply_rule(lake, other, zone) == {"included": [], "excluded": [G]}


def test_a_table_flow_without_column_lineage_makes_a_candidate_of_its_target(lake: GraphIndex) -> None:
    # from the field a.user_id the column edges reach c.user_id and e.user_id; e's table flows
    # job4 (→ f) and job5 (→ g) give no column lineage at all: either may carry user_id
    session = start(lake, "pii", [fld(A, "user_id")])

    assert set(next_round(lake, session)) == {fld(C, "user_id"), fld(E, "user_id"), F, G}
    assert set(session.candidates) == {F, G}
    assert session.members[F].via == [fld(E, "user_id")]

    decide(session, G, True, reason="the model is trained on e", by="ana")
    assert next_round(lake, session) == [H]  # g's own table flow is followed: g is a table
