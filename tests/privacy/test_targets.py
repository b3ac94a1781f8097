"""Which datasets privacy requests must cover: declared ones, and those identities reach.

The graph below is small enough to follow by hand: `events.user_id` is declared an identity;
it is copied into `sessions.uid`, which is hashed into `features.uid_hash` (both sure, direct
edges), so both are targets, each with the path that shows why. It also filters `ads` rows (an
indirect edge) and reaches `guesses.uid` only through a LOW-confidence edge: neither is a target.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelake.model import Asset, Confidence, FlowEdge, LineageBatch, Process, Signal, Transformation
from tracelake.privacy.targets import declare, find_targets
from tracelake.store import LineageStore

JOB = "spark.job/nightly"


def edge(source: str, target: str, transformation: Transformation, confidence: Confidence) -> FlowEdge:
    return FlowEdge(source, target, JOB, Signal.SPARK_RUNTIME, confidence, transformation)


def test_a_declared_dataset_is_a_target_with_its_identity_columns(
    store: LineageStore, tmp_path: Path
) -> None:
    (tmp_path / "events").mkdir()
    declared = declare(store, tmp_path / "events", ["user_id", "identity_map"])

    (target,) = find_targets(store)
    assert target.asset == f"file.dataset/{tmp_path / 'events'}" == declared.asset
    assert target.identity == ("identity_map", "user_id")
    assert target.path == tmp_path / "events"
    assert target.declared


def test_identities_reach_datasets_through_sure_direct_column_lineage(
    store: LineageStore, tmp_path: Path
) -> None:
    (tmp_path / "events").mkdir()
    events = declare(store, tmp_path / "events", ["user_id"]).asset
    sessions = f"file.dataset/{tmp_path / 'sessions'}"
    features = "hive.table/ml.features"
    ads = f"file.dataset/{tmp_path / 'ads'}"
    guesses = f"file.dataset/{tmp_path / 'guesses'}"
    store.ingest(
        LineageBatch(
            assets=[Asset(urn) for urn in (sessions, features, ads, guesses)],
            processes=[Process(JOB, "nightly", kind="spark")],
            edges=[
                edge(f"{events}#user_id", f"{sessions}#uid", Transformation.IDENTITY, Confidence.HIGH),
                edge(
                    f"{sessions}#uid", f"{features}#uid_hash", Transformation.TRANSFORMATION, Confidence.HIGH
                ),
                edge(f"{events}#user_id", f"{ads}#segment", Transformation.FILTER, Confidence.HIGH),
                edge(f"{events}#user_id", f"{guesses}#uid", Transformation.IDENTITY, Confidence.LOW),
            ],
        )
    )

    targets = {target.asset: target for target in find_targets(store)}

    assert set(targets) == {events, sessions, features}
    assert targets[sessions].reason == (f"{events}#user_id", f"{sessions}#uid")
    assert targets[sessions].identity == ("uid",)
    assert targets[features].reason == (f"{events}#user_id", f"{sessions}#uid", f"{features}#uid_hash")
    assert targets[features].path is None  # a catalog table: listed, but not a folder to search
    assert targets[sessions].path == tmp_path / "sessions"


def test_a_dataset_that_is_not_there_is_not_declared(store: LineageStore, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    for missing in (tmp_path / "evnets", tmp_path / "a-file"):
        with pytest.raises(ValueError, match="does not exist"):
            declare(store, missing, ["user_id"])
    assert find_targets(store) == []


def test_no_identity_label_means_no_target(store: LineageStore) -> None:
    store.ingest(LineageBatch(assets=[Asset("hive.table/db.t")]))
    assert find_targets(store) == []
