"""Store and traversal benchmark: bulk ingest into SQLite, then lineage on a 1M-edge lake.

(a) Ingest: a synthetic lake of processes, each writing one table from 1–4 inputs with
    10–50 edges (table edges plus column edges), one `LineageBatch` per process, ingested
    through `LineageStore.ingest` in chunks (one transaction each) into a fresh SQLite file.
    Then the same batches again: the idempotent path, which only moves `last_seen`.
(b) Traversal: a layered lake graph of ~1,000,000 edge versions loaded through the same
    `ingest`, the index build (snapshot + numpy CSR), then full downstream closures from a
    few representative starts, beside a plain in-memory BFS (dict of lists + deque) over the
    same edges and networkx's `descendants` when networkx is importable.

Sized for a 2-core machine; runs in a few minutes with the defaults. Every figure is printed
beside its baseline or target. `--quick` runs a small version of everything (a smoke test).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from machine import print_header, python_bfs
from tracelake.graph.index import GraphIndex
from tracelake.graph.traverse import lineage
from tracelake.model import Confidence, FlowEdge, LineageBatch, Signal, Transformation
from tracelake.store import LineageStore

try:
    import networkx as nx
except ImportError:  # networkx is in the `bench` extra, not a dependency of tracelake
    nx = None

INGEST_TARGET = 20_000  # edges/s
CLOSURE_TARGET_MS = 100.0
OBSERVED = datetime(2024, 6, 1, tzinfo=UTC)
TRANSFORMS = [
    Transformation.IDENTITY,
    Transformation.IDENTITY,
    Transformation.TRANSFORMATION,
    Transformation.AGGREGATION,
    Transformation.FILTER,
    Transformation.JOIN,
]
SIGNAL_MIX = [Signal.SQL_STATIC] * 6 + [Signal.SPARK_RUNTIME] * 3 + [Signal.OPENLINEAGE]
LAYERS = ["ods", "dwd", "dws", "ads", "app", "rpt", "ml", "srv"]


# ---------------------------------------------------------------------- the synthetic lake


@dataclass(slots=True)
class Table:
    urn: str
    layer: int
    columns: int


class LakeBuilder:
    """Builds processes layer by layer; inputs favour a few hub tables, as real lakes do.

    Each process writes one new table of layer L from 1–4 tables of layers < L (mostly
    L - 1), emits one table edge per input and column edges until its edge budget is
    spent: each output column comes from 1–2 input columns.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.tables: list[Table] = []
        self.by_layer: list[list[Table]] = []
        self.edge_count = 0

    def add_sources(self, count: int, layer: int = 0) -> None:
        while len(self.by_layer) <= layer:
            self.by_layer.append([])
        for i in range(count):
            table = Table(f"hive.table/{LAYERS[layer]}.src_{i}", layer, self.rng.randint(8, 30))
            self.tables.append(table)
            self.by_layer[layer].append(table)

    def _pick_input(self, layer: int) -> Table:
        rng = self.rng
        source_layer = layer - 1 if rng.random() < 0.75 or layer == 1 else rng.randrange(0, layer - 1)
        candidates = self.by_layer[source_layer]
        # Skew: the square of a uniform draw favours low indexes, which become hubs.
        return candidates[int(len(candidates) * rng.random() ** 2)]

    def process(self, number: int, layer: int, budget: int) -> LineageBatch:
        rng = self.rng
        while len(self.by_layer) <= layer:
            self.by_layer.append([])
        out = Table(f"hive.table/{LAYERS[layer % len(LAYERS)]}.t{number}", layer, 0)
        proc = f"spark.job/job_{number}"
        inputs = list(
            {t.urn: t for t in (self._pick_input(layer) for _ in range(rng.randint(1, 4)))}.values()
        )
        signal = rng.choice(SIGNAL_MIX)
        confidence = (
            Confidence.HIGH if signal is not Signal.SQL_STATIC or rng.random() < 0.9 else Confidence.LOW
        )
        edges = {(t.urn, out.urn): FlowEdge(t.urn, out.urn, proc, signal, confidence) for t in inputs}
        column = 0
        while len(edges) < budget:
            target = f"{out.urn}#c{column}"
            for _ in range(min(rng.randint(1, 2), budget - len(edges))):
                table = rng.choice(inputs)
                # (a repeated draw of the same input column is one edge, as the store keys it)
                source = f"{table.urn}#c{rng.randrange(table.columns)}"
                edges[(source, target)] = FlowEdge(
                    source, target, proc, signal, confidence, rng.choice(TRANSFORMS)
                )
            column += 1
        out.columns = max(column, 1)
        self.tables.append(out)
        self.by_layer[layer].append(out)
        self.edge_count += len(edges)
        return LineageBatch(edges=list(edges.values()), observed_at=OBSERVED)


def ingest_lake(processes: int, seed: int) -> list[LineageBatch]:
    """(a): `processes` processes of 10–50 edges over ~8 layers."""
    lake = LakeBuilder(seed)
    lake.add_sources(max(processes // 10, 10))
    per_layer = processes // 7 + 1
    return [lake.process(p, 1 + p // per_layer, lake.rng.randint(10, 50)) for p in range(processes)]


def traversal_lake(target_edges: int, seed: int) -> Iterator[list[LineageBatch]]:
    """(b): a layered lake of about `target_edges` edges, yielded in chunks of batches."""
    lake = LakeBuilder(seed)
    mean_budget = 24  # 10–38 edges a process
    processes = target_edges // mean_budget
    lake.add_sources(max(processes // 12, 10))
    per_layer = processes // 7 + 1
    chunk: list[LineageBatch] = []
    for p in range(processes):
        chunk.append(lake.process(p, 1 + p // per_layer, lake.rng.randint(10, 2 * mean_budget - 10)))
        if len(chunk) == 2000:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# ---------------------------------------------------------------------- measuring


def chunked(items: list[LineageBatch], size: int) -> Iterator[list[LineageBatch]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def latencies(fn: Callable[[], object], repeats: int, warmup: int = 3) -> tuple[float, float]:
    """Median and p95 in milliseconds, once warm; GC off while timing, as a server tunes it."""
    for _ in range(warmup):
        fn()
    samples = []
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
            gc.collect(0)
    finally:
        gc.enable()
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]


def rule(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 86 - len(title)))


# ---------------------------------------------------------------------- (a) ingest


def bench_ingest(workdir: Path, processes: int, chunk: int, seed: int) -> None:
    rule("(a) bulk ingest into SQLite")
    batches = ingest_lake(processes, seed)
    edges = sum(len(b.edges) for b in batches)
    field_edges = sum(1 for b in batches for e in b.edges if "#" in e.source)
    print(
        f"{processes:,} processes, {edges:,} edges ({edges - field_edges:,} table, {field_edges:,} column), "
        f"one LineageBatch per process, {chunk} batches per ingest() call (one transaction each)"
    )
    with LineageStore(f"sqlite:///{workdir / 'ingest.db'}") as store:
        first, _ = timed(lambda: [store.ingest(c) for c in chunked(batches, chunk)])
        again, reports = timed(lambda: [store.ingest(c) for c in chunked(batches, chunk)])
        counts = store.counts()
    added = sum(r.edges_added for r in reports)  # type: ignore[attr-defined]
    assert added == 0, f"re-ingest added {added} edges: not idempotent"
    assert counts["edge_versions"] == edges, counts
    print(f"store now: {counts}")
    print(f"{'':28}{'seconds':>10}{'edges/s':>12}{'target':>12}  verdict")
    for name, seconds in (("first ingest", first), ("re-ingest (idempotent)", again)):
        rate = edges / seconds
        verdict = "ok" if rate >= INGEST_TARGET else "BELOW TARGET"
        print(f"{name:28}{seconds:>10.2f}{rate:>12,.0f}{INGEST_TARGET:>12,}  {verdict}")


# ---------------------------------------------------------------------- (b) traversal


def python_adjacency(index: GraphIndex) -> dict[int, list[int]]:
    """The floor: a dict of lists over the open edges, what a hand-written BFS would use."""
    open_edges = np.flatnonzero(index.edge_valid_to == np.iinfo(np.int64).max)
    adjacency: dict[int, list[int]] = {}
    for source, target in zip(
        index.edge_source[open_edges].tolist(), index.edge_target[open_edges].tolist(), strict=True
    ):
        adjacency.setdefault(source, []).append(target)
    return adjacency


def networkx_closure(graph: nx.DiGraph, starts: list[int]) -> set[int]:
    """networkx has no multi-source `descendants`: several starts hang under a virtual root,
    added before timing (as a caller would keep it)."""
    if len(starts) == 1:
        return nx.descendants(graph, starts[0]) | {starts[0]}
    return nx.descendants(graph, -1) | set(starts)


def pick_starts(index: GraphIndex) -> list[tuple[str, list[str]]]:
    """Representative starts: a hub source table (largest fan-out at the top), a typical
    mid-layer table, a hub source column, then every source table at once and every source
    table and column at once (multi-root closures over most of the graph)."""
    out_degree = np.diff(index.downstream.indptr)
    urns = index.urns
    source_tables = np.array([u.startswith("hive.table/ods.src_") and "#" not in u for u in urns])
    source_columns = np.array([u.startswith("hive.table/ods.src_") and "#" in u for u in urns])
    mid_tables = np.array([u.startswith("hive.table/dws.") and "#" not in u for u in urns])
    picks: list[tuple[str, list[str]]] = []
    tables = np.flatnonzero(source_tables)
    columns = np.flatnonzero(source_columns)
    mids = np.flatnonzero(mid_tables)
    if len(tables):
        picks.append(("source table (hub)", [urns[tables[np.argmax(out_degree[tables])]]]))
    if len(mids):
        # the 90th percentile by fan-out: a busy but ordinary mid-layer table
        ranked = mids[np.argsort(out_degree[mids], kind="stable")]
        picks.append(("mid-layer table", [urns[ranked[int(len(ranked) * 0.9)]]]))
    if len(columns):
        picks.append(("source column (hub)", [urns[columns[np.argmax(out_degree[columns])]]]))
    if len(tables):
        picks.append((f"{len(tables):,} source tables", [urns[p] for p in tables]))
        both = np.concatenate([tables, columns])
        picks.append((f"{len(both):,} src tables+cols", [urns[p] for p in both]))
    return picks


def bench_traversal(workdir: Path, target_edges: int, repeats: int, seed: int) -> None:
    rule(f"(b) traversal on a {target_edges:,}-edge layered lake")
    with LineageStore(f"sqlite:///{workdir / 'traverse.db'}") as store:
        loaded = 0
        start = time.perf_counter()
        for batches in traversal_lake(target_edges, seed):
            store.ingest(batches)
            loaded += sum(len(b.edges) for b in batches)
        load_seconds = time.perf_counter() - start
        print(
            f"loaded {loaded:,} edges through LineageStore.ingest (chunks of 2,000 process batches) "
            f"in {load_seconds:.1f} s = {loaded / load_seconds:,.0f} edges/s"
        )
        version_seconds, _ = timed(store.graph_version)
        start = time.perf_counter()
        snap = store.snapshot()
        snapshot_seconds = time.perf_counter() - start
    start = time.perf_counter()
    index = GraphIndex.from_snapshot(snap)
    build_seconds = time.perf_counter() - start
    del snap  # the index holds its own arrays
    print(f"graph: {index.n_nodes:,} nodes, {index.n_edges:,} edge versions")
    print(f"{'index step':40}{'seconds':>10}")
    print(f"{'store.graph_version() (refresh check)':40}{version_seconds:>10.4f}")
    print(f"{'store.snapshot()':40}{snapshot_seconds:>10.2f}")
    print(f"{'GraphIndex.from_snapshot()':40}{build_seconds:>10.2f}")
    print(f"{'from_store total':40}{snapshot_seconds + build_seconds:>10.2f}")

    adjacency_seconds, adjacency_obj = timed(lambda: python_adjacency(index))
    adjacency: dict[int, list[int]] = adjacency_obj  # type: ignore[assignment]
    graph = None
    nx_build = float("nan")
    if nx is not None:
        open_edges = np.flatnonzero(index.edge_valid_to == np.iinfo(np.int64).max)
        nx_build, graph = timed(
            lambda: nx.DiGraph(
                zip(
                    index.edge_source[open_edges].tolist(),
                    index.edge_target[open_edges].tolist(),
                    strict=True,
                )
            )
        )
    nx_text = f"{nx_build:.2f} s" if graph is not None else "networkx not installed"
    print(f"baselines built: dict-of-lists {adjacency_seconds:.2f} s, networkx DiGraph {nx_text}")

    print(
        f"\nfull downstream closure, {repeats} repeats once warm, milliseconds (median / p95); "
        f"target < {CLOSURE_TARGET_MS:.0f} ms"
    )
    header = (
        f"{'start':24}{'reached':>9}{'edges':>11}  {'tracelake':>15}  {'python BFS':>15}  {'networkx':>15}"
    )
    print_header(header)
    picks = pick_starts(index)
    for label, starts in picks:
        positions = [index.positions[urn] for urn in starts]
        result = lineage(index, starts, "downstream")
        floor = python_bfs(adjacency, positions)
        assert set(result.nodes.tolist()) == floor, f"closure of {label} differs from the plain BFS"
        ours = latencies(lambda starts=starts: lineage(index, starts, "downstream"), repeats)
        plain = latencies(lambda positions=positions: python_bfs(adjacency, positions), repeats)
        nx_cell = "n/a"
        if graph is not None:
            if len(positions) > 1:
                graph.add_edges_from((-1, p) for p in positions)
            assert networkx_closure(graph, positions) == floor
            theirs = latencies(lambda positions=positions: networkx_closure(graph, positions), repeats)
            if len(positions) > 1:
                graph.remove_node(-1)
            nx_cell = f"{theirs[0]:7.1f} /{theirs[1]:6.1f}"
        verdict = "ok" if ours[0] < CLOSURE_TARGET_MS else "SLOW"
        print(
            f"{label:24}{len(result):>9,}{len(result.edges):>11,}  {ours[0]:7.1f} /{ours[1]:6.1f}"
            f"  {plain[0]:7.1f} /{plain[1]:6.1f}  {nx_cell:>15}  {verdict}"
        )
    print()
    for label, starts in picks[:3]:
        print(f"  {label}: {starts[0]}")

    mixed = [starts[0] for _, starts in picks[:3]]
    multi = latencies(lambda: lineage(index, mixed, "both"), repeats)
    print(
        f"\nthe first three starts in one query, upstream and downstream: "
        f"{multi[0]:.1f} / {multi[1]:.1f} ms (median / p95)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=10_000, help="(a) processes to ingest")
    parser.add_argument("--chunk", type=int, default=500, help="(a) batches per ingest() call")
    parser.add_argument("--edges", type=int, default=1_000_000, help="(b) edges in the traversal lake")
    parser.add_argument("--repeats", type=int, default=20, help="(b) timed closures per start")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a small smoke run of both parts")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--skip-traversal", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.processes, args.edges, args.repeats = 500, 30_000, 5
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        workdir = Path(tmp)
        if not args.skip_ingest:
            bench_ingest(workdir, args.processes, args.chunk, args.seed)
        if not args.skip_traversal:
            bench_traversal(workdir, args.edges, args.repeats, args.seed)


if __name__ == "__main__":
    main()
