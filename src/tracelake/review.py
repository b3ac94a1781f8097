"""The privacy engineer's operations on one store: labels, propagation, discovery sessions,
policy checks and hotness — what the CLI's `label`, `propagate`, `discover`, `check` and `hot`
commands and the HTTP API's routes both call, so neither holds logic of its own.

It ties `tracelake.store.labels.LabelStore` (declared, inferred and confirmed labels; sessions)
to the pure analyses of `tracelake.graph` over the service's current index. A mistake in what
was asked (no declared label to spread, a node that is not a candidate, a malformed policy) is
a `ReviewError` with a sentence for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracelake.graph import discovery
from tracelake.graph.discovery import DecisionRule, Session
from tracelake.graph.hotness import hotness
from tracelake.graph.policy import Policy, Violation, check
from tracelake.graph.propagate import Propagation, PropagationRules, propagate
from tracelake.model import Confidence
from tracelake.service import Tracelake
from tracelake.store.facts import asset_facts
from tracelake.store.labels import MAX_LABEL, LabelAssignment, LabelChanges, LabelStore
from tracelake.store.reads import NO_READS


class ReviewError(ValueError):
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
    result: Propagation
    changes: LabelChanges
    declared: dict[str, list[str]]  # the declared labels that were spread, by node


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
        self, rules: PropagationRules, *, only: set[str] | None = None, actor: str
    ) -> PropagationOutcome:
        """Spread declared labels (`only` these, if given) and store what they reach."""
        declared = {
            urn: [name for name in names if not only or name in only]
            for urn, names in self.labels.declared().items()
        }
        declared = {urn: names for urn, names in declared.items() if names}
        if not declared:
            raise ReviewError(
                "no declared label to propagate: declare some with `tracelake label add NODE LABEL`"
            )
        result = propagate(self.service.index(), declared, rules)
        changes = self.labels.save_inferred(result, actor=actor)
        return PropagationOutcome(result, changes, declared)

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
        self.labels.save_session(session, actor=actor)
        return Round(session, new)

    def session(self, session_id: str) -> Session:
        try:
            return self.labels.load_session(session_id)
        except discovery.DiscoveryError as error:
            raise UnknownSession(str(error)) from None

    def next_round(self, session_id: str, *, actor: str) -> Round:
        session = self.session(session_id)
        new = discovery.next_round(self.service.index(), session)
        self.labels.save_session(session, actor=actor)
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
        self.labels.save_session(session, actor=actor)
        return urn, gone

    def apply_rule(
        self, session_id: str, rule: DecisionRule, *, actor: str
    ) -> tuple[Session, dict[str, list[str]]]:
        session = self.session(session_id)
        decided = discovery.apply_rule(self.service.index(), session, rule)
        self.labels.save_session(session, actor=actor)
        return session, decided

    def export(self, session_id: str, *, confirm: bool = False, actor: str) -> dict[str, Any]:
        """The confirmed set with the flows that justify it; `confirm` stores its labels."""
        session = self.session(session_id)
        if confirm:
            if not session.stable:
                raise NotStable(
                    f"{session_id} is not stable yet: decide its candidates and run the next round"
                )
            self.labels.confirm(session, actor=actor)
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

    def check(self, policies: list[Policy]) -> list[Violation]:
        index = self.service.index()
        return check(index, policies, asset_facts(self.service.store), self.labels.declared())

    def hottest(self, limit: int) -> list[HotAsset]:
        """The `limit` hottest assets; the reads of every asset vote (`tracelake.graph.hotness`)."""
        counts = self.service.store.read_counts()
        votes = [(process, asset) for asset, read in counts.items() for process in read.processes]
        return [
            HotAsset(urn, score, counts.get(urn, NO_READS).runs, counts.get(urn, NO_READS).readers)
            for urn, score in hotness(self.service.index(), reads=votes)[:limit]
        ]


def _assignable(labels: list[str]) -> None:
    """Refuse a label longer than an assignment can hold: declared, it would fail the propagation
    that spreads it (on PostgreSQL; SQLite holds any length), and a session could not be saved."""
    for label in labels:
        if len(label) > MAX_LABEL:
            raise ReviewError(f"a label is at most {MAX_LABEL} characters, not {len(label):,}")
