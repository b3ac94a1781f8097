"""A tracked run's journal on disk, without Spark: where it lives for each kind of store, its
private folder and header, which journals count as abandoned, one claimer at a time, and the
reader's whole lines across segments."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelake.collect import spark_journal
from tracelake.collect.spark_journal import RunHeader, SegmentReader, journal_root
from tracelake.model.store_urls import store_label


@pytest.fixture(autouse=True)
def _no_journal_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spark_journal.JOURNAL_ENV, raising=False)


def _header(run_id: str, store: str, pid: int, host: str | None = None) -> RunHeader:
    return RunHeader(
        run_id=run_id,
        job="daily",
        process_urn="spark.job/daily",
        started_at=datetime(2024, 3, 12, 6, 0, tzinfo=UTC),
        host=host or socket.gethostname(),
        pid=pid,
        store=store,
        application_id="local-1",
        application_name="daily",
        user="ann",
        spark_version="4.0.1",
    )


def _dead_pid() -> int:
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(ended.stdout)


def test_where_journals_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "lineage.db"
    assert journal_root(f"sqlite:///{db}") == tmp_path / "lineage.db.spark-runs"
    # a read-only URI names the same file, so the same journals
    assert journal_root(f"sqlite:///file:{db}?mode=ro&uri=true") == tmp_path / "lineage.db.spark-runs"
    assert journal_root("sqlite://") is None  # in memory: no later process could recover into it
    assert journal_root("sqlite:///:memory:") is None
    assert (
        journal_root("postgresql+psycopg://ann:secret@db/lineage")
        == Path.home() / ".tracelake" / "spark-runs"
    )
    monkeypatch.setenv(spark_journal.JOURNAL_ENV, str(tmp_path / "elsewhere"))
    assert journal_root(f"sqlite:///{db}") == tmp_path / "elsewhere"


def test_a_header_names_the_store_without_its_password(tmp_path: Path) -> None:
    assert (
        store_label("postgresql+psycopg://ann:secret@db/lineage") == "postgresql+psycopg://ann:***@db/lineage"
    )
    absolute = tmp_path / "lineage.db"
    assert store_label(f"sqlite:///file:{absolute}?mode=ro&uri=true") == f"sqlite:///{absolute}"
    header = _header("r1", store_label(f"sqlite:///{absolute}"), os.getpid())
    assert RunHeader.from_json(header.to_json()) == header


def test_a_journal_is_private_and_has_its_header(tmp_path: Path) -> None:
    header = _header("r1", "sqlite:///x.db", os.getpid())
    directory = spark_journal.make_journal(tmp_path / "runs", header)
    spark_journal.sync_header(directory)
    assert directory == tmp_path / "runs" / "r1"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "runs").stat().st_mode & 0o777 == 0o700
    assert spark_journal.read_header(directory) == header
    spark_journal.let_go(header)


def test_only_journals_of_this_store_whose_driver_is_gone_are_abandoned(tmp_path: Path) -> None:
    store, other = "sqlite:////lake/lineage.db", "sqlite:////other/lineage.db"
    dead = _dead_pid()
    root = tmp_path / "runs"
    made = {
        "dead": _header("dead", store, dead),
        "alive": _header("alive", store, os.getppid()),
        "other-store": _header("other-store", other, dead),
        "other-host": _header("other-host", store, dead, host="another-host"),
        "mine-done": _header("mine-done", store, os.getpid()),
        "mine-running": _header("mine-running", store, os.getpid()),
    }
    for header in made.values():
        spark_journal.make_journal(root, header)
    spark_journal.let_go(made["mine-done"])  # this process's tracker is done with it, unstored
    found = {header.run_id for _, header in spark_journal.abandoned(root, store)}
    assert found == {"dead", "mine-done"}
    spark_journal.let_go(made["mine-running"])

    # one claimer: the journal is renamed to it; a second claim of the old name finds nothing
    (directory,) = [d for d, h in spark_journal.abandoned(root, store) if h.run_id == "dead"]
    claimed = spark_journal.claim(directory)
    assert claimed is not None and claimed.name == f"dead.recovering-{os.getpid()}"
    assert spark_journal.claim(directory) is None
    # being recovered by a live process: not abandoned; by a dead one: abandoned again
    assert "dead" not in {h.run_id for _, h in spark_journal.abandoned(root, store)}
    claimed.rename(root / f"dead.recovering-{dead}")
    assert "dead" in {h.run_id for _, h in spark_journal.abandoned(root, store)}


def test_a_stored_runs_journal_is_put_aside_at_once_and_swept_later(tmp_path: Path) -> None:
    """Removing files just synced costs milliseconds on the job's thread: a stored run's journal
    is renamed aside instead, recovered by no one, and removed by the next sweep."""
    store, root = "sqlite:////lake/lineage.db", tmp_path / "runs"
    header = _header("stored", store, _dead_pid())  # its driver gone: abandoned, were it not put aside
    directory = spark_journal.make_journal(root, header)
    spark_journal.let_go(header)

    spark_journal.discard(directory, later=True)

    assert not directory.exists()
    assert spark_journal.abandoned(root, store) == []
    assert [p.name for p in root.iterdir()] == [".discarded-stored"]
    spark_journal.sweep(root)
    assert list(root.iterdir()) == []


def test_the_reader_returns_whole_lines_across_segments(tmp_path: Path) -> None:
    first, second = spark_journal.segment_path(tmp_path, 0), spark_journal.segment_path(tmp_path, 1)
    first.write_bytes(b'{"a": 1}\n{"b": ')
    reader = SegmentReader(tmp_path)
    assert reader.read() == [b'{"a": 1}']  # a line still being written waits
    with open(first, "ab") as segment:
        segment.write(b"2}\n")
    second.write_bytes(b'{"c": 3}\n')  # the next segment exists: the first is read to its end
    assert reader.read() == [b'{"b": 2}', b'{"c": 3}']
    assert reader.segment == 1
    assert reader.read() == []
    assert reader.trim(1) and not first.exists() and second.exists()
