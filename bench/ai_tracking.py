"""What `tracelake.python.track` costs a training step: the steps untracked, with the hooks idle, tracked.

The job is a small, real training loop: each step a `pd.read_parquet` of one of `--shards`
Parquet shards (20; `--rows` rows (5,000): an `id`, `--features` float features (10) and a 0/1
`label`, generated with a fixed seed into a temporary directory before any timing) and a
`SGDClassifier.partial_fit` on its features (a DataFrame, so the model keeps its feature names,
as most training code does); every `--every` steps (10) a checkpoint with `joblib.dump`. A whole
run of `--steps` steps (100) then reads a held-out shard, scores it with `predict_proba` and
writes ids and scores with `DataFrame.to_parquet`. Every I/O call goes through the module or
the frame, so each is hooked.

Hooks, once installed, stay for the process. So, in one process:
  plain:      first, `--before` runs of the loop (5) before anything installs the hooks
              (asserted), after one untimed: the libraries as they are without Tracelake;
  original:   afterwards, the functions the hooks wrapped put back for a step or a call
              (asserted to be the very objects the plain loops called), then wrapped again: the
              same code as plain, but interleaved with the others. Overheads are against it;
  hooks idle: the hooks installed, no run going (what every call of the process pays afterwards);
  tracked:    a run of `tracelake.python.track(job=..., store="sqlite:///...")` going.
This machine's speed moves by 10–15% from one loop to the next, idle or not (a shared virtual
machine), more than the 1% to be shown. So the figures are paired as finely as they
can be:
  (1) step by step: `--step-rounds` rounds (1,500), each one step of every variant, in a rotating
      order, the three training the same way (a model each, the same shard and checkpoint
      schedule). The tracked steps belong to one run, started once with `track()`; it sees only
      its steps (`hooks.start`/`hooks.finish`, what `track()` and `stop()` do, around each), and
      is stopped after the last, outside the clock. Per variant: mean, median and p90 step; per
      round, the tracked and idle step minus the original one: mean (± 95% interval) and median;
      and the time the run's `saw` took in the tracked steps (describing each call and recording
      it, timed where the hooks call it: the run's own share of the overhead). The target is
      checked here, on the mean: under 1% of a training step (from the issue);
  (2) whole runs: after the plain runs, `--rounds` rounds (8) of a whole loop of each variant,
      rotating, one untimed loop each first; the tracked one `with track(...)` around the loop,
      stored at its end into the same SQLite store each time (a job re-run into its store, the
      schema made before the clock), opened from its URL as the README's example does. Timed
      apart: `track()`, the loop, `stop()`, and the batch `stop()` builds (built again after it),
      to show what a run pays once; each round's runs against the original one. The runs are too
      noisy to tell 1%: the whole run's verdict adds (2)'s `track()` + `stop()` to (1)'s steps;
  (3) per call: `pd.read_parquet` of a 100-row file of the same columns, `joblib.dump` of the
      fitted model, `DataFrame.to_parquet` of 100 rows, `--calls` rounds (600) of one call of each
      variant, rotating (a run per call kind, toggled as in (1)): medians, and the median of the
      per-round differences; the run's `saw` per tracked call, as in (1); the call's describer
      alone on the same arguments in a tight loop (warm caches); and a no-op function behind the
      same wrapper (`hooks._wrapped`, a hook that describes nothing): the wrapper's own floor;
  (4) stop() against the run's length: runs fed the loop's calls (`saw`, as the hooks do once a
      call returns; no I/O) for `--lengths` steps, timing the batch and `stop()`.
Every whole run starts from a collected heap, (1) and (3) once before their rounds (outside the
clock); GC stays on while timing.

    .venv/bin/python bench/ai_tracking.py [--step-rounds N] [--steps N] [--rounds N] [--calls N]
                                          [--lengths N,N] [--quick]

About 90 s with the defaults on 2 cores (2 minutes when the machine is slow); `--quick`, a smoke
test, about 15 s. Spark hand-offs
(`toPandas`) are left out: a Spark session would cost more than the whole bench.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from machine import load_change, print_header, python_machine
from spark_overhead import sign_flip_p

try:
    import joblib
    import pandas as pd
    from sklearn.linear_model import SGDClassifier
except ImportError as missing:  # pandas and scikit-learn come with the `dev` and `ai` extras
    raise SystemExit(f"bench/ai_tracking.py needs pandas, scikit-learn and joblib ({missing})") from None

import tracelake.python as tp
from tracelake.collect.python_io import HOOKS, Call, Hook, Naming
from tracelake.python import PythonTracker, hooks
from tracelake.store import LineageStore

TARGET = 0.01  # of a training step (from the issue)
JOB = "bench.train"
CLASSES = np.array([0, 1])
ORIGINAL, IDLE, TRACKED = "original functions", "hooks installed, no run", "tracked"
VARIANTS = (ORIGINAL, IDLE, TRACKED)
ORDERS = list(itertools.permutations(VARIANTS))
MICRO_ROWS = 100
NOOP_CALLS = 100_000
DESCRIBE_CALLS = 5_000


# ---------------------------------------------------------------------- the data and the loop


@dataclass(frozen=True)
class Data:
    root: Path
    shards: tuple[str, ...]
    holdout: str
    features: list[str]
    steps: int
    every: int

    @property
    def predictions(self) -> str:
        return str(self.root / "scores.parquet")

    def checkpoint(self, variant: str = "") -> str:
        return str(self.root / f"model{'-' + variant.split()[0] if variant else ''}.joblib")

    @property
    def calls(self) -> int:
        """Hooked calls of a whole run: a read a step, the checkpoints, the held-out read, the write."""
        return self.steps + self.steps // self.every + 2


def make_data(root: Path, args: argparse.Namespace) -> Data:
    """Shards of a noisy linear problem, written with pyarrow before any hook exists."""
    rng = np.random.default_rng(args.seed)
    features = [f"f{i}" for i in range(args.features)]
    weights = rng.normal(size=args.features)

    def shard(path: Path, first_id: int, rows: int) -> str:
        x = rng.normal(size=(rows, args.features))
        label = (x @ weights + rng.normal(scale=0.5, size=rows) > 0).astype("int8")
        columns: dict[str, Any] = {"id": np.arange(first_id, first_id + rows)}
        columns |= {name: x[:, i] for i, name in enumerate(features)}
        columns["label"] = label
        pq.write_table(pa.table(columns), path)
        return str(path)

    shards = tuple(
        shard(root / f"shard-{i:03d}.parquet", i * args.rows, args.rows) for i in range(args.shards)
    )
    holdout = shard(root / "holdout.parquet", args.shards * args.rows, args.rows)
    return Data(root, shards, holdout, features, args.steps, args.every)


def new_model() -> SGDClassifier:
    return SGDClassifier(loss="log_loss", random_state=0)


def step(data: Data, model: SGDClassifier, index: int, checkpoint: str) -> None:
    """One training step; every I/O call through `pd` or `joblib`, so hooked."""
    frame = pd.read_parquet(data.shards[index % len(data.shards)])
    model.partial_fit(frame[data.features], frame["label"], classes=CLASSES)
    if (index + 1) % data.every == 0:
        joblib.dump(model, checkpoint)


@dataclass
class Loop:
    wall: float  # s, first read to the predictions written
    cpu: float  # s of this process, all threads
    steps: list[float]  # s each


def train(data: Data) -> Loop:
    """A whole run: the steps, then the held-out shard scored and written."""
    model = new_model()
    steps: list[float] = []
    clock = time.perf_counter
    cpu0, began = time.process_time(), clock()
    for index in range(data.steps):
        start = clock()
        step(data, model, index, data.checkpoint())
        steps.append(clock() - start)
    holdout = pd.read_parquet(data.holdout)
    scores = pd.DataFrame({"id": holdout["id"], "score": model.predict_proba(holdout[data.features])[:, 1]})
    scores.to_parquet(data.predictions)
    return Loop(clock() - began, time.process_time() - cpu0, steps)


# ---------------------------------------------------------------------- the variants


@dataclass(frozen=True)
class Wrapped:
    owner: Any  # the module or class the hook set the wrapper on
    name: str
    wrapper: Callable[..., Any]
    original: Callable[..., Any]


def wrapped_calls() -> list[Wrapped]:
    """Every call the hooks wrapped in this process, with the function it wraps."""
    found: list[Wrapped] = []
    for hook in HOOKS:
        owner: Any = sys.modules.get(hook.module)
        *classes, name = hook.attribute.split(".")
        for class_name in classes:
            owner = getattr(owner, class_name, None)
        current = getattr(owner, name, None) if owner is not None else None
        if getattr(current, "__tracelake_hook__", None) is not None:
            found.append(Wrapped(owner, name, current, current.__wrapped__))  # type: ignore[union-attr]
    return found


@contextmanager
def originals(wrapped: Sequence[Wrapped]) -> Iterator[None]:
    """The library functions as they were before `install`, for one block, then the wrappers again."""
    for item in wrapped:
        setattr(item.owner, item.name, item.original)
    try:
        yield
    finally:
        for item in wrapped:
            setattr(item.owner, item.name, item.wrapper)


@contextmanager
def variant(name: str, wrapped: Sequence[Wrapped], run: PythonTracker | None = None) -> Iterator[None]:
    """The process as `name` sees it, for one block. `run` (a started run, taken out of the hooks'
    runs with `hooks.finish`) sees the block when tracked, as a run started with `track()` does."""
    if name == ORIGINAL:
        with originals(wrapped):
            yield
    elif name == TRACKED:
        assert run is not None
        hooks.start(run)
        try:
            yield
        finally:
            hooks.finish(run)
    else:
        yield


def paused(job: str, url: str) -> PythonTracker:
    """A run that sees nothing until `variant(TRACKED, ..., run)`."""
    run = tp.track(job=job, store=url)
    hooks.finish(run)
    return run


class SawClock:
    """Times a run's `saw` (describing a call and recording it) where the hooks call it, once the
    call has returned: what the run itself adds to a call, apart from the wrapper and the noise."""

    def __init__(self, run: PythonTracker) -> None:
        self.ns = 0
        self.calls = 0
        self._saw = run.saw
        run.saw = self  # type: ignore[method-assign]  # the instance's, which the hooks call

    def __call__(self, hook: Hook, call: Call) -> None:
        began = time.perf_counter_ns()
        try:
            self._saw(hook, call)
        finally:
            self.ns += time.perf_counter_ns() - began
            self.calls += 1


def plain_functions() -> dict[str, Any]:
    """The functions the steps call, as the plain loops find them (compared with the originals put
    back later)."""
    return {
        "pandas.read_parquet": pd.read_parquet,
        "pandas.DataFrame.to_parquet": pd.DataFrame.to_parquet,
        "joblib.dump": joblib.dump,
    }


def rotation(index: int) -> tuple[str, ...]:
    """The variants' order in round `index`: each of the six orders in turn, so each variant runs
    first, second and third, after each other one, equally often."""
    return ORDERS[index % len(ORDERS)]


# ---------------------------------------------------------------------- plain, before the hooks


def bench_plain(data: Data, args: argparse.Namespace) -> tuple[list[Loop], dict[str, Any]]:
    if hooks.patched():
        raise RuntimeError("the hooks were installed before the plain loops")
    functions = plain_functions()
    train(data)  # untimed: imports, the page cache, first-call costs
    loops = []
    for _ in range(args.before):
        gc.collect()
        loops.append(train(data))
    return loops, functions


# ---------------------------------------------------------------------- (1) step by step


@dataclass
class StepResult:
    times: dict[str, list[float]]  # variant → s per step, in round order
    seconds: float
    observed: int
    expected: int
    stop: float  # s, the tracked run's stop() after its last step (not in the steps)
    saw: list[float]  # s per tracked step in the run's saw(), timed where the hooks call it
    saw_calls: int


def bench_steps(data: Data, url: str, args: argparse.Namespace) -> StepResult:
    wrapped = wrapped_calls()
    models = {name: new_model() for name in VARIANTS}
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    run = paused(JOB + ".steps", url)
    saw = SawClock(run)
    in_saw: list[float] = []
    clock = time.perf_counter
    for name in VARIANTS:  # untimed: a first step each
        with variant(name, wrapped, run):
            step(data, new_model(), 0, data.checkpoint(name))
    gc.collect()
    began = clock()
    for index in range(args.step_rounds):
        for name in rotation(index):
            with variant(name, wrapped, run):
                before = saw.ns
                start = clock()
                step(data, models[name], index, data.checkpoint(name))
                times[name].append(clock() - start)
                if name == TRACKED:
                    in_saw.append((saw.ns - before) / 1e9)
    seconds = clock() - began
    stopping = clock()
    run.stop()
    stop = clock() - stopping
    # the untimed step read one shard; then a read every round and a checkpoint every `every`
    expected = 1 + args.step_rounds + args.step_rounds // data.every
    return StepResult(times, seconds, sum(run.calls.values()), expected, stop, in_saw, saw.calls)


def print_steps(result: StepResult, plain: list[Loop], args: argparse.Namespace) -> list[str]:
    """The table of (1); returns the verdict."""
    rounds = args.step_rounds
    print(
        f"\n== (1) step by step: {rounds:,} rounds, each one step of every variant in a rotating order, "
        f"{result.seconds:.0f} s =="
    )
    header = (
        f"{'variant':<28}{'steps':>7}{'mean ms':>9}{'median ms':>11}{'p90 ms':>9}"
        f"{'- original, per round: mean µs':>32}{'median µs':>11}{'mean %':>9}"
    )
    print_header(header)
    base = result.times[ORIGINAL]
    base_mean = statistics.fmean(base)
    plain_steps = [s for loop in plain for s in loop.steps]
    rows: list[tuple[str, list[float]]] = [(f"plain, before install ({len(plain)} runs)", plain_steps)]
    rows += [(name, result.times[name]) for name in VARIANTS]
    verdicts: list[str] = []
    for label, times in rows:
        figures = (
            f"{label:<28}{len(times):>7,}{statistics.fmean(times) * 1e3:>9.3f}"
            f"{statistics.median(times) * 1e3:>11.3f}{_p90(times) * 1e3:>9.3f}"
        )
        if label in (IDLE, TRACKED):
            diffs = [(t - o) * 1e6 for t, o in zip(times, base, strict=True)]
            mean = statistics.fmean(diffs)
            half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))
            share, upper = mean / (base_mean * 1e6), (mean + half) / (base_mean * 1e6)
            figures += f"{f'{mean:+.1f} ± {half:.1f}':>32}{statistics.median(diffs):>+11.1f}{share:>+9.2%}"
            if label == TRACKED:
                lower = (mean - half) / (base_mean * 1e6)
                verdicts.append(
                    f"per step, (1): {mean:+.1f} µs = {share:+.2%} of a {base_mean * 1e3:.2f} ms step — "
                    f"{_verdict(share, lower, upper)}"
                )
        print(figures)
    print(
        "- original: each round's step minus the original step of the same round; ± the 95% interval of "
        "the mean; mean %: of the original's mean step. The plain steps ran first, not interleaved"
    )
    added = statistics.fmean(result.times[TRACKED]) - base_mean
    in_saw = statistics.fmean(result.saw)
    per_call = sum(result.saw) / max(1, result.saw_calls - 1) * 1e6  # the untimed step's call apart
    print(
        f"the run's saw() (describing the calls and recording them, timed where the hooks call it) took "
        f"{in_saw * 1e6:.1f} µs a tracked step, {per_call:.1f} µs a call; at {added * 1e6:+.1f} µs a step, "
        f"1% holds for steps of {added / TARGET * 1e3:.0f} ms and more"
    )
    print(
        f"the tracked run saw {result.observed:,} calls ({result.expected:,} expected: its steps' reads "
        f"and checkpoints, none of the others'); its stop() afterwards took {result.stop:.2f} s (see (4))"
    )
    if result.observed != result.expected:
        raise RuntimeError("the tracked run did not see exactly its own steps' calls")
    return verdicts


def _verdict(share: float, lower: float, upper: float) -> str:
    """PASS or FAIL on the estimate, and whether its 95% interval agrees."""
    interval = f"95% interval {lower:+.2%} to {upper:+.2%}"
    if share < TARGET:
        return f"PASS ({interval})" if upper < TARGET else f"PASS on the mean, not shown ({interval})"
    return f"FAIL ({interval})" if lower >= TARGET else f"FAIL on the mean, not shown ({interval})"


def _p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


# ---------------------------------------------------------------------- (2) whole runs


@dataclass
class Runs:
    loops: dict[str, list[Loop]] = field(default_factory=lambda: {name: [] for name in VARIANTS})
    starts: list[float] = field(default_factory=list)  # tracked: track()
    stops: list[float] = field(default_factory=list)  # tracked: stop()
    batches: list[float] = field(default_factory=list)  # tracked: the batch, built again after stop()
    seconds: float = 0.0

    def walls(self, name: str) -> list[float]:
        return [loop.wall for loop in self.loops[name]]

    def wholes(self) -> list[float]:
        """track() + the loop + stop(), per tracked run."""
        loops = self.loops[TRACKED]
        return [s + loop.wall + e for s, loop, e in zip(self.starts, loops, self.stops, strict=True)]


def bench_runs(data: Data, url: str, args: argparse.Namespace) -> Runs:
    wrapped = wrapped_calls()
    runs = Runs()
    clock = time.perf_counter

    def timed(name: str) -> None:
        gc.collect()
        if name != TRACKED:
            with variant(name, wrapped):
                runs.loops[name].append(train(data))
            return
        began = clock()
        run = tp.track(job=JOB, store=url)
        started = clock()
        with run:
            loop = train(data)
            ending = clock()
        ended = clock()
        again = clock()
        run.batch()
        runs.batches.append(clock() - again)
        if not run.stored or run.problems or sum(run.calls.values()) != data.calls:
            raise RuntimeError(
                f"the tracked run was not recorded as it should be: stored {run.stored}, "
                f"{len(run.problems)} problems, {sum(run.calls.values())} of {data.calls} calls observed"
            )
        runs.loops[TRACKED].append(loop)
        runs.starts.append(started - began)
        runs.stops.append(ended - ending)

    for name in VARIANTS:  # an untimed run each, then forget it
        timed(name)
    runs = Runs()
    began = clock()
    for index in range(args.rounds):
        for name in rotation(index):
            timed(name)
    runs.seconds = clock() - began
    return runs


def print_runs(runs: Runs, plain: list[Loop], data: Data, args: argparse.Namespace, steps: StepResult) -> str:
    """The tables of (2); returns the verdict on a whole run, from (1)'s step and (2)'s once-a-run
    costs (the runs themselves are too noisy to tell 1%)."""
    print(
        f"\n== (2) whole runs of {data.steps} steps ({data.calls} hooked calls): {args.rounds} rounds of a "
        f"run of every variant in a rotating order, {runs.seconds:.0f} s =="
    )
    header = f"{'variant':<34}{'run ms':>9}{'min–max ms':>16}{'cpu ms':>9}{'vs original':>13}{'per step':>12}"
    print_header(header)
    base = statistics.median(runs.walls(ORIGINAL))

    def row(label: str, walls: list[float], cpus: list[float]) -> None:
        wall = statistics.median(walls)
        cpu = f"{statistics.median(cpus) * 1e3:>9.0f}" if cpus else f"{'':>9}"
        spread = f"{min(walls) * 1e3:,.0f}–{max(walls) * 1e3:,.0f}"
        vs = f"{wall / base - 1:>+13.2%}{(wall - base) / data.steps * 1e6:>+10.1f}µs"
        print(f"{label:<34}{wall * 1e3:>9,.0f}{spread:>16}{cpu}{vs}")

    row(f"plain, before install ({len(plain)})", [x.wall for x in plain], [x.cpu for x in plain])
    for name in VARIANTS:
        label = "tracked: the loop" if name == TRACKED else name
        row(label, runs.walls(name), [x.cpu for x in runs.loops[name]])
    row("tracked: track() + loop + stop()", runs.wholes(), [])
    for label, values in (("  track()", runs.starts), ("  stop()", runs.stops)):
        print(f"{label:<34}{statistics.median(values) * 1e3:>9.1f}{_span_ms(values):>16}")
    batch = statistics.median(runs.batches)
    print(f"{'    building the batch':<34}{batch * 1e3:>9.1f}{_span_ms(runs.batches):>16}")
    print(f"{'    the rest: open, ingest, close':<34}{(statistics.median(runs.stops) - batch) * 1e3:>9.1f}")
    print("cpu: this process, pyarrow's threads included; building the batch: timed again after stop()")

    print(f"\n{'per round, against original':<34}{'median':>9}{'min':>9}{'max':>9}{'p(≥1%)':>9}")
    for label, walls in (
        (IDLE, runs.walls(IDLE)),
        ("tracked: the loop", runs.walls(TRACKED)),
        ("tracked: track() + loop + stop()", runs.wholes()),
    ):
        originals_ = runs.walls(ORIGINAL)
        ratios = [w / o - 1 for w, o in zip(walls, originals_, strict=True)]
        p = sign_flip_p(
            [w - (1 + TARGET) * o for w, o in zip(walls, originals_, strict=True)], alternative="less"
        )
        print(
            f"{label:<34}{statistics.median(ratios):>+9.2%}{min(ratios):>+9.2%}{max(ratios):>+9.2%}{p:>9.3f}"
        )
    print(
        "p(≥1%): one-sided sign-flip test on the rounds, H0 overhead ≥ 1% (a small p: below it); the "
        "runs move by 10–15% on this machine, so (1) is the step's figure"
    )
    once = statistics.median(runs.starts) + statistics.median(runs.stops)
    step_time = statistics.fmean(steps.times[ORIGINAL])
    added = statistics.fmean(steps.times[TRACKED]) - step_time
    print(
        f"track() + stop() = {once * 1e3:.1f} ms once a run = {once / step_time:.1f} of (1)'s steps: alone, "
        f"under 1% of a run from about {once / (TARGET * step_time):,.0f} steps on, if stop() did not grow "
        "with the run (4)"
    )
    share = (data.steps * added + once) / (data.steps * step_time)
    return (
        f"whole run of {data.steps} steps, (1)'s step and (2)'s track() + stop(): ({data.steps} × "
        f"{added * 1e6:+.1f} µs + {once * 1e3:.1f} ms) / ({data.steps} × {step_time * 1e3:.2f} ms) = "
        f"{share:+.2%} — {'PASS' if share < TARGET else 'FAIL'}"
    )


def _span_ms(values: Sequence[float]) -> str:
    return f"{min(values) * 1e3:,.1f}–{max(values) * 1e3:,.1f}"


# ---------------------------------------------------------------------- (3) per call


@dataclass
class MicroCall:
    label: str
    hook: str  # the hooked call, `module.attribute`
    call: Callable[[], Any]
    shown: Call  # the call as the hooks show it to a run, for the describer alone
    times: dict[str, list[int]] = field(default_factory=lambda: {name: [] for name in VARIANTS})
    saw: list[int] = field(default_factory=list)  # ns in the run's saw() per tracked call


def bench_calls(data: Data, url: str, args: argparse.Namespace) -> None:
    small = pd.read_parquet(data.shards[0]).head(MICRO_ROWS)
    tiny = str(data.root / "tiny.parquet")
    small.to_parquet(tiny)
    model = new_model()
    model.partial_fit(small[data.features], small["label"], classes=CLASSES)
    dumped, written = str(data.root / "micro.joblib"), str(data.root / "micro-out.parquet")
    calls = [
        MicroCall(
            f"pd.read_parquet ({MICRO_ROWS} rows, {len(small.columns)} columns)",
            "pandas.read_parquet",
            lambda: pd.read_parquet(tiny),
            Call("pandas.read_parquet", (tiny,), {}, small),
        ),
        MicroCall(
            "joblib.dump (the fitted SGDClassifier)",
            "joblib.dump",
            lambda: joblib.dump(model, dumped),
            Call("joblib.dump", (model, dumped), {}, [dumped]),
        ),
        MicroCall(
            f"DataFrame.to_parquet ({MICRO_ROWS} rows)",
            "pandas.DataFrame.to_parquet",
            lambda: small.to_parquet(written),
            Call("pandas.DataFrame.to_parquet", (small, written), {}, None),
        ),
    ]
    wrapped = wrapped_calls()
    clock = time.perf_counter_ns
    began = time.perf_counter()
    for call in calls:
        # A run per kind of call: a run of only reads, or only writes, stops fast (see (4)).
        run = paused(f"{JOB}.calls.{call.hook}", url)
        saw = SawClock(run)
        for name in VARIANTS:  # untimed
            with variant(name, wrapped, run):
                for _ in range(10):
                    call.call()
        gc.collect()
        for index in range(args.calls):
            for name in rotation(index):
                with variant(name, wrapped, run):
                    before = saw.ns
                    start = clock()
                    call.call()
                    call.times[name].append(clock() - start)
                    if name == TRACKED:
                        call.saw.append(saw.ns - before)
        run.stop()
    seconds = time.perf_counter() - began

    print(
        f"\n== (3) per call: {args.calls:,} rounds of one call of every variant in a rotating order, per "
        f"call, {seconds:.0f} s =="
    )
    by_name = {hook.call: hook for hook in HOOKS}
    header = f"{'call (median µs)':<40}{'original':>10}{'hooks idle':>12}{'tracked':>10}"
    header += f"{'idle adds':>11}{'tracked adds':>14}{'in saw()':>10}{'describe, warm':>16}"
    print_header(header)
    for call in calls:
        medians = {name: statistics.median(call.times[name]) / 1000 for name in VARIANTS}
        idle = statistics.median(_diffs(call.times[IDLE], call.times[ORIGINAL])) / 1000
        tracked = statistics.median(_diffs(call.times[TRACKED], call.times[ORIGINAL])) / 1000
        warm = describe_cost(by_name[call.hook], call.shown)
        print(
            f"{call.label:<40}{medians[ORIGINAL]:>10.1f}{medians[IDLE]:>12.1f}{medians[TRACKED]:>10.1f}"
            f"{idle:>+11.1f}{tracked:>+14.1f}{statistics.median(call.saw) / 1000:>10.1f}{warm:>16.1f}"
        )
    noop = noop_costs(url)
    print(
        f"{'a no-op behind the wrapper (tight loop)':<40}{noop[0]:>10.2f}{noop[1]:>12.2f}{noop[2]:>10.2f}"
        f"{noop[1] - noop[0]:>+11.2f}{noop[2] - noop[0]:>+14.2f}"
    )
    print(
        "adds: the median of the per-round differences; in saw(): the run describing the call and "
        "recording it, timed where the hooks call it (median); describe, warm: the describer alone on "
        f"the same call, {DESCRIBE_CALLS:,} times in a tight loop (best of 3). The no-op's hook describes "
        "nothing: its tracked row is the wrapper's floor with a run (the inside flag set and reset, the "
        "run's check)"
    )


def _diffs(times: Sequence[int], base: Sequence[int]) -> list[int]:
    return [t - b for t, b in zip(times, base, strict=True)]


def noop_costs(url: str) -> tuple[float, float, float]:
    """µs per call of a no-op: itself, behind the hooks' wrapper with no run, with a run."""

    def noop() -> None:
        return None

    hook = Hook("bench", "noop", lambda call, naming: None)
    wrapper = hooks._wrapped(noop, hook)  # the wrapper `install` sets on each hooked call

    def per_call(function: Callable[[], Any]) -> float:
        best = float("inf")
        for _ in range(5):  # the best of five: a tight loop has no other noise to keep
            began = time.perf_counter_ns()
            for _ in range(NOOP_CALLS):
                function()
            best = min(best, (time.perf_counter_ns() - began) / NOOP_CALLS / 1000)
        return best

    plain, idle = per_call(noop), per_call(wrapper)
    with tp.track(job=JOB + ".noop", store=url):
        tracked = per_call(wrapper)
    return plain, idle, tracked


def describe_cost(hook: Hook, call: Call) -> float:
    """µs per call of the hook's describer on `call` (what a run does after the call returns)."""
    naming = Naming()
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter_ns()
        for _ in range(DESCRIBE_CALLS):
            hook.describe(call, naming)
        best = min(best, (time.perf_counter_ns() - began) / DESCRIBE_CALLS / 1000)
    return best


# ---------------------------------------------------------------------- (4) stop() and the run's length


def bench_lengths(data: Data, url: str, args: argparse.Namespace, step_time: float) -> list[str]:
    """Runs fed a whole run's calls without I/O (`saw`, as the hooks do after a call returns), for
    several lengths: how the batch and `stop()` grow. Returns the verdict on the longest."""
    by_name = {hook.call: hook for hook in HOOKS}
    read, dump = by_name["pandas.read_parquet"], by_name["joblib.dump"]
    write = by_name["pandas.DataFrame.to_parquet"]
    frame = pd.read_parquet(data.shards[0]).head(MICRO_ROWS)  # only its columns are looked at
    model = new_model()
    model.partial_fit(frame[data.features], frame["label"], classes=CLASSES)
    scores = frame[["id"]].assign(score=0.0)
    checkpoint = data.checkpoint()
    print(
        f"\n== (4) stop() against the run's length: a whole run's calls fed to a run (no I/O): a read a "
        f"step, a checkpoint every {data.every}, the held-out read and the write =="
    )
    header = (
        f"{'steps':>7}{'distinct':>9}{'edges':>7}{'the calls ms':>14}{'batch ms':>11}{'stop() ms':>11}"
        f"{'stop() in steps':>17}{'stop() / the steps':>20}"
    )
    print_header(header)
    last = ""
    for steps in args.lengths:
        gc.collect()
        clock = time.perf_counter
        began = clock()
        run = tp.track(job=f"{JOB}.length-{steps}", store=url)
        for index in range(steps):
            run.saw(read, Call(read.call, (data.shards[index % len(data.shards)],), {}, frame))
            if (index + 1) % data.every == 0:
                run.saw(dump, Call(dump.call, (model, checkpoint), {}, [checkpoint]))
        run.saw(read, Call(read.call, (data.holdout,), {}, frame))
        run.saw(write, Call(write.call, (scores, data.predictions), {}, None))
        fed = clock()
        batch = run.batch()
        built = clock()
        run.stop()
        stopped = clock()
        if not run.stored:
            raise RuntimeError(f"the {steps}-step run was not stored")
        share = (stopped - built) / (steps * step_time)
        print(
            f"{steps:>7,}{len(run.observed):>9,}{len(batch.edges):>7,}{(fed - began) * 1e3:>14.1f}"
            f"{(built - fed) * 1e3:>11.1f}{(stopped - built) * 1e3:>11.1f}"
            f"{(stopped - built) / step_time:>17,.1f}{share:>20.2%}"
        )
        verdict = "PASS" if share < TARGET else "FAIL"
        last = f"stop() alone at {steps:,} steps, (4): {share:.2%} of the steps' time — {verdict}"
    print(
        f"stop() / the steps: against that many of (1)'s original steps ({step_time * 1e3:.2f} ms); the "
        "calls: track() and feeding them (describing, without the I/O); batch: built once before stop()"
    )
    return [last] if last else []


# ---------------------------------------------------------------------- main


def machine() -> str:
    packages = ", ".join(
        f"{name} {version(name)}" for name in ("pandas", "pyarrow", "scikit-learn", "joblib")
    )
    return python_machine(packages)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--step-rounds",
        type=int,
        default=1_500,
        help="(1): rounds of one step of each variant (default 1,500)",
    )
    parser.add_argument("--steps", type=int, default=100, help="(2): steps of a whole run (default 100)")
    parser.add_argument(
        "--rounds", type=int, default=8, help="(2): rounds of a whole run of each variant (default 8)"
    )
    parser.add_argument(
        "--before", type=int, default=5, help="whole runs before the hooks are installed (default 5)"
    )
    parser.add_argument(
        "--calls", type=int, default=600, help="(3): rounds of one call of each variant (default 600)"
    )
    parser.add_argument(
        "--lengths",
        default="100,1000,2000,4000",
        help="(4): steps of the runs timing stop() (default 100,1000,2000,4000)",
    )
    parser.add_argument("--rows", type=int, default=5_000, help="rows a shard (default 5,000)")
    parser.add_argument("--features", type=int, default=10, help="feature columns (default 10)")
    parser.add_argument("--shards", type=int, default=20, help="Parquet shards, read in turn (default 20)")
    parser.add_argument("--every", type=int, default=10, help="steps between checkpoints (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the data (default 1)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 200 step rounds, 20-step runs, 2 plain, 3 rounds, 100 calls, lengths 100,300",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.step_rounds, args.steps, args.before, args.rounds = 200, 20, 2, 3
        args.calls, args.lengths = 100, "100,300"
    try:
        args.lengths = [int(n) for n in args.lengths.split(",") if n.strip()]
    except ValueError:
        parser.error("--lengths: step counts, e.g. 100,1000")
    sizes = (args.step_rounds, args.steps, args.rounds, args.before, args.calls, args.rows, args.features)
    if min(*sizes, args.shards, args.every, *args.lengths) < 1 or args.step_rounds < 2:
        parser.error("every count must be at least 1 (--step-rounds at least 2)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    began = time.perf_counter()
    print(machine())
    if args.quick:
        print("quick run (--quick): a smoke test, too few steps and runs for figures to quote")
    with tempfile.TemporaryDirectory(prefix="tracelake-ai-bench-") as directory:
        root = Path(directory)
        data = make_data(root, args)
        url = f"sqlite:///{root / 'lineage.db'}"
        LineageStore(url).close()  # the schema, before any clock: a job's store already exists
        size = sum(os.path.getsize(path) for path in data.shards) / len(data.shards) / 2**20
        print(
            f"a step: pd.read_parquet of one of {args.shards} shards ({args.rows:,} rows: id, "
            f"{args.features} float features, label; {size:.2f} MiB), SGDClassifier.partial_fit, every "
            f"{args.every}th step joblib.dump; a whole run: {args.steps} steps, then a held-out shard read, "
            "scored and written with DataFrame.to_parquet"
        )
        plain, functions = bench_plain(data, args)
        tp.track(job=JOB + ".warm-up", store=url).stop()  # installs the hooks for the process
        with originals(wrapped_calls()):
            if plain_functions() != functions:
                raise RuntimeError("the functions put back are not the ones the plain runs called")
        steps = bench_steps(data, url, args)
        verdicts = print_steps(steps, plain, args)
        verdicts.append(print_runs(bench_runs(data, url, args), plain, data, args, steps))
        step_time = statistics.fmean(steps.times[ORIGINAL])
        bench_calls(data, url, args)
        verdicts += bench_lengths(data, url, args, step_time)
        with LineageStore(url) as store:
            counts = store.counts()
        print(f"\nstore at the end: {counts}")
    print(f"\ntarget: under {TARGET:.0%} of a training step")
    for line in verdicts:
        print(f"  {line}")
    print(f"{load_change(load_before)}; total {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
