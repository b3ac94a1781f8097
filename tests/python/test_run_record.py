"""How a Python run's reads and writes become lineage (`collect.python_run`), on observations
written by hand, with every expected edge worked out from the rules in the module's docstring;
then the rules as properties over generated runs."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from tracelake.collect.python_run import DataRead, DataWrite, PythonRunRecord, RunContext, RunHeader
from tracelake.model import Confidence, Signal, Transformation

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
A, B, W, M = "file.dataset//d/a", "file.dataset//d/b", "file.dataset//d/w", "ai.model/ranker"
HIGH, MEDIUM = Confidence.HIGH, Confidence.MEDIUM
TX = Transformation.TRANSFORMATION


def read(asset: str, *columns: str, model: bool = False) -> DataRead:
    return DataRead(
        "test.read", (asset,), {c: frozenset({f"{asset}#{c.lower()}"}) for c in columns}, model=model
    )


def record(*items: DataRead | DataWrite, contexts: tuple[RunContext, ...] = ()) -> PythonRunRecord:
    run = PythonRunRecord(RunHeader("run-1", "train", T0, user="ana", contexts=contexts))
    for item in items:
        run.observe(item)
    return run


def edges(run: PythonRunRecord) -> dict[tuple[str, str, Transformation | None], Confidence]:
    return {(e.source, e.target, e.transformation): e.confidence for e in run.batch().edges}


def test_a_model_fitted_on_columns_read_gets_them_as_its_features() -> None:
    run = record(
        read(A, "user_id", "same_religion", "label"), DataWrite("joblib.dump", M, ("same_religion",))
    )
    assert edges(run) == {
        (f"{A}#same_religion", f"{M}#same_religion", TX): HIGH,
        (A, M, None): HIGH,
    }
    batch = run.batch()
    assert {e.signal for e in batch.edges} == {Signal.AI_RUNTIME}
    assert [p.urn for p in batch.processes] == ["python.job/train"]
    assert batch.reads == []  # A flows into the model: not a read-only asset


def test_a_name_two_reads_offer_is_medium_from_both_and_proves_neither_table() -> None:
    run = record(
        read(A, "user_id", "score"), read(B, "user_id", "city"), DataWrite("w", W, ("user_id", "score"))
    )
    assert edges(run) == {
        (f"{A}#user_id", f"{W}#user_id", TX): MEDIUM,
        (f"{B}#user_id", f"{W}#user_id", TX): MEDIUM,
        (f"{A}#score", f"{W}#score", TX): HIGH,
        (A, W, None): HIGH,  # `score` came from A alone
        (B, W, None): MEDIUM,  # only the ambiguous `user_id` points at B
    }


def test_reads_after_a_write_do_not_flow_into_it() -> None:
    run = record(read(A, "x"), DataWrite("w", W, ("x",)), read(B, "x"))
    assert edges(run) == {(f"{A}#x", f"{W}#x", TX): HIGH, (A, W, None): HIGH}
    assert [(r.asset, r.columns) for r in run.batch().reads] == [(B, ("x",))]


def test_a_write_with_no_column_named_as_read_gets_medium_table_edges_with_why() -> None:
    run = record(read(A, "x"), DataWrite("w", W, ("prediction",)))
    (edge,) = run.batch().edges
    assert (edge.source, edge.target, edge.confidence) == (A, W, MEDIUM)
    assert "read earlier in the same run" in (edge.description or "")


def test_names_compare_case_insensitively_and_a_file_updated_in_place_has_no_loop() -> None:
    run = record(
        read(A, "UserId"), DataWrite("w", W, ("USERID",)), read(W, "userid"), DataWrite("w", W, ("userid",))
    )
    assert edges(run) == {(f"{A}#userid", f"{W}#userid", TX): HIGH, (A, W, None): HIGH}


def test_a_model_loaded_while_serving_a_request_flows_into_its_endpoint() -> None:
    web = RunContext("web", "web.handler/ranking.recommend", "trace-7", "web.endpoint/ranking.recommend")
    run = record(read(M, model=True), contexts=(web,))
    assert edges(run) == {(M, "web.endpoint/ranking.recommend", None): MEDIUM}
    assert run.run.job_id == "trace-7"
    assert run.batch().processes[0].metadata["contexts"][0]["kind"] == "web"


def test_a_dataset_read_in_a_request_is_no_flow_into_the_endpoint() -> None:
    web = RunContext("web", "web.handler/h", None, "web.endpoint/h")
    run = record(read(A, "x"), contexts=(web,))
    assert edges(run) == {}
    assert [r.asset for r in run.batch().reads] == [A]


def test_the_run_ends_complete_or_failed_with_the_error_class() -> None:
    run = record()
    run.end(KeyError("no"))
    assert (run.run.status, run.batch().processes[0].metadata["error_class"]) == ("FAIL", "KeyError")


# -- properties ---------------------------------------------------------------------------

ASSETS = [A, B, W, M]
COLUMNS = ["x", "y", "Z"]
observations = st.lists(
    st.one_of(
        st.builds(
            lambda asset, cols: read(asset, *cols),
            st.sampled_from(ASSETS),
            st.lists(st.sampled_from(COLUMNS), unique=True),
        ),
        st.builds(
            lambda asset, cols: DataWrite("w", asset, tuple(cols)),
            st.sampled_from(ASSETS),
            st.lists(st.sampled_from(COLUMNS), unique=True),
        ),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(observations)
def test_every_asset_read_before_a_write_flows_into_it_and_nothing_read_after(items: list) -> None:
    run = record(*items)
    found = edges(run)
    table_edges = {(s, t) for (s, t, kind) in found if kind is None}
    expected: set[tuple[str, str]] = set()
    for position, item in enumerate(items):
        if isinstance(item, DataWrite):
            expected |= {
                (asset, item.asset)
                for earlier in items[:position]
                if isinstance(earlier, DataRead)
                for asset in earlier.assets
                if asset != item.asset
            }
    assert table_edges == expected


@settings(max_examples=300, deadline=None)
@given(observations)
def test_field_edges_join_equal_names_and_are_sure_only_when_one_read_offers_the_name(items: list) -> None:
    """The field edges, computed naively: at each write, for each of its columns, what the reads
    before it offered under that name (as sets of source columns); an edge from each source, HIGH
    if one set alone was offered at some write, else MEDIUM."""
    expected: dict[tuple[str, str, Transformation | None], Confidence] = {}
    for position, item in enumerate(items):
        if not isinstance(item, DataWrite):
            continue
        for name in {c.lower() for c in item.columns}:
            offers = {
                sources
                for earlier in items[:position]
                if isinstance(earlier, DataRead)
                for column, sources in earlier.columns.items()
                if column.lower() == name
            }
            for sources in offers:
                for source in sources:
                    if source.partition("#")[0] == item.asset:
                        continue
                    key = (source, f"{item.asset}#{name}", TX)
                    confidence = HIGH if len(offers) == 1 else MEDIUM
                    if expected.get(key) != HIGH:
                        expected[key] = confidence
    found = {key: confidence for key, confidence in edges(record(*items)).items() if key[2] is not None}
    assert found == expected


def test_a_loop_of_the_same_calls_is_a_few_observations_and_their_counts() -> None:
    step = [read(A, "x"), DataWrite("joblib.dump", M, ("x",))]
    run = record(*(step * 1000))
    assert len(run.observed) == 2 and run.calls == {"test.read": 1000, "joblib.dump": 1000}
    assert edges(run) == {(f"{A}#x", f"{M}#x", TX): HIGH, (A, M, None): HIGH}


def test_a_write_is_joined_again_when_a_read_since_offers_its_name_anew() -> None:
    """Two hand-offs of one table whose `x` holds different source columns: the second makes
    `x` ambiguous for a write repeated after it (same assets, same names read)."""
    first = DataRead("handoff", (A,), {"x": frozenset({f"{A}#a"})})
    second = DataRead("handoff", (A,), {"x": frozenset({f"{A}#b"})})
    write = DataWrite("w", W, ("x",))
    run = record(first, write, second, write)
    assert edges(run) == {
        (f"{A}#a", f"{W}#x", TX): HIGH,  # the surest said of it: at the first write it was alone
        (f"{A}#b", f"{W}#x", TX): MEDIUM,
        (A, W, None): HIGH,
    }
