"""Datasets' own lives in the store: CREATE, ALTER, DROP, TRUNCATE, RENAME, OVERWRITE.

A change is no flow edge. A table whose last change dropped it (or renamed it away) has its
edges end at that moment — in `edges`, in the graph index, as of any time — while queries as of
before still see them; a table re-created, or an edge observed anew after the drop, lives again.
The property test at the end checks `edges(as_of=…)` and the index against a replay of the
history, computed naively.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from tracelake.graph import GraphIndex, lineage
from tracelake.graph.traverse import TraversalFilters
from tracelake.model import AssetChange, FlowEdge, Lifecycle, LineageBatch, Signal
from tracelake.store import LineageStore

JAN, FEB, MAR, APR, MAY = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 2, 3, 4, 5))
SRC, OUT, NEW = "hive.table/db.src", "hive.table/db.out", "hive.table/db.out_v2"
JOB = "spark.job/daily"


def _flows(*pairs: tuple[str, str]) -> list[FlowEdge]:
    return [FlowEdge(source, target, JOB, Signal.SPARK_RUNTIME) for source, target in pairs]


def _change(asset: str, change: Lifecycle, at: datetime, **more: object) -> AssetChange:
    return AssetChange(asset, change, at, Signal.SPARK_RUNTIME, **more)  # type: ignore[arg-type]


def _edges(store: LineageStore, as_of: datetime | None = None) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in store.edges(as_of=as_of)}


def _upstream(store: LineageStore, urn: str, as_of: datetime | None = None) -> set[str]:
    result = lineage(GraphIndex.from_store(store), [urn], "upstream", filters=TraversalFilters(as_of=as_of))
    return {node for node in result.urns if node != urn}


def test_changes_are_kept_once_each_oldest_first(store: LineageStore) -> None:
    created = _change(
        OUT, Lifecycle.CREATE, JAN, process=JOB, run_id="r1", columns=(("id", "int"), ("name", "string"))
    )
    altered = _change(OUT, Lifecycle.ALTER, FEB, columns=(("id", "int"), ("name", "string"), ("z", "string")))
    store.ingest(LineageBatch(changes=[altered, created]))
    store.ingest(LineageBatch(changes=[created]))  # the same change again is no second one
    assert store.changes(OUT) == [created, altered]
    assert store.changes(OUT, since=FEB) == [altered]
    assert store.changes(SRC) == []
    assert store.node(OUT) is not None  # a change names its dataset: the node exists


def test_a_dropped_table_loses_its_edges_from_the_drop_on(store: LineageStore) -> None:
    store.ingest(LineageBatch(edges=_flows((SRC, OUT), (f"{SRC}#id", f"{OUT}#id")), observed_at=JAN))
    store.ingest(LineageBatch(changes=[_change(OUT, Lifecycle.DROP, MAR)]))

    assert _edges(store) == set()
    assert _edges(store, as_of=APR) == set()
    assert _edges(store, as_of=FEB) == {(SRC, OUT), (f"{SRC}#id", f"{OUT}#id")}  # the past is kept
    assert _upstream(store, OUT) == set()
    assert _upstream(store, OUT, as_of=FEB) == {SRC}
    assert _upstream(store, f"{OUT}#id", as_of=FEB) == {f"{SRC}#id"}
    assert _upstream(store, f"{OUT}#id") == set()
    assert store.ended_assets() == {OUT: MAR}

    # re-created: the job that writes it is its lineage again
    store.ingest(LineageBatch(changes=[_change(OUT, Lifecycle.CREATE, APR)]))
    assert _edges(store) == {(SRC, OUT), (f"{SRC}#id", f"{OUT}#id")}
    assert store.ended_assets() == {}


def test_an_edge_observed_after_the_drop_lives(store: LineageStore) -> None:
    store.ingest(LineageBatch(edges=_flows((SRC, OUT)), observed_at=JAN))
    store.ingest(LineageBatch(changes=[_change(OUT, Lifecycle.DROP, FEB)]))
    other = FlowEdge(SRC, OUT, "spark.job/rebuild", Signal.SPARK_RUNTIME)
    store.ingest(LineageBatch(edges=[other], observed_at=MAR))  # a job wrote it after the drop
    assert {(e.source, e.target, e.process) for e in store.edges()} == {(SRC, OUT, "spark.job/rebuild")}


def test_truncate_alter_and_overwrite_end_nothing(store: LineageStore) -> None:
    store.ingest(LineageBatch(edges=_flows((SRC, OUT)), observed_at=JAN))
    store.ingest(
        LineageBatch(
            changes=[
                _change(OUT, Lifecycle.TRUNCATE, FEB),
                _change(OUT, Lifecycle.OVERWRITE, MAR),
                _change(OUT, Lifecycle.ALTER, APR),
            ]
        )
    )
    assert _edges(store) == {(SRC, OUT)}


def test_a_rename_ends_the_old_name_and_is_found_from_either(store: LineageStore) -> None:
    store.ingest(LineageBatch(edges=_flows((SRC, OUT)), observed_at=JAN))
    renamed = _change(NEW, Lifecycle.RENAME, MAR, previous=OUT)
    store.ingest(LineageBatch(changes=[renamed]))
    assert _edges(store) == set()
    assert _edges(store, as_of=FEB) == {(SRC, OUT)}
    assert store.changes(NEW) == [renamed]
    assert store.changes(OUT) == [renamed]
    assert store.ended_assets() == {OUT: MAR}


# -- against a replay --------------------------------------------------------------------

ASSETS = ["hive.table/db.a", "hive.table/db.b", "hive.table/db.c"]
DAY = timedelta(days=1)
START = datetime(2024, 1, 1, tzinfo=UTC)

event = st.one_of(
    st.tuples(st.just("flow"), st.integers(0, 9), st.sampled_from(ASSETS), st.sampled_from(ASSETS)),
    st.tuples(
        st.just("change"),
        st.integers(0, 9),
        st.sampled_from(ASSETS),
        st.sampled_from([Lifecycle.CREATE, Lifecycle.DROP, Lifecycle.TRUNCATE, Lifecycle.RENAME]),
    ),
)


def _replay(events: list[tuple[object, ...]], moment: datetime) -> set[tuple[str, str, str]]:
    """The edges valid at `moment`, worked out from the history alone.

    Each flow event is a job (one per source→target pair) observed on a day with that one edge;
    a job's edge holds from its first observation on (it never changes). An asset ends at the
    last change of its whole history if that change is a DROP, or a RENAME away from it
    (renames here go from the asset to `<asset>_renamed`), and not before that end's moment; an
    edge is cut by an end of either side that falls after the edge began and at or before
    `moment`.
    """
    first_seen: dict[tuple[str, str, str], datetime] = {}
    for kind, day, a, b in events:
        if kind == "flow" and a != b:
            job = f"spark.job/{a[-1]}{b[-1]}"
            at = START + day * DAY
            key = (a, b, job)
            first_seen[key] = min(first_seen.get(key, at), at)
    last: dict[str, tuple[datetime, bool]] = {}  # asset → (when, whether that change ends it)
    for _, day, a, change in sorted((e for e in events if e[0] == "change"), key=lambda e: (e[1], str(e[3]))):
        at = START + day * DAY
        if change == Lifecycle.RENAME:
            last[f"{a}_renamed"] = (at, False)
            last[a] = (at, True)
        else:
            last[a] = (at, change == Lifecycle.DROP)
    valid = set()
    for (a, b, job), began in first_seen.items():
        if began > moment:
            continue
        cut = any(asset in last and last[asset][1] and began < last[asset][0] <= moment for asset in (a, b))
        if not cut:
            valid.add((a, b, job))
    return valid


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(event, max_size=12))
def test_edges_and_the_index_agree_with_a_replay(
    tmp_path_factory: object, events: list[tuple[object, ...]]
) -> None:
    note(repr(events))
    path = tmp_path_factory.mktemp("replay") / "lineage.db"  # type: ignore[attr-defined]
    with LineageStore(f"sqlite:///{path}") as store:
        for kind, day, a, b in events:
            at = START + day * DAY  # type: ignore[operator]
            if kind == "flow":
                if a != b:
                    job = f"spark.job/{str(a)[-1]}{str(b)[-1]}"
                    edge = FlowEdge(str(a), str(b), job, Signal.SPARK_RUNTIME)
                    store.ingest(LineageBatch(edges=[edge], observed_at=at))
            elif b == Lifecycle.RENAME:
                renamed = _change(f"{a}_renamed", Lifecycle.RENAME, at, previous=str(a))
                store.ingest(LineageBatch(changes=[renamed]))
            else:
                store.ingest(LineageBatch(changes=[_change(str(a), b, at)]))  # type: ignore[arg-type]
        index = GraphIndex.from_store(store)
        for day in range(-1, 11):
            moment = START + day * DAY + timedelta(hours=12)
            expected = _replay(events, moment)
            assert {(e.source, e.target, e.process) for e in store.edges(as_of=moment)} == expected
            positions = [
                i
                for i in range(index.n_edges)
                if index.edge_valid_from[i] <= _micros(moment) < index.edge_valid_to[i]
            ]
            urns = index.urns
            in_index = {(urns[index.edge_source[i]], urns[index.edge_target[i]]) for i in positions}
            assert in_index == {(a, b) for a, b, _ in expected}


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)
