"""The store's history against a naive replay: any order, any split, any repeat gives one answer.

A history is query-log runs of two jobs — re-runs with changed SQL, same-instant runs, INSERTs
with and without column lists (the order from a schema file) — cut into files that are ingested
in any order, some twice. The naive replay, written here, takes each run's edges (its entry
collected alone) and says what is in force at T: for each process, the edges of its latest runs
at or before T, united when several ran at that instant. Every as-of edge set, every diff and a
downstream closure must match it, and every arrangement must leave the same store, edge
version for edge version, as ingesting the whole log at once.

The two minimal logs that once gave false lineage (a positional INSERT mapped onto the order the
store first saw columns in; a late run kept in force past a later re-run) are tests of their own,
each ingested every way.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.collect.catalog import SchemaCatalog
from tracelake.collect.sql import collect_query_log
from tracelake.graph import traverse
from tracelake.graph.index import GraphIndex
from tracelake.store import LineageStore

T = "hive.table/"
START = datetime(2024, 3, 1, tzinfo=UTC)
INSTANTS = [START + timedelta(hours=12 * n) for n in range(6)]
SCHEMA = {"raw.s": ["k", "x", "y", "z"], "stg.t0": ["k", "v"], "dw.r": ["g", "h"]}
VARIANTS = {
    "j0": [
        "INSERT OVERWRITE TABLE stg.t0 SELECT a.k, a.x AS v FROM raw.s a",
        "INSERT OVERWRITE TABLE stg.t0 SELECT a.k, a.y AS v FROM raw.s a",
        "INSERT OVERWRITE TABLE stg.t0 (v, k) SELECT a.z, a.k FROM raw.s a",
        "INSERT OVERWRITE TABLE stg.t0 SELECT a.z, a.x FROM raw.s a",  # by position: z → k, x → v
    ],
    "j1": [
        "INSERT OVERWRITE TABLE dw.r SELECT b.v AS g, b.k AS h FROM stg.t0 b",
        "INSERT OVERWRITE TABLE dw.r SELECT b.k, b.v FROM stg.t0 b",  # by position: k → g, v → h
        "INSERT OVERWRITE TABLE dw.r (h) SELECT b.v FROM stg.t0 b",
    ],
}

Run = tuple[str, int, int]  # job, instant number, variant
EdgeKey = tuple[str, str, str, str]  # source, target, process, transformation


def log_line(number: int, run: Run) -> str:
    job, instant, variant = run
    return json.dumps(
        {
            "query": VARIANTS[job][variant],
            "job_id": f"{job}.{number}",
            "job_name": job,
            "timestamp": INSTANTS[instant].isoformat(),
        }
    )


def write_log(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def edge_keys(edges: Iterable[object]) -> set[EdgeKey]:
    return {(e.source, e.target, e.process, str(e.transformation or "")) for e in edges}  # type: ignore[attr-defined]


def run_edges(run: Run, folder: Path, schema: Path) -> set[EdgeKey]:
    """One run's edges, its entry collected alone (no store, no other run)."""
    alone = write_log(folder / "alone.jsonl", [log_line(0, run)])
    collection = collect_query_log(alone, schema=SchemaCatalog.from_file(schema))
    return {key for batch in collection.batches for key in edge_keys(batch.edges)}


def naive_at(runs: Sequence[Run], edges: Sequence[set[EdgeKey]], moment: datetime | None) -> set[EdgeKey]:
    """What is in force at `moment` (None: now): per job, its latest instant's runs, united."""
    in_force: set[EdgeKey] = set()
    for job in VARIANTS:
        times = [i for i, (j, instant, _) in enumerate(runs) if j == job]
        times = [i for i in times if moment is None or INSTANTS[runs[i][1]] <= moment]
        if times:
            latest = max(runs[i][1] for i in times)
            for i in times:
                if runs[i][1] == latest:
                    in_force |= edges[i]
    return in_force


def ingest(db: Path, files: Sequence[Path], schema: Path) -> LineageStore:
    store = LineageStore(f"sqlite:///{db}")
    service = Tracelake(store)
    for file in files:
        service.ingest_sql(file, schema_file=schema)
    return store


def history_rows(store: LineageStore) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Every edge version and process version, by content (ids and arrival times left out)."""
    with store.engine.connect() as conn:
        edges = conn.execute(
            sa.text(
                "SELECT s.urn, t.urn, p.urn, e.signal, e.confidence, e.transformation, e.valid_from, "
                "e.valid_to FROM edges e JOIN nodes s ON s.id = e.source_id "
                "JOIN nodes t ON t.id = e.target_id JOIN nodes p ON p.id = e.process_id"
            )
        ).all()
        versions = conn.execute(
            sa.text(
                "SELECT p.urn, v.valid_from, v.valid_to, v.content_hash, v.edge_count "
                "FROM process_versions v JOIN nodes p ON p.id = v.process_id"
            )
        ).all()
    return sorted(map(tuple, edges), key=repr), sorted(map(tuple, versions), key=repr)


def downstream(edges: set[EdgeKey], start: str) -> set[str]:
    reached, frontier = set(), [start]
    while frontier:
        node = frontier.pop()
        for source, target, _, _ in edges:
            if source == node and target not in reached:
                reached.add(target)
                frontier.append(target)
    return reached


runs_strategy = st.lists(
    st.sampled_from(sorted(VARIANTS)).flatmap(
        lambda job: st.tuples(
            st.just(job), st.integers(0, len(INSTANTS) - 1), st.integers(0, len(VARIANTS[job]) - 1)
        )
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs_strategy, data=st.data())
def test_any_arrangement_of_a_history_answers_as_a_naive_replay(
    tmp_path_factory: pytest.TempPathFactory, runs: list[Run], data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("history")
    schema = folder / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    edges = [run_edges(run, folder, schema) for run in runs]
    lines = [log_line(number, run) for number, run in enumerate(runs)]

    parts = data.draw(
        st.lists(st.integers(0, 2), min_size=len(runs), max_size=len(runs)), label="file of each run"
    )
    files = [
        write_log(
            folder / f"part-{n}.jsonl", [line for line, part in zip(lines, parts, strict=True) if part == n]
        )
        for n in sorted(set(parts))
    ]
    order = data.draw(st.permutations(files), label="ingest order")
    repeat = data.draw(st.lists(st.sampled_from(files), max_size=2), label="ingested again")
    arranged = ingest(folder / "arranged.db", [*order, *repeat], schema)
    at_once = ingest(folder / "at-once.db", [write_log(folder / "all.jsonl", lines)], schema)

    assert history_rows(arranged) == history_rows(at_once)
    moments = [*INSTANTS, *(t + timedelta(hours=6) for t in INSTANTS), START - timedelta(days=1)]
    for moment in moments:
        assert edge_keys(arranged.edges(as_of=moment)) == naive_at(runs, edges, moment), moment
    assert edge_keys(arranged.edges()) == naive_at(runs, edges, None)
    for since, until in itertools.pairwise(moments):
        diff = arranged.diff(since, until)
        before, after = naive_at(runs, edges, since), naive_at(runs, edges, until)
        assert edge_keys(diff.added) == after - before and edge_keys(diff.removed) == before - after
    index = GraphIndex.from_store(arranged)
    for moment in (INSTANTS[2], None):
        expected = downstream(naive_at(runs, edges, moment), f"{T}raw.s#x")
        if f"{T}raw.s#x" in index.positions:
            found = traverse.lineage(
                index, f"{T}raw.s#x", "downstream", filters=TraversalFilters(as_of=moment)
            )
            assert {index.urns[p] for p in found.distances()} - {f"{T}raw.s#x"} == expected
    arranged.close()
    at_once.close()


# -- the two minimal logs, every way ---------------------------------------------------------

POSITIONAL = [
    "INSERT OVERWRITE TABLE dw.r2 SELECT a.gender AS g FROM stg.logins2 a;",
    "INSERT OVERWRITE TABLE stg.logins2 SELECT a.k, a.religion AS gender FROM raw.reports2 a;",
]
POSITIONAL_EDGES = {
    (f"{T}stg.logins2#gender", f"{T}dw.r2#g"),
    (f"{T}raw.reports2#k", f"{T}stg.logins2#k"),
    (f"{T}raw.reports2#religion", f"{T}stg.logins2#gender"),
}


def column_pairs(store: LineageStore, as_of: datetime | None = None) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in store.edges(as_of=as_of) if "#" in e.source}


def every_edge_version(store: LineageStore) -> set[tuple[str, str]]:
    return {(row[0], row[1]) for row in history_rows(store)[0] if "#" in str(row[0])}


@pytest.mark.parametrize(
    "arrangement",
    [
        ["both"],
        ["both", "both"],
        ["reversed"],
        ["first", "second"],
        ["second", "first"],
        ["second", "first", "both"],
    ],
)
def test_a_positional_insert_maps_as_written_however_the_log_is_ingested(
    tmp_path: Path, arrangement: list[str]
) -> None:
    """By output names (no order is known), the same on the first ingest and every later one."""
    texts = {
        "both": "\n".join(POSITIONAL),
        "reversed": "\n".join(reversed(POSITIONAL)),
        "first": POSITIONAL[0],
        "second": POSITIONAL[1],
    }
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    service = Tracelake(store)
    for n, name in enumerate(arrangement):
        (tmp_path / f"{n}.sql").write_text(texts[name])
        service.ingest_sql(tmp_path / f"{n}.sql")
    assert column_pairs(store) == POSITIONAL_EDGES
    assert every_edge_version(store) == POSITIONAL_EDGES  # nothing false, even in the past


def test_a_positional_insert_follows_a_declared_order_over_the_names(tmp_path: Path) -> None:
    """The engine maps by position: with stg.logins2 declared (gender, k), k lands in gender."""
    schema = tmp_path / "schema.yaml"
    schema.write_text("stg.logins2: [gender, k]\n")
    (tmp_path / "log.sql").write_text("\n".join(POSITIONAL))
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    for _ in range(2):
        Tracelake(store).ingest_sql(tmp_path / "log.sql", schema_file=schema)
    assert {(s, t) for s, t in column_pairs(store) if "logins2" in t} == {
        (f"{T}raw.reports2#k", f"{T}stg.logins2#gender"),
        (f"{T}raw.reports2#religion", f"{T}stg.logins2#k"),
    }


def test_a_select_star_over_columns_only_seen_is_not_mapped_by_position(tmp_path: Path) -> None:
    """raw.a's columns are known by name only, in the order first seen: `*` has no order."""
    schema = tmp_path / "schema.yaml"
    schema.write_text("dw.t: [p, q]\n")
    (tmp_path / "seen.sql").write_text("INSERT INTO x.y SELECT a.q, a.p FROM raw.a a;")
    (tmp_path / "star.sql").write_text("INSERT INTO dw.t SELECT * FROM raw.a;")
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    service = Tracelake(store)
    service.ingest_sql(tmp_path / "seen.sql")
    summary = service.ingest_sql(tmp_path / "star.sql", schema_file=schema)
    assert {(s, t) for s, t in column_pairs(store) if "dw.t" in t} == {
        (f"{T}raw.a#p", f"{T}dw.t#p"),
        (f"{T}raw.a#q", f"{T}dw.t#q"),
    }
    assert not summary.problems


LATE_MAIN = [
    ("INSERT OVERWRITE TABLE stg.t SELECT a.k, a.x AS v FROM raw.s a", "j.1", "2024-03-01T00:00:00Z"),
    ("INSERT OVERWRITE TABLE stg.t SELECT a.k, a.x AS v FROM raw.s a", "j.3", "2024-03-03T00:00:00Z"),
]
LATE = [("INSERT OVERWRITE TABLE stg.t SELECT a.k, a.y AS v FROM raw.s a", "j.2", "2024-03-02T00:00:00Z")]


def late_log(path: Path, entries: Sequence[tuple[str, str, str]]) -> Path:
    lines = [json.dumps({"query": q, "job_id": i, "job_name": "j", "timestamp": t}) for q, i, t in entries]
    return write_log(path, lines)


@pytest.mark.parametrize(
    "arrangement",
    [
        [LATE_MAIN + LATE],
        [LATE_MAIN, LATE],
        [LATE, LATE_MAIN],
        [LATE_MAIN, LATE, LATE_MAIN, LATE],
        [list(reversed(LATE_MAIN + LATE))],
        [LATE_MAIN[:1], LATE, LATE_MAIN[1:]],
    ],
)
def test_a_late_run_is_in_force_only_until_the_next_run_however_the_logs_arrive(
    tmp_path: Path, arrangement: list[list[tuple[str, str, str]]]
) -> None:
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    service = Tracelake(store)
    for n, entries in enumerate(arrangement):
        service.ingest_sql(late_log(tmp_path / f"{n}.jsonl", entries))

    def writes_v(moment: str) -> set[str]:
        at = datetime.fromisoformat(moment)
        return {s for s, t in column_pairs(store, at) if t == f"{T}stg.t#v"}

    assert writes_v("2024-03-01T12:00:00+00:00") == {f"{T}raw.s#x"}
    assert writes_v("2024-03-02T12:00:00+00:00") == {f"{T}raw.s#y"}
    assert writes_v("2024-03-04T00:00:00+00:00") == {f"{T}raw.s#x"}
    assert {(s, t) for s, t in column_pairs(store) if t.endswith("#v")} == {(f"{T}raw.s#x", f"{T}stg.t#v")}
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM process_versions")).scalar() == 3


def test_lineage_as_of_a_time_before_a_node_had_lineage_shows_nothing(tmp_path: Path) -> None:
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    service = Tracelake(store)
    service.ingest_sql(late_log(tmp_path / "log.jsonl", LATE_MAIN))
    before = service.lineage(
        [f"{T}stg.t#v"], "upstream", TraversalFilters(as_of=datetime(2024, 2, 1, tzinfo=UTC))
    )
    during = service.lineage(
        [f"{T}stg.t#v"], "upstream", TraversalFilters(as_of=datetime(2024, 3, 2, tzinfo=UTC))
    )
    assert before.nodes == [] and before.edges == []
    assert {node.id for node in during.nodes} == {f"{T}stg.t#v", f"{T}raw.s#x"}


DECLARED = [
    ("CREATE TABLE d.t (a STRING, b STRING)", "2024-03-01T00:00:00Z"),
    ("INSERT INTO d.t SELECT s.x, s.y FROM src.s s", "2024-03-02T00:00:00Z"),
    ("CREATE OR REPLACE TABLE d.t (b STRING, a STRING)", "2024-03-03T00:00:00Z"),
    ("INSERT INTO d.t SELECT s.x, s.y FROM src.s s", "2024-03-04T00:00:00Z"),
]


def declared_log(path: Path, entries: Sequence[tuple[str, str]]) -> Path:
    return write_log(path, [json.dumps({"query": q, "timestamp": t}) for q, t in entries])


@pytest.mark.parametrize(
    "arrangement",
    [[DECLARED], [DECLARED, DECLARED], [list(reversed(DECLARED))], [DECLARED[::2], DECLARED[1::2]]],
)
def test_a_positional_insert_maps_by_the_column_order_declared_at_its_time(
    tmp_path: Path, arrangement: list[list[tuple[str, str]]]
) -> None:
    """(a, b) from 03-01, (b, a) from 03-03: the INSERT of 03-02 writes x → a, that of 03-04 x → b,
    whatever order the entries are in and however often they are ingested."""
    store = LineageStore(f"sqlite:///{tmp_path / 'l.db'}")
    service = Tracelake(store)
    for n, entries in enumerate(arrangement):
        service.ingest_sql(declared_log(tmp_path / f"{n}.jsonl", entries))
    mapped = {(e.source, e.target) for e in store.edges() if e.source.startswith(f"{T}src.s#")}
    assert mapped == {(f"{T}src.s#x", f"{T}d.t#b"), (f"{T}src.s#y", f"{T}d.t#a")}  # in force now: 03-04's
    every = {
        (row[0], row[1], row[6]) for row in history_rows(store)[0] if str(row[0]).startswith(f"{T}src.s#")
    }
    day = {n: int(datetime(2024, 3, n, tzinfo=UTC).timestamp() * 1_000_000) for n in (2, 4)}
    assert every == {
        (f"{T}src.s#x", f"{T}d.t#a", day[2]),
        (f"{T}src.s#y", f"{T}d.t#b", day[2]),
        (f"{T}src.s#x", f"{T}d.t#b", day[4]),
        (f"{T}src.s#y", f"{T}d.t#a", day[4]),
    }
    assert [f.urn.partition("#")[2] for f in service.show(f"{T}d.t").fields] == ["b", "a"]


def test_a_late_run_that_makes_two_versions_alike_makes_them_one(tmp_path: Path) -> None:
    """j1 ran at t0 with both columns and twice at t2: the t2 run writing h alone came first, the
    one writing both later, in another file. United, t2 holds what t0 held: one version from t0,
    as when the whole log is ingested at once (found by the test above; the split changed no
    answer, but the store held two versions where one was meant)."""
    runs = [("j1", 0, 1), ("j1", 2, 2), ("j1", 2, 1)]
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    lines = [log_line(number, run) for number, run in enumerate(runs)]
    first = write_log(tmp_path / "first.jsonl", lines[:2])
    late = write_log(tmp_path / "late.jsonl", lines[2:])

    arranged = ingest(tmp_path / "arranged.db", [first, late], schema)
    at_once = ingest(tmp_path / "at-once.db", [write_log(tmp_path / "all.jsonl", lines)], schema)

    _, versions = history_rows(arranged)
    assert [(urn, start, end) for urn, start, end, _, _ in versions] == [
        ("sql.job/j1", int(INSTANTS[0].timestamp() * 1_000_000), None)
    ]
    assert history_rows(arranged) == history_rows(at_once)
    arranged.close()
    at_once.close()
