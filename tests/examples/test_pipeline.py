"""The PySpark dating-app example (`examples/dating/pipeline.py`) on the suite's Spark session.

The pipeline runs once per module into a temporary lake, without tracking. Expected counts are
worked out by hand from `Sizes()` (users=2000, reported_users=200, reports_per_user=3,
match_events=12000), following the rules in its docstring:

- profile.update events: religion for u % 4 == 0 (500), again for u % 12 == 0 (166), city
  for u % 5 == 0 (400) → 1066 rows in dating.profile_update_log.
- interests: 1 + u % 3 each; u % 3 is 0 for 666 users, 1 and 2 for 667 each
  → 666·1 + 667·2 + 667·3 = 4001 rows in dating.user_interests.
- abuse reports: 600, three per user 1..200 (r = u, u + 200, u + 400), severities
  1 + k + u % 3 for k = 0, 1, 2. Users with u % 3 == 0 (66 of them) have 1, 2, 3: two reports
  of severity ≥ 2, max 3, label 0. The other 134 have 2, 3, 4 or 3, 4, 5: three reports, label 1.
  → 200 rows in safety_training_tbl, Σlabel = 134, Σreport_count = 66·2 + 134·3 = 534, and
  134 users on the blocklist (max severity ≥ 4).
- match events: 12000, mutual like when m % 3 == 0 → 4000 matches. For m = 3j, user_a − 1 =
  (3j − 1) mod 2000 takes every value twice as j runs over 1..4000 (3 is invertible mod 2000),
  so every user has 2 matches as user_a: 2000 feature rows, each (same + 1) / (2 + 2).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from examples.dating import pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


EXPECTED_ROWS = {
    "profile_log": {"dating.profile_update_log": 1066, "dating.user_profile_raw": 2000},
    "warehouse_safety": {
        "dating.abuse_reports": 600,
        "dating.user_profile": 2000,
        "dating.user_interests": 4001,
        "dating.safety_log_tbl": 600,
        "dating.safety_training_tbl": 200,
        "dating.user_blocklist": 134,
    },
    "features": {
        "dating.match_events": 12000,
        "dating.matches": 4000,
        "dating.dating_training_tbl": 4000,
        "dating.daily_match_stats.n_matches": 4000,
        "<feature>": 2000,
    },
    "ads_segments": {"ads.user_segments": 2000},
}

EXPECTED_COLUMNS = {
    "dating.profile_update_log": ["user_id", "field_name", "new_value", "event_ts", "ds"],
    "dating.user_profile": [
        "user_id",
        "name",
        "birth_date",
        "gender",
        "religion",
        "city",
        "country",
        "signup_ts",
        "ds",
    ],
    "dating.safety_log_tbl": [
        "user_id",
        "reporter_id",
        "religion",
        "report_reason",
        "report_text",
        "severity",
        "event_ts",
        "ds",
    ],
    "dating.safety_training_tbl": ["target_user_id", "target_religion", "label", "report_count", "ds"],
    "dating.dating_training_tbl": [
        "user_id",
        "candidate_id",
        "same_religion",
        "age_bucket",
        "dating_user_religion_score",
        "label",
        "ds",
    ],
    "dating.daily_match_stats": ["country", "religion", "n_matches", "ds"],
    "ads.user_segments": ["user_id", "segment", "city", "ds"],
}


@pytest.fixture(scope="module")
def lake(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The raw data of `Sizes()` in a temporary lake, with the catalog's databases made; they
    are dropped at the end, the session being the whole suite's (other modules make their own
    `dating` database)."""
    lake = pipeline.Lake.at(tmp_path_factory.mktemp("dating-lake"))
    pipeline.generate_raw(spark, lake)
    pipeline.prepare_catalog(spark, lake)
    try:
        yield lake
    finally:
        for db in ("dating", "ads"):
            spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


@pytest.fixture(scope="module")
def untracked_run(spark: SparkSession, lake: Any) -> dict[str, dict[str, int]]:
    return pipeline.run_jobs(spark, lake)


def test_jobs_report_the_hand_worked_row_counts(untracked_run: dict[str, dict[str, int]], lake: Any) -> None:
    expected = {
        job: {lake.feature_path if k == "<feature>" else k: v for k, v in counts.items()}
        for job, counts in EXPECTED_ROWS.items()
    }
    assert untracked_run == expected


def test_outputs_have_the_query_log_columns(
    spark: SparkSession, untracked_run: dict[str, dict[str, int]], lake: Any
) -> None:
    for table, columns in EXPECTED_COLUMNS.items():
        assert spark.table(table).columns == columns, table
    feature = spark.read.parquet(lake.feature_path)
    assert feature.columns == ["user_id", "dating_user_religion_score", "ds"]
    assert Path(lake.feature_path, f"ds={pipeline.DS}").is_dir()  # partitioned by day


def test_religion_reaches_the_training_tables(
    spark: SparkSession, untracked_run: dict[str, dict[str, int]]
) -> None:
    profile = {r.user_id: r.religion for r in spark.table("dating.user_profile").collect()}
    # Signup religion is RELIGIONS[u % 7]; u % 4 == 0 moved to RELIGIONS[(u + 1) % 7], and
    # u % 12 == 0 later to RELIGIONS[(u + 2) % 7] (the latest update wins).
    assert profile[5] == "Jewish"  # 5 % 7 = 5, no update
    assert profile[4] == "Jewish"  # (4 + 1) % 7 = 5
    assert profile[12] == "Atheist"  # (12 + 2) % 7 = 0
    assert profile[3] == "Christian"

    training = {r.target_user_id: r for r in spark.table("dating.safety_training_tbl").collect()}
    assert sorted(training) == list(range(1, 201))
    assert (training[3].target_religion, training[3].label, training[3].report_count) == ("Christian", 0, 2)
    assert (training[4].target_religion, training[4].label, training[4].report_count) == ("Jewish", 1, 3)
    assert sum(r.label for r in training.values()) == 134
    assert sum(r.report_count for r in training.values()) == 534


def test_feature_is_a_smoothed_share_of_same_religion_matches(
    spark: SparkSession, untracked_run: dict[str, dict[str, int]], lake: Any
) -> None:
    scores = {r.dating_user_religion_score for r in spark.read.parquet(lake.feature_path).collect()}
    # Two matches per user: (same + 1) / 4 with same in 0..2.
    assert scores <= {0.25, 0.5, 0.75}
    training = spark.table("dating.dating_training_tbl")
    assert training.where("dating_user_religion_score IS NULL").count() == 0


def test_tracked_run_stores_the_runtime_lineage(
    spark: SparkSession, untracked_run: dict[str, dict[str, int]], lake: Any, sqlite_store: Any
) -> None:
    """The same jobs with tracking: the religion flows of the example reach the store.

    Expected by reading the jobs: safety_training_tbl's temp-view step passes `religion` through
    unchanged as `target_religion` (a grouping key, selected as is); the training table copies
    the feature column from the parquet dataset after a left join; the score is a UDF over an
    aggregate of religion comparisons.
    """
    from tracelake.spark import track

    # The two jobs the expected edges come from, on the tables the untracked run left (the
    # other two only add time).
    tracked = {"warehouse_safety", "features"}
    for job, run in pipeline.JOBS:
        if job in tracked:
            with track(spark, job=job, store=sqlite_store):
                assert run(spark, lake, pipeline.DS) == untracked_run[job]  # tracking changes nothing

    feature = f"file.dataset/{lake.feature_path}"
    assert lake.feature_path.startswith("/")  # so the URN is file.dataset//tmp/…
    edges = {(e.source, e.target, e.transformation, e.signal) for e in sqlite_store.edges()}
    expected = {
        (
            "hive.table/dating.safety_log_tbl#religion",
            "hive.table/dating.safety_training_tbl#target_religion",
            "IDENTITY",
            "spark_runtime",
        ),
        (
            "hive.table/dating.safety_log_tbl#user_id",
            "hive.table/dating.safety_training_tbl#target_user_id",
            "IDENTITY",
            "spark_runtime",
        ),
        (
            f"{feature}#dating_user_religion_score",
            "hive.table/dating.dating_training_tbl#dating_user_religion_score",
            "IDENTITY",
            "spark_runtime",
        ),
        (
            "hive.table/dating.user_profile#religion",
            f"{feature}#dating_user_religion_score",
            "AGGREGATION",
            "spark_runtime",
        ),
    }
    assert expected <= edges
    assert sqlite_store.node(feature) is not None
    processes = {e.process for e in sqlite_store.edges()}
    assert processes == {f"spark.job/{job}" for job in tracked}


def test_the_trained_model_reaches_religion_through_code_and_discovery_follows_it(
    spark: SparkSession, untracked_run: dict[str, dict[str, int]], lake: Any, sqlite_store: Any
) -> None:
    """`examples/dating/train.py` tracked after the `features` job: the model's features come from
    the training table's columns through the toPandas hand-off and scikit-learn's fit, and the
    service that loads the model serves ranking.recommend.

    Worked out from train.py: the frame selects the three features and candidate_id; the model is
    fitted on the three features only (Pipeline.feature_names_in_), so candidate_id is no model
    field. 4000 rows: one per match, every user being user_a of two (see the module docstring).
    """
    from examples.dating import train

    import tracelake.python
    import tracelake.spark
    from tracelake import Tracelake
    from tracelake.app.review import Review
    from tracelake.collect.probes import Probes

    with tracelake.spark.track(spark, job="features", store=sqlite_store):
        assert pipeline.features(spark, lake, pipeline.DS) == untracked_run["features"]
    models = {str(train.model_path(lake)): train.MODEL}
    with (
        tracelake.spark.track(spark, job="ranking_training_data", store=sqlite_store) as spark_run,
        tracelake.python.track(job="dating_ranking_training", store=sqlite_store, models=models) as run,
    ):
        _, rows = train.train(spark, lake)
    assert rows == 4000
    assert run.run.job_id == spark_run.run.run_id  # linked to the Spark run it ran inside

    table, model = "hive.table/dating.dating_training_tbl", "ai.model/dating_ranking_model"
    code_edges = {
        (e.source, e.target, e.transformation, e.confidence)
        for e in sqlite_store.edges(process="python.job/dating_ranking_training")
    }
    assert code_edges == {
        (f"{table}#{name}", f"{model}#{name}", "TRANSFORMATION", "HIGH") for name in train.FEATURES
    } | {(table, model, None, "HIGH")}

    service = train.RankingService(lake, Probes(sampler=lambda: 1.0), sqlite_store)
    assert len(service.recommend(1.0, 30, 0.75)) == 5
    served = {(e.source, e.target) for e in sqlite_store.edges(process="python.job/ranking_service")}
    assert served == {(model, "web.endpoint/ranking.recommend")}

    review = Review(Tracelake(sqlite_store))
    review.declare("hive.table/dating.user_profile#religion", ["religion"])
    members = review.start("religion", None, actor="test").session.members
    assert members[f"{model}#same_religion"].state == "reached"
    assert members[f"{model}#dating_user_religion_score"].state == "reached"
    assert f"{model}#age_bucket" not in members  # an age, not religion
    assert members["web.endpoint/ranking.recommend"].state == "candidate"  # a table-level flow


def test_the_training_script_as_the_demo_runs_it(
    spark: SparkSession,
    untracked_run: dict[str, dict[str, int]],
    lake: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`python -m examples.dating.train --base … --db …` (README, `make demo`), on this session."""
    from examples.dating import train

    db = tmp_path / "lineage.db"
    assert train.main(["--base", str(lake.base), "--db", str(db)], spark=spark) == 0
    printed = capsys.readouterr().out
    assert (
        "tracked: python.job/dating_ranking_training, linked to spark.job/ranking_training_data run"
        in printed
    )
    assert (
        f"trained dating_ranking_model on 4,000 rows of dating.dating_training_tbl → {train.model_path(lake)}"
        in printed
    )
    assert "ranking.recommend answers: candidates [" in printed
    from tracelake.store import LineageStore

    with LineageStore(f"sqlite:///{db}") as store:
        assert {e.target for e in store.edges(process="python.job/ranking_service")} == {
            "web.endpoint/ranking.recommend"
        }
