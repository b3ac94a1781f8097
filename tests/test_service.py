"""The service layer on both backends: what the CLI and the HTTP API share."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.model import UnknownNodeError
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dating"
T = "hive.table/"


@pytest.fixture
def service(store: LineageStore) -> Tracelake:
    return Tracelake(store)


def test_the_dating_example_end_to_end(service: Tracelake) -> None:
    summary = service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")

    assert (summary.statements, summary.failed) == (40, 1)
    view = service.lineage(
        ["dating.safety_training_tbl#target_religion"], "upstream", TraversalFilters(direct_only=True)
    )
    # worked out by hand from the log; the same answer on SQLite and PostgreSQL
    assert {n.id for n in view.nodes} == {
        f"{T}dating.safety_training_tbl#target_religion",
        f"{T}dating.safety_log_tbl#religion",
        f"{T}dating.user_profile#religion",
        f"{T}dating.user_profile_raw#religion",
        f"{T}dating.profile_update_log#new_value",
        f"{T}raw.web_profile_events#event.value",
    }
    before = service.lineage(
        ["dating.safety_training_tbl"],
        "upstream",
        TraversalFilters(depth=1, as_of=datetime(2024, 3, 11, 23, 59, tzinfo=UTC)),
    )
    assert {n.id for n in before.nodes} == {f"{T}dating.safety_training_tbl", f"{T}dating.safety_log_tbl"}


def test_select_star_is_expanded_from_columns_the_store_has_seen(service: Tracelake, tmp_path: Path) -> None:
    first, second = tmp_path / "1.sql", tmp_path / "2.sql"
    first.write_text("INSERT INTO db.b SELECT x AS p, y AS q FROM db.a;\n")
    second.write_text("CREATE VIEW db.v AS SELECT * FROM db.b;\n")
    service.ingest_sql(first)
    service.ingest_sql(second)  # no schema file: db.b's columns come from the first ingest

    view = service.lineage(["db.v#q"], "upstream")

    assert {n.id: n.distance for n in view.nodes} == {f"{T}db.v#q": 0, f"{T}db.b#q": 1, f"{T}db.a#y": 2}


def test_the_index_follows_new_ingests(service: Tracelake, tmp_path: Path) -> None:
    script = tmp_path / "a.sql"
    script.write_text("INSERT INTO db.b SELECT x FROM db.a;\n")
    service.ingest_sql(script)
    assert {n.id for n in service.lineage(["db.a"], "downstream").nodes} == {f"{T}db.a", f"{T}db.b"}

    script.write_text("INSERT INTO db.c SELECT x FROM db.a;\n")  # the script now writes c instead
    service.ingest_sql(script)

    assert {n.id for n in service.lineage(["db.a"], "downstream").nodes} == {f"{T}db.a", f"{T}db.c"}


def test_an_ambiguous_plain_name_lists_the_candidates(service: Tracelake, tmp_path: Path) -> None:
    script = tmp_path / "a.sql"
    script.write_text("INSERT INTO one.t SELECT x FROM src.s;\nINSERT INTO two.t SELECT x FROM src.s;\n")
    service.ingest_sql(script)

    with pytest.raises(UnknownNodeError) as raised:
        service.lineage(["t"], "upstream")

    assert set(raised.value.suggestions) == {f"{T}one.t", f"{T}two.t"}
