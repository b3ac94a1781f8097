"""Helpers for the collector tests: edges as short, hand-writable tuples.

A field is written `db.table#column` (the `hive.table/` prefix left off), a table `db.table`,
so an expected lineage reads like the SQL it comes from.
"""

from __future__ import annotations

from tracelake.collect.sql import SqlCollection, collect_sql
from tracelake.model import Confidence, FlowEdge

PREFIX = "hive.table/"


def short(urn: str) -> str:
    return urn.removeprefix(PREFIX)


def all_edges(collection: SqlCollection) -> list[FlowEdge]:
    return [edge for batch in collection.batches for edge in batch.edges]


def column_edges(collection: SqlCollection, *kinds: str) -> set[tuple[str, str, str]]:
    """(source field, target field, transformation) of every field→field edge, optionally of some kinds."""
    return {
        (short(e.source), short(e.target), str(e.transformation))
        for e in all_edges(collection)
        if e.transformation is not None and (not kinds or e.transformation in kinds)
    }


def direct_edges(collection: SqlCollection) -> set[tuple[str, str, str]]:
    return column_edges(collection, "IDENTITY", "TRANSFORMATION", "AGGREGATION")


def indirect_edges(collection: SqlCollection) -> set[tuple[str, str, str]]:
    return column_edges(collection, "FILTER", "JOIN", "GROUP_BY", "SORT", "WINDOW", "CONDITIONAL")


def table_edges(collection: SqlCollection) -> set[tuple[str, str]]:
    return {(short(e.source), short(e.target)) for e in all_edges(collection) if e.transformation is None}


def confidences(collection: SqlCollection) -> dict[tuple[str, str, str], Confidence]:
    return {
        (short(e.source), short(e.target), str(e.transformation)): e.confidence
        for e in all_edges(collection)
        if e.transformation is not None
    }


def to_all(sources: list[str], targets: list[str], kind: str) -> set[tuple[str, str, str]]:
    """An indirect influence: every source column onto every target column."""
    return {(source, target, kind) for source in sources for target in targets}


def lineage(sql: str, **options: object) -> SqlCollection:
    """Collect `sql`, insisting that every statement parsed."""
    collection = collect_sql(sql, **options)  # type: ignore[arg-type]
    assert not collection.problems, [str(p) for p in collection.problems]
    assert collection.failed == 0
    return collection
