"""How fast the taint planner works out what to redo after ten bad hours, on 10,000 entities.

A random DAG of `--entities` entities (default 10,000, seeded by `--seed`) is built in Python as
`tracelake.temporal.entities.Entity` objects, level by level (30 levels; level 0 holds sources
only): each derived entity reads 1–3 entities of earlier levels, the level just before 60% of the
time, older ones less and less (so the DAG is ~30 levels deep), of periods no coarser than its
own (snapshots and statics excepted); mostly hourly and daily time series, some weekly (Monday)
and monthly ones, sliding windows of 7 or 30 periods, cumulative entities over a week or a
month, a few snapshots and statics. Dependencies take the kind's default range (`check` fills
it), some `all_week`, `last_7_days` or `latest`; a few entities hold two states (`estimated`,
`completed`) with per-state dependencies, and a few live in Europe/Paris, their cross-zone
dependencies matched by instant. The data start on 2024-01-01 and the horizon (`until`) is
2025-01-01: a year of hourly instances. The taint is 10 hours, 2024-06-10 05:00–15:00 UTC, at the
hourly source (among the first five) with the largest downstream closure.

Three ways of answering the same question, in the same run:
  ours:     `EntityGraph.plan` (spans of time, `ranges.affected`), median and max of `--repeat`
            runs after a warm-up; `check` and the `EntityGraph` build are one-off and timed apart;
  baseline: an instance-by-instance BFS, the way one would write it without spans: every
            tainted (entity, instance) node, for each downstream dependency, enumerates the
            downstream instances from the one holding the node's start (for `all_week`-style
            ranges, the start of that week/day/month) up to the horizon, asks `ranges.needed`
            which upstream time each reads, keeps those that overlap the node's instance and
            stops once the needed time starts after it. States are tracked per instance. It runs
            once, under `--baseline-budget` seconds;
  floor:    a plain BFS over the entity DAG from the root (dict of lists, deque): the reachable
            entities, no time at all; the least any planner must do.
The baseline must find the same instances with the same lost states as ours: checked on a small
graph (`--verify-entities`, from every candidate root) and on the full one if it finishes.

    .venv/bin/python bench/taint_plan.py [--entities N] [--seed N] [--repeat N] [--baseline-budget S]
                                         [--verify-entities N]

Pure Python, one thread; about 75 s with the defaults, most of it the baseline's budget.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from machine import load_change, python_machine
from tracelake.temporal.entities import (
    DateRange,
    Dependency,
    Entity,
    EntityState,
    Kind,
    RangeKind,
    TzRule,
    check,
    topological_order,
)
from tracelake.temporal.periods import Period, parse_moment
from tracelake.temporal.planner import EntityGraph, TaintPlan
from tracelake.temporal.ranges import Edge, needed, within_calendar

DATA_START = "2024-01-01"  # every entity's first instance, local to its time zone
UNTIL = parse_moment("2025-01-01T00:00:00+00:00", ZoneInfo("UTC"))
TAINT = ("2024-06-10T05:00:00+00:00", "2024-06-10T15:00:00+00:00")
PLAN_TARGET = 1.0  # seconds (from the issue)
CANDIDATE_ROOTS = 5  # the first hourly sources; the one with the largest closure is tainted
PARIS = "Europe/Paris"
RANK = {Period.HOURLY: 0, Period.DAILY: 1, Period.WEEKLY: 2, Period.MONTHLY: 3}
SOURCE_SHARE = 0.03  # entities without dependencies beyond level 0
PARIS_SHARE = 0.03
TWO_STATE_SHARE = 0.04  # of the time series with 2+ upstreams
LEVELS = 30  # entities are made level by level, each reading earlier levels: the DAG's depth
PREVIOUS_LEVEL_SHARE = 0.6  # an upstream from the level just before; the others further back
OLDER_LEVELS_MEAN = 4.0  # how much further back, on average
KIND_MIX = (
    (Kind.TIME_SERIES, 0.78),
    (Kind.SLIDING_WINDOW, 0.08),
    (Kind.CUMULATIVE, 0.07),
    (Kind.SNAPSHOT, 0.06),
    (Kind.STATIC, 0.01),
)
TIME_SERIES_PERIODS = (
    (Period.HOURLY, 0.45),
    (Period.DAILY, 0.40),
    (Period.WEEKLY, 0.08),
    (Period.MONTHLY, 0.07),
)

T = TypeVar("T")
Instance = tuple[str, int]  # (entity, start epoch)
Lost = dict[Instance, frozenset[str]]  # the states each instance loses


# ---------------------------------------------------------------------- the random DAG


def draw(mix: Sequence[tuple[T, float]], rng: random.Random) -> T:
    return rng.choices([item for item, _ in mix], [weight for _, weight in mix])[0]


def source_entity(name: str, index: int, rng: random.Random) -> Entity:
    """An entity without dependencies: hourly logs mostly, some referentials and daily snapshots."""
    if index < CANDIDATE_ROOTS:
        return Entity(name, Period.HOURLY, start=DATA_START)
    roll = rng.random()
    tz = PARIS if rng.random() < PARIS_SHARE else "UTC"
    if roll < 0.15:
        return Entity(name, None, kind=Kind.STATIC)
    if roll < 0.30:
        return Entity(name, Period.DAILY, tz, Kind.SNAPSHOT, start=DATA_START)
    return Entity(name, Period.HOURLY, tz, start=DATA_START)


def shape(name: str, rng: random.Random) -> Entity:
    """A derived entity's kind, period and the kind's settings; no dependencies yet, UTC."""
    kind = draw(KIND_MIX, rng)
    if kind is Kind.STATIC:
        return Entity(name, None, kind=kind)
    if kind is Kind.SLIDING_WINDOW:
        period = Period.DAILY if rng.random() < 0.7 else Period.HOURLY
        return Entity(name, period, kind=kind, window=rng.choice((7, 30)), start=DATA_START)
    if kind is Kind.CUMULATIVE:
        period = Period.DAILY if rng.random() < 0.8 else Period.HOURLY
        over = rng.choice((Period.WEEKLY, Period.MONTHLY))
        return Entity(name, period, kind=kind, cumulative_over=over, week_start=0, start=DATA_START)
    if kind is Kind.SNAPSHOT:
        period = Period.DAILY if rng.random() < 0.8 else Period.HOURLY
        return Entity(name, period, kind=kind, start=DATA_START)
    period = draw(TIME_SERIES_PERIODS, rng)
    week_start = 0 if period is Period.WEEKLY else None
    return Entity(name, period, kind=kind, week_start=week_start, start=DATA_START)


def readable(upstream: Entity, period: Period | None) -> bool:
    """Derived data reads finer or equal periods, and any snapshot or static."""
    if period is None or upstream.kind in (Kind.SNAPSHOT, Kind.STATIC):
        return True
    return RANK[upstream.period] <= RANK[period]  # type: ignore[index]


def pick_upstreams(
    level: int, layers: list[list[Entity]], period: Period | None, rng: random.Random
) -> list[Entity]:
    """1–3 distinct entities of earlier levels: the level just before most often, older ones less."""
    wanted = rng.choice((1, 1, 2, 2, 2, 3, 3))
    chosen: dict[str, Entity] = {}
    for _ in range(wanted * 20):
        if len(chosen) == wanted:
            break
        back = 1 if rng.random() < PREVIOUS_LEVEL_SHARE else 2 + int(rng.expovariate(1 / OLDER_LEVELS_MEAN))
        candidate = rng.choice(layers[max(0, level - back)])
        if readable(candidate, period):
            chosen[candidate.name] = candidate
    if not chosen:  # the first entities are hourly sources, readable by anyone
        chosen[layers[0][0].name] = layers[0][0]
    return list(chosen.values())


def date_range(kind: Kind, period: Period | None, upstream: Entity, rng: random.Random) -> str | None:
    """A range other than the kind's default, now and then; None lets `check` fill the default."""
    if kind is not Kind.TIME_SERIES or upstream.kind in (Kind.STATIC, Kind.SNAPSHOT):
        return None
    roll = rng.random()
    if roll < 0.06 and period in (Period.HOURLY, Period.DAILY):
        return "all_week"
    if roll < 0.12 and period in (Period.DAILY, Period.WEEKLY):
        return "last_7_days"
    if roll < 0.16:
        return "latest"
    return None


def dependency(
    entity: Entity, upstream: Entity, rng: random.Random, *, estimated: bool = False
) -> Dependency:
    """`entity`'s dependency on `upstream`: in state completed, or either state now and then."""
    text = date_range(entity.kind, entity.period, upstream, rng)
    two_states = "estimated" in upstream.state_names
    either = two_states and (estimated or rng.random() < 0.5)
    cross_zone = upstream.kind is not Kind.STATIC and upstream.timezone != entity.timezone
    return Dependency(
        upstream.name,
        DateRange.parse(text) if text else None,  # type: ignore[arg-type]  # check() fills the default
        ("estimated", "completed") if either else ("completed",),
        TzRule.INSTANT if cross_zone else None,
    )


def derived_entity(name: str, level: int, layers: list[list[Entity]], rng: random.Random) -> Entity:
    entity = shape(name, rng)
    if entity.period is not None and rng.random() < PARIS_SHARE:
        entity = replace(entity, timezone=PARIS)
    upstreams = pick_upstreams(level, layers, entity.period, rng)
    deps = tuple(dependency(entity, upstream, rng) for upstream in upstreams)
    states: tuple[EntityState, ...] = (EntityState("completed", deps),)
    if entity.kind is Kind.TIME_SERIES and len(deps) > 1 and rng.random() < TWO_STATE_SHARE:
        first = dependency(entity, upstreams[0], rng, estimated=True)
        states = (EntityState("estimated", (first,)), EntityState("completed", deps))
    entity = replace(entity, states=states)
    if any(dep.dates and dep.dates.period is Period.WEEKLY for state in states for dep in state.depends_on):
        entity = replace(entity, week_start=0)  # `all_week` needs to know where weeks start
    return entity


def make_entities(count: int, seed: int) -> dict[str, Entity]:
    """The random DAG, level by level (so in a topological order); level 0 holds only sources."""
    rng = random.Random(seed)
    levels = max(2, min(LEVELS, count // 10))
    layers: list[list[Entity]] = [[] for _ in range(levels)]
    for index in range(count):
        name = f"e{index:05d}"
        level = index * levels // count
        if level == 0 or rng.random() < SOURCE_SHARE:
            entity = source_entity(name, index, rng)
        else:
            entity = derived_entity(name, level, layers, rng)
        layers[level].append(entity)
    return {entity.name: entity for layer in layers for entity in layer}


# ---------------------------------------------------------------------- describing it


def upstreams_of(entity: Entity) -> set[str]:
    return {dep.entity for state in entity.states for dep in state.depends_on if dep.entity != entity.name}


def downstream_lists(entities: dict[str, Entity]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {name: [] for name in entities}
    for name, entity in entities.items():
        for upstream in upstreams_of(entity):
            children[upstream].append(name)
    return children


def depth(entities: dict[str, Entity]) -> int:
    """Levels of the DAG: entities on its longest dependency chain."""
    level: dict[str, int] = {}
    for name in topological_order(entities):
        level[name] = 1 + max((level[up] for up in upstreams_of(entities[name])), default=0)
    return max(level.values())


def describe(entities: dict[str, Entity]) -> str:
    deps = sum(len(state.depends_on) for entity in entities.values() for state in entity.states)
    pairs = sum(len(upstreams_of(entity)) for entity in entities.values())
    kinds = Counter(entity.kind.value for entity in entities.values())
    periods = Counter(entity.period.value for entity in entities.values() if entity.period)
    ranges = Counter(str(dep.dates) for e in entities.values() for s in e.states for dep in s.depends_on)
    sources = sum(1 for entity in entities.values() if not upstreams_of(entity))
    paris = sum(1 for entity in entities.values() if entity.timezone == PARIS)
    two = sum(1 for entity in entities.values() if len(entity.states) > 1)
    return (
        f"graph: {len(entities):,} entities ({sources:,} without dependencies), {pairs:,} edges between "
        f"entities ({deps:,} dependencies counting each state's), depth {depth(entities)} levels\n"
        f"  kinds: {_counts(kinds)}\n  periods: {_counts(periods)}\n  ranges: {_counts(ranges)}\n"
        f"  {paris:,} in Europe/Paris (cross-zone dependencies by instant), {two:,} with two states"
    )


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{key} {value:,}" for key, value in counter.most_common())


# ---------------------------------------------------------------------- floor: entity BFS


def reachable(children: dict[str, list[str]], root: str) -> set[str]:
    seen = {root}
    queue = deque((root,))
    while queue:
        for child in children[queue.popleft()]:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return seen


def pick_root(entities: dict[str, Entity], children: dict[str, list[str]]) -> tuple[str, dict[str, int]]:
    closures = {name: len(reachable(children, name)) for name in list(entities)[:CANDIDATE_ROOTS]}
    return max(closures, key=closures.__getitem__), closures


# ---------------------------------------------------------------------- baseline: instance BFS


@dataclass
class BaselineRun:
    lost: Lost
    static: set[str]
    nodes: int  # instance nodes taken off the queue
    needed_calls: int
    seconds: float
    finished: bool


class InstanceBfs:
    """The taint closure one instance at a time, with `ranges.needed` (never `affected`)."""

    def __init__(self, graph: EntityGraph, until: int) -> None:
        self.graph = graph
        self.until = until
        self.horizons: dict[str, tuple[int | None, int]] = {}
        self.needed_calls = 0

    def horizon(self, entity: Entity) -> tuple[int | None, int]:
        if entity.name not in self.horizons:
            self.horizons[entity.name] = self.graph.horizon(entity, self.until)
        return self.horizons[entity.name]

    def run(self, root: str, start: int, end: int, budget: float) -> BaselineRun:
        began = time.perf_counter()
        deadline = began + budget
        entity = self.graph.entities[root]
        lo, hi = self.horizon(entity)
        lost: dict[Instance, set[str]] = {}
        queue: deque[Instance] = deque()
        for moment in entity.calendar.starts(start, end):
            if (lo is None or moment >= lo) and moment < hi:
                lost[(root, moment)] = set(entity.state_names)
                queue.append((root, moment))
        static: set[str] = set()
        nodes = 0
        self.needed_calls = 0
        finished = True
        while queue:
            if nodes % 64 == 0 and time.perf_counter() > deadline:
                finished = False
                break
            name, moment = queue.popleft()
            nodes += 1
            self._expand(name, moment, lost, queue, static)
        frozen = {node: frozenset(states) for node, states in lost.items()}
        return BaselineRun(frozen, static, nodes, self.needed_calls, time.perf_counter() - began, finished)

    def _expand(
        self, name: str, moment: int, lost: dict[Instance, set[str]], queue: deque[Instance], static: set[str]
    ) -> None:
        """Queue every downstream instance that reads this one and so loses a state."""
        upstream = self.graph.entities[name]
        end = upstream.calendar.end(moment)
        gone = lost[(name, moment)]
        for edge in self.graph.children[name] + self.graph.self_edges[name]:
            child = edge.downstream
            if child.kind is Kind.STATIC:
                static.add(child.name)  # reached, never rebuilt (as the planner does)
                continue
            if not set(edge.dependency.states) <= gone:
                continue  # the instance still holds a state this dependency accepts
            for candidate in self._readers(edge, moment, end):
                states = lost.setdefault((child.name, candidate), set())
                if edge.state not in states:
                    states.add(edge.state)
                    queue.append((child.name, candidate))

    def _readers(self, edge: Edge, start: int, end: int) -> Iterator[int]:
        """Downstream instances within the horizon whose needed time overlaps [start, end)."""
        own = edge.downstream.calendar
        first = start
        if edge.dependency.dates.kind is RangeKind.WITHIN:  # reads its whole day/week/month, ahead too
            first = within_calendar(edge, edge.dependency.dates.period).floor(start)  # type: ignore[arg-type]
        lo, hi = self.horizon(edge.downstream)
        candidate = own.floor(first)
        if lo is not None:
            candidate = max(candidate, lo)
        while candidate < hi:
            need_lo, need_hi = needed(edge, candidate)
            self.needed_calls += 1
            if need_lo >= end:
                break  # needed time only moves forward with the instance
            if need_hi > start:
                yield candidate
            candidate = own.shift(candidate, 1)


# ---------------------------------------------------------------------- ours


def plan_instances(graph: EntityGraph, plan: TaintPlan) -> Lost:
    """The plan's steps expanded into instances and the states each loses."""
    found: Lost = {}
    for step in plan.steps:
        calendar = graph.entities[step.entity].calendar
        for moment in calendar.starts(step.start_epoch, step.end_epoch):
            found[(step.entity, moment)] = frozenset(step.states)
    return found


def timed(action: Callable[[], T], repeat: int) -> tuple[list[float], T]:
    """Seconds of `repeat` calls after one untimed warm-up, and the last result."""
    result = action()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - began)
    return times, result


def build(count: int, seed: int) -> tuple[dict[str, Entity], EntityGraph, str]:
    """The checked entities, their graph, and what each one-off step took."""
    clock = time.perf_counter()
    entities = make_entities(count, seed)
    generated = time.perf_counter() - clock
    clock = time.perf_counter()
    problems = check(entities)
    checked = time.perf_counter() - clock
    if problems:
        raise SystemExit(f"check() found {len(problems)} problems, first: {problems[0]}")
    clock = time.perf_counter()
    graph = EntityGraph(entities)
    built = time.perf_counter() - clock
    return (
        entities,
        graph,
        f"generated in {ms(generated)} ms; check() {ms(checked)} ms (no problems, default ranges filled); "
        f"EntityGraph() {ms(built)} ms",
    )


def verify(entities_count: int, seed: int, start: int, end: int) -> str:
    """Ours against the baseline on a small graph, from every candidate root."""
    entities, graph, _ = build(entities_count, seed)
    bfs = InstanceBfs(graph, UNTIL)
    same, instances, downgraded = True, 0, 0
    for root in list(entities)[:CANDIDATE_ROOTS]:
        plan = graph.plan(root, start, end, until=UNTIL)
        ours = plan_instances(graph, plan)
        theirs = bfs.run(root, start, end, budget=float("inf"))
        same = same and ours == theirs.lost and set(plan.static_reached) == theirs.static
        instances += len(ours)
        downgraded += sum(1 for (name, _), states in ours.items() if len(states) < len(entities[name].states))
    verdict = "yes" if same else "NO"
    return (
        f"same instances and lost states as the baseline on {entities_count} entities (seed {seed}), from "
        f"each of the {CANDIDATE_ROOTS} candidate roots ({instances:,} instances in all, {downgraded:,} of "
        f"them downgraded): {verdict}"
    )


# ---------------------------------------------------------------------- printing


def machine() -> str:
    return python_machine("one thread, no Spark")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def plan_summary(graph: EntityGraph, plan: TaintPlan, floor_reached: int) -> str:
    rebuild = sum(step.instances for step in plan.steps if step.action == "rebuild")
    downgrade = sum(step.instances for step in plan.steps if step.action == "downgrade")
    by_entity = Counter(step.entity for step in plan.steps)
    periods = Counter(graph.entities[name].period.value for name in by_entity)  # type: ignore[union-attr]
    return (
        f"plan: {len(by_entity):,} entities to redo ({_counts(periods)}), {len(plan.static_reached)} static "
        f"reached (never rebuilt); the floor reaches {floor_reached:,} entities\n"
        f"  {len(plan.steps):,} steps: {rebuild:,} instances to rebuild, {downgrade:,} to downgrade"
    )


def print_times(
    plan_times: list[float], floor_times: list[float], baseline: BaselineRun, budget: float, ours: int
) -> None:
    median = statistics.median(plan_times)
    print(f"\n{'method':<52}{'median ms':>12}{'max ms':>12}")
    print("-" * 76)
    print(f"{'ours: EntityGraph.plan (spans of time)':<52}{ms(median):>12}{ms(max(plan_times)):>12}")
    if baseline.finished:
        wall = f"{ms(baseline.seconds):>12}{'(1 run)':>12}"
    else:
        wall = f"{'> ' + ms(budget):>12}{'(budget)':>12}"
    print(f"{'baseline: instance-by-instance BFS (ranges.needed)':<52}{wall}")
    floor_median = statistics.median(floor_times)
    print(f"{'floor: entity BFS, dict of lists':<52}{ms(floor_median):>12}{ms(max(floor_times)):>12}")
    done = "finished" if baseline.finished else f"stopped at its {budget:g} s budget"
    print(
        f"  baseline {done}: {baseline.nodes:,} instance nodes expanded, {baseline.needed_calls:,} needed() "
        f"calls, {len(baseline.lost):,} instances found ({len(baseline.lost) / ours:.1%} of ours' {ours:,})"
    )
    speedup = (baseline.seconds if baseline.finished else budget) / median
    print(
        f"  ours: {'> ' if not baseline.finished else ''}{speedup:,.0f}× faster than the baseline; "
        f"{median / floor_median:,.0f}× the floor's time"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=10_000, help="entities in the DAG (default 10,000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random DAG (default 1)")
    parser.add_argument("--repeat", type=int, default=7, help="timed plan() runs after a warm-up (default 7)")
    parser.add_argument(
        "--baseline-budget", type=float, default=60.0, help="seconds the baseline may run (default 60)"
    )
    parser.add_argument(
        "--verify-entities", type=int, default=200, help="entities of the graph checked against the baseline"
    )
    args = parser.parse_args(argv)
    if args.entities <= CANDIDATE_ROOTS or args.verify_entities <= CANDIDATE_ROOTS:
        parser.error(f"a graph needs more than {CANDIDATE_ROOTS} entities")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    began = time.perf_counter()
    print(machine())
    start, end = (parse_moment(text, ZoneInfo("UTC")) for text in TAINT)
    entities, graph, one_off = build(args.entities, args.seed)
    print(describe(entities) + f" (seed {args.seed})")
    print(f"one-off: {one_off}")

    children = downstream_lists(entities)
    root, closures = pick_root(entities, children)
    print(
        f"horizon: instances from {DATA_START} (local) ended by until = {_utc(UNTIL)} UTC; taint: {root} "
        f"(hourly, UTC) [{_utc(start)}, {_utc(end)}), {(end - start) // 3600} instances"
    )
    print(f"  root: the largest closure among the first hourly sources ({_closures(closures)})")

    plan_times, plan = timed(lambda: graph.plan(root, start, end, until=UNTIL), args.repeat)
    floor_times, reached = timed(lambda: reachable(children, root), args.repeat)
    print(plan_summary(graph, plan, len(reached)))
    ours = plan_instances(graph, plan)
    baseline = InstanceBfs(graph, UNTIL).run(root, start, end, args.baseline_budget)
    print_times(plan_times, floor_times, baseline, args.baseline_budget, len(ours))
    if baseline.finished:
        same = ours == baseline.lost and set(plan.static_reached) == baseline.static
        print(f"  same instances and lost states as the baseline on this graph: {'yes' if same else 'NO'}")
    print(verify(args.verify_entities, args.seed, start, end))

    median = statistics.median(plan_times)
    verdict = "MET" if median < PLAN_TARGET else "MISSED"
    print(
        f"\ntarget: plan < {PLAN_TARGET:g} s: {median:.3f} s median, {max(plan_times):.3f} s max: {verdict}"
    )
    print(f"{load_change(load_before)}; total {time.perf_counter() - began:.0f} s")
    return 0


def _utc(moment: int) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M")


def _closures(closures: dict[str, int]) -> str:
    return ", ".join(f"{name} {size:,}" for name, size in closures.items())


if __name__ == "__main__":
    sys.exit(main())
