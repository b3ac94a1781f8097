"""The demo's HTTP API tour (`examples/dating/api_tour.py`, run by `make demo`), run as the demo runs
it on a store holding the dating example's query log: the producer's topic is found by the name
the producer sent, with the job that wrote it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating"


def test_the_api_tour_finds_the_topic_by_the_name_it_was_sent_under(tmp_path: Path) -> None:
    db = str(tmp_path / "lineage.db")
    with LineageStore(db) as store:
        Tracelake(store).ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")

    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "api_tour.py"), "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["subscription", "event", "1:", "added", "['kafka.topic//broker:9092/ads_segments']"] in lines
    topic = next(
        line for line in lines if line[:2] == ["DATASET", "dataset:kafka://broker:9092:ads_segments"]
    )
    assert topic[-1] == "job:airflow:ads.export_segments"  # ← the job that wrote it
