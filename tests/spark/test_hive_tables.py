"""Hive-format tables give the same lineage as data-source tables (issue 28, item 1).

A driver of its own, with Hive support and the Derby metastore the pyspark wheel ships: the
suite's session has no Hive catalog, and `spark.sql.catalogImplementation` is fixed when a
session starts. The same statements run over tables of every storage clause; the expected edges
are worked out by hand from the SQL below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tracelake.model.names import location_urn

# (suffix, storage clause): `USING hive` is a Hive-enabled session's default format
STORAGE = [
    ("hive", "USING hive"),
    ("hive_parquet", "STORED AS PARQUET"),
    ("hive_orc", "STORED AS ORC"),
    ("hive_text", "STORED AS TEXTFILE"),
    ("parquet", "USING parquet"),
]

SCRIPT = textwrap.dedent(
    """
    import json, logging, sys
    from pyspark.sql import SparkSession
    import tracelake.spark

    root, storage = sys.argv[1], json.loads(sys.argv[2])
    metastore = f"jdbc:derby:;databaseName={root}/metastore;create=true"
    store = f"sqlite:///{root}/lineage.db"
    warnings = []

    class Collect(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    logging.getLogger("tracelake.spark").addHandler(Collect(level=logging.WARNING))
    spark = (
        SparkSession.builder.master("local[1]").appName("hive-tables")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", f"{root}/warehouse")
        .config("spark.hadoop.javax.jdo.option.ConnectionURL", metastore)
        .enableHiveSupport()
        .getOrCreate()
    )
    runs = {}
    for suffix, clause in storage:
        with tracelake.spark.track(spark, job=f"insert_{suffix}", store=store) as run:
            spark.sql(f"CREATE TABLE src_{suffix} (key INT, value STRING) {clause}")
            spark.sql(f"INSERT INTO src_{suffix} VALUES (1, 'a'), (2, 'b')")
            spark.sql(f"CREATE TABLE dst_{suffix} (key INT, value STRING) {clause}")
            spark.sql(f"INSERT INTO dst_{suffix} SELECT * FROM src_{suffix} WHERE key > 1")
            spark.sql(f"INSERT OVERWRITE TABLE dst_{suffix} SELECT key, upper(value) FROM src_{suffix}")
            shout = f"SELECT key, concat(value, '!') AS shout FROM src_{suffix}"
            spark.sql(f"CREATE TABLE ctas_{suffix} {clause} AS {shout}")
        runs[suffix] = run
    with open(f"{root}/rows.csv", "w") as rows:
        rows.write("1,x\\n2,y\\n")
    with tracelake.spark.track(spark, job="moves", store=store) as run:
        spark.sql(
            f"INSERT OVERWRITE DIRECTORY '{root}/dir_ds' USING parquet SELECT * FROM src_hive WHERE key > 1"
        )
        spark.sql(
            f"INSERT OVERWRITE LOCAL DIRECTORY '{root}/dir_hive' STORED AS TEXTFILE "
            "SELECT key, upper(value) AS v FROM src_hive"
        )
        spark.sql("CREATE TABLE loaded (key INT, value STRING) ROW FORMAT DELIMITED FIELDS TERMINATED BY ','")
        spark.sql(f"LOAD DATA LOCAL INPATH '{root}/rows.csv' INTO TABLE loaded")
    runs["moves"] = run
    out = {}
    for suffix, run in runs.items():
        batch = run.batch()
        out[suffix] = {
            "root": root,
            "edges": sorted([e.source, e.target, e.transformation.value if e.transformation else None]
                            for e in batch.edges),
            "writes": batch.processes[0].metadata["writes"],
            "status": run.run.status,
        }
    print(json.dumps({"runs": out, "warnings": warnings}))
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def hive_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hive")
    (root / "job.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(root / "job.py"), str(root), json.dumps(STORAGE)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,  # Derby's log and whatever else the session leaves stay in the test's folder
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _short(urn: str) -> str:
    return urn.removeprefix("hive.table/default.")


def _expected(suffix: str) -> set[tuple[str, str, str | None]]:
    src, dst, ctas = f"src_{suffix}", f"dst_{suffix}", f"ctas_{suffix}"
    return {
        # INSERT INTO dst SELECT * FROM src WHERE key > 1
        (src, dst, None),
        (f"{src}#key", f"{dst}#key", "IDENTITY"),
        (f"{src}#value", f"{dst}#value", "IDENTITY"),
        (f"{src}#key", f"{dst}#key", "FILTER"),
        (f"{src}#key", f"{dst}#value", "FILTER"),
        # INSERT OVERWRITE TABLE dst SELECT key, upper(value) FROM src
        (f"{src}#value", f"{dst}#value", "TRANSFORMATION"),
        # CREATE TABLE ctas AS SELECT key, concat(value, '!') AS shout FROM src
        (src, ctas, None),
        (f"{src}#key", f"{ctas}#key", "IDENTITY"),
        (f"{src}#value", f"{ctas}#shout", "TRANSFORMATION"),
    }


@pytest.mark.parametrize("suffix", [suffix for suffix, _ in STORAGE])
def test_every_storage_clause_gives_the_column_lineage_of_a_parquet_table(
    hive_runs: dict[str, Any], suffix: str
) -> None:
    run = hive_runs["runs"][suffix]
    edges = {(_short(source), _short(target), kind) for source, target, kind in run["edges"]}
    assert edges == _expected(suffix)
    assert run["status"] == "COMPLETE"


@pytest.mark.parametrize("suffix", [suffix for suffix, _ in STORAGE])
def test_a_write_records_its_table_and_whether_it_overwrote(hive_runs: dict[str, Any], suffix: str) -> None:
    writes = {_short(w["dataset"]): w for w in hive_runs["runs"][suffix]["writes"]}
    assert set(writes) == {f"src_{suffix}", f"dst_{suffix}", f"ctas_{suffix}"}
    # the run's last write of dst was the INSERT OVERWRITE
    assert writes[f"dst_{suffix}"]["mode"] == "Overwrite"


def test_no_write_to_a_hive_table_loses_its_details(hive_runs: dict[str, Any]) -> None:
    assert hive_runs["warnings"] == []


def test_directories_and_loaded_files_are_writes(hive_runs: dict[str, Any]) -> None:
    run = hive_runs["runs"]["moves"]
    root = run["root"]
    names = {
        location_urn(f"{root}/dir_ds"): "dir_ds",
        location_urn(f"{root}/dir_hive"): "dir_hive",
        location_urn(f"{root}/rows.csv"): "rows.csv",
    }

    def short(urn: str) -> str:
        dataset, _, column = urn.partition("#")
        name = names.get(dataset, _short(dataset))
        return f"{name}#{column}" if column else name

    edges = {(short(source), short(target), kind) for source, target, kind in run["edges"]}
    assert edges == {
        # INSERT OVERWRITE DIRECTORY … USING parquet SELECT * FROM src_hive WHERE key > 1
        ("src_hive", "dir_ds", None),
        ("src_hive#key", "dir_ds#key", "IDENTITY"),
        ("src_hive#value", "dir_ds#value", "IDENTITY"),
        ("src_hive#key", "dir_ds#key", "FILTER"),
        ("src_hive#key", "dir_ds#value", "FILTER"),
        # INSERT OVERWRITE LOCAL DIRECTORY … STORED AS TEXTFILE SELECT key, upper(value) AS v …
        ("src_hive", "dir_hive", None),
        ("src_hive#key", "dir_hive#key", "IDENTITY"),
        ("src_hive#value", "dir_hive#v", "TRANSFORMATION"),
        # LOAD DATA LOCAL INPATH 'rows.csv' INTO TABLE loaded: files as they are, no columns
        ("rows.csv", "loaded", None),
    }
    writes = {short(w["dataset"]): w["mode"] for w in run["writes"]}
    assert writes == {"dir_ds": "Overwrite", "dir_hive": "Overwrite", "loaded": "Append"}
