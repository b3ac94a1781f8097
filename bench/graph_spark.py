"""Whole-graph analyses on Spark (issue 24): label propagation, PageRank hotness and the closures
of 100 roots, in memory beside the PySpark jobs of `tracelake.graph.spark` on `local[1]` and
`local[2]`, at 1M and 10M field edges; every Spark answer checked against the in-memory one.

For each `--edges` size (1,000,000 and 10,000,000 with `--edges 1000000,10000000`):

- the warehouse: bench/discovery.py's synthetic layered warehouse (`make_warehouse`: ~N/50
  assets in 25 layers, ~10 fields each, N field→field edges plus the table-level edges they
  imply, all open), with its 10 labels each declared on 5 fields of layers 0–1 (seed `--seed`);
  `GraphIndex.from_snapshot` builds the in-memory index (timed apart).
- the lake: written straight from the snapshot's arrays with pyarrow in the lake format
  (`tracelake.store.lake`: `TABLE/seq=0/part-K.parquet` of `FILE_ROWS` rows at most, written
  in row groups of `BATCH_ROWS` as `export_lake` writes them, and the `_lake.json` manifest from
  `Manifest.to_json()`): nodes; edges (`is_field`, `valid_to` null while open); an empty
  `edge_deletes`; assets; labels holding the declared labels (provenance "declared", source and
  path the field itself); empty reads, versions and runs. Its write time and size on disk are
  printed.
- in memory (this process, one thread, GC paused while timing): `propagate(index, declared,
  RULES)` for the 10 labels with discovery.py's rules (min confidence MEDIUM, `CARRYING`
  transformations, `ai.model` a stop kind, `hive.table/ads.` a stop zone); `hotness(index)`
  (tolerance 1e-12); and one `lineage(index, root, "downstream")` per root for 100 random
  assets (no filter). Median of `--repeat` timed runs after one untimed.
- on Spark: for each master, a subprocess of this script (`--worker MASTER --lake DIR`: a fresh
  JVM each) starts a session (`spark.driver.memory` `--driver-memory` (8g),
  `spark.sql.shuffle.partitions` `--shuffle-partitions`, UI off, quiet log4j), reads the lake
  (`read_lake`), runs one small untimed warm-up job, then times each analysis once, wall clock:
  the call (`walk.propagation(graph, None, RULES)`: the lake's declared labels;
  `hotness.hotness(graph)`; `walk.closures(graph, roots, "downstream")`, all 100 roots in one
  call) plus writing its rows to Parquet under the lake's `results/` (the write is the action
  that runs the result's last joins, so it is part of the analysis). It prints its timings as
  one JSON line. The walks and PageRank run one Spark job a hop or an iteration, each ending in
  an `Observation`; the worker swaps `pyspark.sql.Observation` for a subclass that notes when
  each one's value arrives, which gives the hops or iterations and the seconds each took. The
  shuffle bytes written and read are summed from the Spark status store's stage data (the
  stages that ran during the analysis).
- the check, in this process, over the Parquet results read with pyarrow: propagation's
  (label, node URN, depth) set equals the in-memory one, and each row's parent URN is the
  in-memory route's previous node (the source of the edge `propagate` reached the node by);
  closures' (root, URN, depth) set equals the union of the 100 in-memory `lineage` results
  (their `distance_by_urn()`, read as the result's node and hop arrays); every asset has a
  PageRank score within 1e-9 relative of the in-memory one. "same answer: yes" only if all
  hold; otherwise what differs, with examples.

Shuffle partitions: 2× the master's cores (`--shuffle-partitions 0`, the default: 2 on local[1],
4 on local[2]). Tried on local[2], one run each (propagation / PageRank / closures, seconds): at 1M
edges 1: 43.5/27.1/17.7, 2: 48.6/23.5/18.3, 4: 51.6/26.8/19.6, 8: 54.6/26.3/21.7, 16:
59.9/31.3/28.3; at 10M 2: 125.9/64.4/43.8, 4: 127.2/59.9/38.7, 8: 130.1/57.7/42.9. Up to 4 they
are within the noise (a hop is a few small jobs; the partitions' count matters little next to
the job overhead), 8 and more cost more at 1M; 4 had the lowest total at 10M.

An analysis that runs past `--limit` minutes on Spark is cancelled (its job group) and printed
as over the limit; `--skip MASTER@EDGES[:ANALYSIS]` leaves a run, or one analysis of it, out
(both say so in the output). At 10M on local[1] the slowest analysis took under 3 minutes, so
neither is needed with the defaults.

With `--store PATH` (e.g. the 1M-edge store bench/answers.py builds, /tmp/benchwhy/lineage.db)
the store is copied to a temporary file first (the original is never opened) and `export_lake`
is timed on the copy: a full export into an empty folder, then, nothing ingested, an
incremental one.

    .venv/bin/python bench/graph_spark.py [--edges 1000000,10000000] [--masters local[1],local[2]]
        [--repeat N] [--seed N] [--shuffle-partitions N] [--driver-memory 8g] [--limit MINUTES]
        [--skip MASTER@EDGES[:ANALYSIS]] [--analyses propagation,hotness,closures]
        [--store PATH] [--workdir DIR] [--keep]

Needs Java 17+ and pyspark. At 10M edges the parent peaks at ~3 GB (the snapshot and the index)
while a worker's JVM takes up to the driver memory; the whole run takes about 15 minutes here.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from discovery import RULES, make_warehouse, timed
from machine import load_change, python_machine
from tracelake.graph.hotness import hotness as memory_hotness
from tracelake.graph.index import GraphIndex
from tracelake.graph.propagate import Propagation, propagate
from tracelake.graph.traverse import lineage
from tracelake.model import Confidence, Signal, Transformation
from tracelake.store.lake import BATCH_ROWS, FILE_ROWS, MANIFEST, SCHEMAS, TABLES, Manifest
from tracelake.store.records import NODE_TYPES, OPEN_END, GraphSnapshot

ANALYSES = ("propagation", "hotness", "closures")
TITLES = {
    "propagation": "label propagation (10 labels)",
    "hotness": "PageRank hotness",
    "closures": "closures of 100 roots",
}
STEP = {"propagation": "hops", "hotness": "iterations", "closures": "hops"}
RESULT_COLUMNS = {
    "propagation": ("label", "urn", "depth", "parent_urn", "source_urn", "stopped"),
    "hotness": ("asset_id", "urn", "score"),
    "closures": ("root", "urn", "depth"),
}
ROOTS = 100
LABELS, SOURCES_PER_LABEL = 10, 5
RELATIVE = 1e-9  # PageRank scores must agree this closely
SHOWN = 3  # examples of a difference printed


# ---------------------------------------------------------------------- the lake, from the arrays


def _timestamps(values: np.ndarray, open_end: bool = False) -> pa.Array:
    micros = pa.array(values, type=pa.int64(), mask=(values == OPEN_END) if open_end else None)
    return micros.cast(pa.timestamp("us", tz="UTC"))


def _coded(codes: np.ndarray, names: Sequence[str | None]) -> pa.Array:
    """Strings from small codes (negative: null), decoded from a dictionary array."""
    codes = np.asarray(codes)
    indices = pa.array(np.where(codes < 0, 0, codes).astype(np.int32), mask=codes < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(names, type=pa.string())).cast(pa.string())


def _write_table(folder: Path, name: str, table: pa.Table) -> int:
    """`name/seq=0/part-K.parquet`, FILE_ROWS rows a file in BATCH_ROWS row groups, as
    `export_lake` writes them; an empty table still gets its (empty) file."""
    target = folder / name / "seq=0"
    target.mkdir(parents=True, exist_ok=True)
    table = table.cast(SCHEMAS[name])
    if table.num_rows == 0:
        pq.write_table(table, target / "part-00000.parquet")
        return 0
    for part, start in enumerate(range(0, table.num_rows, FILE_ROWS)):
        chunk = table.slice(start, FILE_ROWS)
        with pq.ParquetWriter(target / f"part-{part:05d}.parquet", SCHEMAS[name]) as writer:
            for offset in range(0, chunk.num_rows, BATCH_ROWS):
                writer.write_table(chunk.slice(offset, BATCH_ROWS))
    return table.num_rows


def write_lake(snap: GraphSnapshot, declared: dict[str, list[str]], folder: Path) -> dict[str, int]:
    """The snapshot as a lake in `folder` (seq 0, full), rows written a table."""
    asset, field_, process = (NODE_TYPES.index(t) for t in ("asset", "field", "process"))
    ids = np.asarray(snap.node_ids, dtype=np.int64)
    types = np.asarray(snap.node_types)
    parents = np.asarray(snap.node_parents, dtype=np.int64)
    asset_id = np.where(types == asset, ids, parents)
    nodes = pa.table(
        {
            "id": ids,
            "urn": pa.array(snap.node_urns, type=pa.string()),
            "node_type": _coded(types, NODE_TYPES),
            "kind": pa.array(snap.node_kinds, type=pa.string()),
            "asset_id": pa.array(asset_id, mask=(types == process) | (asset_id < 0)),
        }
    )
    source = np.asarray(snap.edge_source, dtype=np.int64)
    source_type = types[np.searchsorted(ids, source)]
    confidence_names = [None] * 4
    for c in Confidence:
        confidence_names[c.rank] = str(c)
    edges = pa.table(
        {
            "id": np.asarray(snap.edge_ids, dtype=np.int64),
            "source_id": source,
            "target_id": np.asarray(snap.edge_target, dtype=np.int64),
            "process_id": np.asarray(snap.edge_process, dtype=np.int64),
            "signal": _coded(snap.edge_signal, [str(s) for s in Signal]),
            "confidence": _coded(snap.edge_confidence, confidence_names),
            "transformation": _coded(snap.edge_transformation, [str(t) for t in Transformation]),
            "is_field": source_type == field_,
            "valid_from": _timestamps(np.asarray(snap.edge_valid_from, dtype=np.int64)),
            "valid_to": _timestamps(np.asarray(snap.edge_valid_to, dtype=np.int64), open_end=True),
        }
    )
    assets = np.flatnonzero(types == asset)
    none = pa.nulls(len(assets))
    asset_rows = pa.table(
        {
            "id": ids[assets],
            "urn": pa.array([snap.node_urns[a] for a in assets.tolist()], type=pa.string()),
            "owner": none,
            "layer": none,
            "security_level": none,
            "labels": none,
            "description": none,
            "properties": none,
        }
    )
    pairs = [(urn, label) for urn, labels in declared.items() for label in labels]
    labels = pa.table(
        {
            "urn": [urn for urn, _ in pairs],
            "label": [label for _, label in pairs],
            "provenance": ["declared"] * len(pairs),
            "source": [urn for urn, _ in pairs],
            "path": [[urn] for urn, _ in pairs],
        },
        schema=SCHEMAS["labels"],
    )
    written = {"nodes": nodes, "edges": edges, "assets": asset_rows, "labels": labels}
    rows = {
        name: _write_table(folder, name, written.get(name, SCHEMAS[name].empty_table())) for name in TABLES
    }
    manifest = Manifest(
        store=0,
        graph_version=snap.version,
        ends={},
        tables={name: [0] for name in TABLES},
        full_edges=rows["edges"],
        appended_edges=0,
        history=[{"seq": 0, "full": True, "graph_version": snap.version, "at": "bench", "rows": rows}],
    )
    (folder / MANIFEST).write_text(json.dumps(manifest.to_json(), indent=1))
    return rows


def disk_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


# ---------------------------------------------------------------------- the Spark worker


class _Steps:
    """When each `Observation` of an analysis delivered its value (one a hop or iteration)."""

    log: ClassVar[list[tuple[float, dict[str, Any]]]] = []


def _counting_observation() -> None:
    """Swap `pyspark.sql.Observation` (imported by the walk and PageRank at call time) for a
    subclass noting when each value arrives; behaviour unchanged."""
    import pyspark.sql
    from pyspark.sql.observation import Observation

    class Counted(Observation):
        @property
        def get(self) -> dict[str, Any]:
            value = super().get
            if not getattr(self, "_noted", False):
                self._noted = True
                _Steps.log.append((time.perf_counter(), dict(value)))
            return value

    pyspark.sql.Observation = Counted  # type: ignore[misc]


def _shuffle_bytes(spark: Any, after_stage: int) -> tuple[int, int, int]:
    """(bytes written, bytes read, last stage id) summed over the stages after `after_stage`,
    from the status store (the listener bus drained first)."""
    sc = spark.sparkContext._jsc.sc()
    try:
        sc.listenerBus().waitUntilEmpty(30_000)
    except Exception:  # a private API; a short wait does as well
        time.sleep(1.0)
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    stages = sc.statusStore().stageList(
        None, False, False, gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList()
    )
    written = read = 0
    last = after_stage
    for i in range(stages.size()):
        stage = stages.apply(i)
        if stage.stageId() > after_stage:
            written += stage.shuffleWriteBytes()
            read += stage.shuffleReadBytes()
            last = max(last, stage.stageId())
    return written, read, last


class _Watchdog:
    """Cancels the analysis' job group once `limit` seconds have passed, and keeps cancelling
    (a walk starts a new job each hop) until the analysis has given up."""

    def __init__(self, spark: Any, group: str, limit: float) -> None:
        self.sc, self.group, self.limit = spark.sparkContext, group, limit
        self.done = threading.Event()
        self.fired = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self.done.wait(self.limit):
            return
        self.fired = True
        while not self.done.is_set():
            self.sc.cancelJobGroup(self.group)
            self.done.wait(0.5)

    def __enter__(self) -> _Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def worker(args: argparse.Namespace) -> int:
    """One Spark master's run over the lake: timings as one JSON line on stdout."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from machine import versions
    from tracelake.graph.spark.hotness import hotness
    from tracelake.graph.spark.lake import read_lake
    from tracelake.graph.spark.walk import closures, propagation
    from tracelake.spark.local import quiet_log_option

    lake = args.lake
    cores = _cores(args.worker)
    partitions = args.shuffle_partitions or 2 * cores
    scratch = Path(args.workdir) / "spark"
    began = time.perf_counter()
    spark = (
        SparkSession.builder.master(args.worker)
        .appName("tracelake-graph-spark-bench")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.retainedStages", "1000000")
        .config("spark.ui.retainedJobs", "1000000")
        .config("spark.sql.ui.retainedExecutions", "100")
        .config("spark.local.dir", str(scratch))
        .config("spark.driver.extraJavaOptions", quiet_log_option(scratch))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - began
    _counting_observation()
    out: dict[str, Any] = {
        "master": args.worker,
        "partitions": partitions,
        "versions": versions(spark),
        "start": started,
        "analyses": {},
    }
    began = time.perf_counter()
    graph = read_lake(spark, lake)
    out["read_lake"] = time.perf_counter() - began
    began = time.perf_counter()
    spark.range(100_000).selectExpr("id % 97 AS k").groupBy("k").count().collect()  # warm-up
    graph.nodes.limit(3).collect()
    out["warmup"] = time.perf_counter() - began

    roots = json.loads((lake / "results" / "roots.json").read_text())
    calls: dict[str, Callable[[], Any]] = {
        "propagation": lambda: propagation(graph, None, RULES),
        "hotness": lambda: hotness(graph),
        "closures": lambda: closures(graph, roots, "downstream"),
    }
    last_stage = _shuffle_bytes(spark, -1)[2]
    for name in args.analyses.split(","):
        target = lake / "results" / f"{name}-{_tag(args.worker)}"
        shutil.rmtree(target, ignore_errors=True)
        spark.sparkContext.setJobGroup(name, name, True)
        _Steps.log = []
        gc.collect()
        print(f"  [{args.worker}] {name} …", flush=True)
        began = time.perf_counter()
        record: dict[str, Any] = {}
        with _Watchdog(spark, name, args.limit * 60) as watchdog:
            try:
                frame = calls[name]()
                called = time.perf_counter()
                frame.select(*RESULT_COLUMNS[name]).write.parquet(str(target))
                ended = time.perf_counter()
                record.update(call=called - began, write=ended - called, seconds=ended - began)
            except Exception as error:  # cancelled by the watchdog, or failed
                record.update(seconds=None, error=f"{type(error).__name__}: {str(error)[:300]}")
        if watchdog.fired:
            record.update(seconds=None, error=f"over the limit of {args.limit:g} min: cancelled")
        stamps = [began] + [at for at, _ in _Steps.log]
        record["steps"] = [b - a for a, b in itertools.pairwise(stamps)]
        record["step_values"] = [value for _, value in _Steps.log]
        written, read, last_stage = _shuffle_bytes(spark, last_stage)
        record.update(shuffle_write=written, shuffle_read=read)
        out["analyses"][name] = record
        print(
            f"  [{args.worker}] {name}: {record.get('seconds') or record.get('error')}",
            flush=True,
        )
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def _cores(master: str) -> int:
    inside = master.partition("[")[2].rstrip("]")
    return (os.cpu_count() or 1) if inside in ("*", "") else int(inside)


def _tag(master: str) -> str:
    return master.replace("[", "-").replace("]", "").replace("*", "all")


# ---------------------------------------------------------------------- in memory, and the check


def median_seconds(action: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median seconds of `repeat` calls after one untimed, GC paused while timing (discovery.py's
    `timed`); the last result."""
    times, result = timed(action, repeat)
    return statistics.median(times), result


@dataclass
class Expected:
    """The in-memory answers as sorted keys (code × nodes + position) and their values."""

    propagation: tuple[np.ndarray, np.ndarray, np.ndarray]  # keys, depth, parent position
    labels: list[str]
    hotness: np.ndarray  # score by node position, NaN where no asset
    closures: tuple[np.ndarray, np.ndarray]  # keys, depth
    roots: list[str]
    deepest: int  # propagation's deepest hop
    inferred: int
    closure_rows: int
    closure_deepest: int


def keyed(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.argsort(keys, kind="stable")
    return (keys[order], *(v[order] for v in values))


def propagation_expected(index: GraphIndex, result: Propagation) -> tuple[list[str], tuple[np.ndarray, ...]]:
    labels = sorted(result.walks)
    n = index.n_nodes
    keys, depths, parents = [], [], []
    for code, label in enumerate(labels):
        walk = result.walks[label]
        reached = walk.reached.astype(np.int64)
        keys.append(code * n + reached)
        depths.append(walk.dist[reached].astype(np.int64))
        parents.append(index.edge_source[walk.parent_edge[reached]].astype(np.int64))
    return labels, keyed(np.concatenate(keys), np.concatenate(depths), np.concatenate(parents))


@dataclass
class Check:
    same: bool
    rows: int
    notes: list[str] = field(default_factory=list)


def positions(column: pa.ChunkedArray | pa.Array, value_set: pa.Array) -> np.ndarray:
    """Each value's position in `value_set` (-1 when it is not there)."""
    found = pc.index_in(column, value_set=value_set)
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def compare_keys(
    what: str,
    urns: pa.Array,
    n: int,
    expected: tuple[np.ndarray, ...],
    got: tuple[np.ndarray, ...],
    names: Sequence[str],
    tags: Sequence[str],
) -> Check:
    """Equal key sets, then equal values per key; differences counted with a few examples."""
    e_keys, *e_values = expected
    g_keys, *g_values = keyed(*got)
    notes: list[str] = []

    def show(keys: np.ndarray) -> str:
        shown = [f"({tags[int(k // n)]}, {urns[int(k % n)].as_py()})" for k in keys[:SHOWN] if k >= 0]
        return ", ".join(shown) + (" …" if len(keys) > SHOWN else "")

    bad = int(np.sum(g_keys < 0))
    if bad:
        notes.append(f"{what}: {bad:,} rows with a URN or tag the graph does not hold")
    duplicated = g_keys[1:][g_keys[1:] == g_keys[:-1]]
    if len(duplicated):
        notes.append(f"{what}: {len(duplicated):,} duplicate rows, e.g. {show(duplicated)}")
    missing = np.setdiff1d(e_keys, g_keys, assume_unique=True)
    extra = np.setdiff1d(g_keys[g_keys >= 0], e_keys)
    if len(missing):
        notes.append(f"{what}: {len(missing):,} in memory only, e.g. {show(missing)}")
    if len(extra):
        notes.append(f"{what}: {len(extra):,} on Spark only, e.g. {show(extra)}")
    if not notes:
        for name, e, g in zip(names, e_values, g_values, strict=True):
            differ = np.flatnonzero(e != g)
            if len(differ):
                examples = "; ".join(
                    f"{show(e_keys[i : i + 1])}: {name} {int(e[i])} in memory, {int(g[i])} on Spark"
                    if name == "depth"
                    else f"{show(e_keys[i : i + 1])}: {name} {urns[int(e[i])].as_py()} in memory, "
                    f"{urns[int(g[i])].as_py() if g[i] >= 0 else None} on Spark"
                    for i in differ[:SHOWN].tolist()
                )
                notes.append(f"{what}: {len(differ):,} rows with another {name}, e.g. {examples}")
    return Check(not notes, len(g_keys), notes)


def check_run(
    index: GraphIndex, urns: pa.Array, expected: Expected, results: Path, master: str
) -> dict[str, Check]:
    n = index.n_nodes
    checks: dict[str, Check] = {}
    tag = _tag(master)
    path = results / f"propagation-{tag}"
    if path.exists():
        table = pq.read_table(path)
        labels = pa.array(expected.labels)
        codes = positions(table["label"], labels)
        nodes = positions(table["urn"], urns)
        parents = positions(table["parent_urn"], urns)
        keys = np.where((codes < 0) | (nodes < 0), -1, codes * n + nodes)
        depth = table["depth"].to_numpy().astype(np.int64)
        checks["propagation"] = compare_keys(
            "propagation",
            urns,
            n,
            expected.propagation,
            (keys, depth, parents),
            ("depth", "parent"),
            expected.labels,
        )
        del table
    path = results / f"closures-{tag}"
    if path.exists():
        table = pq.read_table(path)
        roots = positions(table["root"], pa.array(expected.roots))
        nodes = positions(table["urn"], urns)
        keys = np.where((roots < 0) | (nodes < 0), -1, roots * n + nodes)
        checks["closures"] = compare_keys(
            "closures",
            urns,
            n,
            expected.closures,
            (keys, table["depth"].to_numpy().astype(np.int64)),
            ("depth",),
            expected.roots,
        )
        del table
    path = results / f"hotness-{tag}"
    if path.exists():
        table = pq.read_table(path)
        nodes = positions(table["urn"], urns)
        scores = table["score"].to_numpy()
        want = expected.hotness
        notes = []
        assets = np.flatnonzero(~np.isnan(want))
        got = np.full(n, np.nan)
        got[nodes[nodes >= 0]] = scores[nodes >= 0]
        if np.any(nodes < 0) or len(np.unique(nodes)) != len(nodes):
            notes.append("hotness: rows of unknown or repeated URNs")
        absent = assets[np.isnan(got[assets])]
        if len(absent):
            notes.append(
                f"hotness: {len(absent):,} assets without a score, e.g. {urns[int(absent[0])].as_py()}"
            )
        extra = np.setdiff1d(nodes[nodes >= 0], assets)
        if len(extra):
            notes.append(f"hotness: {len(extra):,} scores of non-assets")
        both = assets[~np.isnan(got[assets])]
        relative = np.abs(got[both] - want[both]) / np.abs(want[both])
        worst = float(relative.max()) if len(relative) else 0.0
        if worst > RELATIVE:
            i = int(both[np.argmax(relative)])
            notes.append(
                f"hotness: {int(np.sum(relative > RELATIVE)):,} scores off by more than {RELATIVE:g} "
                f"relative, worst {worst:.2e} ({urns[i].as_py()}: {want[i]!r} in memory, {got[i]!r} on Spark)"
            )
        check = Check(not notes, len(nodes), notes)
        check.notes.append(f"hotness: largest relative difference {worst:.1e}")
        checks["hotness"] = check
    return checks


# ---------------------------------------------------------------------- one size


@dataclass
class SparkRun:
    master: str
    figures: dict[str, Any] | None  # the worker's JSON, None when skipped or failed
    checks: dict[str, Check]
    note: str = ""


def run_worker(
    args: argparse.Namespace, master: str, lake: Path, analyses: list[str]
) -> tuple[dict | None, str]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        master,
        "--lake",
        str(lake),
        "--analyses",
        ",".join(analyses),
        "--shuffle-partitions",
        str(args.shuffle_partitions),
        "--driver-memory",
        args.driver_memory,
        "--limit",
        str(args.limit),
        "--workdir",
        str(args.workdir),
    ]
    errors = Path(args.workdir) / f"worker-{_tag(master)}-{lake.name}.log"
    result = None
    with (
        errors.open("w") as log,
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:  # progress lines go on to the log as they come
            if line.startswith("RESULT "):
                result = json.loads(line.removeprefix("RESULT "))
            else:
                print(line, end="", flush=True)
    if result is None:
        tail = errors.read_text()[-800:]
        return None, f"worker failed (exit {proc.returncode}; its stderr in {errors}): {tail}"
    return result, ""


def skipped(args: argparse.Namespace, master: str, edges: int) -> set[str]:
    """Analyses `--skip` takes out of this master's run at this size."""
    out: set[str] = set()
    for item in args.skip:
        where, _, analysis = item.partition(":")
        at, _, size = where.partition("@")
        if at == master and (not size or int(size) == edges):
            out |= {analysis} if analysis else set(ANALYSES)
    return out


def one_size(args: argparse.Namespace, edges: int) -> None:
    print(f"\n== {edges:,} field edges ==")
    began = time.perf_counter()
    snap, house = make_warehouse(edges, LABELS, SOURCES_PER_LABEL, args.seed)
    generated = time.perf_counter() - began
    print(house.summary + f" (seed {args.seed})")
    began = time.perf_counter()
    index = GraphIndex.from_snapshot(snap)
    built = time.perf_counter() - began

    lake = Path(tempfile.mkdtemp(prefix=f"lake-{edges}-", dir=args.workdir))
    began = time.perf_counter()
    rows = write_lake(snap, house.declared, lake)
    wrote = time.perf_counter() - began
    size = disk_size(lake)
    del snap
    gc.collect()
    print(
        f"one-off: warehouse generated {generated:.1f} s; GraphIndex.from_snapshot {built:.1f} s; lake "
        f"written (pyarrow, from the arrays) in {wrote:.1f} s, {size / 2**20:,.0f} MiB on disk "
        f"({', '.join(f'{name} {count:,}' for name, count in rows.items() if count)} rows) in {lake}"
    )

    # the in-memory answers
    memory: dict[str, float] = {}
    memory["propagation"], result = median_seconds(
        lambda: propagate(index, house.declared, RULES), args.repeat
    )
    labels, prop = propagation_expected(index, result)
    deepest = max(int(walk.dist.max()) for walk in result.walks.values())
    inferred = result.count()
    del result
    memory["hotness"], scores = median_seconds(lambda: memory_hotness(index), args.repeat)
    score = np.full(index.n_nodes, np.nan)
    for urn, value in scores:
        score[index.positions[urn]] = value
    del scores
    rng = np.random.default_rng(args.seed + 24)
    assets = np.flatnonzero(index.node_types == NODE_TYPES.index("asset"))
    roots = [
        index.urns[int(p)] for p in np.sort(rng.choice(assets, size=min(ROOTS, len(assets)), replace=False))
    ]
    memory["closures"], walks = median_seconds(
        lambda: [lineage(index, root, "downstream") for root in roots], args.repeat
    )
    keys = np.concatenate([r * index.n_nodes + w.nodes.astype(np.int64) for r, w in enumerate(walks)])
    hops = np.concatenate([w.hops.astype(np.int64) for w in walks])
    closure_deepest = int(hops.max())
    del walks
    expected = Expected(
        prop, labels, score, keyed(keys, hops), roots, deepest, inferred, len(keys), closure_deepest
    )
    (lake / "results").mkdir()
    (lake / "results" / "roots.json").write_text(json.dumps(roots))
    print(
        f"in memory: {inferred:,} inferred (node, label) pairs, deepest {deepest} hops; "
        f"{int(np.sum(~np.isnan(score))):,} assets scored; closures {len(keys):,} (root, node) rows, "
        f"deepest {closure_deepest} hops; median of {args.repeat} after one untimed"
    )

    urns = pa.array(index.urns, type=pa.string())
    runs: list[SparkRun] = []
    for master in args.masters:
        left_out = skipped(args, master, edges)
        wanted = [a for a in args.analyses if a not in left_out]
        if not wanted:
            runs.append(SparkRun(master, None, {}, f"skipped (--skip) at {edges:,} edges"))
            continue
        print(f"spark {master}: running {', '.join(wanted)} …", flush=True)
        figures, failure = run_worker(args, master, lake, wanted)
        checks = check_run(index, urns, expected, lake / "results", master) if figures else {}
        note = failure or (f"skipped (--skip): {', '.join(sorted(left_out))}" if left_out else "")
        runs.append(SparkRun(master, figures, checks, note))
    print_size(args, edges, index, memory, expected, runs)
    if not args.keep:
        shutil.rmtree(lake, ignore_errors=True)


def print_size(
    args: argparse.Namespace,
    edges: int,
    index: GraphIndex,
    memory: dict[str, float],
    expected: Expected,
    runs: list[SparkRun],
) -> None:
    for run in runs:
        if run.figures:
            print(run.figures["versions"])
            break
    header = f"{'analysis':<32}{'in-memory s':>13}" + "".join(
        f"{'spark ' + run.master + ' s':>20}" for run in runs
    )
    header += "   same answer"
    print(f"\n{edges:,} field edges ({index.n_nodes:,} nodes, {index.n_edges:,} edge versions)")
    print(header)
    print("-" * len(header))
    for name in args.analyses:
        cells = f"{TITLES[name]:<32}{memory[name]:>13,.2f}"
        verdicts = []
        for run in runs:
            record = (run.figures or {}).get("analyses", {}).get(name)
            if record is None:
                cells += f"{'skipped':>20}"
                continue
            if record.get("seconds") is None:
                over = "error" if "limit" not in record.get("error", "") else f"> {args.limit:g} min"
                cells += f"{over:>20}"
                continue
            cells += f"{record['seconds']:>20,.1f}"
            check = run.checks.get(name)
            verdicts.append(f"{run.master} {'yes' if check and check.same else 'NO'}")
        same = (
            "yes" if verdicts and all(v.endswith("yes") for v in verdicts) else "; ".join(verdicts) or "n/a"
        )
        print(f"{cells}   {same}")
    print(
        "in memory: one thread; the Spark figures are one timed run each after a small warm-up job: the "
        "analysis call plus writing its rows to Parquet"
    )
    for run in runs:
        print(f"\nspark {run.master}" + (f": {run.note}" if run.note else ""))
        if not run.figures:
            continue
        f = run.figures
        print(
            f"  session start {f['start']:.1f} s, read_lake {f['read_lake']:.2f} s, "
            f"warm-up {f['warmup']:.1f} s; shuffle partitions {f['partitions']}"
        )
        for name, record in f["analyses"].items():
            steps = record["steps"]
            counted = len(steps)
            finished = record.get("seconds") is not None
            if name == "hotness":
                what = f"{counted} iterations" + ("" if finished else " done before it stopped")
            elif finished:
                found = sum(1 for value in record["step_values"] if value.get("rows", 0) > 0)
                what = f"{counted} hops ({found} finding new pairs, then one finding none)"
            else:
                what = f"{counted} hops done before it stopped"
            timing = (
                f"call {record['call']:.1f} s + write {record['write']:.1f} s"
                if record.get("seconds") is not None
                else record.get("error", "")
            )
            per = ""
            if steps:
                rest = steps[1:] or steps
                per = (
                    f"; s per {STEP[name][:-1]}: first {steps[0]:.2f} (with the set-up), then median "
                    f"{statistics.median(rest):.2f}, max {max(rest):.2f}, mean {statistics.fmean(steps):.2f}"
                )
            print(f"  {name}: {what}{per}; {timing}")
            print(
                f"    shuffle written {record['shuffle_write'] / 2**20:,.1f} MiB, read "
                f"{record['shuffle_read'] / 2**20:,.1f} MiB"
            )
            check = run.checks.get(name)
            if check is not None:
                print(f"    same answer: {'yes' if check.same else 'NO'} ({check.rows:,} rows)")
                for note in check.notes:
                    print(f"    {note}")
    print(
        f"\nin memory for comparison: propagation deepest {expected.deepest} hops "
        f"({memory['propagation'] / max(expected.deepest, 1):.3f} s a hop on average); closures deepest "
        f"{expected.closure_deepest} hops (per root)"
    )


# ---------------------------------------------------------------------- export_lake on a real store


def bench_export(store_path: Path, workdir: Path) -> None:
    from tracelake.store import LineageStore
    from tracelake.store.lake import export_lake

    print(f"\n== export_lake on a copy of {store_path} ==")
    scratch = Path(tempfile.mkdtemp(prefix="export-", dir=workdir))
    try:
        copy = scratch / store_path.name
        began = time.perf_counter()
        shutil.copyfile(store_path, copy)
        print(f"copied ({store_path.stat().st_size / 2**20:,.0f} MiB) in {time.perf_counter() - began:.1f} s")
        folder = scratch / "lake"
        with LineageStore(str(copy)) as store:
            began = time.perf_counter()
            full = export_lake(store, folder)
            first = time.perf_counter() - began
            size = disk_size(folder)
            began = time.perf_counter()
            again = export_lake(store, folder)
            second = time.perf_counter() - began
        rows = ", ".join(f"{name} {count:,}" for name, count in full.rows.items() if count)
        print(
            f"full export:        {first:8.2f} s  (full={full.full}; {rows}; {size / 2**20:,.0f} MiB on disk)"
        )
        rows = ", ".join(f"{name} {count:,}" for name, count in again.rows.items() if count) or "nothing"
        print(
            f"incremental export: {second:8.2f} s  (full={again.full}; nothing ingested since; wrote {rows})"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--edges", default="1000000", help="field edges, comma-separated sizes (default 1000000)"
    )
    parser.add_argument(
        "--masters", default="local[1],local[2]", help="Spark masters (default local[1],local[2])"
    )
    parser.add_argument("--analyses", default=",".join(ANALYSES), help="which (default all three)")
    parser.add_argument("--repeat", type=int, default=3, help="timed in-memory runs (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="warehouse, labels and roots (default 1)")
    parser.add_argument(
        "--shuffle-partitions", type=int, default=0, help="spark.sql.shuffle.partitions (0: 2× the cores)"
    )
    parser.add_argument("--driver-memory", default="8g", help="spark.driver.memory (default 8g)")
    parser.add_argument(
        "--limit", type=float, default=25.0, help="minutes a Spark analysis may run before it is cancelled"
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="MASTER@EDGES[:ANALYSIS]",
        help="leave a Spark run (or one analysis of it) out, e.g. local[1]@10000000:hotness",
    )
    parser.add_argument("--store", type=Path, help="a store to time export_lake on (copied first)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "graphbench")
    parser.add_argument("--keep", action="store_true", help="keep the lakes and results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is None:
        args.edges = [int(size) for size in args.edges.split(",")]
        args.masters = args.masters.split(",")
        args.analyses = args.analyses.split(",")
        if unknown := set(args.analyses) - set(ANALYSES):
            parser.error(f"unknown analyses: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.worker:
        return worker(args)
    load_before = os.getloadavg()
    began = time.perf_counter()
    print(python_machine(f"numpy {np.__version__}, pyarrow {pa.__version__}"))
    print(f"command: {' '.join(sys.argv)}")
    if args.store:
        bench_export(args.store, args.workdir)
    for edges in args.edges:
        one_size(args, edges)
    print(f"\n{load_change(load_before)}; total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
