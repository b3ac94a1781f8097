"""`tracelake discover …` end to end on the hand-drawn lake of test_traverse.py, stored in real
SQLite between commands (a → c → e → f all HIGH; e → g LOW; g → h HIGH)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from tests.graph.test_traverse import A, C, E, F, G, H
from tracelake.cli import app
from tracelake.store import LineageStore
from tracelake.store.labels import LabelStore


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def test_a_session_from_start_to_confirmed_labels(lake_store: LineageStore) -> None:
    db = lake_store.url
    LabelStore(lake_store).declare(A, ["pii"])

    code, out, _ = run("discover", "start", "--label", "pii", "--db", db)
    assert code == 0 and "1 candidate(s) to decide" in out
    [session] = set(re.findall(r"discovery-[0-9a-f]{12}", out))

    code, out, err = run("discover", "decide", session, "db.c", "--include", "--reason", "x", "--db", db)
    assert code == 2 and "cannot include" in err  # c was reached, not a candidate

    code, out, _ = run(
        "discover", "decide", session, G, "--include", "--reason", "model reads it", "--db", db
    )
    assert code == 0 and f"{G} included" in out
    code, out, _ = run("discover", "next", session, "--db", db)
    assert code == 0 and f"{H} (new)" in out and "stable: 6 node(s) confirmed" in out

    code, out, _ = run("discover", "export", session, "--confirm", "--db", db)
    document = json.loads(out)
    assert code == 0 and document["stable"] is True
    assert set(document["confirmed"]) == {A, C, E, F, G, H}
    assert document["decisions"] == {
        G: {"state": "included", "reason": "model reads it", "by": document["decisions"][G]["by"]}
    }
    confirmed = {
        a.urn for a in LabelStore(lake_store).assignments(label="pii") if a.provenance == "confirmed"
    }
    assert confirmed == {C, E, F, G, H}


def test_unknown_sessions_and_labels_get_one_line(lake_store: LineageStore) -> None:
    db = lake_store.url
    code, _, err = run("discover", "show", "discovery-000000000000", "--db", db)
    assert code == 2 and "no discovery session" in err
    code, _, err = run("discover", "start", "--label", "religion", "--db", db)
    assert code == 2 and "no node holds 'religion'" in err and "Traceback" not in err


def test_a_rule_decides_from_the_command_line(lake_store: LineageStore) -> None:
    db = lake_store.url
    LabelStore(lake_store).declare(A, ["pii"])
    _, out, _ = run("discover", "start", "--label", "pii", "--db", db)
    [session] = set(re.findall(r"discovery-[0-9a-f]{12}", out))

    rule = ("--include-kind", "ai.model", "--name", "models")
    code, out, _ = run("discover", "rule", session, *rule, "--db", db)

    assert code == 0 and "included 1, excluded 0; 0 candidate(s) left" in out
    assert "models" in run("discover", "show", session, "--db", db)[1]
