"""The privacy engineer's workflow on the dating example's query log (examples/dating), in real
SQLite: `religion` declared on dating.user_profile#religion, then propagation, a discovery
session and the policies of examples/dating/policies.yml.

Read off the log's statements: user_profile.religion is copied into safety_log_tbl.religion and
daily_match_stats.religion (IDENTITY), decides dating_training_tbl.same_religion and
ads.user_segments.segment (CASE WHEN religion …: CONDITIONAL), and goes on from safety_log_tbl
into safety_training_tbl.target_religion and then safety_training_latest.target_religion.

The ML configs (examples/dating/configs) add table-level flows with no column lineage:
user_profile → the religion-score feature, dating_training_tbl (+ the feature) → the ranking
model → its inference service.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelake.graph import discovery
from tracelake.graph.policy import check, load_policies
from tracelake.graph.propagate import propagate
from tracelake.service import Tracelake
from tracelake.store import LineageStore
from tracelake.store.facts import asset_facts
from tracelake.store.labels import LabelStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating"
D = "hive.table/dating."
RELIGION = f"{D}user_profile#religion"
REACHED = {
    f"{D}safety_log_tbl#religion",
    f"{D}daily_match_stats#religion",
    f"{D}dating_training_tbl#same_religion",
    "hive.table/ads.user_segments#segment",
    f"{D}safety_training_tbl#target_religion",
    f"{D}safety_training_latest#target_religion",
}


@pytest.fixture
def service(tmp_path: Path) -> Tracelake:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    LabelStore(service.store).declare(RELIGION, ["religion"])
    return service


def test_religion_spreads_to_the_tables_that_copy_or_encode_it(service: Tracelake) -> None:
    result = propagate(service.index(), LabelStore(service.store).declared())

    assert result.nodes_with("religion") == REACHED


def test_a_discovery_session_confirms_the_same_set(service: Tracelake) -> None:
    index = service.index()
    session = discovery.start(index, "religion", [RELIGION])
    discovery.next_round(index, session)

    # every flow in the log is a HIGH-confidence SQL edge: nothing to decide, one round is enough
    assert session.stable
    assert set(session.confirmed) == REACHED | {RELIGION}


def test_the_policy_flags_religion_reaching_the_ads_segment(service: Tracelake) -> None:
    policies, problems = load_policies(EXAMPLE / "policies.yml")
    assert problems == []

    found = check(service.index(), policies, asset_facts(service.store), LabelStore(service.store).declared())

    assert [(v.policy, v.path) for v in found] == [
        ("religion-stays-out-of-ads", (RELIGION, "hive.table/ads.user_segments#segment"))
    ]


def test_with_the_ml_configs_discovery_reaches_the_feature_the_model_and_the_service(
    service: Tracelake,
) -> None:
    service.ingest_configs([EXAMPLE / "configs"])
    index = service.index()
    session = discovery.start(index, "religion", [RELIGION])
    discovery.next_round(index, session)

    # the configs name whole tables: the walk stops there and asks
    feature, model = "ai.feature/DATING_USER_RELIGION_SCORE", "ai.model/dating_ranking_model"
    assert session.candidates == [feature, model]
    assert session.members[feature].via == [RELIGION]
    assert session.members[model].via == [f"{D}dating_training_tbl#same_religion"]

    for candidate in (feature, model):
        discovery.decide(session, candidate, True, reason="trained on religion", by="privacy")
    assert discovery.next_round(index, session) == ["web.endpoint/ranking.recommend"]
    assert session.stable
    assert set(session.confirmed) == REACHED | {RELIGION, feature, model, "web.endpoint/ranking.recommend"}
