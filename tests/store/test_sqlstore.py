"""The store's contract, on SQLite and on a real PostgreSQL: one transaction per ingest,
idempotence, signals kept apart, temporal versions with as-of and diff."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tracelake.model import (
    Asset,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    Transformation,
)
from tracelake.store import LineageStore

LOG = "hive.table/dating.safety_log_tbl"
TRAIN = "hive.table/dating.safety_training_tbl"
PROFILE = "hive.table/dating.user_profile"
JOB = "sql.job/safety_training"

JAN, FEB, MAR = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 2, 3))


def edge(
    source: str, target: str, *, process: str = JOB, signal: Signal = Signal.SQL_STATIC, **kw
) -> FlowEdge:
    return FlowEdge(source, target, process, signal, **kw)


def training_batch(observed_at: datetime | None = JAN) -> LineageBatch:
    return LineageBatch(
        assets=[
            Asset(LOG, owner="safety-team", layer="ods"),
            Asset(TRAIN, layer="dwd", labels=frozenset({"ml"})),
        ],
        fields=[Field(f"{LOG}#religion", data_type="string")],
        processes=[Process(JOB, name="safety_training")],
        runs=[Run("run-1", JOB, started_at=observed_at, job_id="safety_training")],
        edges=[
            edge(LOG, TRAIN),
            edge(f"{LOG}#user_id", f"{TRAIN}#target_user_id", transformation=Transformation.IDENTITY),
            edge(f"{LOG}#religion", f"{TRAIN}#target_religion", transformation=Transformation.IDENTITY),
            edge(f"{LOG}#ds", f"{TRAIN}#target_religion", transformation=Transformation.FILTER),
        ],
        observed_at=observed_at,
    )


def pairs(records) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in records}


def test_ingest_writes_nodes_edges_runs_and_properties(store: LineageStore) -> None:
    report = store.ingest(training_batch())

    assert report.edges_added == 4
    assert store.counts() == {"asset": 2, "field": 5, "process": 1, "edges": 4, "edge_versions": 4}
    log = store.node(LOG)
    assert log is not None and log.owner == "safety-team" and log.layer == "ods" and log.kind == "hive.table"
    religion = store.node(f"{LOG}#religion")
    assert religion is not None and religion.data_type == "string" and religion.parent_id == log.id
    # by name, not in the order seen; a declared order comes first
    assert [f.urn for f in store.fields_of(TRAIN)] == [f"{TRAIN}#target_religion", f"{TRAIN}#target_user_id"]
    declared = store.fields_of(TRAIN, ["target_user_id", "target_religion"])
    assert [f.urn for f in declared] == [f"{TRAIN}#target_user_id", f"{TRAIN}#target_religion"]
    with store.engine.connect() as conn:
        assert (
            conn.execute(sa.text("SELECT job_id FROM runs WHERE run_id = 'run-1'")).scalar()
            == "safety_training"
        )


def test_the_same_batch_twice_adds_nothing_but_moves_last_seen(store: LineageStore) -> None:
    store.ingest(training_batch(), now=datetime(2024, 1, 2, tzinfo=UTC))
    report = store.ingest(training_batch(), now=datetime(2024, 1, 5, tzinfo=UTC))

    assert report.edges_added == 0 and report.versions_added == 0 and report.versions_unchanged == 1
    assert store.counts()["edge_versions"] == 4
    current = store.edges()
    assert len(current) == 4
    assert {e.last_seen for e in current} == {datetime(2024, 1, 5, tzinfo=UTC)}
    assert {e.first_seen for e in current} == {datetime(2024, 1, 2, tzinfo=UTC)}


def test_edges_from_different_signals_are_kept_apart(store: LineageStore) -> None:
    store.ingest(training_batch())
    runtime = LineageBatch(
        edges=[
            edge(
                LOG,
                TRAIN,
                process="spark.job/safety",
                signal=Signal.SPARK_RUNTIME,
                confidence=Confidence.MEDIUM,
            )
        ]
    )
    store.ingest(runtime)

    between = [e for e in store.edges() if (e.source, e.target) == (LOG, TRAIN)]
    assert sorted((e.signal, e.confidence) for e in between) == [
        ("spark_runtime", "MEDIUM"),
        ("sql_static", "HIGH"),
    ]


def test_labels_accumulate_and_unset_properties_are_kept(store: LineageStore) -> None:
    store.ingest(training_batch())
    store.ingest(LineageBatch(assets=[Asset(TRAIN, labels=frozenset({"religion"}))]))

    train = store.node(TRAIN)
    assert train is not None
    assert train.labels == ("ml", "religion")
    assert train.layer == "dwd"


def test_a_node_said_again_moves_last_seen_and_takes_only_what_changed(store: LineageStore) -> None:
    facets = {"openlineage": {"namespace": "hive", "name": "dating.user_profile"}}
    store.ingest(LineageBatch(assets=[Asset(PROFILE, owner="growth", metadata=facets)]), now=JAN)
    store.ingest(LineageBatch(assets=[Asset(PROFILE, metadata=facets)]), now=FEB)  # nothing new
    unchanged = store.node(PROFILE)
    store.ingest(
        LineageBatch(assets=[Asset(PROFILE, owner="safety", metadata={"retention": "30d"})]), now=MAR
    )
    changed = store.node(PROFILE)

    assert unchanged is not None and changed is not None
    assert (unchanged.owner, unchanged.properties) == ("growth", facets)
    assert (unchanged.first_seen, unchanged.last_seen) == (JAN, FEB)
    assert changed.owner == "safety"
    assert changed.properties == {**facets, "retention": "30d"}
    assert changed.last_seen == MAR


def test_edges_of_one_process(store: LineageStore) -> None:
    store.ingest(training_batch(JAN))
    other = "sql.job/profile_export"
    store.ingest(
        LineageBatch(
            processes=[Process(other, name="profile_export")], edges=[edge(PROFILE, LOG, process=other)]
        )
    )

    assert pairs(store.edges(process=other)) == {(PROFILE, LOG)}
    assert pairs(store.edges(process=JOB)) == pairs(training_batch().edges)
    assert store.edges(process=JOB, as_of=datetime(2023, 12, 1, tzinfo=UTC)) == []
    assert store.edges(process="sql.job/never_seen") == []


def test_a_changed_process_closes_its_old_edges_and_opens_new_ones(store: LineageStore) -> None:
    store.ingest(training_batch(JAN))
    changed = LineageBatch(
        processes=[Process(JOB, name="safety_training")],
        edges=[
            edge(PROFILE, TRAIN),
            edge(f"{LOG}#user_id", f"{TRAIN}#target_user_id", transformation=Transformation.IDENTITY),
        ],
        observed_at=FEB,
    )
    report = store.ingest(changed)

    assert report.edges_closed == 4 and report.edges_added == 2
    at_jan15 = store.edges(as_of=datetime(2024, 1, 15, tzinfo=UTC))
    at_feb15 = store.edges(as_of=datetime(2024, 2, 15, tzinfo=UTC))
    assert pairs(at_jan15) == pairs(training_batch().edges)
    assert pairs(at_feb15) == {(PROFILE, TRAIN), (f"{LOG}#user_id", f"{TRAIN}#target_user_id")}
    assert store.edges(as_of=datetime(2023, 12, 1, tzinfo=UTC)) == []
    # the current graph is the February version
    assert pairs(store.edges()) == pairs(at_feb15)
    closed = [e for e in at_jan15 if e.source == LOG]
    assert closed[0].valid_from == JAN and closed[0].valid_to == FEB


def test_diff_reports_added_and_removed_edges(store: LineageStore) -> None:
    store.ingest(training_batch(JAN))
    store.ingest(
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(PROFILE, TRAIN)], observed_at=FEB)
    )

    diff = store.diff(datetime(2024, 1, 15, tzinfo=UTC), datetime(2024, 2, 15, tzinfo=UTC))

    assert pairs(diff.added) == {(PROFILE, TRAIN)}
    assert pairs(diff.removed) == pairs(training_batch().edges)
    unchanged = store.diff(datetime(2024, 2, 2, tzinfo=UTC), datetime(2024, 2, 20, tzinfo=UTC))
    assert unchanged.added == [] and unchanged.removed == []


def test_a_late_observation_splits_the_version_that_covered_its_time(store: LineageStore) -> None:
    """Logs arrive out of order: a February change ingested after the March one still lands in place."""
    store.ingest(training_batch(JAN))
    store.ingest(
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(PROFILE, TRAIN)], observed_at=MAR)
    )
    store.ingest(
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(LOG, PROFILE)], observed_at=FEB)
    )

    assert pairs(store.edges(as_of=datetime(2024, 1, 15, tzinfo=UTC))) == pairs(training_batch().edges)
    assert pairs(store.edges(as_of=datetime(2024, 2, 15, tzinfo=UTC))) == {(LOG, PROFILE)}
    assert pairs(store.edges(as_of=datetime(2024, 3, 15, tzinfo=UTC))) == {(PROFILE, TRAIN)}
    # an earlier-than-everything observation becomes a closed version before the first one
    store.ingest(
        LineageBatch(
            processes=[Process(JOB, name="x")], edges=[edge(TRAIN, LOG)], observed_at=datetime(2023, 6, 1)
        )
    )
    assert pairs(store.edges(as_of=datetime(2023, 7, 1, tzinfo=UTC))) == {(TRAIN, LOG)}
    assert pairs(store.edges(as_of=datetime(2024, 1, 15, tzinfo=UTC))) == pairs(training_batch().edges)


def test_several_versions_of_one_process_in_one_ingest(store: LineageStore) -> None:
    """A query log holds many days of one job; one ingest call records each change in order."""
    day = [datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]
    batches = [
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(LOG, TRAIN)], observed_at=day[0]),
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(LOG, TRAIN)], observed_at=day[1]),
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(PROFILE, TRAIN)], observed_at=day[2]),
    ]
    report = store.ingest(reversed(batches))  # the order of the list does not matter, the times do

    assert report.versions_added == 2 and report.versions_unchanged == 1
    assert pairs(store.edges(as_of=datetime(2024, 1, 2, 12, tzinfo=UTC))) == {(LOG, TRAIN)}
    assert pairs(store.edges()) == {(PROFILE, TRAIN)}


@pytest.mark.postgres
def test_ingest_is_one_transaction_on_postgres(postgres_url: str) -> None:
    """A batch that fails half way leaves the store exactly as it was."""
    store = LineageStore(postgres_url)
    store.ingest(training_batch(JAN))
    before = store.counts()
    broken = LineageBatch(
        processes=[Process(JOB, name="x")],
        edges=[edge(PROFILE, TRAIN)],
        # an over-long run status breaks the run insert, after nodes and edges were written
        runs=[Run("run-2", JOB, status="x" * 10_000)],
        observed_at=FEB,
    )
    with pytest.raises(sa.exc.DataError):
        store.ingest(broken)

    assert store.counts() == before
    assert pairs(store.edges()) == pairs(training_batch().edges)
    assert store.node(PROFILE) is None
    store.close()


def test_ingest_rolls_back_on_sqlite_too(sqlite_store: LineageStore) -> None:
    sqlite_store.ingest(training_batch(JAN))
    before = sqlite_store.counts()

    broken_run = LineageBatch(
        runs=[Run("r", JOB, started_at=FEB)], edges=[edge(PROFILE, TRAIN)], observed_at=FEB
    )
    with sqlite_store.engine.begin() as conn:  # make the run insert fail: a CHECK-like trigger
        conn.execute(
            sa.text("CREATE TRIGGER no_runs BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END")
        )
    with pytest.raises(sa.exc.IntegrityError):
        sqlite_store.ingest(broken_run)

    assert sqlite_store.counts() == before
    assert sqlite_store.node(PROFILE) is None
    # ids learnt inside the rolled-back transaction are forgotten: a later ingest still works
    with sqlite_store.engine.begin() as conn:
        conn.execute(sa.text("DROP TRIGGER no_runs"))
    sqlite_store.ingest(broken_run)
    assert (PROFILE, TRAIN) in pairs(sqlite_store.edges())


def test_problems_are_recorded(store: LineageStore) -> None:
    problem = Problem("logs/q.jsonl", "Invalid expression / Unexpected token", "entry 7", "SELEC 1")
    store.ingest(LineageBatch(problems=[problem]))

    assert store.problems() == [problem]


def test_snapshot_holds_every_version_as_arrays(store: LineageStore) -> None:
    store.ingest(training_batch(JAN))
    store.ingest(
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(PROFILE, TRAIN)], observed_at=FEB)
    )

    snap = store.snapshot()

    assert snap.version == store.graph_version() == 2
    assert len(snap.edge_ids) == 5
    urn_of = dict(zip(snap.node_ids.tolist(), snap.node_urns, strict=True))
    open_pairs = {
        (urn_of[s], urn_of[t])
        for s, t, to in zip(
            snap.edge_source.tolist(), snap.edge_target.tolist(), snap.edge_valid_to.tolist(), strict=True
        )
        if to == 2**63 - 1
    }
    assert open_pairs == {(PROFILE, TRAIN)}
    religion_edge = [
        i
        for i, (s, t) in enumerate(zip(snap.edge_source.tolist(), snap.edge_target.tolist(), strict=True))
        if urn_of[s] == f"{LOG}#religion"
    ]
    assert snap.edge_transformation[religion_edge[0]] == list(Transformation).index(Transformation.IDENTITY)
    assert snap.edge_confidence[religion_edge[0]] == 3


def test_known_columns_come_from_the_fields_seen(store: LineageStore) -> None:
    store.ingest(training_batch())
    store.ingest(LineageBatch(fields=[Field(f"{PROFILE}#address"), Field(f"{PROFILE}#address.city")]))

    known = store.known_columns()

    assert known[TRAIN] == ["target_user_id", "target_religion"]
    assert known[PROFILE] == ["address"]


def test_default_location_honours_tracelake_db(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from tracelake.store import default_url

    monkeypatch.delenv("TRACELAKE_DB", raising=False)
    assert default_url() == "sqlite:///.tracelake/lineage.db"
    monkeypatch.setenv("TRACELAKE_DB", str(tmp_path / "x.db"))
    assert default_url() == f"sqlite:///{tmp_path / 'x.db'}"
    monkeypatch.setenv("TRACELAKE_DB", "postgresql+psycopg://u@h/db")
    assert default_url() == "postgresql+psycopg://u@h/db"


def test_a_re_observation_at_the_same_instant_replaces_that_version(store: LineageStore) -> None:
    """A running job re-registers its growing edge set under its start time; no empty versions pile up."""
    store.ingest(LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(LOG, TRAIN)], observed_at=JAN))
    store.ingest(
        LineageBatch(processes=[Process(JOB, name="x")], edges=[edge(PROFILE, TRAIN)], observed_at=FEB)
    )
    grown = [edge(LOG, TRAIN), edge(LOG, PROFILE)]
    report = store.ingest(LineageBatch(processes=[Process(JOB, name="x")], edges=grown, observed_at=JAN))

    assert report.versions_replaced == 1 and report.edges_replaced == 1 and report.edges_added == 2
    assert pairs(store.edges(as_of=datetime(2024, 1, 15, tzinfo=UTC))) == {(LOG, TRAIN), (LOG, PROFILE)}
    # the February version is untouched, and the replaced one still ends where the old one did
    assert pairs(store.edges()) == {(PROFILE, TRAIN)}
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM process_versions")).scalar() == 2
    replaced = [e for e in store.edges(as_of=datetime(2024, 1, 15, tzinfo=UTC)) if e.target == PROFILE]
    assert replaced[0].valid_to == FEB


def test_a_run_reported_in_pieces_out_of_order_keeps_what_each_piece_knew(store: LineageStore) -> None:
    started, ended = datetime(2024, 3, 12, 10, tzinfo=UTC), datetime(2024, 3, 12, 11, tzinfo=UTC)
    # the COMPLETE arrives first, then a late START that knows only the start time
    store.ingest(LineageBatch(runs=[Run("run-9", JOB, ended_at=ended, status="COMPLETE")]))
    store.ingest(
        LineageBatch(runs=[Run("run-9", JOB, started_at=started, status="RUNNING", job_id="parent")])
    )

    with store.engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT started_at, ended_at, status, job_id FROM runs WHERE run_id = 'run-9'")
        ).one()
    assert (row.status, row.job_id) == ("COMPLETE", "parent")
    assert row.started_at is not None and row.ended_at is not None
    assert row.started_at < row.ended_at


def test_a_run_that_ends_takes_its_final_status(store: LineageStore) -> None:
    store.ingest(LineageBatch(runs=[Run("run-8", JOB, started_at=JAN, status="RUNNING")]))
    store.ingest(LineageBatch(runs=[Run("run-8", JOB, ended_at=FEB, status="FAIL")]))
    with store.engine.connect() as conn:
        status = conn.execute(sa.text("SELECT status FROM runs WHERE run_id = 'run-8'")).scalar()
    assert status == "FAIL"


def test_a_store_made_before_an_index_existed_gets_it_when_opened(store: LineageStore) -> None:
    """An index added to the schema later (the runs' by process, which `why` reads runs by) is
    made in a store an older Tracelake created, the first time a newer one opens it; the data stays."""
    store.ingest(
        LineageBatch(
            runs=[Run("r1", "sql.query/p", started_at=datetime(2024, 1, 1, tzinfo=UTC), status="COMPLETE")]
        )
    )
    url = store.engine.url.render_as_string(hide_password=False)
    with store.engine.begin() as conn:
        conn.execute(sa.text("DROP INDEX ix_runs_process"))
    with LineageStore(url) as reopened, reopened.engine.connect() as conn:
        assert {index["name"] for index in sa.inspect(conn).get_indexes("runs")} >= {"ix_runs_process"}
        assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() == 1
