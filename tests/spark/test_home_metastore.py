"""A Hive session's metastore is the home of the tracker's `db.table` names (issue 17, item 4):
OpenLineage events the tracker sends name them `hive://host:port` + `db.table`, as Spark's own
agent and other producers do. A driver of its own: `spark.sql.catalogImplementation` is fixed when
a session starts, and the suite's session has no Hive catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from tracelake.model import names
    import tracelake.spark

    root = sys.argv[1]
    spark = (
        SparkSession.builder.master("local[1]").appName("home-metastore")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", "thrift://meta-1.internal:9083,thrift://meta-2.internal:9083")
        .getOrCreate()
    )
    before = names.hive_namespace()
    tracker = tracelake.spark.track(spark, job="home", store=f"sqlite:///{root}/lineage.db")
    tracker.stop()
    print(json.dumps({"before": before, "after": names.hive_namespace(),
                      "dataset": list(names.dataset_of("hive.table/sales.orders"))}))
    spark.stop()
    """
)


def test_the_tracker_takes_the_home_metastore_from_the_session(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRACELAKE_HIVE_NAMESPACE"}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "job.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # whatever the session leaves (a warehouse folder) stays in the test's folder
        env={**env, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {
        "before": None,
        "after": "hive://meta-1.internal:9083",
        "dataset": ["hive://meta-1.internal:9083", "sales.orders"],
    }
