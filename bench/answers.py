"""Root cause (`tracelake why`) and critical paths (`tracelake critical-path`) on the 1M-edge
bench store with a month of history: their latency beside what one writes without Tracelake (SQL
over the store), in the same run.

The store: bench/store.py's layered lake (`traversal_lake`: ~1,000,000 edge versions, ~42,000
processes, observed 2024-06-01), plus a month of history written through `LineageStore.ingest`:
every process runs once a day from 2024-06-01 to 2024-06-30 (~1.25 million runs; 1% of them
fail, 1% take three times their usual ten minutes), and in the last week (the window asked
about) 2% of the processes get a new version (an input dropped, or a column flow) and 1% of the
tables an ALTER. Built once into `--store` and reused (a `.bench.json` beside it says for what).

Starts: tables of the top layers (rpt, ml, srv), of the middle (dws), and those with the widest
upstream (of every 10th table, the walks over the window that reach the most nodes). Each call
is timed `--repeats` times after one untimed, the index already built (a server's steady state:
the calls then read the store only for the window's or the day's facts); medians and p95s.

(a) `why(service, start, since=2024-06-24, until=2024-07-01)`. Baseline, sqlite3 on the same
file: a recursive CTE upstream over the table edges in force in the window, then the failed
runs, version starts and ALTERs of what it reached. It ranks nothing and finds no slow run,
input change or route; where both answer they must agree (checked for every start).
(b) `critical_path(service, start, 2024-06-30)`. Baseline: the same walk written as SQL a step
(the writers of the table that day, their first completed run; then, step by step, the inputs
of the run's process while it ran, their writers, and the run of those that completed last
before it), in Python over sqlite3. Both must find the same runs.
Target (issue 23): each ≤ 200 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from machine import print_header, python_machine
from store import OBSERVED, traversal_lake
from tracelake.app.critical_path import critical_path
from tracelake.app.root_cause import why
from tracelake.app.service import Tracelake
from tracelake.graph.upstream_window import upstream_window
from tracelake.model import AssetChange, Lifecycle, LineageBatch, Run, Signal
from tracelake.store import LineageStore
from tracelake.store.schema import to_micros

TARGET_MS = 200.0
SINCE, UNTIL = datetime(2024, 6, 24, tzinfo=UTC), datetime(2024, 7, 1, tzinfo=UTC)
DAY = date(2024, 6, 30)  # the critical paths' day
DAYS = 30
TOP, MIDDLE = ("rpt", "ml", "srv"), ("dws",)


def meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".bench.json")


def history(batches: list[LineageBatch], rng: random.Random) -> Iterator[list[LineageBatch]]:
    """A month of runs for every process, then the window's new versions and ALTERs."""
    processes = sorted({edge.process for batch in batches for edge in batch.edges})
    runs: list[Run] = []
    for number, process in enumerate(processes):
        usual = timedelta(minutes=rng.uniform(8, 12))
        hour = timedelta(hours=number % 20, minutes=rng.randrange(60))
        for day in range(DAYS):
            start = OBSERVED + timedelta(days=day) + hour
            draw = rng.random()
            status, took = (
                ("FAIL", usual / 2) if draw < 0.01 else ("COMPLETE", usual * (3 if draw < 0.02 else 1))
            )
            runs.append(
                Run(f"{process}@{day}", process, started_at=start, ended_at=start + took, status=status)
            )
            if len(runs) == 50_000:
                yield [LineageBatch(runs=runs)]
                runs = []
    if runs:
        yield [LineageBatch(runs=runs)]
    changed = []
    for batch in rng.sample(batches, len(batches) // 50):
        at = SINCE + timedelta(seconds=rng.randrange(int((UNTIL - SINCE).total_seconds())))
        tables = [e for e in batch.edges if "#" not in e.source]
        if len(tables) > 1 and rng.random() < 0.5:  # drop an input and its column flows
            gone = tables[-1].source
            edges = [e for e in batch.edges if e.source.partition("#")[0] != gone]
        else:  # drop a column flow
            edges = batch.edges[:-1]
        changed.append(replace(batch, edges=edges, observed_at=at))
    yield changed
    tables = sorted({edge.target for batch in batches for edge in batch.edges if "#" not in edge.target})
    alters = [
        AssetChange(
            urn,
            Lifecycle.ALTER,
            SINCE + timedelta(seconds=rng.randrange(int((UNTIL - SINCE).total_seconds()))),
            Signal.SQL_STATIC,
            columns=(("c0", "string"), ("c_new", "bigint")),
        )
        for urn in rng.sample(tables, len(tables) // 100)
    ]
    yield [LineageBatch(changes=alters)]


def ensure_store(path: Path, edges: int, seed: int) -> None:
    wanted = {"edges": edges, "seed": seed, "history": "runs-30d-v1"}
    meta = meta_path(path)
    if path.exists():
        built = json.loads(meta.read_text()) if meta.exists() else {}
        if {k: built.get(k) for k in wanted} != wanted:
            sys.exit(f"{path} was not built by this bench for {wanted}; pass another --store or delete it")
        print(f"store: reusing {path} (built in {built['seconds']:.0f} s)")
        return
    began = time.perf_counter()
    batches: list[LineageBatch] = []
    with LineageStore(str(path)) as store:
        for chunk in traversal_lake(edges, seed):
            store.ingest(chunk)
            batches += chunk
        lake = time.perf_counter() - began
        for chunk in history(batches, random.Random(seed)):
            store.ingest(chunk)
        counts = store.counts()
    seconds = time.perf_counter() - began
    meta.write_text(json.dumps({**wanted, "seconds": seconds, "counts": counts}))
    print(
        f"store: built {path} in {seconds:.0f} s "
        f"(the lake {lake:.0f} s, its history {seconds - lake:.0f} s): {counts}"
    )


UPSTREAM = """
WITH RECURSIVE up(id) AS (
    SELECT id FROM nodes WHERE urn = :start
    UNION
    SELECT e.source_id FROM edges e JOIN up ON e.target_id = up.id
    WHERE e.valid_from <= :until AND (e.valid_to IS NULL OR e.valid_to > :since)
)
SELECT id FROM up
"""


def baseline(db: sqlite3.Connection, start: str) -> tuple[int, int, int]:
    """(failed runs, version starts, ALTERs) upstream of `start` in the window, in SQL."""
    window = {"start": start, "since": to_micros(SINCE), "until": to_micros(UNTIL)}
    reached = ",".join(str(row[0]) for row in db.execute(UPSTREAM, window))
    processes = ",".join(
        str(row[0])
        for row in db.execute(
            f"SELECT DISTINCT process_id FROM edges WHERE target_id IN ({reached}) "
            "AND valid_from <= :until AND (valid_to IS NULL OR valid_to > :since)",
            window,
        )
    )
    failed = db.execute(
        f"SELECT count(*) FROM runs WHERE process_id IN ({processes}) AND status IN ('FAIL', 'ABORT') "
        "AND (started_at BETWEEN :since AND :until OR ended_at BETWEEN :since AND :until)",
        window,
    ).fetchone()[0]
    versions = db.execute(
        f"SELECT count(*) FROM process_versions WHERE process_id IN ({processes}) "
        "AND valid_from > :since AND valid_from <= :until",
        window,
    ).fetchone()[0]
    alters = db.execute(
        f"SELECT count(*) FROM asset_changes WHERE asset_id IN ({reached}) AND change = 'ALTER' "
        "AND at > :since AND at <= :until",
        window,
    ).fetchone()[0]
    return failed, versions, alters


READY = "coalesce(ended_at, started_at)"


def sql_critical_path(db: sqlite3.Connection, start: str) -> list[str]:
    """The run ids of the critical path of `start` on DAY, downstream first, a query a step."""
    lo = to_micros(datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC))
    hi = lo + to_micros(datetime(1970, 1, 2, tzinfo=UTC))
    day = to_micros(datetime(1970, 1, 2, tzinfo=UTC))
    (asset,) = db.execute("SELECT id FROM nodes WHERE urn = ?", (start,)).fetchone()
    writers = [
        row[0]
        for row in db.execute(
            "SELECT DISTINCT process_id FROM edges WHERE target_id = ? AND valid_from <= ? "
            "AND (valid_to IS NULL OR valid_to > ?)",
            (asset, hi, lo),
        )
    ]
    marks = ",".join("?" * len(writers))
    run = db.execute(
        f"SELECT run_id, process_id, started_at, {READY} FROM runs WHERE process_id IN ({marks}) "
        f"AND (status = 'COMPLETE' OR status IS NULL) AND {READY} >= ? AND {READY} < ? "
        f"ORDER BY {READY}, run_id LIMIT 1",
        (*writers, lo, hi),
    ).fetchone()
    found = []
    while run is not None and run[0] not in found:
        found.append(run[0])
        began = run[2] if run[2] is not None else run[3]
        inputs = [
            row[0]
            for row in db.execute(
                "SELECT DISTINCT source_id FROM edges WHERE target_id = ? AND process_id = ? "
                "AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?) AND source_id != ?",
                (asset, run[1], run[3], began, asset),
            )
        ]
        if not inputs:
            break
        marks = ",".join("?" * len(inputs))
        wrote = dict(
            db.execute(
                f"SELECT process_id, min(target_id) FROM edges WHERE target_id IN ({marks}) "
                "AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?) GROUP BY process_id",
                (*inputs, began, began - day),
            ).fetchall()
        )
        if not wrote:
            break
        marks = ",".join("?" * len(wrote))
        run = db.execute(
            f"SELECT run_id, process_id, started_at, {READY} FROM runs WHERE process_id IN ({marks}) "
            f"AND (status = 'COMPLETE' OR status IS NULL) AND {READY} >= ? AND {READY} <= ? "
            f"ORDER BY {READY} DESC, run_id DESC LIMIT 1",
            (*wrote, began - day, began),
        ).fetchone()
        if run is not None:
            asset = wrote[run[1]]
    return found


def ours_counts(service: Tracelake, start: str) -> tuple[int, int, int, int]:
    """(failed runs, version starts, ALTERs, all causes) of `why`'s answer."""
    view = why(service, start, since=SINCE, until=UNTIL)
    kinds = [cause.kind for cause in view.causes]
    failed = kinds.count("run_failed") + kinds.count("run_failed_then_recovered")
    versions = kinds.count("process_changed") + kinds.count("process_new")
    return failed, versions, kinds.count("schema_changed"), len(kinds)


def p95(sorted_ms: list[float]) -> float:
    return sorted_ms[max(0, int(0.95 * len(sorted_ms)) - 1)]


def figures(ours: list[float], sql: list[float]) -> str:
    """Ours and the baseline, median / p95, and the baseline's median over ours."""
    mine, theirs = statistics.median(ours), statistics.median(sql)
    return f"{mine:>8.1f} / {p95(ours):>7.1f}  {theirs:>8.1f} / {p95(sql):>7.1f}  {theirs / mine:>7.1f}×"


def timed_ms(call: object, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - began) * 1000)
    return sorted(samples)


def pick_starts(service: Tracelake, count: int, rng: random.Random) -> list[tuple[str, str]]:
    """`count` tables of each group: the widest upstream (of every 10th table, those whose walk
    over the window reaches the most nodes), the top layers and the middle."""
    index = service.index()
    tables = [urn for urn in index.urns if urn.startswith("hive.table/") and "#" not in urn]
    since, until = to_micros(SINCE), to_micros(UNTIL)
    widths = sorted(
        (len(upstream_window(index, index.positions[urn], since, until).distance), urn)
        for urn in tables[::10]
    )
    found = [("widest", urn) for _, urn in widths[-count:][::-1]]
    for label, layers in (("top", TOP), ("middle", MIDDLE)):
        candidates = [urn for urn in tables if urn.removeprefix("hive.table/").partition(".")[0] in layers]
        found += [(label, urn) for urn in rng.sample(candidates, min(count, len(candidates)))]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="the bench store (built when missing)")
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--starts", type=int, default=5, help="starts per group (top, middle)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50,000 edges, 2 starts, 3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.edges, args.starts, args.repeats = 50_000, 2, 3
    print(python_machine())
    workdir = Path(tempfile.mkdtemp(prefix="tracelake-why-"))
    path = args.store or workdir / "lineage.db"
    ensure_store(path, args.edges, args.seed)
    service = Tracelake(LineageStore(str(path)))
    began = time.perf_counter()
    index = service.index()
    built = time.perf_counter() - began
    print(f"index: {index.n_nodes:,} nodes, {index.n_edges:,} edge versions, built in {built:.1f} s")
    print(f"window: {SINCE:%Y-%m-%d} to {UNTIL:%Y-%m-%d}; {args.repeats} timed calls a start, after one\n")
    db = sqlite3.connect(path)
    starts = pick_starts(service, args.starts, random.Random(args.seed))

    print(f"(a) why, window {SINCE:%Y-%m-%d} to {UNTIL:%Y-%m-%d}")
    header = (
        f"{'start':<28} {'group':<7} {'upstream':>8} {'causes':>7}  {'ours ms (p50/p95)':>18}  "
        f"{'SQL ms (p50/p95)':>18}  {'speed-up':>8}  agree"
    )
    print_header(header)
    worst_why = 0.0
    for group, start in starts:
        failed, versions, alters, causes = ours_counts(service, start)  # also warms the call
        agrees = (failed, versions, alters) == baseline(db, start)
        ours = timed_ms(lambda start=start: why(service, start, since=SINCE, until=UNTIL), args.repeats)
        sql = timed_ms(lambda start=start: baseline(db, start), max(3, args.repeats // 3))
        upstream = why(service, start, since=SINCE, until=UNTIL).upstream_nodes
        worst_why = max(worst_why, p95(ours))
        print(
            f"{start.removeprefix('hive.table/'):<28} {group:<7} {upstream:>8,} {causes:>7,}  "
            f"{figures(ours, sql)}  {'yes' if agrees else 'NO'}"
        )

    print(f"\n(b) critical path on {DAY}")
    header = (
        f"{'start':<28} {'group':<7} {'steps':>8}  {'ours ms (p50/p95)':>18}  "
        f"{'SQL ms (p50/p95)':>18}  {'speed-up':>8}  agree"
    )
    print_header(header)
    worst_path = 0.0
    for group, start in starts:
        ours_runs = [step.run_id for step in critical_path(service, start, DAY).steps][::-1]
        agrees = ours_runs == sql_critical_path(db, start)
        ours = timed_ms(lambda start=start: critical_path(service, start, DAY), args.repeats)
        sql = timed_ms(lambda start=start: sql_critical_path(db, start), max(3, args.repeats // 3))
        worst_path = max(worst_path, p95(ours))
        print(
            f"{start.removeprefix('hive.table/'):<28} {group:<7} {len(ours_runs):>8}  "
            f"{figures(ours, sql)}  {'yes' if agrees else 'NO'}"
        )

    print()
    for what, worst in (("why", worst_why), ("critical path", worst_path)):
        verdict = "MET" if worst <= TARGET_MS else "MISSED"
        print(
            f"target: {what} ≤ {TARGET_MS:.0f} ms on the 1M-edge store: slowest p95 {worst:.1f} ms: {verdict}"
        )
    service.close()


if __name__ == "__main__":
    main()
