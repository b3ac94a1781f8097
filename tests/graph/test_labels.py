"""Declared and inferred labels in a real SQLite store, on the hand-drawn lake of
tests/graph/test_traverse.py (a#user_id ─IDENTITY─▶ c#user_id ─IDENTITY─▶ e#user_id), and how
saving a new propagation adds and drops inferred labels as lineage changes."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from tests.graph.test_traverse import A, C, E, fld, flow
from tracelake.cli import app
from tracelake.graph.index import GraphIndex
from tracelake.graph.propagate import Propagation, propagate
from tracelake.model import LineageBatch, Transformation, UnknownNodeError
from tracelake.store import LineageStore
from tracelake.store.labels import LabelStore

LATER = datetime(2024, 6, 1, tzinfo=UTC)


def test_declared_labels_are_the_nodes_own(lake_store: LineageStore) -> None:
    labels = LabelStore(lake_store)

    assert labels.declare(fld(A, "user_id"), ["identity.user_id", "pii"]) == ("identity.user_id", "pii")
    assert labels.undeclare(fld(A, "user_id"), ["pii"]) == ("identity.user_id",)
    assert labels.declared() == {fld(A, "user_id"): ("identity.user_id",)}
    # the privacy targets read the same labels
    assert lake_store.labelled("identity.") == {fld(A, "user_id"): ("identity.user_id",)}
    with pytest.raises(UnknownNodeError):
        labels.declare("hive.table/db.nowhere#x", ["pii"])


def test_saving_a_propagation_keeps_paths_and_says_what_changed(lake_store: LineageStore) -> None:
    labels = LabelStore(lake_store)
    labels.declare(fld(A, "user_id"), ["identity.user_id"])

    first = labels.save_inferred(
        *_walked(propagate(GraphIndex.from_store(lake_store), labels.declared())), actor="t"
    )

    assert first.added == {(fld(C, "user_id"), "identity.user_id"), (fld(E, "user_id"), "identity.user_id")}
    inferred = [
        item for item in labels.assignments(label="identity.user_id") if item.provenance == "inferred"
    ]
    assert [(item.urn, item.path) for item in inferred] == [
        (fld(C, "user_id"), (fld(A, "user_id"), fld(C, "user_id"))),
        (fld(E, "user_id"), (fld(A, "user_id"), fld(C, "user_id"), fld(E, "user_id"))),
    ]

    # new lineage: e.user_id is copied on into z.uid
    z = "hive.table/db.z"
    lake_store.ingest(
        LineageBatch(
            edges=[
                flow(E, z, "job9"),
                flow(fld(E, "user_id"), fld(z, "uid"), "job9", transformation=Transformation.IDENTITY),
            ],
            observed_at=LATER,
        )
    )
    second = labels.save_inferred(
        *_walked(propagate(GraphIndex.from_store(lake_store), labels.declared())), actor="t"
    )

    assert second.added == {(fld(z, "uid"), "identity.user_id")}
    assert second.removed == set() and second.kept == 2

    # and the label is taken off the source: everything inferred from it goes
    labels.undeclare(fld(A, "user_id"), ["identity.user_id"])
    labels.declare(fld(E, "user_id"), ["identity.user_id"])
    third = labels.save_inferred(
        *_walked(propagate(GraphIndex.from_store(lake_store), labels.declared())), actor="t"
    )
    assert third.removed == {(fld(C, "user_id"), "identity.user_id"), (fld(E, "user_id"), "identity.user_id")}
    assert third.kept == 1 and third.added == set()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def test_the_label_commands(lake_store: LineageStore) -> None:
    db = lake_store.url
    code, out, _ = run("label", "add", "db.a#user_id", "pii", "--db", db)
    assert code == 0 and f"{fld(A, 'user_id')}: pii" in out

    code, out, _ = run("propagate", "--db", db)
    assert code == 0 and "2 label(s) added, 0 removed, 0 unchanged" in out
    code, out, _ = run("label", "list", "--label", "pii", "--db", db)
    assert code == 0
    assert out.count("inferred") == 2 and out.count("declared") == 1

    code, _, err = run("label", "add", "db.nowhere", "pii", "--db", db)
    assert code == 2 and "unknown node" in err and "Traceback" not in err
    code, _, err = run("propagate", "--max-depth", "0", "--db", db)
    assert code == 2 and "--max-depth must be at least 1" in err
    code, _, err = run("propagate", "--label", "religion", "--db", db)
    assert code == 2 and "no declared label to propagate" in err


def _walked(result: Propagation) -> tuple[Collection[str], Iterator[tuple[str, tuple[str, ...]]]]:
    """What the store is told of a propagation: the labels it walked and where each went."""
    return result.walks, result.paths()
