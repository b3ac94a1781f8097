"""How fast labels spread over a million column edges: `propagate` for 10 labels, beside a networkx walk.

A synthetic layered warehouse is built with numpy, straight into a `GraphSnapshot` (no store, no
SQLite): about `--edges` / 50 assets (20,000 by default) in 25 layers, 6–14 fields each (~10), one
process per derived asset reading 1–4 assets of earlier layers (the layer just before 75% of the
time, hub assets favoured), and `--edges` field→field edges (1,000,000) from its inputs' fields to
its own (low column numbers favoured: id columns become hubs). Field edges are 45% IDENTITY, 25%
TRANSFORMATION, 8% AGGREGATION (they carry labels) and 8% FILTER, 8% JOIN, 6% GROUP_BY (indirect:
they do not). Each process has one signal and one confidence for all its edges: 85% HIGH, 10%
MEDIUM, 5% LOW. The table-level edges implied by the field edges (one per asset pair) are added,
as the store holds them. Kinds: mostly `hive.table`, some `kafka.topic`, and `ai.model` from layer
3 on; from layer 8 on, 12% of the tables are in the `ads` database (`hive.table/ads.…`). Every
edge version is open. `GraphIndex.from_snapshot` builds the index, timed on its own. `--labels`
labels (10) are each declared on `--sources-per-label` (5) random fields of layers 0–1. Seeded.

The rules: min confidence MEDIUM, the carrying transformations (`CARRYING`), `ai.model` a stop
kind and `hive.table/ads.` a stop zone (reached, never left), no depth limit. In the same run:
  ours:     `propagate(index, declared, rules)` for all the labels, median and max of `--repeat`
            runs after a warm-up; then `Propagation.path` for 1,000 random inferred (node, label)
            pairs, each path checked (every step a crossable edge, from a declared field, as many
            hops as the walk's distance);
  baseline: what one writes without Tracelake: a `networkx.DiGraph` keyed by URN with the edge
            attributes (confidence rank, transformation), walked per label with a deque under the
            same rules (the stop check parses the node's asset and kind out of its URN), built
            once and timed apart; median and max of `--baseline-repeat` runs after a warm-up.
            (`nx.subgraph_view` with an edge filter walked by `nx.bfs_layers` is the more
            idiomatic way, but took 2.3× as long: the deque walk gives networkx its best chance);
  floor:    a BFS per label over an adjacency already pruned to the edges the rules let through
            (stop nodes keep no out-edge), so it checks nothing while walking: once in numpy
            (CSR, level by level, seen-set only) and once in Python (dict of lists, deque). It
            reaches the same nodes: the least any propagation must do.
Ours, the baseline and both floors must find the same (node, label) set ("same labels: yes"), and
the baseline the same hop distance for each. The issue's second figure, one discovery round from
100 sources, is printed as "not built yet": discovery sessions do not exist; `bench_discovery_round`
is where it goes. GC is paused while timing (collected between runs), as a server would be tuned.

    .venv/bin/python bench/discovery.py [--edges N] [--labels N] [--sources-per-label N] [--seed N]
                                        [--repeat N] [--baseline-repeat N] [--paths N]

Pure Python and numpy, one thread; about 25 s and under 1 GiB with the defaults, a third of it
building the warehouse and the networkx graph.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from machine import load_change, python_bfs, python_machine
from tracelake.graph import discovery
from tracelake.graph.index import GraphIndex
from tracelake.graph.propagate import CARRYING, Propagation, PropagationRules, propagate
from tracelake.model import Confidence, Signal, Transformation
from tracelake.store.records import NODE_TYPES, OPEN_END, TRANSFORMATION_CODES, GraphSnapshot

try:
    import networkx as nx
except ImportError:  # networkx is in the `bench` extra, not a dependency of tracelake
    nx = None

PROPAGATION_TARGET = 10.0  # seconds, all labels (from the issue)
ROUND_TARGET = 1.0  # seconds, one discovery round (from the issue)
ROUND_SOURCES = 100  # sources of that round (from the issue)

LAYERS = 25
EDGES_PER_ASSET = 50  # field edges per asset: sets the asset count from --edges
FIELDS = (6, 15)  # fields per asset, [low, high)
INPUTS = (1, 1, 2, 2, 2, 3, 4)  # input assets per derived asset, drawn uniformly
PREVIOUS_LAYER_SHARE = 0.75  # an input from the layer just before; the others from any earlier one
ADS_FROM_LAYER, ADS_SHARE = 8, 0.12  # tables in the `ads` database (the stop zone)
MODEL_FROM_LAYER = 3
SOURCE_KINDS = (("hive.table", 0.80), ("kafka.topic", 0.20))
DERIVED_KINDS = (("hive.table", 0.88), ("kafka.topic", 0.07), ("ai.model", 0.05))
TRANSFORM_MIX = (
    (Transformation.IDENTITY, 0.45),
    (Transformation.TRANSFORMATION, 0.25),
    (Transformation.AGGREGATION, 0.08),
    (Transformation.FILTER, 0.08),
    (Transformation.JOIN, 0.08),
    (Transformation.GROUP_BY, 0.06),
)
CONFIDENCE_MIX = ((Confidence.HIGH, 0.85), (Confidence.MEDIUM, 0.10), (Confidence.LOW, 0.05))
SIGNAL_MIX = ((Signal.SQL_STATIC, 0.6), (Signal.SPARK_RUNTIME, 0.3), (Signal.OPENLINEAGE, 0.1))
PROCESS_KIND = {Signal.SQL_STATIC: "sql", Signal.SPARK_RUNTIME: "spark", Signal.OPENLINEAGE: "openlineage"}
LABEL_NAMES = (
    "identity.user_id",
    "pii.email",
    "pii.phone",
    "religion",
    "health",
    "location",
    "finance.card",
    "biometric",
    "minor",
    "political",
)
DECLARED_LAYERS = 2  # labels are declared on fields of the first layers
OBSERVED_US = 1_717_200_000_000_000  # 2024-06-01, every edge's valid_from
RULES = PropagationRules(
    min_confidence=Confidence.MEDIUM,
    transformations=CARRYING,
    stop_kinds=frozenset({"ai.model"}),
    stop_zones=("hive.table/ads.",),
)

T = TypeVar("T")
Pairs = dict[str, set[str]]  # label → URNs that got it (declared nodes excepted)


# ---------------------------------------------------------------------- the synthetic warehouse


@dataclass
class Warehouse:
    declared: dict[str, list[str]]  # field URN → its labels
    summary: str
    round_sources: list[str]  # ROUND_SOURCES fields of the first layers, where a session starts


def draw(rng: np.random.Generator, mix: Sequence[tuple[T, float]], size: int) -> np.ndarray:
    """Indexes into `mix`, drawn with its weights."""
    weights = np.array([weight for _, weight in mix])
    return rng.choice(len(mix), size=size, p=weights / weights.sum())


def make_warehouse(
    n_edges: int, n_labels: int, sources_per_label: int, seed: int
) -> tuple[GraphSnapshot, Warehouse]:
    """The warehouse's snapshot (store ids = node positions + 1), and the labels declared on it."""
    rng = np.random.default_rng(seed)
    n_assets = max(LAYERS * 8, n_edges // EDGES_PER_ASSET)
    layer = np.arange(n_assets) * LAYERS // n_assets
    layer_start = np.searchsorted(layer, np.arange(LAYERS))
    layer_size = np.bincount(layer, minlength=LAYERS)

    # Kinds (codes into kind_names) and databases.
    kind_names = ("hive.table", "kafka.topic", "ai.model")
    source = layer == 0
    kind = np.where(
        source,
        draw(rng, SOURCE_KINDS, n_assets),
        draw(rng, DERIVED_KINDS, n_assets),
    )
    kind[(kind == 2) & (layer < MODEL_FROM_LAYER)] = 0
    ads = (kind == 0) & (layer >= ADS_FROM_LAYER) & (rng.random(n_assets) < ADS_SHARE)
    asset_urns = [
        f"{kind_names[k]}/{'ads' if a else f'l{lay:02d}'}.t{i:05d}"
        for i, (k, a, lay) in enumerate(zip(kind.tolist(), ads.tolist(), layer.tolist(), strict=True))
    ]

    # Fields: asset a owns fields field_start[a] … field_start[a] + n_fields[a] - 1, named c0, c1, …
    n_fields = rng.integers(*FIELDS, size=n_assets)
    field_start = np.zeros(n_assets, dtype=np.int64)
    np.cumsum(n_fields[:-1], out=field_start[1:])
    field_asset = np.repeat(np.arange(n_assets), n_fields)
    field_column = np.arange(len(field_asset)) - field_start[field_asset]

    # Each derived asset's input assets, the layer before most often, hubs (low indexes) favoured.
    derived = np.flatnonzero(~source)
    wanted = np.asarray(INPUTS)[rng.integers(0, len(INPUTS), size=len(derived))]
    reader = np.repeat(derived, wanted)
    back = np.where(
        rng.random(len(reader)) < PREVIOUS_LAYER_SHARE,
        1,
        1 + (rng.random(len(reader)) * layer[reader]).astype(np.int64),
    )
    from_layer = layer[reader] - back
    read = layer_start[from_layer] + (layer_size[from_layer] * rng.random(len(reader)) ** 2).astype(np.int64)
    pairs = np.unique(reader * n_assets + read)  # sorted by reader: a CSR of inputs per asset
    reader, read = pairs // n_assets, pairs % n_assets
    input_count = np.bincount(reader, minlength=n_assets)
    input_ptr = np.zeros(n_assets + 1, dtype=np.int64)
    np.cumsum(input_count, out=input_ptr[1:])

    # Field edges: a target field of a derived asset, one of its asset's inputs, a column of it
    # (low columns favoured). Distinct (source, target) pairs, exactly n_edges of them.
    derived_fields = np.flatnonzero(~source[field_asset])
    n_all = len(field_asset)
    keys = np.empty(0, dtype=np.int64)
    draws = int(n_edges * 1.3)
    while len(keys) < n_edges:
        target = derived_fields[rng.integers(0, len(derived_fields), size=draws)]
        owner = field_asset[target]
        chosen = read[input_ptr[owner] + (rng.random(draws) * input_count[owner]).astype(np.int64)]
        column = (rng.random(draws) ** 2 * n_fields[chosen]).astype(np.int64)
        keys = np.unique(np.concatenate([keys, (field_start[chosen] + column) * n_all + target]))
    keys = rng.permutation(keys)[:n_edges]
    f_source, f_target = keys // n_all, keys % n_all

    # One process per derived asset, one signal and one confidence for all its edges.
    process_of = np.full(n_assets, -1, dtype=np.int64)
    process_of[derived] = np.arange(len(derived))
    signals = [signal for signal, _ in SIGNAL_MIX]
    process_signal = draw(rng, SIGNAL_MIX, len(derived))
    process_rank = np.array([c.rank for c, _ in CONFIDENCE_MIX])[draw(rng, CONFIDENCE_MIX, len(derived))]
    codes = np.array([TRANSFORMATION_CODES[t] for t, _ in TRANSFORM_MIX], dtype=np.int8)
    f_transformation = codes[draw(rng, TRANSFORM_MIX, n_edges)]

    # Table-level edges: one per (input asset, output asset) pair the field edges use.
    asset_pairs = np.unique(field_asset[f_source] * n_assets + field_asset[f_target])
    a_source, a_target = asset_pairs // n_assets, asset_pairs % n_assets

    # Node positions: assets, then processes, then fields; store ids are positions + 1.
    n_processes = len(derived)
    field_base, process_base = n_assets + n_processes, n_assets
    n_nodes = field_base + n_all
    edge_source = np.concatenate([a_source, field_base + f_source])
    edge_target = np.concatenate([a_target, field_base + f_target])
    writer = np.concatenate([a_target, field_asset[f_target]])  # the asset whose process wrote it
    is_field = np.r_[np.zeros(len(a_source), bool), np.ones(n_edges, bool)]
    # The order ingest would give: process by process, its table edges first.
    order = np.lexsort((edge_target, edge_source, is_field, writer))
    edge_source, edge_target, writer, is_field = (
        a[order] for a in (edge_source, edge_target, writer, is_field)
    )
    transformation = np.r_[np.full(len(a_source), -1, np.int8), f_transformation][order]
    edge_process = process_base + process_of[writer]
    total = len(edge_source)

    process_urns = [f"spark.job/build_t{a:05d}" for a in derived.tolist()]
    field_urns = [
        f"{asset_urns[a]}#c{c}" for a, c in zip(field_asset.tolist(), field_column.tolist(), strict=True)
    ]
    asset_kinds = [kind_names[k] for k in kind.tolist()]
    node_kinds = (
        asset_kinds
        + [PROCESS_KIND[signals[s]] for s in process_signal.tolist()]
        + [asset_kinds[a] for a in field_asset.tolist()]
    )
    node_types = np.repeat(
        np.array([NODE_TYPES.index(t) for t in ("asset", "process", "field")], dtype=np.int8),
        [n_assets, n_processes, n_all],
    )
    node_parents = np.r_[np.full(n_assets + n_processes, -1, np.int64), field_asset + 1]
    snapshot = GraphSnapshot(
        version=1,
        node_ids=np.arange(1, n_nodes + 1, dtype=np.int64),
        node_urns=asset_urns + process_urns + field_urns,
        node_types=node_types,
        node_kinds=node_kinds,
        node_parents=node_parents,
        edge_ids=np.arange(1, total + 1, dtype=np.int64),
        edge_source=edge_source + 1,
        edge_target=edge_target + 1,
        edge_process=edge_process + 1,
        edge_signal=np.array([list(Signal).index(s) for s in signals], np.int8)[
            process_signal[process_of[writer]]
        ],
        edge_confidence=process_rank[process_of[writer]].astype(np.int8),
        edge_transformation=transformation,
        edge_valid_from=np.full(total, OBSERVED_US, dtype=np.int64),
        edge_valid_to=np.full(total, OPEN_END, dtype=np.int64),
    )

    # Labels, each on a few random fields of the first layers (neither a stop kind nor zone).
    early = np.flatnonzero(layer[field_asset] < DECLARED_LAYERS)
    declared: dict[str, list[str]] = {}
    names = label_names(n_labels)
    for name in names:
        for f in rng.choice(early, size=min(sources_per_label, len(early)), replace=False).tolist():
            declared.setdefault(field_urns[f], []).append(name)

    kinds = Counter(asset_kinds)
    ranks = Counter(snapshot.edge_confidence[is_field].tolist())
    by_rank = {c.rank: c.value for c in Confidence}
    f_conf = ", ".join(f"{by_rank[r]} {ranks[r] / n_edges:.0%}" for r in sorted(ranks, reverse=True))
    transforms = Counter(f_transformation.tolist())
    names_by_code = {code: t.value for t, code in TRANSFORMATION_CODES.items()}
    f_trans = ", ".join(f"{names_by_code[c]} {n / n_edges:.0%}" for c, n in transforms.most_common())
    summary = (
        f"graph: {n_nodes:,} nodes ({n_assets:,} assets in {LAYERS} layers, {n_all:,} fields, "
        f"{n_processes:,} processes), {total:,} edge versions ({n_edges:,} field→field, "
        f"{len(a_source):,} asset→asset), all open\n"
        f"  asset kinds: {', '.join(f'{k} {n:,}' for k, n in kinds.most_common())}; "
        f"{int(ads.sum()):,} tables in hive.table/ads.\n"
        f"  field edges: {f_trans}; confidence (per process) {f_conf}\n"
        f"  inputs per derived asset: mean {len(read) / len(derived):.2f}; field edges into a derived "
        f"field: mean {n_edges / len(derived_fields):.2f}\n"
        f"labels: {len(names)} ({', '.join(names)}), each declared on {sources_per_label} random fields "
        f"of layers 0–{DECLARED_LAYERS - 1} ({len(declared)} distinct fields)"
    )
    picked = rng.choice(early, size=min(ROUND_SOURCES, len(early)), replace=False).tolist()
    return snapshot, Warehouse(declared, summary, [field_urns[f] for f in picked])


def label_names(count: int) -> list[str]:
    return [LABEL_NAMES[i] if i < len(LABEL_NAMES) else f"label_{i:02d}" for i in range(count)]


# ---------------------------------------------------------------------- ours


def ours_pairs(result: Propagation) -> Pairs:
    urns = result.index.urns
    return {label: {urns[p] for p in walk.reached.tolist()} for label, walk in result.walks.items()}


def sample_paths(result: Propagation, count: int, seed: int) -> list[tuple[str, int]]:
    """`count` random inferred (label, position) pairs, drawn uniformly over all of them."""
    rng = np.random.default_rng(seed + 1)
    labels = list(result.walks)
    sizes = np.array([len(result.walks[label].reached) for label in labels])
    picks = rng.choice(int(sizes.sum()), size=min(count, int(sizes.sum())), replace=False)
    bounds = np.cumsum(sizes)
    out = []
    for pick in picks.tolist():
        which = int(np.searchsorted(bounds, pick, side="right"))
        offset = pick - (int(bounds[which - 1]) if which else 0)
        out.append((labels[which], int(result.walks[labels[which]].reached[offset])))
    return out


def check_paths(
    result: Propagation, picks: list[tuple[str, int]], declared: dict[str, list[str]], crossable: np.ndarray
) -> bool:
    """Every sampled path starts at a field declared with its label, follows crossable edges out
    of non-stop nodes, and has as many hops as the walk's distance."""
    index = result.index
    step_ok: dict[tuple[str, str], bool] = {}
    ok = True
    for label, position in picks:
        walk = result.walks[label]
        path = result.path(walk, position)
        ok &= label in declared.get(path[0], ()) and len(path) - 1 == int(walk.dist[position])
        for source, target in itertools.pairwise(path):
            s, t = index.positions[source], index.positions[target]
            if (source, target) not in step_ok:
                lo, hi = index.downstream.indptr[s], index.downstream.indptr[s + 1]
                slots = lo + np.flatnonzero(index.downstream.neighbours[lo:hi] == t)
                step_ok[(source, target)] = bool(crossable[index.downstream.edges[slots]].any())
            ok &= step_ok[(source, target)] and (source == path[0] or not walk.stopped[s])
    return bool(ok)


# ---------------------------------------------------------------------- baseline: networkx


def networkx_graph(index: GraphIndex) -> nx.DiGraph:
    """A DiGraph keyed by URN, each edge with its confidence rank and transformation name."""
    names = [t.value for t in Transformation]
    urns = index.urns
    graph = nx.DiGraph()
    graph.add_nodes_from(urns)  # fields without edges too: a label may be declared on one
    graph.add_edges_from(
        (urns[s], urns[t], {"confidence": c, "transformation": names[x] if x >= 0 else None})
        for s, t, c, x in zip(
            index.edge_source.tolist(),
            index.edge_target.tolist(),
            index.edge_confidence.tolist(),
            index.edge_transformation.tolist(),
            strict=True,
        )
    )
    return graph


def networkx_walk(graph: nx.DiGraph, starts: list[str], rules: PropagationRules) -> dict[str, int]:
    """Hop distance of every node a label reaches under `rules` (declared nodes at 0)."""
    min_rank = rules.min_confidence.rank
    allowed = {t.value for t in rules.transformations}
    stop_kinds, stop_zones = rules.stop_kinds, rules.stop_zones
    max_depth = rules.max_depth
    succ = graph.succ
    dist = dict.fromkeys(starts, 0)
    queue = deque(dist)
    while queue:
        node = queue.popleft()
        hops = dist[node]
        if max_depth is not None and hops >= max_depth:
            continue
        if hops:  # a declared node always passes its label on
            asset = node.partition("#")[0]
            if asset.partition("/")[0] in stop_kinds or asset.startswith(stop_zones):
                continue
        for neighbour, edge in succ[node].items():
            if neighbour in dist or edge["confidence"] < min_rank:
                continue
            transformation = edge["transformation"]
            if transformation is not None and transformation not in allowed:
                continue
            dist[neighbour] = hops + 1
            queue.append(neighbour)
    return dist


def networkx_all(graph: nx.DiGraph, starts: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    return {label: networkx_walk(graph, urns, RULES) for label, urns in starts.items()}


# ---------------------------------------------------------------------- floor: pruned BFS


def crossable_edges(index: GraphIndex, rules: PropagationRules) -> tuple[np.ndarray, np.ndarray]:
    """Edges a label may cross under `rules`, and the stop mask over nodes (computed as the
    rules read: kind of the node's asset, zone prefix of its asset's URN)."""
    allowed = np.array([t in rules.transformations for t in Transformation] + [False])
    ok = (index.edge_valid_to == OPEN_END) & (index.edge_confidence >= rules.min_confidence.rank)
    ok &= allowed[index.edge_transformation] | ~index.edge_is_field
    stop = np.zeros(index.n_nodes, dtype=bool)
    assets = np.flatnonzero(index.asset_of >= 0)
    asset_urns = [index.urns[a] for a in index.asset_of[assets].tolist()]
    stop[assets] = [
        urn.partition("/")[0] in rules.stop_kinds or urn.startswith(rules.stop_zones) for urn in asset_urns
    ]
    return ok, stop


def pruned_csr(index: GraphIndex, crossable: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """indptr and neighbours over the crossable edges leaving non-stop nodes."""
    keep = crossable & ~stop[index.edge_source]
    source, target = index.edge_source[keep], index.edge_target[keep]
    order = np.argsort(source, kind="stable")
    indptr = np.zeros(index.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(source, minlength=index.n_nodes), out=indptr[1:])
    return indptr, target[order]


def numpy_floor(indptr: np.ndarray, neighbours: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Reached positions (starts excluded): level-synchronous BFS, nothing but a seen mask."""
    seen = np.zeros(len(indptr) - 1, dtype=bool)
    seen[starts] = True
    frontier = starts
    while len(frontier):
        lo = indptr[frontier]
        counts = indptr[frontier + 1] - lo
        total = int(counts.sum())
        if total == 0:
            break
        slots = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
        found = neighbours[slots]
        found = found[~seen[found]]
        seen[found] = True
        frontier = np.unique(found)
    seen[starts] = False
    return np.flatnonzero(seen)


def dict_of_lists(indptr: np.ndarray, neighbours: np.ndarray) -> dict[int, list[int]]:
    degrees = np.diff(indptr)
    nodes = np.flatnonzero(degrees)
    return {int(v): neighbours[indptr[v] : indptr[v + 1]].tolist() for v in nodes.tolist()}


def python_floor(adjacency: dict[int, list[int]], starts: list[int]) -> set[int]:
    return python_bfs(adjacency, starts) - set(starts)


# ---------------------------------------------------------------------- timing and printing


def timed(action: Callable[[], T], repeat: int, warmup: int = 1) -> tuple[list[float], T]:
    """Seconds of `repeat` calls after `warmup` untimed ones, GC paused while timing; the last result."""
    result = None
    for _ in range(warmup):
        result = action()
    times = []
    for _ in range(repeat):
        del result
        gc.collect()
        gc.disable()
        try:
            began = time.perf_counter()
            result = action()
            times.append(time.perf_counter() - began)
        finally:
            gc.enable()
    return times, result  # type: ignore[return-value]


def once(action: Callable[[], T]) -> tuple[float, T]:
    began = time.perf_counter()
    result = action()
    return time.perf_counter() - began, result


def machine() -> str:
    networkx = nx.__version__ if nx is not None else "not installed"
    return python_machine(f"numpy {np.__version__}, networkx {networkx}; one thread")


def row(name: str, times: list[float] | None, pairs: int | None, note: str = "") -> None:
    if times is None:
        cells = f"{'n/a':>12}{'':>12}"
    else:
        cells = f"{statistics.median(times) * 1000:>12,.1f}{max(times) * 1000:>12,.1f}"
    count = f"{pairs:>16,}" if pairs is not None else f"{'':>16}"
    print(f"{name:<50}{cells}{count}  {note}".rstrip())


def same(a: Pairs, b: Pairs) -> str:
    return "yes" if a == b else "NO"


# ---------------------------------------------------------------------- the measurements


@dataclass
class Method:
    name: str
    times: list[float] | None  # None: not run
    pairs: Pairs | None
    note: str = ""


def declared_by_label(declared: dict[str, list[str]]) -> dict[str, list[str]]:
    starts: dict[str, list[str]] = {}
    for urn, labels in declared.items():
        for label in labels:
            starts.setdefault(label, []).append(urn)
    return starts


def run_floors(
    index: GraphIndex, starts: dict[str, list[str]], crossable: np.ndarray, stop: np.ndarray, repeat: int
) -> tuple[list[Method], str]:
    """Both floors, the rules applied once beforehand (untimed, reported as one-off)."""
    prune_seconds, (indptr, neighbours) = once(lambda: pruned_csr(index, crossable, stop))
    dict_seconds, adjacency = once(lambda: dict_of_lists(indptr, neighbours))
    positions = {label: np.array(sorted(index.positions[u] for u in urns)) for label, urns in starts.items()}
    np_times, np_reached = timed(
        lambda: {label: numpy_floor(indptr, neighbours, p) for label, p in positions.items()}, repeat
    )
    py_times, py_reached = timed(
        lambda: {label: python_floor(adjacency, p.tolist()) for label, p in positions.items()}, repeat
    )
    urns = index.urns
    methods = [
        Method(
            "floor: BFS over pre-pruned CSR, numpy",
            np_times,
            {label: {urns[p] for p in found.tolist()} for label, found in np_reached.items()},
        ),
        Method(
            "floor: BFS over pre-pruned dict of lists, Python",
            py_times,
            {label: {urns[p] for p in found} for label, found in py_reached.items()},
        ),
    ]
    return methods, f"pruned CSR for the floors {prune_seconds:.2f} s, its dict of lists {dict_seconds:.2f} s"


def run_baseline(
    index: GraphIndex, starts: dict[str, list[str]], result: Propagation, repeat: int
) -> tuple[Method, str]:
    """The networkx walk, and whether it finds ours' hop distances too."""
    name = "baseline: networkx DiGraph, a deque walk per label"
    if nx is None:
        return Method(name, None, None, "networkx not installed"), "networkx not installed"
    build_seconds, graph = once(lambda: networkx_graph(index))
    times, found = timed(lambda: networkx_all(graph, starts), repeat)
    same_dist = all(
        int(result.walks[label].dist[index.positions[urn]]) == hops
        for label, dist in found.items()
        for urn, hops in dist.items()
    )
    pairs = {label: {urn for urn, hops in dist.items() if hops > 0} for label, dist in found.items()}
    note = f"same hop distances: {'yes' if same_dist else 'NO'}"
    return Method(name, times, pairs, note), f"networkx DiGraph {build_seconds:.2f} s"


def bench_propagation(index: GraphIndex, house: Warehouse, args: argparse.Namespace) -> str:
    """Ours, the networkx baseline and the floors on every label; returns the target line."""
    declared = house.declared
    carrying = sorted(t.value for t in RULES.transformations)
    print(
        f"\n== full propagation of {args.labels} labels ==\nrules: min confidence "
        f"{RULES.min_confidence.value}, carrying {carrying}, stop kinds {sorted(RULES.stop_kinds)}, "
        f"stop zones {list(RULES.stop_zones)}, max depth {RULES.max_depth}"
    )

    times, result = timed(lambda: propagate(index, declared, RULES), args.repeat)
    ours = Method("ours: propagate (tracelake.graph.propagate)", times, ours_pairs(result))
    per_label = sorted(len(walk.reached) for walk in result.walks.values())
    stopped = sum(int(walk.stopped[walk.reached].sum()) for walk in result.walks.values())
    deepest = max(int(walk.dist.max()) for walk in result.walks.values())
    print(
        f"ours: {result.count():,} inferred (node, label) pairs; per label {per_label[0]:,} … "
        f"{statistics.median(per_label):,.0f} (median) … {per_label[-1]:,}; {stopped:,} of them at a stop "
        f"kind or zone; deepest {deepest} hops"
    )

    starts = declared_by_label(declared)
    crossable, stop = crossable_edges(index, RULES)
    assert not any(stop[index.positions[urn]] for urn in declared), "a declared field in a stop kind/zone"
    floors, floor_note = run_floors(index, starts, crossable, stop, args.repeat)
    baseline, baseline_note = run_baseline(index, starts, result, args.baseline_repeat)
    print(f"one-off, untimed below: {floor_note}; {baseline_note}")

    picks = sample_paths(result, args.paths, args.seed)
    path_times, _ = timed(lambda: [result.path(result.walks[label], p) for label, p in picks], args.repeat)
    hops = [int(result.walks[label].dist[p]) for label, p in picks]
    paths_ok = check_paths(result, picks, declared, crossable)

    print(f"\n{'method (all labels)':<50}{'median ms':>12}{'max ms':>12}{'(node, label)':>16}")
    print("-" * 90)
    for method in (ours, baseline, *floors):
        note = method.note
        if method is not ours and method.pairs is not None:
            note = f"same labels: {'yes' if method.pairs == ours.pairs else 'NO'}" + (note and f"; {note}")
        row(method.name, method.times, _size(method.pairs), note)

    median = statistics.median(times)
    ratios = []
    if baseline.times is not None:
        ratios.append(f"{statistics.median(baseline.times) / median:,.1f}× faster than the baseline")
    numpy_times, python_times = (floor.times or [float("nan")] for floor in floors)
    ratios.append(
        f"{median / statistics.median(numpy_times):,.2f}× the numpy floor's time, "
        f"{median / statistics.median(python_times):,.2f}× the Python floor's"
    )
    print(f"  ours: {'; '.join(ratios)}")
    path_median = statistics.median(path_times)
    print(
        f"  ours, {len(picks):,} paths rebuilt on demand (Propagation.path) for random inferred pairs: "
        f"{path_median * 1000:,.1f} ms median ({path_median / len(picks) * 1e6:,.1f} µs a path, "
        f"{statistics.mean(hops):.1f} hops on average, at most {max(hops)}); all valid: "
        f"{'yes' if paths_ok else 'NO'}"
    )
    verdict = "MET" if median < PROPAGATION_TARGET else "MISSED"
    return f"propagation < {PROPAGATION_TARGET:g} s: {median:.3f} s median, {max(times):.3f} s max: {verdict}"


def networkx_round(graph: nx.DiGraph, sources: list[str], threshold: int) -> tuple[set[str], set[str]]:
    """One discovery round walked in networkx: what strong flows reach, and the candidates behind
    weak ones (a node also reached strongly is no candidate)."""
    allowed = {t.value for t in CARRYING}
    reached, candidates = set(sources), set()
    queue = deque(sources)
    while queue:
        for neighbour, edge in graph.succ[queue.popleft()].items():
            transformation = edge["transformation"]
            if transformation is not None and transformation not in allowed:
                continue
            if edge["confidence"] >= threshold:
                if neighbour not in reached:
                    reached.add(neighbour)
                    candidates.discard(neighbour)
                    queue.append(neighbour)
            elif neighbour not in reached:
                candidates.add(neighbour)
    return reached - set(sources), candidates


def bench_discovery_round(index: GraphIndex, house: Warehouse, args: argparse.Namespace) -> str:
    """One round of a discovery session from ROUND_SOURCES fields: ours (`discovery.start` +
    `next_round`), the same walk in networkx, and the floor (the strong walk alone, pre-pruned)."""
    sources = house.round_sources
    threshold = Confidence.HIGH
    print(
        f"\n== one discovery round from {len(sources)} sources ==\nthreshold {threshold.value}: "
        "stronger flows are followed, weaker ones give candidates; carrying "
        f"{sorted(t.value for t in CARRYING)}"
    )

    def our_round() -> discovery.Session:
        session = discovery.start(index, "round", sources, threshold=threshold)
        discovery.next_round(index, session)
        return session

    times, session = timed(our_round, args.repeat)
    reached = {urn for urn, m in session.members.items() if m.state == "reached"}
    candidates = set(session.candidates)
    graph_seconds, graph = once(lambda: networkx_graph(index))
    nx_times, (nx_reached, nx_candidates) = timed(
        lambda: networkx_round(graph, sources, threshold.rank), args.baseline_repeat
    )
    strong_rules = PropagationRules(min_confidence=threshold, transformations=CARRYING)
    crossable, _ = crossable_edges(index, strong_rules)
    indptr, neighbours = pruned_csr(index, crossable, np.zeros(index.n_nodes, dtype=bool))
    starts = np.array(sorted(index.positions[urn] for urn in sources))
    floor_times, floor_reached = timed(lambda: numpy_floor(indptr, neighbours, starts), args.repeat)
    floor_set = {index.urns[int(p)] for p in floor_reached} - set(sources)
    print(
        f"ours: {len(reached):,} reached, {len(candidates):,} candidates; one-off, untimed below: "
        f"networkx DiGraph {graph_seconds:.2f} s"
    )
    same_nx = "yes" if (nx_reached, nx_candidates) == (reached, candidates) else "NO"
    print(f"\n{'method (one round)':<50}{'median ms':>12}{'max ms':>12}{'reached':>16}")
    print("-" * 90)
    row("ours: discovery.next_round", times, len(reached))
    row("baseline: networkx DiGraph, a deque walk", nx_times, len(nx_reached), f"same sets: {same_nx}")
    same_floor = "yes" if floor_set == reached else "NO"
    floor_note = f"same reached: {same_floor}"
    row("floor: BFS over pre-pruned strong CSR, numpy", floor_times, len(floor_set), floor_note)
    median = statistics.median(times)
    print(
        f"  ours: {statistics.median(nx_times) / median:,.1f}× faster than the baseline; "
        f"{median / statistics.median(floor_times):,.1f}× the floor's time"
    )
    verdict = "MET" if median < ROUND_TARGET else "MISSED"
    return f"discovery round < {ROUND_TARGET:g} s: {median:.3f} s median, {max(times):.3f} s max: {verdict}"


MEASUREMENTS = (bench_propagation, bench_discovery_round)


def _size(pairs: Pairs | None) -> int | None:
    return None if pairs is None else sum(len(urns) for urns in pairs.values())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000, help="field→field edges (default 1,000,000)")
    parser.add_argument("--labels", type=int, default=10, help="labels to propagate (default 10)")
    parser.add_argument(
        "--sources-per-label", type=int, default=5, help="declared fields per label (default 5)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the warehouse and labels (default 1)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs after a warm-up (default 5)")
    parser.add_argument(
        "--baseline-repeat", type=int, default=3, help="timed networkx runs after a warm-up (default 3)"
    )
    parser.add_argument("--paths", type=int, default=1_000, help="paths rebuilt (default 1,000)")
    args = parser.parse_args(argv)
    if (
        min(args.edges, args.labels, args.sources_per_label, args.repeat, args.baseline_repeat, args.paths)
        < 1
    ):
        parser.error("every count must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    began = time.perf_counter()
    print(machine())
    generated, (snapshot, house) = once(
        lambda: make_warehouse(args.edges, args.labels, args.sources_per_label, args.seed)
    )
    print(house.summary + f" (seed {args.seed})")
    began_build = time.perf_counter()
    index = GraphIndex.from_snapshot(snapshot)
    build_seconds = time.perf_counter() - began_build
    del snapshot  # the index holds its own arrays
    print(
        f"one-off: warehouse generated in {generated:.2f} s; GraphIndex.from_snapshot() {build_seconds:.2f} s"
    )

    targets = [measure(index, house, args) for measure in MEASUREMENTS]
    print("\ntargets")
    for line in targets:
        print(f"  {line}")
    print(f"{load_change(load_before)}; total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
