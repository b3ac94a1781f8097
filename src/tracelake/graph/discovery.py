"""Discovery sessions: from "our `religion` field" to the reviewed set of everything that holds it.

A session starts from labelled nodes. Each round follows the flows out of its frontier: along
strong edges (at or above the session's confidence threshold, of a carrying transformation) the
walk goes on by itself and the nodes reached join the set; an edge below the threshold stops
it, and the node behind it becomes a candidate for a person (or a rule) to decide. So does a
coarse flow out of a reached field's table: a table-level flow with no column lineage (a
training config that names the table) may carry any of its columns. An included
candidate is the next round's frontier; an excluded one is out, and so is everything the session
reached only through it (the exclusion cascades). Rounds repeat until nothing new is found: the
session is stable, and its set, with the flows that justify each member, is the result.

The session is plain data (`to_dict`/`from_dict`), so it can be stored, resumed and shared by
id; the functions here are pure over a `GraphIndex`.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tracelake.graph.index import FIELD, GraphIndex, gather_slots
from tracelake.graph.propagate import CARRYING
from tracelake.graph.traverse import EdgeFilter, TraversalFilters, edge_filter, sorted_unique
from tracelake.model import Confidence, InputError, Transformation

State = Literal["source", "reached", "candidate", "included", "excluded"]
IN_SET: frozenset[str] = frozenset({"source", "reached", "included"})


class DiscoveryError(InputError):
    """A decision the session cannot take (an unknown node, one that is not a candidate)."""


@dataclass
class Member:
    state: State
    round: int
    via: list[str] = field(default_factory=list)  # the nodes it was reached from (its flows)
    reason: str = ""
    decided_by: str = ""


@dataclass
class Session:
    label: str
    threshold: Confidence = Confidence.HIGH
    transformations: frozenset[Transformation] = CARRYING
    id: str = field(default_factory=lambda: f"discovery-{uuid.uuid4().hex[:12]}")
    round: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    frontier: list[str] = field(default_factory=list)  # to expand in the next round

    @property
    def candidates(self) -> list[str]:
        return sorted(urn for urn, member in self.members.items() if member.state == "candidate")

    @property
    def confirmed(self) -> list[str]:
        return sorted(urn for urn, member in self.members.items() if member.state in IN_SET)

    @property
    def stable(self) -> bool:
        return not self.frontier and not self.candidates

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "threshold": self.threshold.value,
            "transformations": sorted(t.value for t in self.transformations),
            "round": self.round,
            "frontier": list(self.frontier),
            "members": {urn: _member_data(m) for urn, m in self.members.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        members = {
            urn: Member(m["state"], m["round"], list(m["via"]), m.get("reason", ""), m.get("by", ""))
            for urn, m in data["members"].items()
        }
        return cls(
            label=data["label"],
            threshold=Confidence(data["threshold"]),
            transformations=frozenset(Transformation(t) for t in data["transformations"]),
            id=data["id"],
            round=int(data["round"]),
            members=members,
            frontier=list(data["frontier"]),
        )


def _member_data(member: Member) -> dict[str, Any]:
    return {
        "state": member.state,
        "round": member.round,
        "via": member.via,
        "reason": member.reason,
        "by": member.decided_by,
    }


def start(index: GraphIndex, label: str, sources: list[str], **options: Any) -> Session:
    """A new session from `sources` (nodes holding `label`)."""
    if not sources:
        raise DiscoveryError(f"no node holds {label!r}: nothing to start from")
    session = Session(label=label, **options)
    for urn in sources:
        canonical = index.urns[index.position(urn)]
        session.members[canonical] = Member("source", 0)
        session.frontier.append(canonical)
    return session


_UNKNOWN, _IN, _CANDIDATE, _EXCLUDED = 0, 1, 2, 3


def next_round(index: GraphIndex, session: Session) -> list[str]:
    """Follow the flows out of the frontier; returns the nodes new to the session.

    The walk runs on arrays (a state code per node position), level by level; the session's
    members are updated from them once it ends.
    """
    if not session.frontier:
        return []
    session.round += 1
    flt = edge_filter(index, filters=TraversalFilters(transformations=session.transformations))
    threshold = session.threshold.rank
    adjacency = index.downstream
    state = np.zeros(index.n_nodes, dtype=np.int8)
    for urn, member in session.members.items():
        code = _CANDIDATE if member.state == "candidate" else _EXCLUDED if member.state == "excluded" else _IN
        state[index.positions[urn]] = code
    before = state.copy()
    frontier = sorted_unique(np.asarray([index.positions[urn] for urn in session.frontier], dtype=np.int64))
    session.frontier = []
    flow_chunks: list[np.ndarray] = []
    order: list[np.ndarray] = []  # positions in the order they joined
    coarse = coarse_edges(index)
    while len(frontier):
        slots, counts = gather_slots(adjacency, frontier)
        keep = flt.edge_mask(index, adjacency, slots)
        origins = np.repeat(frontier, counts)[keep]
        slots = slots[keep]
        targets = adjacency.neighbours[slots]
        strong = index.edge_confidence[adjacency.edges[slots]] >= threshold
        coarse_origins, coarse_targets = _coarse_flows(index, frontier, flt, coarse)
        origins = np.concatenate([origins, coarse_origins])
        targets = np.concatenate([targets, coarse_targets])
        strong = np.concatenate([strong, np.zeros(len(coarse_targets), dtype=bool)])
        alive = state[targets] != _EXCLUDED
        origins, targets, strong = origins[alive], targets[alive], strong[alive]
        flow_chunks.append(np.stack([targets, origins], axis=1))  # (target, origin) rows
        weak_new = sorted_unique(targets[~strong][state[targets[~strong]] == _UNKNOWN])
        strong_targets = targets[strong]
        settled = sorted_unique(strong_targets[np.isin(state[strong_targets], (_UNKNOWN, _CANDIDATE))])
        state[weak_new] = _CANDIDATE
        state[settled] = _IN  # a strong flow settles a candidate too
        order.extend([settled, weak_new])
        frontier = settled
    return _record_round(index, session, before, state, order, flow_chunks)


def coarse_edges(index: GraphIndex) -> np.ndarray:
    """Table-level edges whose process gives no column lineage out of their source (a training
    config naming a table, a job seen only as tables): any column of the source may flow."""
    n = index.n_nodes
    fields = index.edge_is_field
    with_columns = index.edge_process[fields] * n + index.asset_of[index.edge_source[fields]]
    coarse = np.zeros(index.n_edges, dtype=bool)
    tables = np.flatnonzero(~fields)
    coarse[tables] = ~np.isin(index.edge_process[tables] * n + index.edge_source[tables], with_columns)
    return coarse


def _coarse_flows(
    index: GraphIndex, frontier: np.ndarray, flt: EdgeFilter, coarse: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where the frontier's fields may flow through their assets' coarse edges: (origin field,
    target) pairs, one field standing for its asset. Such flows are never strong: candidates."""
    fields = frontier[index.node_types[frontier] == FIELD]
    empty = np.empty(0, dtype=np.int64)
    if not len(fields):
        return empty, empty
    assets = index.asset_of[fields]
    order = np.argsort(assets, kind="stable")
    assets, fields = assets[order], fields[order]
    first = np.r_[True, assets[1:] != assets[:-1]]
    assets, fields = assets[first], fields[first]
    slots, counts = gather_slots(index.downstream, assets)
    keep = flt.edge_mask(index, index.downstream, slots) & coarse[index.downstream.edges[slots]]
    return np.repeat(fields, counts)[keep], index.downstream.neighbours[slots[keep]]


def _record_round(
    index: GraphIndex,
    session: Session,
    before: np.ndarray,
    state: np.ndarray,
    order: list[np.ndarray],
    flow_chunks: list[np.ndarray],
) -> list[str]:
    """Bring the session's members up to date with a round's walk."""
    new: list[str] = []
    joined = np.concatenate(order) if order else np.empty(0, dtype=np.int64)
    for position in dict.fromkeys(joined.tolist()):
        urn = index.urns[position]
        final: State = "reached" if state[position] == _IN else "candidate"
        if before[position] == _UNKNOWN:
            session.members[urn] = Member(final, session.round)
            new.append(urn)
        else:
            session.members[urn].state = final
    # Each (target, origin) flow once, grouped by target: one code per pair, sorted.
    pairs = np.concatenate(flow_chunks) if flow_chunks else np.empty((0, 2), dtype=np.int64)
    codes = sorted_unique(pairs[:, 0] * index.n_nodes + pairs[:, 1])
    if not len(codes):  # a frontier of sinks: nothing flows on
        return new
    targets, origins = codes // index.n_nodes, codes % index.n_nodes
    urns = index.urns
    origin_urns = [urns[p] for p in origins.tolist()]
    starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
    ends = np.r_[starts[1:], len(targets)]
    for target, start, end in zip(targets[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        member = session.members[index.urns[target]]
        if member.via:
            known = set(member.via)
            member.via.extend(urn for urn in origin_urns[start:end] if urn not in known)
        else:
            member.via = origin_urns[start:end]
    return new


def decide(session: Session, urn: str, include: bool, *, reason: str, by: str) -> list[str]:
    """Include a candidate, or exclude any node but a source; returns the nodes an exclusion
    also took out (those the session reached only through it)."""
    member = session.members.get(urn)
    state = member.state if member else "not in the session"
    allowed = state == "candidate" if include else state in ("reached", "candidate", "included")
    if member is None or not allowed:
        verb = "include" if include else "exclude"
        raise DiscoveryError(f"cannot {verb} {urn}: it is {state}")
    member.reason, member.decided_by = reason, by
    if include:
        member.state = "included"
        session.frontier.append(urn)
        return []
    member.state = "excluded"
    return _cascade(session, urn, by)


@dataclass(frozen=True)
class DecisionRule:
    """Decide candidates without a person: include those of some asset kinds, exclude those in
    some zones (URN prefixes). Exclusion wins when both match; the rest stay candidates."""

    include_kinds: frozenset[str] = frozenset()
    exclude_zones: tuple[str, ...] = ()
    name: str = "rule"


def apply_rule(index: GraphIndex, session: Session, rule: DecisionRule) -> dict[str, list[str]]:
    """Decide the candidates `rule` covers; returns the included and excluded nodes (cascades too)."""
    decided: dict[str, list[str]] = {"included": [], "excluded": []}
    for urn in session.candidates:
        if session.members[urn].state != "candidate":  # an earlier exclusion cascaded to it
            continue
        position = index.position(urn)
        asset = index.asset_urn(position) or urn
        if any(asset.startswith(zone) for zone in rule.exclude_zones):
            gone = decide(session, urn, False, reason=f"in an excluded zone ({rule.name})", by=rule.name)
            decided["excluded"].extend([urn, *gone])
        elif index.kind(position) in rule.include_kinds:
            decide(session, urn, True, reason=f"a {index.kind(position)} ({rule.name})", by=rule.name)
            decided["included"].append(urn)
    return decided


def _cascade(session: Session, excluded: str, by: str) -> list[str]:
    """Exclude what can no longer be reached from a source without an excluded node."""
    children: dict[str, list[str]] = {}
    for urn, member in session.members.items():
        for parent in member.via:
            children.setdefault(parent, []).append(urn)
    alive = {urn for urn, m in session.members.items() if m.state == "source"}
    queue = deque(alive)
    while queue:
        for child in children.get(queue.popleft(), ()):
            if child not in alive and session.members[child].state not in ("excluded",):
                alive.add(child)
                queue.append(child)
    gone = []
    for urn, member in session.members.items():
        if member.state != "excluded" and urn not in alive:
            member.state, member.decided_by = "excluded", by
            member.reason = f"only reached through {excluded}"
            gone.append(urn)
    session.frontier = [urn for urn in session.frontier if urn in alive]
    return sorted(gone)


def flows(session: Session) -> list[tuple[str, str]]:
    """The flows that justify the confirmed set: (from, to) between its members."""
    confirmed = set(session.confirmed)
    return sorted(
        (parent, urn)
        for urn, member in session.members.items()
        if urn in confirmed
        for parent in member.via
        if parent in confirmed
    )
