"""What one `tracelake` command costs a user, on stores of growing size (issue 21).

Each command runs in a fresh process, as a shell runs it, and is measured from the outside: wall
time and the process's peak resident memory (`wait4`'s rusage). On each store, the same question:
the depth-5 upstream lineage of one column (the column the lake's last edge writes, deep in its
layers), printed as JSON. Four ways, in the same run:

- `index off` (`TRACELAKE_INDEX=off`): the graph index built from the store by every command —
  what each command did before the index was kept, and what a user gets without it (baseline);
- `first`: the kept index removed first: the command builds the index and keeps it beside the
  store (once per store version);
- `kept`: the next command opens the kept index (its files, read where the walk goes);
- `after a write`: on a copy of the store whose index is kept, one small ingest (a new process
  writing into the queried column) before each command, which opens the kept index and catches
  it up from the store's change log (`graph.catch_up`) instead of building it again.

Beside them, the floors: `python -c pass` (an interpreter's start) and `tracelake --help`. The
targets (issue 21): `--help` under 0.3 s; on the ~1M- and ~10M-edge stores a query at most 1.5×
the ~1k-edge store's time, and under 300 MB.

    .venv/bin/python bench/cli.py [--sizes 1000,1000000] [--stores DIR] [--repeat N] [--seed N]

The stores are bench/store.py's lake, built through `LineageStore.ingest` (about 40 s a million
edges) and reused from `--stores` when this bench (or bench/api.py) built them for the same size
and seed. 10M edges: `--sizes 1000,1000000,10000000` (about 7 minutes to build, ~6 GB of disk).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from api import copy_store, ensure_store
from machine import load_change, python_machine
from tracelake.model import FlowEdge, LineageBatch, Signal
from tracelake.store import LineageStore

HELP_TARGET_S = 0.3
GROWTH_TARGET = 1.5
MEMORY_TARGET_MB = 300


# A small launcher forks and execs the command and reports its peak memory: a child forked from
# this bench directly would count the bench's own pages (a hundred MB of imports) as its peak.
_LAUNCHER = """
import os, sys, time
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - started
print(wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), file=sys.stderr)
"""


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one run of `argv` in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    *errors, last = done.stderr.decode().strip().splitlines() or [""]
    wall, memory, code = last.split()
    if int(code) != 0:
        sys.exit(f"{' '.join(argv)} failed ({code}): {' '.join(errors)[:500]}")
    return float(wall), float(memory)


def median_of(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float]:
    """The median wall seconds and the highest peak MB of `repeat` runs."""
    runs = [measure(argv, env) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), max(m for _, m in runs)


def write_a_little(path: Path, column: str, number: int) -> None:
    """One small ingest, as a job run would make: a new process writing into `column`."""
    source = f"hive.table/bench.cli_write_{number}#c"
    edge = FlowEdge(source, column, f"bench.cli/write_{number}", Signal.MANUAL)
    with LineageStore(f"sqlite:///{path}") as store:
        store.ingest(LineageBatch(edges=[edge]))


def deep_column(path: Path) -> str:
    """The column the lake's last edge writes: deep in its layers, with a long upstream."""
    with sqlite3.connect(path) as conn:
        (urn,) = conn.execute(
            "SELECT n.urn FROM edges e JOIN nodes n ON n.id = e.target_id "
            "WHERE n.node_type = 'field' ORDER BY e.id DESC LIMIT 1"
        ).fetchone()
    return str(urn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,1000000", help="edges in each store, comma-separated")
    parser.add_argument(
        "--stores", type=Path, help="build the stores here, or reuse them (default: a temp dir)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each command (the median)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    print(python_machine())
    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="tracelake-cli-bench-"))
    stores = args.stores or workdir
    stores.mkdir(parents=True, exist_ok=True)
    tracelake = [sys.executable, "-c", "from tracelake.cli import app; app(prog_name='tracelake')"]
    env = {**os.environ, "COLUMNS": "200"}
    try:
        wall, memory = median_of([sys.executable, "-c", "pass"], env, args.repeat)
        print(f"{'python -c pass':<44}{wall:>8.3f} s{memory:>8.0f} MB   (an interpreter's start)")
        help_wall, memory = median_of([*tracelake, "--help"], env, args.repeat)
        verdict = "met" if help_wall < HELP_TARGET_S else "MISSED"
        target = f"target < {HELP_TARGET_S} s: {verdict}"
        print(f"{'tracelake --help':<44}{help_wall:>8.3f} s{memory:>8.0f} MB   {target}")

        rows: list[tuple[int, str, float, float]] = []
        for size in sizes:
            path = stores / f"lake-{size}.db"
            ensure_store(path, size, args.seed)
            column = deep_column(path)
            query = [
                *tracelake,
                "lineage",
                column,
                "--up",
                "--depth",
                "5",
                "--format",
                "json",
                "--db",
                str(path),
            ]
            kept = Path(f"{path}.index")
            off_wall, off_memory = median_of(query, {**env, "TRACELAKE_INDEX": "off"}, args.repeat)
            firsts = []
            for _ in range(args.repeat):
                shutil.rmtree(kept, ignore_errors=True)
                firsts.append(measure(query, env))
            first_wall = statistics.median(w for w, _ in firsts)
            first_memory = max(m for _, m in firsts)
            kept_wall, kept_memory = median_of(query, env, args.repeat)
            written = workdir / f"written-{size}.db"
            copy_store(path, written)
            written_query = [*query[:-1], str(written)]
            measure(written_query, env)  # builds and keeps its index
            afters = []
            for number in range(args.repeat):
                write_a_little(written, column, number)
                afters.append(measure(written_query, env))
            rows += [
                (size, "index off (built by every command)", off_wall, off_memory),
                (size, "first (builds, keeps the index)", first_wall, first_memory),
                (size, "kept (opens its files)", kept_wall, kept_memory),
                (
                    size,
                    "after a write (catches the kept one up)",
                    statistics.median(w for w, _ in afters),
                    max(m for _, m in afters),
                ),
            ]
            print(f"\nstore of {size:,} edges ({path.stat().st_size / 2**20:,.0f} MB), column {column}")
            for _, way, wall, memory in rows[-4:]:
                print(f"  {way:<42}{wall:>8.3f} s{memory:>8.0f} MB")

        smallest = min(sizes)
        base = next(wall for size, way, wall, _ in rows if size == smallest and way.startswith("kept"))
        print(
            f"\ntargets: a query at most {GROWTH_TARGET}× the {smallest:,}-edge store's ({base:.3f} s), "
            f"under {MEMORY_TARGET_MB} MB"
        )
        for size, way, wall, memory in rows:
            if size == smallest or not way.startswith(("kept", "after")):
                continue
            growth = wall / base
            verdict = "met" if growth <= GROWTH_TARGET and memory < MEMORY_TARGET_MB else "MISSED"
            shown = way.partition(" (")[0]
            print(f"  {size:>12,} edges, {shown}: {growth:.2f}× and {memory:.0f} MB: {verdict}")
        print(load_change(load_before))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
