"""`tracelake.python.track` on real pandas, pyarrow, scikit-learn, joblib, pickle, ONNX and
safetensors calls, stored in a real SQLite store: what each call is seen as, how the run joins
them, what it links to, and that it never gets in the way of the code it watches."""

from __future__ import annotations

import asyncio
import io
import json
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from sklearn.linear_model import LogisticRegression

import tracelake.python as tp
from tracelake.collect.probes import Probes
from tracelake.model import Signal
from tracelake.store import LineageStore
from tracelake.store.events import runs


def file_urn(path: Path) -> str:
    return f"file.dataset/{path}"


def stored_edges(store: LineageStore, job: str) -> dict[tuple[str, str], tuple[str, str | None]]:
    return {
        (e.source, e.target): (e.confidence, e.transformation)
        for e in store.edges(process=f"python.job/{job}")
    }


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    """A training table with a religion-derived column, as Parquet (values never to be stored)."""
    path = tmp_path / "profiles.parquet"
    frame = pd.DataFrame(
        {
            "user_id": [1, 2, 3, 4, 5, 6],
            "religion": ["Catholic", "Hindu", "Catholic", "Jewish", "Hindu", "Atheist"],
            "same_religion": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
            "age": [31, 45, 22, 38, 29, 51],
            "label": [1, 0, 1, 0, 1, 0],
        }
    )
    frame.to_parquet(path)
    return path


def test_a_model_trained_with_pandas_and_scikit_learn_has_the_columns_it_was_fitted_on(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    model_file = tmp_path / "ranker.joblib"
    with tp.track(job="train", store=sqlite_store, models={str(model_file): "ranker"}) as run:
        frame = pd.read_parquet(profiles, columns=["user_id", "same_religion", "age", "label"])
        model = LogisticRegression().fit(frame[["same_religion", "age"]], frame["label"])
        joblib.dump(model, model_file)
    assert run.stored and run.problems == []
    source = file_urn(profiles)
    assert stored_edges(sqlite_store, "train") == {
        (f"{source}#same_religion", "ai.model/ranker#same_religion"): ("HIGH", "TRANSFORMATION"),
        (f"{source}#age", "ai.model/ranker#age"): ("HIGH", "TRANSFORMATION"),
        (source, "ai.model/ranker"): ("HIGH", None),
    }
    assert {e.signal for e in sqlite_store.edges(process="python.job/train")} == {Signal.AI_RUNTIME}
    model_node = sqlite_store.node("ai.model/ranker")
    assert model_node is not None
    assert model_node.properties["class"] == "sklearn.linear_model._logistic.LogisticRegression"
    assert model_node.properties["location"] == str(model_file)
    (stored_run,) = runs(sqlite_store, process="python.job/train")
    assert stored_run.status == "COMPLETE"


def test_the_run_keeps_column_names_and_never_a_value(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    with tp.track(job="copy", store=sqlite_store):
        frame = pd.read_parquet(profiles)
        frame.to_csv(tmp_path / "copy.csv", index=False)
    database = Path(sqlite_store.url.removeprefix("sqlite:///"))
    sqlite_store.close()
    dump = "\n".join(sa.create_engine(f"sqlite:///{database}").raw_connection().driver_connection.iterdump())
    assert "religion" in dump  # the column's name is lineage
    for value in ("Catholic", "Hindu", "Jewish", "Atheist"):
        assert value not in dump


def test_pandas_and_pyarrow_readers_and_writers(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    csv, json_file, arrow_out, dataset_out = (
        tmp_path / "p.csv",
        tmp_path / "p.json",
        tmp_path / "arrow.parquet",
        tmp_path / "ds",
    )
    pd.read_parquet(profiles).to_csv(csv, index=False)  # before the run: not seen
    with tp.track(job="io", store=sqlite_store) as run:
        ages = pd.read_csv(csv, usecols=["user_id", "age"])
        ages.to_json(json_file, orient="records")
        table = pq.read_table(profiles, columns=["user_id", "religion"])
        pq.write_table(table, arrow_out)
        pads.write_dataset(pads.dataset(arrow_out), dataset_out, format="parquet")
    calls = [(o.call, o.assets if isinstance(o, tp.DataRead) else o.asset) for o in run.observed]
    assert calls == [
        ("pandas.read_csv", (file_urn(csv),)),
        ("pandas.DataFrame.to_json", file_urn(json_file)),
        ("pyarrow.parquet.read_table", (file_urn(profiles),)),
        ("pyarrow.parquet.write_table", file_urn(arrow_out)),
        ("pyarrow.dataset.dataset", (file_urn(arrow_out),)),
        ("pyarrow.dataset.write_dataset", file_urn(dataset_out)),
    ]
    read = run.observed[0]
    assert isinstance(read, tp.DataRead) and sorted(read.columns) == ["age", "user_id"]
    edges = stored_edges(sqlite_store, "io")
    assert edges[(f"{file_urn(profiles)}#religion", f"{file_urn(arrow_out)}#religion")] == (
        "HIGH",
        "TRANSFORMATION",
    )
    # the csv's `user_id` and the parquet's were both read before arrow.parquet was written
    assert edges[(f"{file_urn(csv)}#user_id", f"{file_urn(arrow_out)}#user_id")] == (
        "MEDIUM",
        "TRANSFORMATION",
    )
    assert edges[(file_urn(csv), file_urn(json_file))] == ("HIGH", None)
    assert (file_urn(json_file), file_urn(arrow_out)) not in edges  # written, never read


def test_a_call_made_inside_another_hooked_call_is_the_outer_calls(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    with tp.track(job="nested", store=sqlite_store) as run:
        pd.read_parquet(profiles).to_parquet(tmp_path / "out.parquet")  # pandas calls pyarrow
        pd.read_parquet(profiles).to_pickle(tmp_path / "frame.pkl")  # pandas calls pickle
    assert run.calls == {
        "pandas.read_parquet": 2,
        "pandas.DataFrame.to_parquet": 1,
        "pandas.DataFrame.to_pickle": 1,
    }
    # the same read twice is one observation
    assert [o.call for o in run.observed] == [
        "pandas.read_parquet",
        "pandas.DataFrame.to_parquet",
        "pandas.DataFrame.to_pickle",
    ]


def test_sql_tables_are_named_from_the_connection(sqlite_store: LineageStore, tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    pd.DataFrame({"order_id": [1, 2], "amount": [9.5, 3.0]}).to_sql("orders", engine, index=False)
    with tp.track(job="sql", store=sqlite_store) as run:
        orders = pd.read_sql("SELECT order_id, amount FROM orders WHERE amount > 1", engine)
        orders.to_sql("big_orders", engine, index=False)
        pd.read_sql("SELECT 1 AS one", engine)  # no table: said, not guessed
    namespace = f"sqlite://{tmp_path / 'shop.db'}"
    first, second = run.observed
    assert isinstance(first, tp.DataRead) and isinstance(second, tp.DataWrite)
    assert first.assets[0].endswith("/orders") and second.asset.endswith("/big_orders")
    assert first.assets[0].startswith("openlineage.dataset/sqlite:")
    assert namespace.replace("/", "%2F") in first.assets[0]
    assert [p.reason for p in run.problems] == [
        "pandas.read_sql: lineage not recorded: a query whose tables could not be found"
    ]
    assert [p.reason for p in sqlite_store.problems()] == [p.reason for p in run.problems]


def test_models_through_pickle_onnx_and_safetensors(sqlite_store: LineageStore, tmp_path: Path) -> None:
    import onnx
    import safetensors.numpy
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    estimator = LogisticRegression().fit(np.array([[0.0], [1.0]]), np.array([0, 1]))
    with tp.track(job="models", store=sqlite_store) as run:
        with open(tmp_path / "model.pkl", "wb") as handle:
            pickle.dump({"model": estimator, "version": 3}, handle)
        with open(tmp_path / "model.pkl", "rb") as handle:
            pickle.load(handle)
        onnx.save_model(helper.make_model(graph), tmp_path / "model.onnx")
        onnx.load_model(tmp_path / "model.onnx")
        safetensors.numpy.save_file({"w": np.zeros(3, dtype=np.float32)}, tmp_path / "w.safetensors")
        safetensors.numpy.load_file(tmp_path / "w.safetensors")
        pickle.dump({"plain": "dict"}, io.BytesIO())  # no file, no model: nothing
        with open(tmp_path / "cache.pkl", "wb") as handle:
            pickle.dump([1, 2, 3], handle)  # a file, but not data Tracelake names
    seen = [(o.call, o.model) for o in run.observed]
    assert seen == [
        ("pickle.dump", True),
        ("pickle.load", True),
        ("onnx.save_model", True),
        ("onnx.load_model", True),
        ("safetensors.numpy.save_file", True),
        ("safetensors.numpy.load_file", True),
    ]
    pickled = run.observed[0]
    assert isinstance(pickled, tp.DataWrite)
    assert pickled.asset == "ai.model/" + str(tmp_path / "model.pkl").replace("/", "%2F", 1)
    assert pickled.facts["class"] == "sklearn.linear_model._logistic.LogisticRegression"
    # models written then read by the same run: reads before a later write flow into it
    edges = stored_edges(sqlite_store, "models")
    assert (pickled.asset, run.observed[2].asset) in edges  # type: ignore[union-attr]


class OddModel:
    """A model whose features cannot be listed: describing it fails, saving and loading it does not."""

    def predict(self, rows: object) -> object:
        return rows

    @property
    def feature_names_in_(self) -> list[str]:
        raise RuntimeError("a value that must not reach the log: Catholic")


def test_the_users_call_fails_as_it_would_and_a_failing_hook_never_fails_it(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with tp.track(job="robust", store=sqlite_store) as run:
        with pytest.raises(FileNotFoundError):
            pd.read_parquet(tmp_path / "missing.parquet")
        joblib.dump(OddModel(), tmp_path / "odd.joblib")
        assert joblib.load(tmp_path / "odd.joblib") is not None
    assert [o.call for o in run.observed] == []  # the failed read is not lineage
    assert [p.reason for p in run.problems] == [
        "joblib.dump: lineage not recorded: the hook failed (RuntimeError)",
        "joblib.load: lineage not recorded: the hook failed (RuntimeError)",
    ]
    assert "Catholic" not in caplog.text
    assert "joblib.dump: lineage not recorded" in caplog.text


def test_a_run_that_fails_keeps_the_jobs_edges_and_says_it_failed(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    with tp.track(job="daily", store=sqlite_store):
        pd.read_parquet(profiles).to_parquet(tmp_path / "a.parquet")
        pd.read_parquet(profiles).to_parquet(tmp_path / "b.parquet")
    with pytest.raises(ZeroDivisionError), tp.track(job="daily", store=sqlite_store):
        pd.read_parquet(profiles).to_parquet(tmp_path / "a.parquet")
        _ = 1 / 0
    targets = {t for (_, t) in stored_edges(sqlite_store, "daily")}
    assert file_urn(tmp_path / "b.parquet") in targets  # not reached this time: no evidence it stopped
    statuses = sorted(r.status for r in runs(sqlite_store, process="python.job/daily"))
    assert statuses == ["COMPLETE", "FAIL"]


def test_a_store_that_refuses_the_run_is_logged_and_the_job_goes_on(
    profiles: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "not-a-db").mkdir()
    with tp.track(job="offline", store=f"sqlite:///{tmp_path / 'not-a-db'}") as run:
        pd.read_parquet(profiles)
    assert not run.stored
    assert "not stored" in caplog.text and "the job is unaffected" in caplog.text


# -- which run sees a call, and what a run is linked to ----------------------------------------


def test_a_thread_started_without_the_context_counts_for_the_latest_run(
    sqlite_store: LineageStore, profiles: Path
) -> None:
    with tp.track(job="loader", store=sqlite_store) as run:
        worker = threading.Thread(target=pd.read_parquet, args=(profiles,))
        worker.start()
        worker.join()
    assert [o.call for o in run.observed] == ["pandas.read_parquet"]


def test_two_runs_in_two_contexts_keep_their_calls_apart(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    async def job(name: str, out: Path) -> tp.PythonTracker:
        with tp.track(job=name, store=sqlite_store) as run:
            frame = pd.read_parquet(profiles)
            await asyncio.sleep(0.01)  # the other task runs its calls in between
            frame.to_parquet(out)
        return run

    async def both() -> list[tp.PythonTracker]:
        return await asyncio.gather(job("left", tmp_path / "l.parquet"), job("right", tmp_path / "r.parquet"))

    left, right = asyncio.run(both())
    assert [o.call for o in left.observed] == ["pandas.read_parquet", "pandas.DataFrame.to_parquet"]
    assert left.observed[1].asset == file_urn(tmp_path / "l.parquet")  # type: ignore[union-attr]
    assert right.observed[1].asset == file_urn(tmp_path / "r.parquet")  # type: ignore[union-attr]


def test_a_run_started_in_a_web_request_links_to_it_and_feeds_its_endpoint(
    sqlite_store: LineageStore, tmp_path: Path
) -> None:
    estimator = LogisticRegression().fit(np.array([[0.0], [1.0]]), np.array([0, 1]))
    joblib.dump(estimator, tmp_path / "ranker.joblib")
    probes = Probes(sampler=lambda: 1.0)  # no request is sampled: the scope still says which
    models = {str(tmp_path / "ranker.joblib"): "dating_ranking_model"}

    @probes.endpoint("web.endpoint/ranking.recommend")
    def recommend(user_id: int) -> object:
        with tp.track(job="ranking_service", store=sqlite_store, models=models) as run:
            joblib.load(tmp_path / "ranker.joblib")
        return run

    run = recommend(7)
    (context,) = run.contexts
    assert (context.kind, context.process, context.endpoint) == (
        "web",
        "web.handler/ranking.recommend",
        "web.endpoint/ranking.recommend",
    )
    assert stored_edges(sqlite_store, "ranking_service") == {
        ("ai.model/dating_ranking_model", "web.endpoint/ranking.recommend"): ("MEDIUM", None)
    }


def test_a_sampled_request_gives_the_run_its_trace_as_parent(sqlite_store: LineageStore) -> None:
    probes = Probes(sampler=lambda: 0.0)
    with probes.request("checkout", trace_id="trace-42"):
        run = tp.track(job="score", store=sqlite_store)
        run.stop()
    assert run.run.job_id == "trace-42"
    (stored,) = runs(sqlite_store, process="python.job/score")
    assert stored.job_id == "trace-42"


def test_a_run_in_an_airflow_task_names_the_task(
    sqlite_store: LineageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the variables Airflow sets in a task's process (airflow.utils.operator_helpers)
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "dating_daily")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "train_ranker")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_RUN_ID", "scheduled__2024-03-10T00:00:00+00:00")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "2")
    with tp.track(job="train_ranker", store=sqlite_store) as run:
        pass
    (context,) = run.contexts
    assert context.process == "openlineage.job/default/dating_daily.train_ranker"
    assert run.run.job_id == "airflow:dating_daily/train_ranker/scheduled__2024-03-10T00:00:00+00:00/2"


def test_a_module_imported_after_tracking_began_is_hooked_as_it_loads(tmp_path: Path) -> None:
    """In a fresh interpreter: safetensors is imported only inside the run."""
    script = f"""
import sys
import tracelake.python as tp
assert "safetensors.numpy" not in sys.modules
with tp.track(job="late", store="sqlite:///{tmp_path / "late.db"}") as run:
    import numpy as np
    import safetensors.numpy
    safetensors.numpy.save_file({{"w": np.zeros(2, dtype=np.float32)}}, "{tmp_path / "w.safetensors"}")
print([o.call for o in run.observed])
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().replace("'", '"')) == ["safetensors.numpy.save_file"]


def test_with_no_run_going_a_hooked_call_is_the_original(sqlite_store: LineageStore, profiles: Path) -> None:
    done = tp.track(job="installs", store=sqlite_store)
    done.stop()  # the hooks stay installed in the process; no run goes on
    assert getattr(pd.read_parquet, "__tracelake_hook__", None) is not None
    assert pd.read_parquet.__name__ == "read_parquet"
    assert pd.read_parquet(profiles).shape == (6, 5)
    assert done.observed == []


# -- OpenLineage out ------------------------------------------------------------------------


def test_run_events_go_out_valid_by_the_spec_with_the_request_as_parent(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    """Validated against the OpenLineage JSON schema, the parent facet against the spec's own
    ParentRunFacet.json (../shared/conformance)."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.serde import Serde
    from openlineage.client.transport.transport import Transport

    from tests.emit.test_openlineage import assert_valid
    from tracelake.emit import OpenLineageEmitter

    class Recording(Transport):
        kind = "recording"

        def __init__(self) -> None:
            self.events: list[object] = []

        def emit(self, event: object) -> None:  # type: ignore[override]
            self.events.append(event)

    transport = Recording()
    emitter = OpenLineageEmitter(
        OpenLineageClient(transport=transport), namespace="dating", producer="https://t.l/x"
    )
    probes = Probes(sampler=lambda: 0.0)
    trace = "4f6c1a3e9b2d4c7e8a1b2c3d4e5f6a7b"
    with (
        probes.request("ranking.retrain", trace_id=trace),
        tp.track(job="retrain", store=sqlite_store, emitter=emitter),
    ):
        frame = pd.read_parquet(profiles, columns=["user_id", "same_religion", "label"])
        joblib.dump(LogisticRegression().fit(frame[["same_religion"]], frame["label"]), tmp_path / "m.joblib")
    start, complete = (json.loads(Serde.to_json(event)) for event in transport.events)
    for doc in (start, complete):
        assert_valid(doc)
        parent = doc["run"]["facets"]["parent"]
        assert (parent["job"]["namespace"], parent["job"]["name"]) == ("dating", "ranking.retrain")
        assert parent["run"]["runId"] == "4f6c1a3e-9b2d-4c7e-8a1b-2c3d4e5f6a7b"
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    (output,) = complete["outputs"]
    assert output["namespace"] == "ai.model" and output["name"] == str(tmp_path / "m.joblib")
    lineage = output["facets"]["columnLineage"]["fields"]
    assert list(lineage) == ["same_religion"]
    assert [i["field"] for i in lineage["same_religion"]["inputFields"]] == ["same_religion"]


def test_data_through_a_buffer_is_a_problem_said_once_with_its_count(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path
) -> None:
    second = tmp_path / "more.parquet"
    pd.read_parquet(profiles).to_parquet(second)
    with tp.track(job="buffers", store=sqlite_store) as run:
        for _ in range(2):
            assert len(pd.read_parquet(io.BytesIO(profiles.read_bytes()))) == 6
        both = pq.read_table([str(profiles), str(second)], columns=["user_id"])
    assert both.num_rows == 12
    assert [p.reason for p in run.problems] == [
        "pandas.read_parquet: lineage not recorded: "
        "data read or written through a buffer with no file behind it (2 calls)"
    ]
    (read,) = run.observed
    assert isinstance(read, tp.DataRead)
    assert read.assets == (file_urn(profiles), file_urn(second))
    assert read.columns == {
        "user_id": frozenset({f"{file_urn(profiles)}#user_id", f"{file_urn(second)}#user_id"})
    }


def test_a_relative_path_is_named_where_the_process_stands_at_each_call(
    sqlite_store: LineageStore, profiles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Descriptions of repeated calls are remembered, but only for paths that name one file
    wherever the process stands."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        pd.read_parquet(profiles, columns=["user_id"] if folder == "a" else ["age"]).to_parquet(
            tmp_path / folder / "x.parquet"
        )
    with tp.track(job="relative", store=sqlite_store) as run:
        for folder in ("a", "b", "a"):
            monkeypatch.chdir(tmp_path / folder)
            pd.read_parquet("x.parquet")
        pd.read_parquet(profiles, columns=["age"])
        pd.read_parquet(profiles, columns=["label"])  # the same file, other columns: another read
    reads = [(o.assets, sorted(o.columns)) for o in run.observed if isinstance(o, tp.DataRead)]
    assert reads == [
        ((file_urn(tmp_path / "a" / "x.parquet"),), ["user_id"]),
        ((file_urn(tmp_path / "b" / "x.parquet"),), ["age"]),
        ((file_urn(profiles),), ["age"]),
        ((file_urn(profiles),), ["label"]),
    ]
    assert run.calls == {"pandas.read_parquet": 5}


def test_a_name_bound_after_install_is_the_wrapped_call(tmp_path: Path) -> None:
    """In a fresh interpreter: `install()` first, then `from pandas import read_parquet`, as a
    service's modules would; a name bound before it stays the original."""
    script = f"""
import pandas as pd
from pandas import read_csv  # bound before install: not seen
import tracelake.python as tp
tp.install()
from pandas import read_parquet
pd.DataFrame({{"a": [1]}}).to_parquet("{tmp_path / "a.parquet"}")
pd.DataFrame({{"a": [1]}}).to_csv("{tmp_path / "a.csv"}")
with tp.track(job="bound", store="sqlite:///{tmp_path / "bound.db"}") as run:
    read_parquet("{tmp_path / "a.parquet"}")
    read_csv("{tmp_path / "a.csv"}")
print(sorted(run.calls))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().replace("'", '"')) == ["pandas.read_parquet"]
