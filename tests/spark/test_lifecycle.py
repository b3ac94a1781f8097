"""DDL on real Spark as lifecycle changes of tables, never as flow edges: CREATE (with its
schema), ALTER (the schema after), TRUNCATE, RENAME (on the new name, the old one kept), DROP;
table writes that make or replace their table as CREATE and OVERWRITE. Then the store: a dropped
table's edges end at the drop, and as-of queries before it still see them.

Expectations by hand, from the statements: each statement below changes one table once.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.spark.conftest import Lake
from tracelake.model import Lifecycle, LineageBatch
from tracelake.model.names import table_urn
from tracelake.store import LineageStore


def _changes(
    batch: LineageBatch,
) -> list[tuple[str, str, tuple[tuple[str, str | None], ...] | None, str | None]]:
    return [(c.asset, str(c.change), c.columns, c.previous) for c in batch.changes]


@pytest.fixture
def database(lake: Lake) -> str:
    name = f"ddl_{lake.root.name[-12:].replace('-', '_').lower()}"
    lake.spark.sql(f"CREATE DATABASE IF NOT EXISTS {name}")
    return name


def test_ddl_statements_are_changes_of_their_tables(lake: Lake, database: str) -> None:
    first, renamed = table_urn("t", database), table_urn("t2", database)

    def job() -> None:
        for statement in (
            f"CREATE TABLE {database}.t (id INT, name STRING) USING parquet",
            f"ALTER TABLE {database}.t ADD COLUMNS (z STRING)",
            f"INSERT INTO {database}.t VALUES (1, 'ann', 'x')",
            f"TRUNCATE TABLE {database}.t",
            f"ALTER TABLE {database}.t RENAME TO {database}.t2",
            f"DROP TABLE {database}.t2",
        ):
            lake.spark.sql(statement)

    tracker = lake.run(job)
    batch = tracker.batch()
    assert _changes(batch) == [
        (first, "CREATE", (("id", "int"), ("name", "string")), None),
        (first, "ALTER", (("id", "int"), ("name", "string"), ("z", "string")), None),
        (first, "TRUNCATE", None, None),
        (renamed, "RENAME", (("id", "int"), ("name", "string"), ("z", "string")), first),
        (renamed, "DROP", None, None),
    ]
    # no flow: the INSERT of literals is the only write, and it has no source
    assert batch.edges == []
    assert {c.run_id for c in batch.changes} == {tracker.run.run_id}
    times = [c.at for c in batch.changes]
    assert times == sorted(times) and tracker.run.started_at <= times[0]


def test_writes_that_make_or_replace_a_table(lake: Lake, database: str) -> None:
    people = lake.read("people").select("id", "name")
    made, kept = table_urn("made", database), table_urn("kept", database)
    files = lake.output("files")

    def job() -> None:
        lake.spark.sql(
            f"CREATE TABLE {database}.made USING parquet AS SELECT id FROM parquet.`{lake.path('people')}`"
        )
        people.write.saveAsTable(f"{database}.kept")
        people.write.mode("overwrite").saveAsTable(f"{database}.kept")  # dropped and made again
        people.write.mode("append").saveAsTable(f"{database}.kept")  # there already: no change
        people.write.insertInto(f"{database}.kept", overwrite=True)
        people.write.mode("overwrite").parquet(files)

    batch = lake.run(job).batch()
    assert [(c.asset, str(c.change)) for c in batch.changes] == [
        (made, "CREATE"),
        (kept, "CREATE"),
        (kept, "CREATE"),
        (kept, "OVERWRITE"),
        (lake.urn("files"), "OVERWRITE"),
    ]
    assert batch.changes[0].columns == (("id", "int"),)


def test_a_dropped_table_leaves_the_current_graph_and_stays_in_the_past(lake: Lake, database: str) -> None:
    copy = table_urn("copy", database)
    people = lake.urn("people")

    def make() -> None:
        lake.spark.sql(
            f"CREATE TABLE {database}.copy USING parquet AS SELECT id FROM parquet.`{lake.path('people')}`"
        )

    made = lake.run(make, job="make_copy")
    dropped = lake.run(lambda: lake.spark.sql(f"DROP TABLE {database}.copy"), job="drop_copy")
    drop_at = dropped.batch().changes[0].at

    with LineageStore(f"sqlite:///{lake.root / 'lineage.db'}") as store:
        assert [str(c.change) for c in store.changes(copy)] == ["CREATE", "DROP"]
        assert store.ended_assets() == {copy: drop_at}
        assert [e for e in store.edges() if copy in (e.source, e.target.partition("#")[0])] == []
        before = {(e.source, e.target) for e in store.edges(as_of=drop_at - timedelta(microseconds=1))}
    assert (people, copy) in before and (f"{people}#id", f"{copy}#id") in before
    assert made.run.status == "COMPLETE" and dropped.run.status == "COMPLETE"
    assert dropped.batch().changes[0].change == Lifecycle.DROP
