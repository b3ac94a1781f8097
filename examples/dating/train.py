"""The ranking model's training as data scientists write it: pandas and scikit-learn on the
pipeline's training table, with Tracelake's runtime lineage attached; then the ranking service
loading the model to answer a request.

    dating.dating_training_tbl ──spark.table(…).toPandas()──▶ a pandas frame
        ──StandardScaler + NearestNeighbors on same_religion, age_bucket,
          dating_user_religion_score──▶ <base>/models/dating_ranking_model.joblib
    the model file is `ai.model/dating_ranking_model`, the node the training config names
    ranking.recommend (a request scope of the privacy probes) loads it ──▶ web.endpoint/ranking.recommend

The model ranks candidates by their nearness, in those three features, to a user's past
matches (every row of the training table is a match: there is no negative to classify
against). `same_religion` is computed from both users' religion, so religion reaches the
model through the code itself, column by column, not only through what the config declares.

The training runs inside a tracked Spark run (`tracelake.spark.track`), and its Python run
(`tracelake.python.track`) links to it; the service's run links to the request it serves. Run
it after the pipeline, on the same lake and store:

    python -m examples.dating.train [--base DIR] [--db URL] [--no-track]   (from the repository root)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sklearn.neighbors import NearestNeighbors
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from examples.dating.pipeline import DEFAULT_BASE, DS, Lake, create_session, open_store
from tracelake.collect.probes import Probes

FEATURES = ["same_religion", "age_bucket", "dating_user_religion_score"]
MODEL = "dating_ranking_model"
ENDPOINT = "web.endpoint/ranking.recommend"


def model_path(lake: Lake) -> Path:
    return lake.base / "models" / f"{MODEL}.joblib"


def known_training_table(spark: SparkSession, lake: Lake) -> None:
    """Name the training table over its directory when this session's catalog does not know it
    (a session without Hive support keeps its catalog in memory: the pipeline's process knew
    the table, this one does not), as a shared metastore would."""
    if spark.catalog.tableExists("dating.dating_training_tbl"):
        return
    database = lake.warehouse / "dating.db"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS dating LOCATION '{database.as_uri()}'")
    location = database / "dating_training_tbl"
    spark.catalog.createTable("dating.dating_training_tbl", path=str(location), source="parquet")
    spark.catalog.recoverPartitions("dating.dating_training_tbl")  # its `ds=` folders


def train(spark: SparkSession, lake: Lake, ds: str = DS) -> tuple[Pipeline, int]:
    """Fit the ranking model on one day of the training table and save it; (model, rows)."""
    frame = (
        spark.table("dating.dating_training_tbl")
        .where(F.col("ds") == ds)
        .select(*FEATURES, "candidate_id")
        .toPandas()
    )
    # users with no feature row yet (the left join's nulls) rank as if the score were neutral
    frame["dating_user_religion_score"] = frame["dating_user_religion_score"].fillna(0.5)
    model = make_pipeline(StandardScaler(), NearestNeighbors(n_neighbors=5)).fit(frame[FEATURES])
    path = model_path(lake)
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path)
    return model, len(frame)


class RankingService:
    """The ranking endpoint: each request's scope comes from the privacy probes; the model is
    loaded on the first request, in a tracked run of `ranking_service` that links to it."""

    def __init__(self, lake: Lake, probes: Probes, store: Any | None) -> None:
        self._path = model_path(lake)
        self._store = store
        self._model: Pipeline | None = None
        self.recommend = probes.endpoint(ENDPOINT)(self._recommend)

    def _recommend(self, same_religion: float, age_bucket: int, score: float) -> list[int]:
        if self._model is None:
            with self._tracking("ranking_service"):
                self._model = joblib.load(self._path)
        query = pd.DataFrame([[same_religion, age_bucket, score]], columns=FEATURES)
        scaler, neighbours = self._model[0], self._model[-1]
        _, nearest = neighbours.kneighbors(scaler.transform(query))
        return [int(row) for row in nearest[0]]

    @contextmanager
    def _tracking(self, job: str) -> Iterator[None]:
        if self._store is None:
            yield
            return
        import tracelake.python

        with tracelake.python.track(job=job, store=self._store, models={str(self._path): MODEL}):
            yield


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """The command line; `spark`: a session to use (and leave running) instead of a new one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=str(DEFAULT_BASE), help="lake directory (default: %(default)s)")
    parser.add_argument("--no-track", action="store_true", help="run without Tracelake attached")
    parser.add_argument("--db", help="lineage store URL or SQLite file (default: TRACELAKE_DB)")
    parser.add_argument("--ds", default=DS, help="the day to train on (default: %(default)s)")
    args = parser.parse_args(argv)

    lake = Lake.at(args.base)
    own_session = spark is None
    spark = spark or create_session(lake)
    store = None if args.no_track else open_store(args.db)
    try:
        known_training_table(spark, lake)
        if store is None:
            _, rows = train(spark, lake, args.ds)
        else:
            import tracelake.python
            import tracelake.spark

            with (
                tracelake.spark.track(spark, job="ranking_training_data", store=store),
                tracelake.python.track(
                    job="dating_ranking_training", store=store, models={str(model_path(lake)): MODEL}
                ) as run,
            ):
                _, rows = train(spark, lake, args.ds)
            print(f"tracked: {run.process_urn}, linked to {run.contexts[0].process} run {run.run.job_id}")
        print(f"trained {MODEL} on {rows:,} rows of dating.dating_training_tbl → {model_path(lake)}")
        service = RankingService(lake, Probes(sampler=lambda: 1.0), store)
        print(f"ranking.recommend answers: candidates {service.recommend(1.0, 30, 0.75)}")
    finally:
        if own_session:
            spark.stop()
        if store is not None:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
