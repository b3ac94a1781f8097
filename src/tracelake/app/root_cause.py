"""Root cause: "this table looks wrong since Tuesday — why?" (`tracelake why`).

Everything upstream of the asset that changed within the window, ranked: runs that failed or
ran far longer than they used to, process versions that replaced others (what the process
reads or writes changed), schema changes and drops, inputs that appeared or vanished, and
entity instances someone marked tainted. Each comes with its time, its distance (hops upstream
from the asset) and one shortest route from it to the asset.

The ranking is a score a reader can check: how strongly the kind of change explains bad data
(`SEVERITY`) times `DECAY` per hop, nearest and strongest first; ties go to the earlier change,
the likelier start of the trouble. The walk is the graph's (`graph.upstream_window`), the facts
the store's (`store.timeline`, lifecycle changes, instance history).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tracelake.app.service import Tracelake
from tracelake.graph.index import GraphIndex
from tracelake.graph.upstream_window import UpstreamWindow, upstream_window
from tracelake.model import AssetChange, InputError, Lifecycle, UnknownNodeError, shifted, utcnow
from tracelake.store.schema import from_micros, to_micros
from tracelake.store.timeline import runs_in_window, version_starts
from tracelake.temporal.instances import EntityStore

DEFAULT_WINDOW = timedelta(days=7)
DECAY = 0.8  # a change one hop further up explains less
# A completed run this many times its process's usual length, and at least SLOW_MARGIN longer.
SLOW_FACTOR = 2.0
SLOW_MARGIN = timedelta(minutes=1)
MIN_EARLIER_RUNS = 3  # what "usual" needs to mean anything

SEVERITY: dict[str, float] = {
    "run_failed": 1.0,
    "instance_tainted": 1.0,
    "process_changed": 0.9,
    "dropped": 0.9,
    "input_removed": 0.85,
    "schema_changed": 0.8,
    "truncated": 0.8,
    "input_added": 0.7,
    "renamed": 0.7,
    "created": 0.6,
    "run_slow": 0.6,
    "run_failed_then_recovered": 0.5,
    "process_new": 0.5,
    "overwritten": 0.3,
}
_LIFECYCLE_KIND = {
    "ALTER": "schema_changed",
    "DROP": "dropped",
    "TRUNCATE": "truncated",
    "RENAME": "renamed",
    "CREATE": "created",
    "OVERWRITE": "overwritten",
}
_FAILED = {"FAIL", "FAILED", "ABORT"}


@dataclass(frozen=True, slots=True)
class Hop:
    source: str
    target: str
    process: str

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "target": self.target, "process": self.process}


@dataclass(frozen=True, slots=True)
class Cause:
    """One change upstream: what (`kind`), to which node (`subject`: a process or an asset),
    when, how far up, and the route from it down to the asset asked about."""

    kind: str
    subject: str
    at: datetime
    distance: int
    score: float
    detail: str
    route: tuple[Hop, ...] = ()
    run_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "at": self.at.isoformat(),
            "distance": self.distance,
            "score": round(self.score, 4),
            "detail": self.detail,
            "run_id": self.run_id,
            "route": [hop.to_json() for hop in self.route],
        }


@dataclass(slots=True)
class RootCauseView:
    asset: str
    since: datetime
    until: datetime
    upstream_nodes: int  # the nodes the walk reached, the asset not counted
    upstream_processes: int
    causes: list[Cause] = field(default_factory=list)
    shown: int = 0  # how many of the causes the view keeps (all when no limit)

    def to_json(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "upstream_nodes": self.upstream_nodes,
            "upstream_processes": self.upstream_processes,
            "found": len(self.causes),
            "causes": [cause.to_json() for cause in self.causes[: self.shown]],
        }


def why(
    service: Tracelake,
    name: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    depth: int | None = None,
    limit: int | None = None,
) -> RootCauseView:
    """What changed upstream of `name` (an asset or a column) within [since, until], ranked."""
    until = until or utcnow()
    since = since or shifted(until, -DEFAULT_WINDOW)
    if since >= until:
        raise InputError(f"the window is empty: since {since.isoformat()} is not before {until.isoformat()}")
    if depth is not None and depth < 0:
        raise InputError("depth must be 0 or more")
    index = service.index()
    (urn,) = service.resolve([name], index)
    walk = upstream_window(index, index.positions[urn], to_micros(since), to_micros(until), depth)
    found = _Findings(service, index, walk, since, until)
    causes = sorted(found.causes, key=lambda c: (-c.score, c.at, c.subject, c.kind))
    return RootCauseView(
        asset=urn,
        since=since,
        until=until,
        upstream_nodes=len(walk.distance) - 1,
        upstream_processes=len(walk.writes),
        causes=causes,
        shown=len(causes) if limit is None else max(limit, 0),
    )


class _Findings:
    """The causes of one walk, gathered kind by kind."""

    def __init__(
        self, service: Tracelake, index: GraphIndex, walk: UpstreamWindow, since: datetime, until: datetime
    ) -> None:
        self.service, self.index, self.walk = service, index, walk
        self.since, self.until = since, until
        self.causes: list[Cause] = []
        self.hops: dict[int, Hop] = {}
        # an asset's nearest node in the walk (itself, or the nearest of its columns)
        self.nearest: dict[int, int] = {}
        for node, hops in walk.distance.items():
            asset = int(index.asset_of[node])
            if asset >= 0 and (asset not in self.nearest or hops < walk.distance[self.nearest[asset]]):
                self.nearest[asset] = node
        self._processes()
        self._lifecycle()
        self._inputs()
        self._taints()

    def add(self, kind: str, node: int, subject: str, at: datetime, detail: str, **extra: Any) -> None:
        hops = self.walk.distance[node]
        route = extra.pop("route", None) or self.route(node)
        score = SEVERITY[kind] * DECAY**hops
        self.causes.append(Cause(kind, subject, at, hops, score, detail, route, **extra))

    def route(self, node: int) -> tuple[Hop, ...]:
        return tuple(self.hop(edge) for edge in self.walk.route(node))

    def hop(self, edge: int) -> Hop:
        known = self.hops.get(edge)
        if known is None:  # routes of nearby causes share their hops, and each is three URN reads
            index, urns = self.index, self.index.urns
            known = self.hops[edge] = Hop(
                urns[int(index.edge_source[edge])],
                urns[int(index.edge_target[edge])],
                urns[int(index.edge_process[edge])],
            )
        return known

    def _processes(self) -> None:
        writes = self.walk.writes
        if not writes:
            return
        position = {int(self.index.node_ids[process]): process for process in writes}
        store = self.service.store
        for version in version_starts(store, position, self.since, self.until):
            node = writes[position[version.process_id]]
            if version.previous_hash is None:
                detail = f"first seen, {version.edge_count} edges"
                self.add("process_new", node, version.process, version.at, detail)
            elif version.previous_hash != version.content_hash:
                detail = f"its flows changed: {version.previous_edge_count} → {version.edge_count} edges"
                self.add("process_changed", node, version.process, version.at, detail)
        found = runs_in_window(store, position, self.since, self.until)
        for process_id, runs in found.runs.items():
            node = writes[position[process_id]]
            completed = [run.moment for run in runs if run.status == "COMPLETE" and run.moment is not None]
            recovered = max(completed, default=None)  # the process's last completed run in the window
            usual = found.usual_seconds(process_id)
            for run in runs:
                at = run.moment or self.since
                if run.status in _FAILED:
                    if recovered is not None and recovered > at:
                        detail = f"{run.status}; a later run completed at {recovered.isoformat()}"
                        self.add(
                            "run_failed_then_recovered", node, run.process, at, detail, run_id=run.run_id
                        )
                    else:
                        self.add("run_failed", node, run.process, at, run.status, run_id=run.run_id)
                elif run.status == "COMPLETE" and run.started_at and run.ended_at and usual is not None:
                    took = (run.ended_at - run.started_at).total_seconds()
                    if (
                        len(found.earlier[process_id]) >= MIN_EARLIER_RUNS
                        and took >= SLOW_FACTOR * usual
                        and took - usual >= SLOW_MARGIN.total_seconds()
                    ):
                        detail = f"took {_duration(took)}, usually {_duration(usual)}"
                        self.add("run_slow", node, run.process, at, detail, run_id=run.run_id)

    def _lifecycle(self) -> None:
        ids = [int(self.index.node_ids[asset]) for asset in self.nearest]
        changes = [
            change
            for change in self.service.store.changes(since=self.since, until=self.until, asset_ids=ids)
            if change.at > self.since and str(change.change) in _LIFECYCLE_KIND
        ]
        altered = {
            int(self.index.node_ids[self.index.positions[c.asset]])
            for c in changes
            if c.change == Lifecycle.ALTER
        }
        # each ALTER is told against the columns the asset's change before it recorded
        history = self.service.store.changes(until=self.until, asset_ids=altered) if altered else []
        for change in changes:
            kind = _LIFECYCLE_KIND[str(change.change)]
            detail = str(change.change)
            if kind == "schema_changed":
                detail = _schema_detail(change, history)
            elif kind == "renamed" and change.previous:
                detail = f"renamed from {change.previous}"
            node = self.nearest[self.index.positions[change.asset]]
            self.add(kind, node, change.asset, change.at, detail, run_id=change.run_id)

    def _inputs(self) -> None:
        urns = self.index.urns
        for change in self.walk.input_changes:
            kind = "input_added" if change.appeared else "input_removed"
            source, target, process = urns[change.source], urns[change.target], urns[change.process]
            verb = "now reads" if change.appeared else "no longer reads"
            route = (Hop(source, target, process), *self.route(change.target))
            at = from_micros(change.at_us)
            self.add(kind, change.target, process, at, f"{target} {verb} {source}", route=route)

    def _taints(self) -> None:
        entities = EntityStore(self.service.store)
        tainted = entities.tables.tainted_between(self.since, self.until)
        if not tainted:
            return
        assets: dict[str, str] = {}
        for name, entity in entities.definitions().items():
            if entity.asset is None:
                continue
            try:
                (assets[name],) = self.service.resolve([entity.asset], self.index)
            except UnknownNodeError:
                continue  # an entity whose asset lineage has not seen cannot be upstream
        for status in tainted:
            asset = assets.get(status.entity)
            node = self.nearest.get(self.index.positions[asset]) if asset is not None else None
            if asset is None or node is None:
                continue
            start, end = from_micros(status.start * 1_000_000), from_micros(status.end * 1_000_000)
            detail = f"{status.entity} [{start.isoformat()}, {end.isoformat()}) by {status.actor}"
            if status.reason:
                detail += f": {status.reason}"
            self.add("instance_tainted", node, asset, status.changed_at, detail, run_id=status.run_id)


def _schema_detail(change: AssetChange, history: list[AssetChange]) -> str:
    """What an ALTER changed: its columns against those of the asset's last change before it
    that recorded some (`history` is oldest first)."""
    before = None
    for earlier in history:
        if earlier.asset == change.asset and earlier.at < change.at and earlier.columns is not None:
            before = dict(earlier.columns)
    if change.columns is None or before is None:
        return "ALTER"
    after = dict(change.columns)
    parts = [f"+{name}" for name in after if name not in before]
    parts += [f"-{name}" for name in before if name not in after]
    parts += [
        f"{name}: {before[name]} → {after[name]}"
        for name in after
        if name in before and before[name] != after[name]
    ]
    return "ALTER: " + (", ".join(parts) if parts else "same columns")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
