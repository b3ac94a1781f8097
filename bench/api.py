"""The HTTP API under load on loopback: depth-5 lineage queries and OpenLineage ingest, 1M-edge store.

The store: `bench/store.py`'s layered synthetic lake (`traversal_lake`: ~1,000,000 edge versions,
~10% table edges, ~90% column edges, 8 layers), loaded through `LineageStore.ingest` into a SQLite
file, or reused from `--store` when this bench built it for the same size and seed (a `.bench.json`
beside it says so). The server is `create_app(Tracelake(LineageStore(path)))` under uvicorn with the
settings of `tracelake serve` (one worker; asyncio and h11 unless uvloop/httptools are installed),
in a process of its own, so the clients' GIL is not the server's; as under `tracelake serve`, it
writes ingested events through its writer process. Clients are threads, each with
one keep-alive connection, sending back to back (a closed loop, no think time) for a bounded time.
Clients, server and the in-process measurements all share this machine's cores; the `cpu` columns
say how much of a core the server (API and writer processes) and the clients used.

(a) Queries: GET /api/tracelake/v1/lineage?node=…&direction=…&depth=5 from `--clients` (8)
`requests.Session`s for `--seconds` (20) per direction, cycling over `--starts` (200) starts a
direction: half tables, half columns, drawn uniformly among the nodes that have lineage that way in
the middle layers (dwd/dws downstream, app/rpt upstream: depth 5 then spans most of the lake). Then
one client alone (the service time without queueing) and Marquez's GET /api/v1/lineage?nodeId=
dataset:hive:…&depth=5 (both ways, the tables among the starts) for at most 10 s. Last, the
baseline of the concurrent loads: the same downstream load on a server that lets every read
through at once (no read gate, `api.gate`: FastAPI's thread pool alone, as before it). One query builds
the server's index before any clock starts; a pass over every start then checks each answer's node
and edge counts against the floor's and records the result sizes. In the same run, in this process,
one start at a time, each checked against the floor too:
  ours:     `Tracelake.lineage(...).to_json()`, what the route calls, without HTTP;
  baseline: what one writes without Tracelake's index: a recursive CTE over the store's `edges`
            (open versions: valid_to IS NULL) with a depth column, then the rows of the nodes
            reached and the edges out of those nearer than 5 hops, URNs joined in (the same nodes
            and edges the API returns); Python's sqlite3 on the same file, at most 15 s a direction;
  floor:    a depth-limited BFS over a dict of lists of the open edges built in advance: node ids
            only, no URN, no attributes, no JSON.
(b) Ingest: `--ingest-clients` (8) clients POST distinct OpenLineage RunEvents (COMPLETE, a unique
job and run id each, 2 existing lake tables in, a new table out, 3 output fields with
columnLineage) to the Marquez-compatible POST /api/v1/lineage, one event a request, for
`--ingest-seconds` (15), into a copy of the store (the query store is left as it was). These
clients use `http.client`: a `requests` call costs ~0.65 ms of CPU, which on 2 cores would take a
core from the server at these rates. The server reports its CPU time and its writer's transactions
and CPU time. Then the server is stopped and the copy
read: every job answered 201 must be a node `openlineage.job/<namespace>/<name>` and its run a row
of `runs` ("no lost event"). In the same run, in this process, one thread, on the same copy:
  baseline: the same kind of events, `event_to_batch` + `LineageStore.ingest` one transaction each
            (what the server would do without group commit), for at most 10 s;
  ceiling:  the same, 500 events a transaction (no HTTP, no waiting: what group commit tends to).

(c) Mixed: half the query clients ask downstream lineage while 2 clients post an event every
100 ms each, into another copy; beside them a probe posts one more event a second and asks for
its first input's downstream every 20 ms until the answer has the event's output: the seconds
from the 201 to that answer are how soon a committed write is visible (the server's index
caught up from the store's change log, `graph.catch_up`).

Targets (issue 7): p99 < 200 ms for depth-5 lineage queries under the concurrent load; ≥ 1,000
OpenLineage events/s ingested, none lost. Issue 21: a write visible within 1 s under load.

    .venv/bin/python bench/api.py [--edges N] [--store PATH] [--clients N] [--seconds S]
                                  [--ingest-clients N] [--ingest-seconds S] [--starts N]
                                  [--seed N] [--quick]

Building the 1M-edge store takes about 40 s (keep it with `--store`); a run on a built store takes
about 2 minutes 20 s. `--quick`: ~50,000 edges, 3 s loads, 60 starts, under 30 s (a smoke test).
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing
import os
import random
import socket
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import numpy as np
import requests

from machine import load_change, print_header, python_machine
from store import traversal_lake
from tracelake.app.service import Tracelake, TraversalFilters
from tracelake.collect.openlineage import event_to_batch
from tracelake.graph.index import ASSET, FIELD, GraphIndex
from tracelake.store import LineageStore

DEPTH = 5
QUERY_TARGET_MS = 200.0
FRESH_TARGET_S = 1.0  # a write acknowledged, visible to the next query (issue 21)
INGEST_TARGET = 1_000  # events/s
STARTS = {"downstream": ("dwd", "dws"), "upstream": ("app", "rpt")}  # layers 1–2 and 4–5 of 0–7
DIRECTIONS = tuple(STARTS)
NAMESPACE = "tracelake-bench"  # the posted jobs' OpenLineage namespace
PRODUCER = "https://example.com/tracelake-bench"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
COLUMN_LINEAGE_SCHEMA = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
QUERY_PATH = "/api/tracelake/v1/lineage"
MARQUEZ_PATH = "/api/v1/lineage"


def rule(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 96 - len(title)), flush=True)


# ---------------------------------------------------------------------- the store


def meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".bench.json")


def ensure_store(path: Path, edges: int, seed: int) -> None:
    """Build the lake into `path`, or reuse it when this bench built it for the same size and seed."""
    wanted = {"edges": edges, "seed": seed}
    meta = meta_path(path)
    if path.exists():
        if not meta.exists():
            sys.exit(f"{path} exists but was not built by this bench (no {meta.name}); pass another --store")
        built = json.loads(meta.read_text())
        if {k: built.get(k) for k in wanted} != wanted:
            sys.exit(f"{path} was built for {built}, not {wanted}; pass another --store or delete it")
        print(f"store: reusing {path} ({built['loaded']:,} edges, built in {built['seconds']:.0f} s)")
        return
    loaded = 0
    began = time.perf_counter()
    with LineageStore(str(path)) as store:
        for batches in traversal_lake(edges, seed):
            store.ingest(batches)
            loaded += sum(len(b.edges) for b in batches)
    seconds = time.perf_counter() - began
    meta.write_text(json.dumps({**wanted, "loaded": loaded, "seconds": seconds}))
    print(
        f"store: built {path}: {loaded:,} edges through LineageStore.ingest (bench/store.py's lake) "
        f"in {seconds:.1f} s = {loaded / seconds:,.0f} edges/s"
    )


def copy_store(source: Path, target: Path) -> float:
    """A consistent copy (SQLite's backup API, WAL included); seconds taken."""
    began = time.perf_counter()
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()
    return time.perf_counter() - began


# ---------------------------------------------------------------------- starts and the floor


def layer_of(urn: str) -> str:
    return urn.partition("/")[2].partition(".")[0]


def sample_starts(index: GraphIndex, direction: str, count: int, rng: random.Random) -> list[str]:
    """Half tables, half columns, drawn uniformly among the nodes of the middle layers that have
    lineage that way: dwd and dws downstream, app and rpt upstream (depth 5 then spans most of the
    lake's eight layers); a node with no edge that way has nothing to time."""
    layers = STARTS[direction]
    adjacency = index.downstream if direction == "downstream" else index.upstream
    has_edges = np.diff(adjacency.indptr) > 0
    urns = index.urns
    picked: list[str] = []
    for node_type, share in ((ASSET, count // 2), (FIELD, count - count // 2)):
        candidates = [
            urns[p]
            for p in np.flatnonzero((index.node_types == node_type) & has_edges)
            if layer_of(urns[p]) in layers
        ]
        picked += rng.sample(candidates, min(len(candidates), share))
    rng.shuffle(picked)
    return picked


def adjacencies(index: GraphIndex) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Downstream and upstream dicts of lists over the open edges: the floor's graph."""
    open_edges = np.flatnonzero(index.edge_valid_to == np.iinfo(np.int64).max)
    down: dict[int, list[int]] = {}
    up: dict[int, list[int]] = {}
    sources = index.edge_source[open_edges].tolist()
    targets = index.edge_target[open_edges].tolist()
    for source, target in zip(sources, targets, strict=True):
        down.setdefault(source, []).append(target)
        up.setdefault(target, []).append(source)
    return down, up


def bfs_depth(adjacency: dict[int, list[int]], start: int, depth: int) -> tuple[int, int]:
    """Nodes within `depth` hops (start included) and edges crossed (out of nodes nearer than it)."""
    seen = {start}
    frontier = [start]
    crossed = 0
    for _ in range(depth):
        following = []
        for node in frontier:
            out = adjacency.get(node, ())
            crossed += len(out)
            for neighbour in out:
                if neighbour not in seen:
                    seen.add(neighbour)
                    following.append(neighbour)
        if not following:
            break
        frontier = following
    return len(seen), crossed


# ---------------------------------------------------------------------- figures


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q% of the values at or below it."""
    if not sorted_values:
        return float("nan")
    return sorted_values[max(0, math.ceil(q / 100 * len(sorted_values)) - 1)]


@dataclass
class Load:
    """What a bounded closed-loop load gave: per-request latencies (ms) of the successes."""

    clients: int
    seconds: float = 0.0  # wall time, first request sent to last answer received
    latencies: list[float] = field(default_factory=list)
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    server_cpu: float = 0.0  # CPU seconds of the server's processes (API and writer, every thread)
    client_cpu: float = 0.0  # and of this process (the clients)
    groups: int = 0  # group-commit transactions during the load
    writer_cpu: float = 0.0  # CPU seconds of the writer process (receiving, ingest, answering)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def p(self, q: float) -> float:
        return percentile(self.latencies, q)


class RawClient:
    """One keep-alive HTTP/1.1 connection of the standard library: about a fifth of the CPU a
    `requests` call takes, which matters when clients and server share two cores."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port
        self.connection: http.client.HTTPConnection | None = None

    def post(self, path: str, body: bytes) -> int:
        reused = self.connection is not None
        try:
            return self._post(path, body)
        except (OSError, http.client.HTTPException):
            self.close()
            if not reused:
                raise
        # a kept-alive connection the server closed while this client waited (uvicorn closes
        # one idle for 5 s): once more on a new one, as HTTP clients do
        return self._post(path, body)

    def _post(self, path: str, body: bytes) -> int:
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            self.connection.request("POST", path, body, {"Content-Type": "application/json"})
            response = self.connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            self.close()  # the next call reconnects
            raise

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def run_load(
    url: str,
    clients: int,
    seconds: float,
    request: Callable[[Any, int, int], bool | str],
    connect: Callable[[], Any] = requests.Session,
) -> Load:
    """`clients` threads, each with its own keep-alive connection (`connect()`), calling
    `request(connection, client, n)` back to back until `seconds` have passed; True is a success, a
    string names a failure. The server at `url` is asked for its CPU time and group commits before
    and after."""
    result = Load(clients)
    server_before, client_before = stats(url), time.process_time()
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    deadline = [0.0]

    def client(number: int) -> None:
        session = connect()
        mine: list[float] = []
        failures: dict[str, int] = {}
        barrier.wait()
        n = 0
        while time.perf_counter() < deadline[0]:
            began = time.perf_counter()
            try:
                outcome = request(session, number, n)
            except (OSError, http.client.HTTPException) as error:  # requests' errors are OSErrors
                outcome = type(error).__name__
            if outcome is True:
                mine.append((time.perf_counter() - began) * 1000)
            else:
                failures[str(outcome)] = failures.get(str(outcome), 0) + 1
            n += 1
        session.close()
        with lock:
            result.latencies.extend(mine)
            for reason, count in failures.items():
                result.failures[reason] = result.failures.get(reason, 0) + count
                result.failed += count

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - began
    result.latencies.sort()
    server_after, result.client_cpu = stats(url), time.process_time() - client_before
    result.writer_cpu = server_after["writer_cpu"] - server_before["writer_cpu"]
    result.server_cpu = server_after["cpu"] - server_before["cpu"] + result.writer_cpu
    result.groups = server_after["groups"] - server_before["groups"]
    return result


def print_load_header(rate: str) -> None:
    """The columns of `load_row`, and a rule under them."""
    columns = "".join(f"{name:>9}" for name in ("requests", rate, "p50", "p90", "p99", "max"))
    print_header(f"{'load':46}{'cl.':>4}{columns}{'failed':>8}{'srv cpu':>9}{'cli cpu':>9}")


def load_row(label: str, load: Load) -> None:
    print(
        f"{label:46}{load.clients:>4}{len(load.latencies):>9,}{load.rate:>9.1f}"
        f"{load.p(50):>9.1f}{load.p(90):>9.1f}{load.p(99):>9.1f}{load.p(100):>9.1f}{load.failed:>8,}"
        f"{load.server_cpu / load.seconds:>9.0%}{load.client_cpu / load.seconds:>9.0%}"
    )
    for reason, count in sorted(load.failures.items()):
        print(f"    failed: {count:,} × {reason}")


def timing_row(label: str, samples: list[float], total: int) -> None:
    samples = sorted(samples)
    done = f"{len(samples):,}" + ("" if len(samples) == total else f" of {total:,}")
    print(
        f"{label:46}{done:>13}{percentile(samples, 50):>9.2f}{percentile(samples, 90):>9.2f}"
        f"{percentile(samples, 99):>9.2f}{percentile(samples, 100):>9.2f}"
    )


# ---------------------------------------------------------------------- the server process


def _serve(db_path: str, ports: Any, read_concurrency: int | None) -> None:
    """In the server process: the app on a fresh loopback socket, its port sent back."""
    import uvicorn
    from fastapi import FastAPI

    from tracelake.api.app import ApiSettings, create_app
    from tracelake.app.service import Tracelake

    store = LineageStore(db_path)
    service = Tracelake(store)
    settings = ApiSettings() if read_concurrency is None else ApiSettings(read_concurrency=read_concurrency)
    app: FastAPI = create_app(service, settings)

    @app.get("/_bench/stats")
    def stats() -> dict[str, Any]:  # the bench's own probe, not part of the API
        return {
            "groups": service.writer_stats.groups,
            "index_builds": service._indexes.builds,
            "index_catch_ups": service._indexes.catch_ups,
            "cpu": time.process_time(),  # the API process's CPU seconds, every thread
            "writer_cpu": service.writer_stats.cpu_seconds,  # the writer process's, as of its last answer
        }

    # IPPROTO_TCP, as uvicorn's own bind makes it: asyncio sets TCP_NODELAY only on sockets that
    # say so, and without it small answers wait ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    ports.put((os.getpid(), sock.getsockname()[1]))
    # tracelake.api.server.serve_forever's settings (log level aside), on the socket bound above
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def server_process(db_path: Path, read_concurrency: int | None = None) -> Iterator[str]:
    """The app serving `db_path` in a child process (with `tracelake serve`'s settings, or reads
    let through `read_concurrency` at a time); yields its base URL, stops it (SIGTERM: uvicorn's
    graceful shutdown) at the end."""
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    process = context.Process(
        target=_serve, args=(str(db_path), ports, read_concurrency), name="tracelake-api-bench"
    )
    process.start()
    try:
        pid, port = ports.get(timeout=60)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url + "/_bench/stats", timeout=5).raise_for_status()
                break
            except requests.RequestException:
                if time.monotonic() > deadline or not process.is_alive():
                    raise RuntimeError("the HTTP server did not start") from None
                time.sleep(0.05)
        print(f"server: pid {pid}, {url}, uvicorn in its own process", flush=True)
        yield url
    finally:
        process.terminate()
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()


def stats(url: str) -> dict[str, Any]:
    return requests.get(url + "/_bench/stats", timeout=30).json()  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- queries


CTE = """
WITH RECURSIVE reach(id, depth) AS (
    SELECT id, 0 FROM nodes WHERE urn = :start
    UNION
    SELECT e.{far}, r.depth + 1
    FROM reach AS r JOIN edges AS e ON e.{near} = r.id
    WHERE r.depth < :depth AND e.valid_to IS NULL
)
SELECT id, MIN(depth) FROM reach GROUP BY id
"""
NODES = "SELECT urn, node_type, kind, owner, layer, labels FROM nodes WHERE id IN ({ids})"
EDGES = """
SELECT s.urn, t.urn, p.urn, e.signal, e.confidence, e.transformation, e.valid_from
FROM edges AS e
JOIN nodes AS s ON s.id = e.source_id JOIN nodes AS t ON t.id = e.target_id
JOIN nodes AS p ON p.id = e.process_id
WHERE e.{near} IN ({ids}) AND e.valid_to IS NULL
"""


def cte_closure(db: sqlite3.Connection, start: str, direction: str, depth: int) -> tuple[int, int]:
    """The baseline: nodes within `depth` hops by a recursive CTE, then their rows and the edges out
    of the nearer ones, URNs joined in (as the API answers). Returns (nodes, edges)."""
    near, far = ("source_id", "target_id") if direction == "downstream" else ("target_id", "source_id")
    reached = db.execute(CTE.format(near=near, far=far), {"start": start, "depth": depth}).fetchall()
    ids = ",".join(str(i) for i, _ in reached)
    inner = ",".join(str(i) for i, d in reached if d < depth) or "NULL"
    nodes = db.execute(NODES.format(ids=ids)).fetchall()
    edges = db.execute(EDGES.format(near=near, ids=inner)).fetchall()
    return len(nodes), len(edges)


def query_url(url: str, start: str, direction: str) -> str:
    return f"{url}{QUERY_PATH}?{urlencode({'node': start, 'direction': direction, 'depth': DEPTH})}"


def marquez_url(url: str, table: str) -> str:
    node_id = f"dataset:hive:{table.partition('/')[2]}"
    return f"{url}{MARQUEZ_PATH}?{urlencode({'nodeId': node_id, 'depth': DEPTH})}"


def getter(urls: list[str]) -> Callable[[requests.Session, int, int], bool | str]:
    """Client i's n-th request: the starts in turn, clients spread over the list."""

    def request(session: requests.Session, client: int, n: int) -> bool | str:
        response = session.get(urls[(client * 7919 + n) % len(urls)], timeout=120)
        return True if response.status_code == 200 else f"HTTP {response.status_code}"

    return request


def size_line(label: str, sizes: list[tuple[int, int]]) -> str:
    nodes = sorted(n for n, _ in sizes)
    edges = sorted(e for _, e in sizes)
    return (
        f"{label:12} nodes p50 {percentile(nodes, 50):>7,} p90 {percentile(nodes, 90):>7,} "
        f"max {nodes[-1]:>7,} | edges p50 {percentile(edges, 50):>7,} p90 {percentile(edges, 90):>7,} "
        f"max {edges[-1]:>7,}"
    )


# More places than FastAPI's thread pool has threads: the gate never holds a read back.
UNGATED = 1_000


def bench_queries(path: Path, args: argparse.Namespace) -> tuple[float, list[str]]:
    """Part (a); returns the worst p99 of the two concurrent depth-5 loads (ms) and the downstream
    starts."""
    rule(f"(a) depth-{DEPTH} lineage queries")
    service = Tracelake(LineageStore(str(path)))
    began = time.perf_counter()
    index = service.index()
    print(
        f"graph: {index.n_nodes:,} nodes, {index.n_edges:,} edge versions (index built in "
        f"{time.perf_counter() - began:.1f} s in this process too: the starts, ours in process, the floor)"
    )
    rng = random.Random(args.seed)
    starts = {direction: sample_starts(index, direction, args.starts, rng) for direction in DIRECTIONS}
    for direction, layers in STARTS.items():
        print(
            f"starts {direction}: {len(starts[direction])} tables and columns of {'/'.join(layers)} "
            f"with {direction} edges, half each (seed {args.seed})"
        )

    # The floor: node and edge counts that every other way is checked against.
    began = time.perf_counter()
    graphs = dict(zip(DIRECTIONS, adjacencies(index), strict=True))
    print(f"floor's dicts of lists built in {time.perf_counter() - began:.1f} s (not timed below)")
    floor_times: dict[str, list[float]] = {}
    expected: dict[str, dict[str, tuple[int, int]]] = {}
    for direction, adjacency in graphs.items():
        floor_times[direction], expected[direction] = [], {}
        for start in starts[direction]:
            t0 = time.perf_counter()
            expected[direction][start] = bfs_depth(adjacency, index.positions[start], DEPTH)
            floor_times[direction].append((time.perf_counter() - t0) * 1000)
    del graphs, index

    def check(way: str, direction: str, start: str, got: tuple[int, int]) -> None:
        if got != expected[direction][start]:
            floor = expected[direction][start]
            sys.exit(f"{direction} of {start}: {way} found {got} (nodes, edges), the floor {floor}")

    # Ours without HTTP: what the route calls, in this process.
    ours_times: dict[str, list[float]] = {}
    depth = TraversalFilters(depth=DEPTH)
    for direction in DIRECTIONS:
        ours_times[direction] = []
        for start in starts[direction]:
            t0 = time.perf_counter()
            view = service.lineage([start], direction, depth).to_json()  # type: ignore[arg-type]
            ours_times[direction].append((time.perf_counter() - t0) * 1000)
            check("Tracelake.lineage", direction, start, (len(view["nodes"]), len(view["edges"])))
    service.close()

    # The baseline: recursive CTEs in SQLite, bounded time per direction.
    cte_times: dict[str, list[float]] = {}
    budget = min(args.seconds, 15.0)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for direction in DIRECTIONS:
            cte_closure(db, starts[direction][0], direction, DEPTH)  # the pages into the cache
            cte_times[direction] = []
            stop = time.perf_counter() + budget
            for start in starts[direction]:
                if time.perf_counter() > stop:
                    break
                t0 = time.perf_counter()
                size = cte_closure(db, start, direction, DEPTH)
                cte_times[direction].append((time.perf_counter() - t0) * 1000)
                check("the recursive CTE", direction, start, size)
    db.close()

    loads: dict[str, Load] = {}
    sizes: dict[str, list[tuple[int, int]]] = {}
    tables = [s for direction in DIRECTIONS for s in starts[direction] if "#" not in s]
    with server_process(path) as url:
        t0 = time.perf_counter()
        requests.get(query_url(url, starts["downstream"][0], "downstream"), timeout=600).raise_for_status()
        print(f"first query (builds the server's index): {time.perf_counter() - t0:.1f} s")
        session = requests.Session()
        for direction in DIRECTIONS:  # warm, and check every answer against the floor
            sizes[direction] = []
            for start in starts[direction]:
                answer = session.get(query_url(url, start, direction), timeout=120)
                answer.raise_for_status()
                body = answer.json()
                sizes[direction].append((len(body["nodes"]), len(body["edges"])))
                check("the API", direction, start, sizes[direction][-1])
        marquez = [marquez_url(url, t) for t in tables]
        for address in marquez[:3]:
            session.get(address, timeout=120).raise_for_status()
        session.close()
        print(f"result sizes at depth {DEPTH} (the API's answers, equal to the floor's and the CTE's):")
        for direction in DIRECTIONS:
            print("  " + size_line(direction, sizes[direction]))

        for direction in DIRECTIONS:
            urls = [query_url(url, s, direction) for s in starts[direction]]
            loads[direction] = run_load(url, args.clients, args.seconds, getter(urls))
        urls = [query_url(url, s, "downstream") for s in starts["downstream"]]
        loads["alone"] = run_load(url, 1, max(args.seconds / 4, 2.0), getter(urls))
        loads["marquez"] = run_load(url, args.clients, min(args.seconds, 10.0), getter(marquez))
        server = stats(url)
    # The baseline: the same downstream load on a server that lets every read through at once,
    # FastAPI's thread pool alone (its 40 threads), as before the read gate.
    with server_process(path, read_concurrency=UNGATED) as url:
        session = requests.Session()
        for start in starts["downstream"]:  # the index built, the pages warm
            session.get(query_url(url, start, "downstream"), timeout=120).raise_for_status()
        session.close()
        urls = [query_url(url, s, "downstream") for s in starts["downstream"]]
        loads["ungated"] = run_load(url, args.clients, args.seconds, getter(urls))

    print(
        f"\nover HTTP, closed loop, {args.seconds:g} s per load, milliseconds; "
        f"index builds in the server: {server['index_builds']}"
    )
    print_load_header("req/s")
    load_row(f"GET {QUERY_PATH} downstream", loads["downstream"])
    load_row(f"GET {QUERY_PATH} upstream", loads["upstream"])
    load_row("  downstream, one client alone", loads["alone"])
    load_row("  downstream, no read gate (baseline)", loads["ungated"])
    load_row(f"GET {MARQUEZ_PATH} (Marquez, both ways, tables)", loads["marquez"])
    per_request = ", ".join(
        f"{name} {load.server_cpu / max(len(load.latencies), 1) * 1000:.1f}" for name, load in loads.items()
    )
    print(f"server CPU ms a request: {per_request}  (cpu columns: CPU time over wall time, 100% = a core)")

    print(f"\nthe same closures in this process, one start at a time, ms (CTE: {budget:g} s at most)")
    print_header(f"{'way':46}{'starts':>13}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    for direction in DIRECTIONS:
        timing_row(f"ours: Tracelake.lineage + to_json, {direction}", ours_times[direction], args.starts)
    for direction in DIRECTIONS:
        timing_row(f"baseline: recursive CTE in SQLite, {direction}", cte_times[direction], args.starts)
    for direction in DIRECTIONS:
        timing_row(f"floor: Python BFS to depth 5, {direction}", floor_times[direction], args.starts)
    return max(loads["downstream"].p(99), loads["upstream"].p(99)), starts["downstream"]


# ---------------------------------------------------------------------- ingest


def ol_event(job: str, inputs: Sequence[str], rng: random.Random) -> dict[str, Any]:
    """An OpenLineage COMPLETE RunEvent: `inputs` (two lake tables) → a new table, 3 fields."""
    output = f"bench.{job.replace('.', '_')}"
    fields = {}
    for number in range(3):
        sources = rng.sample(inputs, rng.randint(1, 2))
        fields[f"f{number}"] = {
            "inputFields": [
                {
                    "namespace": "hive",
                    "name": source.partition("/")[2],
                    "field": f"c{rng.randrange(4)}",
                    "transformations": [
                        {"type": "DIRECT", "subtype": rng.choice(("IDENTITY", "TRANSFORMATION"))}
                    ],
                }
                for source in sources
            ]
        }
    return {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(UTC).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": NAMESPACE, "name": job},
        "inputs": [{"namespace": "hive", "name": table.partition("/")[2]} for table in inputs],
        "outputs": [
            {
                "namespace": "hive",
                "name": output,
                "facets": {
                    "columnLineage": {
                        "_producer": PRODUCER,
                        "_schemaURL": COLUMN_LINEAGE_SCHEMA,
                        "fields": fields,
                    }
                },
            }
        ],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA,
    }


def poster(
    tables: list[str],
    prefix: str,
    acknowledged: list[dict[str, str]],
    pause: float = 0.0,
    *,
    prepared: int = 0,
) -> Callable[[RawClient, int, int], bool | str]:
    """Client i's n-th POST: a new event of job `<prefix>.c<i>.e<n>`, noted in `acknowledged[i]`
    (job → run id) when answered 201; `pause` seconds first (a paced client). The first `prepared`
    events of each client are made now, before any clock starts: a producer builds its events on
    its own machine, and here they would take the shared cores from the server (~0.15 ms each)."""

    def event(client: int, n: int) -> tuple[str, str, bytes]:
        rng = random.Random(client * 1_000_003 + n)
        job = f"{prefix}.c{client}.e{n}"
        made = ol_event(job, rng.sample(tables, 2), rng)
        return job, made["run"]["runId"], json.dumps(made).encode()

    ready = [[event(client, n) for n in range(prepared)] for client in range(len(acknowledged))]

    def post(connection: RawClient, client: int, n: int) -> bool | str:
        if pause:
            time.sleep(pause)
        job, run_id, body = ready[client][n] if 0 <= n < prepared else event(client, n)
        status = connection.post(MARQUEZ_PATH, body)
        if status != 201:
            return f"HTTP {status}"
        acknowledged[client][job] = run_id
        return True

    return post


def lake_tables(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT urn FROM nodes WHERE node_type = 'asset' AND urn LIKE 'hive.table/%'")
        found = [urn for (urn,) in rows]
    db.close()
    return found


def found_jobs(path: Path, posted: dict[str, str]) -> tuple[int, int]:
    """How many of the posted jobs are process nodes of the store, and how many of their runs are rows."""
    jobs = runs = 0
    names = list(posted)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for at in range(0, len(names), 500):
            chunk = names[at : at + 500]
            marks = ",".join("?" * len(chunk))
            urns = [f"openlineage.job/{NAMESPACE}/{name}" for name in chunk]
            query = f"SELECT count(*) FROM nodes WHERE node_type = 'process' AND urn IN ({marks})"
            jobs += db.execute(query, urns).fetchone()[0]
            run_ids = [posted[name] for name in chunk]
            runs += db.execute(f"SELECT count(*) FROM runs WHERE run_id IN ({marks})", run_ids).fetchone()[0]
    db.close()
    return jobs, runs


def bench_ingest(path: Path, workdir: Path, args: argparse.Namespace) -> tuple[float, int]:
    """Part (b); returns (events/s acknowledged, events lost)."""
    rule("(b) OpenLineage ingest: POST /api/v1/lineage, one event a request")
    copy = workdir / "ingest.db"
    seconds = copy_store(path, copy)
    tables = lake_tables(copy)
    print(f"target store: a copy of the query store ({seconds:.1f} s to copy); {len(tables):,} lake tables")

    acknowledged: list[dict[str, str]] = [{} for _ in range(args.ingest_clients)]
    # enough for 250 events/s a client, beyond which each is made as it is sent
    post = poster(tables, "http", acknowledged, prepared=int(args.ingest_seconds * 250))
    with server_process(copy) as url:
        post(RawClient(url), 0, -1)  # a first event: the server's first transaction
        load = run_load(url, args.ingest_clients, args.ingest_seconds, post, lambda: RawClient(url))
    posted = {job: run for mine in acknowledged for job, run in mine.items()}
    posted.pop("http.c0.e-1")
    jobs, runs = found_jobs(copy, posted)
    lost = len(posted) - min(jobs, runs)
    sent = len(load.latencies) + load.failed

    print(f"\nover HTTP, closed loop, {args.ingest_seconds:g} s, milliseconds per POST")
    print_load_header("ev/s")
    load_row(f"POST {MARQUEZ_PATH}", load)
    print(
        f"group commit: {load.groups:,} transactions for {len(load.latencies):,} events "
        f"({len(load.latencies) / max(load.groups, 1):.1f} events a transaction); server CPU "
        f"{load.server_cpu / max(len(load.latencies), 1) * 1000:.2f} ms an event, of which "
        f"{load.writer_cpu / max(len(load.latencies), 1) * 1000:.2f} in the writer process "
        f"({load.writer_cpu / max(load.groups, 1) * 1000:.2f} ms a transaction)"
    )
    print(
        f"no lost event: posted {sent:,}, acknowledged (201) {len(posted):,}, failed {load.failed:,}; "
        f"found in the store after the server stopped: {jobs:,} jobs, {runs:,} runs; lost {lost:,}"
    )

    # In this process, one thread, on the same copy (new job names).
    budget = min(args.ingest_seconds, 10.0)
    rng = random.Random(args.seed)
    with LineageStore(str(copy)) as store:
        done = 0
        stop = time.perf_counter() + budget
        began = time.perf_counter()
        while time.perf_counter() < stop:
            store.ingest(event_to_batch(ol_event(f"alone.e{done}", rng.sample(tables, 2), rng)))
            done += 1
        alone = done / (time.perf_counter() - began)
        grouped = 0
        stop = time.perf_counter() + budget
        began = time.perf_counter()
        while time.perf_counter() < stop:
            events = [ol_event(f"group.e{grouped + i}", rng.sample(tables, 2), rng) for i in range(500)]
            store.ingest([event_to_batch(event) for event in events])
            grouped += len(events)
        together = grouped / (time.perf_counter() - began)
    print(f"\nthe same events in this process, one thread, {budget:g} s each (event building included)")
    print(f"{'way':64}{'events':>9}{'ev/s':>9}")
    print(f"{'baseline: event_to_batch + LineageStore.ingest, one tx per event':64}{done:>9,}{alone:>9,.0f}")
    print(f"{'ceiling: the same, 500 events per transaction':64}{grouped:>9,}{together:>9,.0f}")
    print(f"{'ours: over HTTP, group commit (above)':64}{len(load.latencies):>9,}{load.rate:>9,.0f}")
    return load.rate, lost


# ---------------------------------------------------------------------- mixed


def bench_mixed(
    path: Path, workdir: Path, args: argparse.Namespace, starts: list[str]
) -> tuple[Load, float, list[float]]:
    """Part (c): downstream queries while a few events a second arrive, and how long a write
    takes to show: once a second, one more event, then its output table asked for until the
    answer has it (the seconds from the 201 to that answer)."""
    rule("(c) the same downstream queries while events arrive; how soon a write is visible")
    copy = workdir / "mixed.db"
    copy_store(path, copy)
    tables = lake_tables(copy)
    acknowledged: list[dict[str, str]] = [{}, {}]
    feeders: dict[str, Load] = {}
    lags: list[float] = []
    queriers = max(args.clients // 2, 1)
    with server_process(copy) as url:
        urls = [query_url(url, s, "downstream") for s in starts]
        requests.get(urls[0], timeout=600).raise_for_status()  # the index, before the clock
        post = poster(tables, "mixed", acknowledged, pause=0.1)
        before = stats(url)

        def feed() -> None:
            feeders["ingest"] = run_load(url, 2, args.seconds, post, lambda: RawClient(url))

        def probe() -> None:
            lags.extend(visibility_lags(url, tables, args.seconds))

        helpers = [threading.Thread(target=feed, daemon=True), threading.Thread(target=probe, daemon=True)]
        for helper in helpers:
            helper.start()
        queries = run_load(url, queriers, args.seconds, getter(urls))
        for helper in helpers:
            helper.join()
        after = stats(url)
    ingest = feeders["ingest"]
    print(
        f"2 clients post an event every 100 ms each ({ingest.rate:.1f} events/s acknowledged) while "
        f"{queriers} clients ask depth-5 downstream lineage, {args.seconds:g} s, milliseconds"
    )
    print_load_header("req/s")
    load_row(f"GET {QUERY_PATH} downstream", queries)
    refreshed = {kind: after[f"index_{kind}"] - before[f"index_{kind}"] for kind in ("catch_ups", "builds")}
    print(
        f"the server's index during the load: caught up {refreshed['catch_ups']} times, built "
        f"{refreshed['builds']} times (readers keep the index they have while a slow one runs); "
        f"cpu columns include the ingest"
    )
    if lags:
        ordered = sorted(lags)
        print(
            f"a write visible to the next query, {len(lags)} probes (one more event a second, its "
            f"output asked for every 20 ms): median {statistics.median(ordered):.2f} s, "
            f"max {ordered[-1]:.2f} s"
        )
    return queries, ingest.rate, lags


def visibility_lags(url: str, tables: list[str], seconds: float) -> list[float]:
    """For `seconds`: post an event, then ask for its first input's downstream until its output is
    there; the seconds from each 201 to the first answer that has it (at most 30 s a probe)."""
    client, session = RawClient(url), requests.Session()
    rng = random.Random(11)
    lags: list[float] = []
    stop = time.perf_counter() + seconds
    number = 0
    while time.perf_counter() < stop:
        job = f"fresh.e{number}"
        inputs = rng.sample(tables, 2)
        event = ol_event(job, inputs, rng)
        if client.post(MARQUEZ_PATH, json.dumps(event).encode()) != 201:
            raise SystemExit(f"a probe's event was refused: {job}")
        acknowledged = time.perf_counter()
        output = f"hive.table/{event['outputs'][0]['name']}"
        # an input's next hop downstream (a node the index has: an unknown one is a 404 whose
        # near matches cost the server a pass over every URN)
        wanted = query_url(url, inputs[0], "downstream").replace(f"depth={DEPTH}", "depth=1")
        while f'"{output}"' not in session.get(wanted, timeout=120).text:
            if time.perf_counter() - acknowledged > 30:
                raise SystemExit(f"a probe's write was not visible after 30 s: {output}")
            time.sleep(0.02)
        lags.append(time.perf_counter() - acknowledged)
        number += 1
        time.sleep(max(0.0, 1.0 - lags[-1]))
    client.close()
    return lags


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--edges", type=int, default=1_000_000, help="edges in the store's lake")
    parser.add_argument("--store", type=Path, help="build the store here, or reuse it (default: a temp dir)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent query clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each query load")
    parser.add_argument("--ingest-clients", type=int, default=8, help="concurrent ingest clients")
    parser.add_argument("--ingest-seconds", type=float, default=15.0, help="length of the ingest load")
    parser.add_argument("--starts", type=int, default=200, help="sampled start nodes")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="~50,000 edges, 3 s loads: a smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.edges, args.seconds, args.ingest_seconds, args.starts = 50_000, 3.0, 3.0, 60
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    began = time.perf_counter()
    import fastapi
    import uvicorn

    print(
        python_machine(
            f"FastAPI {fastapi.__version__}, uvicorn {uvicorn.__version__}, requests "
            f"{requests.__version__}, SQLite {sqlite3.sqlite_version}"
        )
    )
    print(
        f"clients and server on this machine, loopback; {args.clients} query clients, "
        f"{args.ingest_clients} ingest clients{' (--quick)' if args.quick else ''}"
    )
    with tempfile.TemporaryDirectory(prefix="tracelake-api-bench-") as tmp:
        workdir = Path(tmp)
        path = args.store or workdir / "lake.db"
        ensure_store(path, args.edges, args.seed)
        p99, starts = bench_queries(path, args)
        rate, lost = bench_ingest(path, workdir, args)
        mixed, arriving, lags = bench_mixed(path, workdir, args, starts)
    print()
    met = "MET" if p99 < QUERY_TARGET_MS else "MISSED"
    print(f"target: p99 < {QUERY_TARGET_MS:.0f} ms for depth-5 lineage — {met} (p99 {p99:.1f} ms)")
    met = "MET" if rate >= INGEST_TARGET and lost == 0 else "MISSED"
    print(
        f"target: ≥ {INGEST_TARGET:,} OpenLineage events/s, none lost — {met} "
        f"({rate:,.0f} events/s, lost {lost})"
    )
    worst = max(lags, default=math.inf)
    met = "MET" if worst <= FRESH_TARGET_S else "MISSED"
    print(
        f"target: a write visible to the next query within {FRESH_TARGET_S:g} s under load — {met} "
        f"(the slowest of {len(lags)} probes: {worst:.2f} s)"
    )
    print(
        f"not a target: depth-5 lineage p99 while {arriving:.0f} events/s arrive: {mixed.p(99):,.0f} ms "
        f"({len(mixed.latencies):,} queries in {mixed.seconds:.0f} s)"
    )
    print(f"{load_change(load_before)}; total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
