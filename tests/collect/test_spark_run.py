"""A run's record folds in what the listener captured; an analysis that fails costs that one
capture (counted and logged), never the tracker's worker: found by mypy, an `df.rdd` capture
whose analysis failed raised again in the handler, which named the action it does not have."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from tracelake.collect import spark_run
from tracelake.collect.spark_journal import RunHeader
from tracelake.collect.spark_listener import RddOrigin
from tracelake.collect.spark_run import RunRecord


def _record() -> RunRecord:
    return RunRecord(
        RunHeader(
            run_id="r1",
            job="daily",
            process_urn="spark.job/daily",
            started_at=datetime(2024, 3, 12, 6, 0, tzinfo=UTC),
            host="here",
            pid=1,
            store="sqlite://",
            application_id="local-1",
            application_name="daily",
            user="ann",
            spark_version="4.0.1",
        )
    )


def test_an_rdd_origin_whose_analysis_fails_is_counted_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_args: object) -> None:
        raise KeyError("no such operator")

    monkeypatch.setattr(spark_run, "analyze_action", broken)
    record = _record()
    with caplog.at_level(logging.WARNING, logger="tracelake.spark"):
        changed = record.absorb(RddOrigin(7, plan=None, details=None))  # type: ignore[arg-type]
    assert changed is False
    assert record.analysis_errors == 1
    assert [r.getMessage() for r in caplog.records] == [
        "lineage of Spark action 'df.rdd' not analysed (KeyError)"
    ]
