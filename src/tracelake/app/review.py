"""The privacy engineer's operations on one store: labels, propagation, discovery sessions,
policy checks and hotness — what the CLI's `label`, `propagate`, `discover`, `check` and `hot`
commands and the HTTP API's routes both call, so neither holds logic of its own.

It ties `tracelake.store.labels.LabelStore` (declared, inferred and confirmed labels; sessions)
to the pure analyses of `tracelake.graph` over the service's current index. A mistake in what
was asked (no declared label to spread, a node that is not a candidate, a malformed policy) is
a `ReviewError` with a sentence for the user.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracelake.app import whole_graph
from tracelake.app.service import Tracelake
from tracelake.graph import discovery
from tracelake.graph.discovery import DecisionRule, Session
from tracelake.graph.hotness import hotness
from tracelake.graph.policy import Policy, Violation, check, load_policies, parse_policies
from tracelake.graph.propagate import CARRYING, Propagation, PropagationRules, propagate
from tracelake.model import Confidence, InputError, Problem, Transformation
from tracelake.store.facts import asset_facts
from tracelake.store.labels import MAX_LABEL, LabelAssignment, LabelChanges, LabelStore
from tracelake.store.reads import NO_READS

# The transformations that carry a label unless told otherwise: those that move values.
CARRIED_BY_DEFAULT: tuple[Transformation, ...] = tuple(sorted(CARRYING))


class ReviewError(InputError):
    """A request the review cannot carry out, said as a sentence."""


class UnknownSession(ReviewError):
    pass


class NotStable(ReviewError):
    """Confirming a session that still has candidates or a round to run."""


@dataclass(frozen=True, slots=True)
class HotAsset:
    """An asset's hotness score, with how many runs read it and how many readers they were."""

    asset: str
    score: float
    reading_runs: int = 0
    readers: int = 0


@dataclass(slots=True)
class PropagationOutcome:
    reached: dict[str, int]  # nodes each label reached
    changes: LabelChanges
    declared: dict[str, list[str]]  # the declared labels that were spread, by node
    result: Propagation | None = None  # the in-memory engine's walks (None on Spark)


@dataclass(slots=True)
class Round:
    session: Session
    new: list[str]  # nodes the round added


class Review:
    def __init__(self, service: Tracelake) -> None:
        self.service = service
        self.labels = LabelStore(service.store)

    # ------------------------------------------------------------ labels

    def declare(self, node: str, labels: list[str]) -> tuple[str, tuple[str, ...]]:
        """Declare labels on a node; returns its URN and every label it now declares."""
        _assignable(labels)
        [urn] = self.service.resolve([node])
        return urn, self.labels.declare(urn, labels)

    def undeclare(self, node: str, labels: list[str]) -> tuple[str, tuple[str, ...]]:
        [urn] = self.service.resolve([node])
        return urn, self.labels.undeclare(urn, labels)

    def assignments(self, *, node: str | None = None, label: str | None = None) -> list[LabelAssignment]:
        urn = self.service.resolve([node])[0] if node else None
        return self.labels.assignments(urn=urn, label=label)

    def propagate(
        self,
        *,
        min_confidence: Confidence = Confidence.MEDIUM,
        carry: Iterable[Transformation] | None = None,
        stop_kinds: Iterable[str] = (),
        stop_zones: Iterable[str] = (),
        max_depth: int | None = None,
        only: set[str] | None = None,
        engine: str = "memory",
        lake: Path | None = None,
        actor: str,
    ) -> PropagationOutcome:
        """Spread declared labels (`only` these, if given) downstream over edges of at least
        `min_confidence` that `carry` values (None: `CARRIED_BY_DEFAULT`), stopping at assets of
        `stop_kinds`, under URN prefixes `stop_zones` and after `max_depth` hops; store what they
        reach. `engine` "spark" runs it on Spark over the lake in `lake` (`whole_graph`)."""
        if max_depth is not None and max_depth < 1:
            raise ReviewError("max_depth must be at least 1")
        rules = PropagationRules(
            min_confidence=min_confidence,
            transformations=frozenset(CARRIED_BY_DEFAULT if carry is None else carry),
            stop_kinds=frozenset(stop_kinds),
            stop_zones=tuple(stop_zones),
            max_depth=max_depth,
        )
        declared = {
            urn: [name for name in names if not only or name in only]
            for urn, names in self.labels.declared().items()
        }
        declared = {urn: names for urn, names in declared.items() if names}
        if not declared:
            raise ReviewError(
                "no declared label to propagate: declare some with `tracelake label add NODE LABEL`"
            )
        labels = sorted({name for names in declared.values() for name in names})
        if _engine(engine) == "spark":
            routes = whole_graph.propagate(self.service, declared, rules, lake)
            changes = self.labels.save_inferred(labels, routes, actor=actor)
            counts = Counter(label for label, _ in routes)
            return PropagationOutcome({label: counts[label] for label in labels}, changes, declared)
        result = propagate(self.service.index(), declared, rules)
        changes = self.labels.save_inferred(result.walks, result.paths(), actor=actor)
        reached = {label: len(walk.reached) for label, walk in result.walks.items()}
        return PropagationOutcome(reached, changes, declared, result)

    # ------------------------------------------------------------ discovery sessions

    def start(
        self, label: str, sources: list[str] | None, *, threshold: Confidence = Confidence.HIGH, actor: str
    ) -> Round:
        """Start a session from `sources` (default: every node declaring `label`); runs round one."""
        _assignable([label])
        if sources:
            starts = self.service.resolve(sources)
        else:
            starts = [urn for urn, names in self.labels.declared().items() if label in names]
        index = self.service.index()
        try:
            session = discovery.start(index, label, starts, threshold=threshold)
        except discovery.DiscoveryError as error:
            raise ReviewError(str(error)) from None
        new = discovery.next_round(index, session)
        self._save(session, actor)
        return Round(session, new)

    def session(self, session_id: str) -> Session:
        data = self.labels.load_session(session_id)
        if data is None:
            raise UnknownSession(f"no discovery session {session_id!r}")
        return Session.from_dict(data)

    def _save(self, session: Session, actor: str) -> None:
        self.labels.save_session(session.id, session.label, session.to_dict(), actor=actor)

    def next_round(self, session_id: str, *, actor: str) -> Round:
        session = self.session(session_id)
        new = discovery.next_round(self.service.index(), session)
        self._save(session, actor)
        return Round(session, new)

    def decide(
        self, session_id: str, node: str, include: bool, *, reason: str, actor: str
    ) -> tuple[str, list[str]]:
        """Include or exclude a node; returns its URN and the nodes the exclusion took with it."""
        session = self.session(session_id)
        [urn] = self.service.resolve([node])
        try:
            gone = discovery.decide(session, urn, include, reason=reason, by=actor)
        except discovery.DiscoveryError as error:
            raise ReviewError(str(error)) from None
        self._save(session, actor)
        return urn, gone

    def apply_rule(
        self,
        session_id: str,
        *,
        include_kinds: Iterable[str] = (),
        exclude_zones: Iterable[str] = (),
        name: str = "rule",
        actor: str,
    ) -> tuple[Session, dict[str, list[str]]]:
        """Decide the candidates a heuristic rule covers: include those of `include_kinds`, exclude
        those under `exclude_zones` (exclusions cascade); the rest wait. `name` is kept with each."""
        rule = DecisionRule(frozenset(include_kinds), tuple(exclude_zones), name)
        session = self.session(session_id)
        decided = discovery.apply_rule(self.service.index(), session, rule)
        self._save(session, actor)
        return session, decided

    def export(self, session_id: str, *, confirm: bool = False, actor: str) -> dict[str, Any]:
        """The confirmed set with the flows that justify it; `confirm` stores its labels."""
        session = self.session(session_id)
        if confirm:
            if not session.stable:
                raise NotStable(
                    f"{session_id} is not stable yet: decide its candidates and run the next round"
                )
            sources = {urn for urn, member in session.members.items() if member.state == "source"}
            confirmed = [
                (urn, [*session.members[urn].via[:1], urn]) for urn in session.confirmed if urn not in sources
            ]
            self.labels.confirm(session.label, session.id, confirmed, actor=actor)
        return {
            "session": session.id,
            "label": session.label,
            "stable": session.stable,
            "confirmed": session.confirmed,
            "flows": [list(pair) for pair in discovery.flows(session)],
            "decisions": {
                urn: {"state": m.state, "reason": m.reason, "by": m.decided_by}
                for urn, m in session.members.items()
                if m.decided_by
            },
        }

    # ------------------------------------------------------------ policies and hotness

    def policies_from_file(self, path: Path) -> tuple[list[Policy], list[Problem]]:
        """Policies from a YAML file; every malformed entry is a problem, the rest load."""
        return load_policies(path)

    def policies_from_text(self, text: str, source: str) -> tuple[list[Policy], list[Problem]]:
        """Policies from YAML text (`source` names it in problems)."""
        return parse_policies(text, source)

    def check(
        self, policies: list[Policy], *, engine: str = "memory", lake: Path | None = None
    ) -> list[Violation]:
        """Every violation of `policies` (on Spark over the lake in `lake` when `engine` is "spark")."""
        declared = self.labels.declared()
        if _engine(engine) == "spark":
            return whole_graph.check(self.service, policies, declared, PropagationRules(), lake)
        return check(self.service.index(), policies, asset_facts(self.service.store), declared)

    def hottest(self, limit: int, *, engine: str = "memory", lake: Path | None = None) -> list[HotAsset]:
        """The `limit` hottest assets; the reads of every asset vote (`tracelake.graph.hotness`)."""
        counts = self.service.store.read_counts()
        if _engine(engine) == "spark":
            ranked = whole_graph.hottest(self.service, limit, lake)
        else:
            votes = [(process, asset) for asset, read in counts.items() for process in read.processes]
            ranked = hotness(self.service.index(), reads=votes)[:limit]
        return [
            HotAsset(urn, score, counts.get(urn, NO_READS).runs, counts.get(urn, NO_READS).readers)
            for urn, score in ranked
        ]


def _engine(engine: str) -> str:
    if engine not in whole_graph.ENGINES:
        raise ReviewError(f"engine must be one of {', '.join(whole_graph.ENGINES)}, not {engine!r}")
    return engine


def _assignable(labels: list[str]) -> None:
    """Refuse a label longer than an assignment can hold: declared, it would fail the propagation
    that spreads it (on PostgreSQL; SQLite holds any length), and a session could not be saved."""
    for label in labels:
        if len(label) > MAX_LABEL:
            raise ReviewError(f"a label is at most {MAX_LABEL} characters, not {len(label):,}")
