"""Coverage: how much of the lake lineage sees, and how soon (`tracelake coverage`).

Lineage is only as useful as its coverage (Meta), and late lineage is wrong lineage (DataLeap).
At a moment (now, or any past one: the store is temporal) it counts:

- assets with upstream lineage (a table-level flow enters them) among the assets that existed,
  overall, by the signal of those flows, by layer and by owner;
- columns with upstream lineage, among all columns and among those of assets with upstream;
- tables with table-level lineage in but no column-level lineage into any of their columns;
- assets read but never written (a flow leaves them, or a run read them, and none enters: the
  sources, or lineage missing upstream), written but never read (none leaves them and no run
  read them), and assets with no lineage at all;
- timeliness: for each signal, how long after an observation was true it reached the store
  (`process_observations`: when it was true, when it was first stored), median, p90 and max;
- the history: the same shares at earlier moments, `every` apart.

A node counts from when it entered the lake: the earliest of when the store first saw it, when a
flow into or out of it was first true, and when a run first read it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from tracelake.app.service import Tracelake
from tracelake.graph.coverage import CoverageArrays, coverage_arrays
from tracelake.graph.index import SIGNALS, GraphIndex, positions_of
from tracelake.model import InputError, shifted, utcnow
from tracelake.store.coverage import asset_groups, first_reads, first_seen, observation_lags
from tracelake.store.schema import to_micros
from tracelake.store.sqlstore import LineageStore

LISTED = 20  # names of each list kept in the view (the counts cover them all)
TIMELINESS_WINDOW = timedelta(days=30)
MAX_POINTS = 60


@dataclass(frozen=True, slots=True)
class Share:
    covered: int
    total: int

    @property
    def share(self) -> float | None:
        return self.covered / self.total if self.total else None

    def to_json(self) -> dict[str, Any]:
        share = self.share
        return {
            "covered": self.covered,
            "total": self.total,
            "share": round(share, 4) if share is not None else None,
        }


@dataclass(frozen=True, slots=True)
class Listed:
    """A set of assets: how many, and the names of the first `LISTED` the store saw."""

    count: int
    names: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "first": list(self.names)}


@dataclass(frozen=True, slots=True)
class Lag:
    observations: int
    median_seconds: float
    p90_seconds: float
    max_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "observations": self.observations,
            "median_seconds": round(self.median_seconds, 3),
            "p90_seconds": round(self.p90_seconds, 3),
            "max_seconds": round(self.max_seconds, 3),
        }


@dataclass(slots=True)
class CoverageView:
    at: datetime
    assets: Share  # with upstream lineage
    columns: Share  # with upstream column lineage, of all columns
    columns_of_written: Share  # the same, of the columns of assets with upstream lineage
    by_signal: dict[str, Share]
    by_layer: dict[str, Share]
    by_owner: dict[str, Share]
    table_only: Listed  # table-level lineage in, no column-level
    read_never_written: Listed
    written_never_read: Listed
    no_lineage: Listed
    timeliness: dict[str, Lag] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "assets": self.assets.to_json(),
            "columns": self.columns.to_json(),
            "columns_of_written_assets": self.columns_of_written.to_json(),
            "by_signal": {key: share.to_json() for key, share in self.by_signal.items()},
            "by_layer": {key: share.to_json() for key, share in self.by_layer.items()},
            "by_owner": {key: share.to_json() for key, share in self.by_owner.items()},
            "table_level_only": self.table_only.to_json(),
            "read_never_written": self.read_never_written.to_json(),
            "written_never_read": self.written_never_read.to_json(),
            "no_lineage": self.no_lineage.to_json(),
            "timeliness": {key: lag.to_json() for key, lag in self.timeliness.items()},
            "history": self.history,
        }


def coverage(
    service: Tracelake,
    *,
    at: datetime | None = None,
    points: int = 0,
    every: timedelta = timedelta(days=7),
) -> CoverageView:
    """Coverage at `at` (default now), with `points` earlier moments `every` apart."""
    if points < 0 or points > MAX_POINTS:
        raise InputError(f"the history takes 0 to {MAX_POINTS} points")
    if every <= timedelta(0):
        raise InputError("the history's step must be positive")
    index = service.index()
    store = service.store
    first_read = _first_read(index, store)
    node_seen = _known_since(index, store, first_read)
    groups = asset_groups(store)
    moment = at or utcnow()
    at_us = None if at is None else to_micros(at)
    arrays = coverage_arrays(index, node_seen <= to_micros(moment), at_us)
    view = _view(index, arrays, moment, groups, first_read <= to_micros(moment))
    view.timeliness = _timeliness(index, service, moment)
    for k in range(points, 0, -1):
        earlier = shifted(moment, -k * every)
        past = coverage_arrays(index, node_seen <= to_micros(earlier), to_micros(earlier))
        view.history.append(_point(earlier, past))
    view.history.append(_point(moment, arrays))
    return view


def _known_since(index: GraphIndex, store: LineageStore, first_read: np.ndarray) -> np.ndarray:
    """When each node (by position) entered the lake, epoch µs: the earliest of when the store
    first saw it, when a flow into or out of it was first true and when a run first read it (a log
    read today tells of tables that were there long before)."""
    known = first_read.copy()
    ids, seen = first_seen(store)
    found = positions_of(index.node_ids, ids)
    np.minimum.at(known, found[found >= 0], seen[found >= 0])
    for ends in (index.edge_source, index.edge_target):
        np.minimum.at(known, ends, index.edge_valid_from)
    fields = index.asset_of >= 0
    # an asset entered the lake no later than its first column did
    np.minimum.at(known, index.asset_of[fields], known[fields])
    return known


def _first_read(index: GraphIndex, store: LineageStore) -> np.ndarray:
    """When a run first read each node (by position) without writing from it; never: the largest µs."""
    first = np.full(index.n_nodes, np.iinfo(np.int64).max, dtype=np.int64)
    ids, at = first_reads(store)
    positions = positions_of(index.node_ids, ids)
    first[positions[positions >= 0]] = at[positions >= 0]
    return first


def _view(
    index: GraphIndex,
    arrays: CoverageArrays,
    moment: datetime,
    groups: Mapping[int, tuple[str | None, str | None]],
    read_by_runs: np.ndarray,
) -> CoverageView:
    assets = arrays.assets
    written, read = arrays.written, arrays.read | (read_by_runs & assets)
    of_written = arrays.fields & written[np.maximum(index.asset_of, 0)] & (index.asset_of >= 0)
    by_owner: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_layer: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for position in np.flatnonzero(assets).tolist():
        owner, layer = groups.get(int(index.node_ids[position]), (None, None))
        covered = int(written[position])
        for bucket, key in ((by_owner, owner), (by_layer, layer)):
            counts = bucket[key or "(none)"]
            counts[0] += covered
            counts[1] += 1
    total = int(assets.sum())
    return CoverageView(
        at=moment,
        assets=Share(int(written.sum()), total),
        columns=Share(int(arrays.fields_covered.sum()), int(arrays.fields.sum())),
        columns_of_written=Share(int((arrays.fields_covered & of_written).sum()), int(of_written.sum())),
        by_signal={signal: Share(int(found.sum()), total) for signal, found in arrays.written_by.items()},
        by_layer={key: Share(*counts) for key, counts in sorted(by_layer.items())},
        by_owner={key: Share(*counts) for key, counts in sorted(by_owner.items())},
        table_only=_listed(index, written & ~arrays.columns_written),
        read_never_written=_listed(index, read & ~written),
        written_never_read=_listed(index, written & ~read),
        no_lineage=_listed(index, assets & ~written & ~read),
    )


def _listed(index: GraphIndex, chosen: np.ndarray) -> Listed:
    positions = np.flatnonzero(chosen)  # in store id order: the order they were first seen
    return Listed(len(positions), tuple(index.urns[p] for p in positions[:LISTED].tolist()))


def _point(moment: datetime, arrays: CoverageArrays) -> dict[str, Any]:
    total = int(arrays.assets.sum())
    return {
        "at": moment.isoformat(),
        "assets": Share(int(arrays.written.sum()), total).to_json(),
        "columns": Share(int(arrays.fields_covered.sum()), int(arrays.fields.sum())).to_json(),
        "by_signal": {
            signal: Share(int(found.sum()), total).to_json() for signal, found in arrays.written_by.items()
        },
        "table_level_only": int((arrays.written & ~arrays.columns_written).sum()),
    }


def _timeliness(index: GraphIndex, service: Tracelake, moment: datetime) -> dict[str, Lag]:
    """Each signal's lag, over the observations true in the `TIMELINESS_WINDOW` before `moment`;
    an observation's signal is that of its process's first edge."""
    process_ids, lags = observation_lags(
        service.store, to_micros(shifted(moment, -TIMELINESS_WINDOW)), to_micros(moment)
    )
    if not len(lags):
        return {}
    processes, first_edge = np.unique(index.edge_process, return_index=True)
    signal_of = np.full(index.n_nodes, -1, dtype=np.int64)
    signal_of[processes] = index.edge_signal[first_edge]
    positions = positions_of(index.node_ids, process_ids)
    signals = np.where(positions >= 0, signal_of[np.maximum(positions, 0)], -1)
    found = {}
    for code, signal in enumerate(SIGNALS):
        mine = np.sort(lags[signals == code])
        if len(mine):
            found[str(signal)] = Lag(
                len(mine), float(np.median(mine)), float(np.quantile(mine, 0.9)), float(mine[-1])
            )
    return found
