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

from tracelake.app.service import Tracelake
from tracelake.graph import discovery
from tracelake.graph.policy import check, load_policies
from tracelake.graph.propagate import propagate
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


# ---------------------------------------------------------------- from the web endpoint to the model

ENDPOINT_RELIGION = "web.endpoint/profile.update#religion"
EVENT_VALUE = "web.logger/dating_profile_log#value"
FROM_THE_WEB = {
    EVENT_VALUE,  # EXACT_MATCH
    "web.logger/dating_audit_log#message",  # CONTAINS
    "sqlite.table/dating_web.profiles#religion",  # the service's own database
    "hive.table/raw.web_profile_events#event.value",  # where the event logger's records land
    f"{D}profile_update_log#new_value",  # the query log's SQL from here on
    RELIGION,  # COALESCE(u.new_value, p.religion)
}


@pytest.fixture
def with_the_web(service: Tracelake) -> Tracelake:
    """The same store, plus the ML configs and the web service's probe flows from real requests."""
    import requests
    from examples.dating import web

    from tracelake.api.server import serve_in_thread
    from tracelake.collect.probes import ProbeConfig, Probes, StoreShipper

    service.ingest_configs([EXAMPLE / "configs"])
    probes = Probes(StoreShipper(service.store), ProbeConfig(sample_rate=1.0), landings=web.LANDINGS)
    with serve_in_thread(web.make_app(probes)) as url, requests.Session() as http:
        for body in web.SEED_REQUESTS:
            http.post(f"{url}/profile", json=body, timeout=10).raise_for_status()
    assert probes.flush()
    probes.close()
    return service


def test_discovery_from_the_endpoint_reaches_the_loggers_the_warehouse_the_feature_and_the_model(
    with_the_web: Tracelake,
) -> None:
    index = with_the_web.index()
    session = discovery.start(index, "religion", [ENDPOINT_RELIGION])
    discovery.next_round(index, session)

    feature, model = "ai.feature/DATING_USER_RELIGION_SCORE", "ai.model/dating_ranking_model"
    stats = "web.logger/dating_preference_stats"
    # the third request logged only a count: its LOW flows wait for a person, as do the configs
    assert session.candidates == sorted([f"{stats}#count", f"{stats}#message", feature, model])
    assert set(session.confirmed) == {ENDPOINT_RELIGION} | FROM_THE_WEB | REACHED
    assert session.members["hive.table/raw.web_profile_events#event.value"].via == [EVENT_VALUE]

    discovery.decide(session, f"{stats}#count", False, reason="a count of preferences", by="privacy")
    discovery.decide(session, f"{stats}#message", False, reason="a fixed message", by="privacy")
    for candidate in (feature, model):
        discovery.decide(session, candidate, True, reason="trained on religion", by="privacy")
    assert discovery.next_round(index, session) == ["web.endpoint/ranking.recommend"]
    assert session.stable
    assert set(session.confirmed) == (
        {ENDPOINT_RELIGION, feature, model, "web.endpoint/ranking.recommend"} | FROM_THE_WEB | REACHED
    )


def test_propagation_from_the_endpoint_labels_the_web_and_warehouse_fields(with_the_web: Tracelake) -> None:
    labels = LabelStore(with_the_web.store)
    labels.undeclare(RELIGION, ["religion"])
    labels.declare(ENDPOINT_RELIGION, ["religion"])

    result = propagate(with_the_web.index(), labels.declared())

    # HIGH column flows only: the LOW stats-log guesses and the table-level configs are not followed
    assert result.nodes_with("religion") == (FROM_THE_WEB | REACHED)
