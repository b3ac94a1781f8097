"""The dating-app warehouse as a PySpark pipeline, with Tracelake's runtime lineage attached.

The same warehouse as `query_log.jsonl` (same databases, tables and columns, so the SQL-derived
and the runtime lineage meet on the same nodes), but written the way most Spark jobs are: with
the DataFrame API, which no SQL query log ever sees. It follows `religion` from the web to the
ranking model's training data:

    profile.update endpoint ──logs──▶ raw/web_profile_events (JSON, struct `event`)
    profile_log        raw/web_profile_events → dating.profile_update_log
                       raw/user_signups       → dating.user_profile_raw
    warehouse_safety   raw/abuse_reports (CSV) → dating.abuse_reports
                       user_profile_raw + profile_update_log → dating.user_profile (+ user_interests)
                       abuse_reports ⋈ user_profile → dating.safety_log_tbl
                       safety_log_tbl → temp view recent_reports → (spark.sql) dating.safety_training_tbl
                           user_id AS target_user_id, religion AS target_religion
                       safety_log_tbl → dating.user_blocklist
    features           raw/match_events (JSON) → dating.match_events → dating.matches
                       matches ⋈ user_profile → DATING_USER_RELIGION_SCORE (Python UDF)
                           → <base>/features/dating_user_religion_score (parquet)
                       matches ⋈ user_profile ⋈ feature → dating.dating_training_tbl, daily_match_stats
    ads_segments       user_profile → ads.user_segments (religion reaching ads: what purpose
                       limitation forbids, and what lineage should make visible)

Each job runs under its own `tracelake.spark.track(spark, job=...)`. Run it:

    python examples/dating/pipeline.py [--base DIR] [--no-track] [--db URL]

The raw data are synthetic and deterministic (`Sizes`): counts follow from the ids by plain
arithmetic, so tests can check them by hand; only cosmetic values (names, dates, cities) come
from a seeded hash. Other code (tests, `bench/spark_overhead.py`) imports `generate_raw`,
`JOBS` and `run_jobs` and passes its own SparkSession.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tracelake.spark.local import quiet_log_option

DS = "2024-03-10"
DEFAULT_BASE = Path(".tracelake") / "demo-lake"

RELIGIONS = ("Atheist", "Buddhist", "Catholic", "Christian", "Hindu", "Jewish", "Muslim")
CITIES = (("Austin", "US"), ("Berlin", "DE"), ("Lagos", "NG"), ("Lyon", "FR"), ("Osaka", "JP"))
INTERESTS = ("hiking", "cooking", "jazz", "chess", "travel", "films", "running", "books")
REASONS = ("spam", "harassment", "fake_profile", "scam")
# Index 0 is what `m % 3 == 0` picks, so a third of match events are mutual likes.
MATCH_EVENT_TYPES = ("mutual_like", "like", "pass")

# Schemas of the raw files, given on read so no job pays for schema inference and every run
# sees the same types.
PROFILE_EVENT_SCHEMA = StructType(
    [
        StructField(
            "event",
            StructType(
                [
                    StructField("user_id", LongType()),
                    StructField("field", StringType()),
                    StructField("value", StringType()),
                    StructField("ts", TimestampType()),
                ]
            ),
        ),
        StructField("ds", StringType()),
    ]
)
SIGNUP_SCHEMA = StructType(
    [
        StructField("user_id", LongType()),
        StructField("name", StringType()),
        StructField("birth_date", DateType()),
        StructField("gender", StringType()),
        StructField("religion", StringType()),
        StructField("city", StringType()),
        StructField("country", StringType()),
        StructField("interests", ArrayType(StringType())),
        StructField("signup_ts", TimestampType()),
        StructField("ds", StringType()),
    ]
)
ABUSE_REPORT_SCHEMA = StructType(
    [
        StructField("report_id", LongType()),
        StructField("reporter_id", LongType()),
        StructField("reported_user_id", LongType()),
        StructField("reason", StringType()),
        StructField("free_text", StringType()),
        StructField("severity", IntegerType()),
        StructField("event_ts", TimestampType()),
        StructField("ds", StringType()),
    ]
)
MATCH_EVENT_SCHEMA = StructType(
    [
        StructField("match_id", LongType()),
        StructField("user_a", LongType()),
        StructField("user_b", LongType()),
        StructField("event_type", StringType()),
        StructField("matched_ts", TimestampType()),
        StructField("ds", StringType()),
    ]
)

# Every catalog table the jobs write, for the stale-directory clean-up in `prepare_catalog`.
OUTPUT_TABLES = (
    "dating.profile_update_log",
    "dating.user_profile_raw",
    "dating.abuse_reports",
    "dating.user_profile",
    "dating.user_interests",
    "dating.safety_log_tbl",
    "dating.safety_training_tbl",
    "dating.user_blocklist",
    "dating.match_events",
    "dating.matches",
    "dating.daily_match_stats",
    "dating.dating_training_tbl",
    "ads.user_segments",
)


@dataclass(frozen=True)
class Sizes:
    """How much raw data to generate. Every count below follows from these by arithmetic.

    - users 1..`users`; user u has 1 + u % 3 interests.
    - profile.update events: a religion change for u % 4 == 0, a second, later one for
      u % 12 == 0, a city change for u % 5 == 0.
    - `reported_users * reports_per_user` abuse reports; report r (1-based) targets user
      ((r - 1) % reported_users) + 1, and its severity is 1 + (r - 1) // reported_users + u % 3.
    - `match_events` match events; event m is from user ((m - 1) % users) + 1 and is a mutual
      like when m % 3 == 0.
    """

    users: int = 2000
    reported_users: int = 200
    reports_per_user: int = 3
    match_events: int = 12000
    seed: int = 7


@dataclass(frozen=True, slots=True)
class Lake:
    """Where one pipeline instance keeps its files: raw landing zone, features, warehouse."""

    base: Path

    @classmethod
    def at(cls, base: str | os.PathLike[str]) -> Lake:
        # Absolute, so file dataset URNs (`file.dataset/<absolute path>`) do not depend on cwd.
        return cls(Path(base).resolve())

    def raw(self, name: str) -> str:
        return str(self.base / "raw" / name)

    @property
    def feature_path(self) -> str:
        return str(self.base / "features" / "dating_user_religion_score")

    @property
    def warehouse(self) -> Path:
        return self.base / "warehouse"


# ---------------------------------------------------------------------------------------------
# Raw data: what the web tier, the abuse-report tool and the matching service drop in the lake.


def _pick(values: Sequence[str], index: Column) -> Column:
    """values[index] as a Spark expression (element_at is 1-based)."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))


def _seeded(seed: int, *cols: Column | str) -> Column:
    """A deterministic non-negative pseudo-random int from the seed and some columns."""
    return F.pmod(F.hash(F.lit(seed), *cols), F.lit(2**31 - 1))


def _at(ds: str, seconds: Column) -> Column:
    """The timestamp `seconds` after midnight UTC of ds, whatever the session time zone."""
    midnight = int(datetime.fromisoformat(ds).replace(tzinfo=UTC).timestamp())
    return F.timestamp_seconds(F.lit(midnight) + seconds)


def generate_raw(spark: SparkSession, lake: Lake, sizes: Sizes = Sizes(), ds: str = DS) -> None:
    """Write the raw inputs of one day into `<base>/raw`, replacing what was there.

    Built from `spark.range` so it runs in the JVM and scales to benchmark sizes. Not a tracked
    job: it stands in for the systems outside the warehouse.
    """
    seed = sizes.seed
    users = spark.range(1, sizes.users + 1).withColumnRenamed("id", "user_id")
    u = F.col("user_id")
    religion_index = u % len(RELIGIONS)
    city = _seeded(seed, u, F.lit("city")) % len(CITIES)

    signups = users.select(
        u,
        F.concat(F.lit("user_"), u.cast("string")).alias("name"),
        F.date_add(F.lit("1975-01-01").cast("date"), (_seeded(seed, u) % 10000).cast("int")).alias(
            "birth_date"
        ),
        _pick(("f", "m", "x"), _seeded(seed, u, F.lit("gender")) % 3).alias("gender"),
        _pick(RELIGIONS, religion_index).alias("religion"),
        _pick([c for c, _ in CITIES], city).alias("city"),
        _pick([c for _, c in CITIES], city).alias("country"),
        F.slice(
            F.array(*[F.lit(i) for i in INTERESTS]),
            (1 + _seeded(seed, u, F.lit("interests")) % (len(INTERESTS) - 2)).cast("int"),
            (1 + u % 3).cast("int"),
        ).alias("interests"),
        _at(ds, u - 86400).alias("signup_ts"),
        F.lit(ds).alias("ds"),
    )
    signups.write.mode("overwrite").partitionBy("ds").parquet(lake.raw("user_signups"))

    # What the profile.update endpoint logged: one JSON line per field change.
    religion_change = users.where(u % 4 == 0).select(
        u, F.lit("religion").alias("field"), _pick(RELIGIONS, (u + 1) % len(RELIGIONS)).alias("value"), u
    )
    second_change = users.where(u % 12 == 0).select(
        u, F.lit("religion"), _pick(RELIGIONS, (u + 2) % len(RELIGIONS)), u + 3600
    )
    city_change = users.where(u % 5 == 0).select(
        u, F.lit("city"), _pick([c for c, _ in CITIES], (city + 1) % len(CITIES)), u
    )
    events = religion_change.union(second_change).union(city_change).toDF("user_id", "field", "value", "s")
    events.select(
        F.struct("user_id", "field", "value", _at(ds, F.col("s")).alias("ts")).alias("event"),
        F.lit(ds).alias("ds"),
    ).write.mode("overwrite").partitionBy("ds").json(lake.raw("web_profile_events"))

    # Abuse reports, exported by the moderation tool as CSV.
    h = sizes.reported_users
    reports = spark.range(1, h * sizes.reports_per_user + 1).withColumnRenamed("id", "report_id")
    r = F.col("report_id")
    target = (r - 1) % h + 1
    reports.select(
        r,
        (h + 1 + _seeded(seed, r) % (sizes.users - h)).alias("reporter_id"),
        target.alias("reported_user_id"),
        _pick(REASONS, r % len(REASONS)).alias("reason"),
        F.concat(F.lit("report #"), r.cast("string")).alias("free_text"),
        (1 + F.floor((r - 1) / h) + target % 3).cast("int").alias("severity"),
        _at(ds, 7200 + r).alias("event_ts"),
        F.lit(ds).alias("ds"),
    ).write.mode("overwrite").partitionBy("ds").option("header", True).csv(lake.raw("abuse_reports"))

    # Swipes from the matching service, as JSON.
    matches = spark.range(1, sizes.match_events + 1).withColumnRenamed("id", "match_id")
    m = F.col("match_id")
    user_a = (m - 1) % sizes.users + 1
    matches.select(
        m,
        user_a.alias("user_a"),
        # Any other user: an offset in [1, users - 1] never lands on user_a itself.
        ((user_a + _seeded(seed, m) % (sizes.users - 1)) % sizes.users + 1).alias("user_b"),
        _pick(MATCH_EVENT_TYPES, m % 3).alias("event_type"),
        _at(ds, 10800 + m).alias("matched_ts"),
        F.lit(ds).alias("ds"),
    ).write.mode("overwrite").partitionBy("ds").json(lake.raw("match_events"))


def prepare_catalog(spark: SparkSession, lake: Lake) -> None:
    """Create the databases under the lake's warehouse, and forget stale table directories.

    A session without Hive support keeps its catalog in memory: the next process no longer
    knows the tables, but their directories remain, and `saveAsTable` refuses to create a
    managed table over a non-empty location. Only directories of this pipeline's own tables
    that the catalog does not know are removed.
    """
    for db in ("dating", "ads"):
        location = (lake.warehouse / f"{db}.db").as_uri()
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db} LOCATION '{location}'")
    for table in OUTPUT_TABLES:
        if spark.catalog.tableExists(table):
            continue
        db, name = table.split(".")
        db_location = urlparse(spark.catalog.getDatabase(db).locationUri).path
        stale = Path(db_location) / name
        if stale.is_dir():
            shutil.rmtree(stale)


# ---------------------------------------------------------------------------------------------
# The jobs. Each reads catalog tables or raw files, writes its outputs, and returns the row
# count of each output (counting is the usual last step of a job, and a read of its own).

RowCounts = dict[str, int]


def _save(df: DataFrame, table: str) -> None:
    df.write.mode("overwrite").format("parquet").partitionBy("ds").saveAsTable(table)


def _counted(spark: SparkSession, tables: Sequence[str], ds: str) -> RowCounts:
    return {t: spark.table(t).where(F.col("ds") == ds).count() for t in tables}


def profile_log(spark: SparkSession, lake: Lake, ds: str = DS) -> RowCounts:
    """Parse the endpoint's JSON log into `dating.profile_update_log`; land the signups."""
    events = spark.read.schema(PROFILE_EVENT_SCHEMA).json(lake.raw("web_profile_events"))
    log = events.where(F.col("ds") == ds).select(
        F.col("event.user_id").alias("user_id"),
        F.col("event.field").alias("field_name"),
        F.col("event.value").alias("new_value"),
        F.col("event.ts").alias("event_ts"),
        "ds",
    )
    _save(log, "dating.profile_update_log")

    signups = spark.read.schema(SIGNUP_SCHEMA).parquet(lake.raw("user_signups"))
    _save(signups.where(F.col("ds") == ds), "dating.user_profile_raw")
    return _counted(spark, ["dating.profile_update_log", "dating.user_profile_raw"], ds)


# The training-table step stays in SQL, as it is in the query log: the one statement of this
# pipeline a SQL collector could see too.
SAFETY_TRAINING_SQL = """
SELECT user_id AS target_user_id,
       religion AS target_religion,
       CASE WHEN MAX(severity) >= 4 THEN 1 ELSE 0 END AS label,
       COUNT(*) AS report_count,
       ds
FROM recent_reports
GROUP BY user_id, religion, ds
"""


def warehouse_safety(spark: SparkSession, lake: Lake, ds: str = DS) -> RowCounts:
    """Build the profile, the safety log and the safety training table."""
    day = F.col("ds") == ds
    reports = spark.read.schema(ABUSE_REPORT_SCHEMA).option("header", True).csv(lake.raw("abuse_reports"))
    _save(reports.where(day), "dating.abuse_reports")

    # The latest religion a user set today overrides the one given at signup.
    latest_first = Window.partitionBy("user_id").orderBy(F.col("event_ts").desc())
    religion_updates = (
        spark.table("dating.profile_update_log")
        .where(day & (F.col("field_name") == "religion"))
        .withColumn("rank", F.row_number().over(latest_first))
        .where(F.col("rank") == 1)
        .select("user_id", F.col("new_value").alias("new_religion"))
    )
    raw = spark.table("dating.user_profile_raw").where(day)
    profile = raw.join(religion_updates, "user_id", "left").select(
        "user_id",
        "name",
        "birth_date",
        "gender",
        F.coalesce("new_religion", "religion").alias("religion"),
        "city",
        "country",
        "signup_ts",
        "ds",
    )
    _save(profile, "dating.user_profile")
    _save(
        raw.select("user_id", F.explode("interests").alias("interest"), "ds"),
        "dating.user_interests",
    )

    # Read back from the catalog rather than reusing `profile`, as a separate job would: the
    # lineage then runs table to table, like the SQL version's.
    r = spark.table("dating.abuse_reports").where(day).alias("r")
    p = spark.table("dating.user_profile").where(day).alias("p")
    safety_log = r.join(p, F.col("r.reported_user_id") == F.col("p.user_id")).select(
        F.col("r.reported_user_id").alias("user_id"),
        "r.reporter_id",
        "p.religion",
        F.col("r.reason").alias("report_reason"),
        F.col("r.free_text").alias("report_text"),
        "r.severity",
        "r.event_ts",
        "r.ds",
    )
    _save(safety_log, "dating.safety_log_tbl")

    spark.table("dating.safety_log_tbl").where(day & (F.col("severity") >= 2)).select(
        "user_id", "religion", "report_reason", "severity", "ds"
    ).createOrReplaceTempView("recent_reports")
    _save(spark.sql(SAFETY_TRAINING_SQL), "dating.safety_training_tbl")

    # The SQL version MERGEs into the blocklist; plain parquet tables cannot, so it is rebuilt.
    blocklist = (
        spark.table("dating.safety_log_tbl")
        .where(day)
        .groupBy("user_id")
        .agg(F.max("severity").alias("severity"))
        .where(F.col("severity") >= 4)
        .select("user_id", "severity", F.lit(ds).alias("updated_ds"))
    )
    blocklist.write.mode("overwrite").format("parquet").saveAsTable("dating.user_blocklist")

    counts = _counted(
        spark,
        [
            "dating.abuse_reports",
            "dating.user_profile",
            "dating.user_interests",
            "dating.safety_log_tbl",
            "dating.safety_training_tbl",
        ],
        ds,
    )
    counts["dating.user_blocklist"] = spark.table("dating.user_blocklist").count()
    return counts


def _religion_affinity_udf() -> Callable[..., Column]:
    """DATING_USER_RELIGION_SCORE as a Python UDF.

    Built inside a function so cloudpickle ships the code by value: this file is not an
    importable module on the Python workers (it is loaded by path from tests and the bench).
    """

    def religion_affinity(same: int | None, total: int | None) -> float | None:
        # Laplace-smoothed share of matches with the same religion: a user with no history
        # scores 0.5, one with a long all-same history tends to 1.
        if same is None or total is None:
            return None
        return (same + 1) / (total + 2)

    # A plain pickled UDF: Arrow would need pandas and pyarrow, which the example does not.
    return F.udf(religion_affinity, DoubleType(), useArrow=False)


def features(spark: SparkSession, lake: Lake, ds: str = DS) -> RowCounts:
    """Matches, the DATING_USER_RELIGION_SCORE feature, and the ranking model's training table."""
    day = F.col("ds") == ds
    events = spark.read.schema(MATCH_EVENT_SCHEMA).json(lake.raw("match_events"))
    _save(events.where(day), "dating.match_events")
    _save(
        spark.table("dating.match_events")
        .where(day & (F.col("event_type") == "mutual_like"))
        .select("match_id", "user_a", "user_b", "matched_ts", "ds"),
        "dating.matches",
    )

    matches = spark.table("dating.matches").where(day).alias("m")
    profile = (
        spark.table("dating.user_profile").where(day).select("user_id", "religion", "country", "birth_date")
    )
    a, b = profile.alias("a"), profile.alias("b")
    pairs = matches.join(a, F.col("m.user_a") == F.col("a.user_id")).join(
        b, F.col("m.user_b") == F.col("b.user_id")
    )

    # A value computed from religion (not a CASE condition), so religion flows into the score.
    same = (F.col("a.religion") == F.col("b.religion")).cast("int")
    score = (
        pairs.groupBy(F.col("m.user_a").alias("user_id"))
        .agg(F.sum(same).alias("same"), F.count(F.lit(1)).alias("total"))
        .select(
            "user_id",
            _religion_affinity_udf()("same", "total").alias("dating_user_religion_score"),
            F.lit(ds).alias("ds"),
        )
    )
    score.write.mode("overwrite").partitionBy("ds").parquet(lake.feature_path)

    feature = spark.read.parquet(lake.feature_path).where(day).alias("f")
    training = pairs.join(feature, F.col("m.user_a") == F.col("f.user_id"), "left").select(
        F.col("m.user_a").alias("user_id"),
        F.col("m.user_b").alias("candidate_id"),
        F.when(F.col("a.religion") == F.col("b.religion"), 1.0).otherwise(0.0).alias("same_religion"),
        (F.floor(F.datediff(F.to_date(F.lit(ds)), F.col("a.birth_date")) / 3652.5) * 10)
        .cast("int")
        .alias("age_bucket"),
        F.col("f.dating_user_religion_score"),
        F.lit(1).alias("label"),
        F.col("m.ds"),
    )
    _save(training, "dating.dating_training_tbl")

    stats = (
        matches.join(a, F.col("m.user_a") == F.col("a.user_id"))
        .groupBy("a.country", "a.religion")
        .agg(F.countDistinct("m.match_id").alias("n_matches"))
        .select("country", "religion", "n_matches", F.lit(ds).alias("ds"))
    )
    _save(stats, "dating.daily_match_stats")

    counts = _counted(spark, ["dating.match_events", "dating.matches", "dating.dating_training_tbl"], ds)
    counts["dating.daily_match_stats.n_matches"] = (
        spark.table("dating.daily_match_stats").where(day).agg(F.sum("n_matches")).first()[0]
    )
    counts[lake.feature_path] = spark.read.parquet(lake.feature_path).where(day).count()
    return counts


def ads_segments(spark: SparkSession, lake: Lake, ds: str = DS) -> RowCounts:
    """Ad segments from profiles. Religion used for ads is exactly the flow to catch."""
    segment = (
        F.when(F.col("religion").isin("Catholic", "Christian"), "faith_christian")
        .when(F.col("country") == "US", "us_general")
        .otherwise("other")
    )
    segments = (
        spark.table("dating.user_profile")
        .where(F.col("ds") == ds)
        .select("user_id", segment.alias("segment"), "city", "ds")
    )
    _save(segments, "ads.user_segments")
    return _counted(spark, ["ads.user_segments"], ds)


Job = Callable[[SparkSession, Lake, str], RowCounts]
JOBS: tuple[tuple[str, Job], ...] = (
    ("profile_log", profile_log),
    ("warehouse_safety", warehouse_safety),
    ("features", features),
    ("ads_segments", ads_segments),
)

# Given a job name, a context manager that tracks what runs inside it (or does nothing).
Tracking = Callable[[str], AbstractContextManager[Any]]


@contextmanager
def _untracked(_job: str) -> Iterator[None]:
    yield


def run_jobs(
    spark: SparkSession, lake: Lake, *, tracking: Tracking | None = None, ds: str = DS
) -> dict[str, RowCounts]:
    """Run every job in order, each inside `tracking(job_name)`; returns each job's row counts."""
    tracking = tracking or _untracked
    results: dict[str, RowCounts] = {}
    for name, job in JOBS:
        with tracking(name):
            results[name] = job(spark, lake, ds)
    return results


# ---------------------------------------------------------------------------------------------
# Command line.


def create_session(lake: Lake, *, master: str = "local[*]") -> SparkSession:
    """A quiet local session whose catalog keeps its tables under the lake's warehouse."""
    # Python UDF workers must run this interpreter, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A local demo: bind to loopback instead of warning that the hostname resolves to it.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName("dating-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(lake.warehouse))
        # `setLogLevel` comes too late for the start-up warnings: the driver JVM has to be told.
        .config("spark.driver.extraJavaOptions", quiet_log_option(lake.base))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def open_store(db_url: str | None) -> Any:
    """The Tracelake store at `db_url`: a URL or a SQLite file, TRACELAKE_DB when not given."""
    from tracelake.store import LineageStore, default_url

    url = db_url or default_url()
    if "://" not in url:
        url = f"sqlite:///{url}"
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return LineageStore(url)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=str(DEFAULT_BASE), help="lake directory (default: %(default)s)")
    parser.add_argument("--no-track", action="store_true", help="run without Tracelake attached")
    parser.add_argument("--db", help="lineage store URL or SQLite file (default: TRACELAKE_DB)")
    parser.add_argument("--users", type=int, default=Sizes().users, help="users to generate")
    parser.add_argument("--ds", default=DS, help="the day to process (default: %(default)s)")
    args = parser.parse_args(argv)

    lake = Lake.at(args.base)
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    with ExitStack() as cleanup:
        spark = create_session(lake)
        cleanup.callback(spark.stop)
        store = None if args.no_track else cleanup.enter_context(open_store(args.db))
        if store is not None:
            from tracelake import spark as tracelake_spark

        @contextmanager
        def tracking(job: str) -> Iterator[None]:
            # The clock runs around the tracker, so its stop() (the flush into the store) counts.
            start = time.perf_counter()
            if store is None:
                yield
            else:
                with tracelake_spark.track(spark, job=job, store=store):
                    yield
            seconds[job] = time.perf_counter() - start

        sizes = Sizes(users=args.users, reported_users=min(Sizes().reported_users, args.users // 2))
        generate_raw(spark, lake, sizes, args.ds)
        prepare_catalog(spark, lake)
        results = run_jobs(spark, lake, tracking=tracking, ds=args.ds)
        width = max(len(output) for counts in results.values() for output in counts)
        for job, counts in results.items():
            print(f"{job} ({seconds[job]:.1f} s):")
            for output, rows in counts.items():
                print(f"  {output:<{width}} {rows:>8,}")

    print(f"\nlake: {lake.base}   ({time.perf_counter() - started:.1f} s)")
    if store is None:
        print("lineage: not tracked (--no-track)")
    else:
        db = store.engine.url.render_as_string(hide_password=True)
        print(f"lineage: {db}")
        print(f"  try: tracelake lineage dating.safety_training_tbl#target_religion --up --db {db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
