"""The privacy engineer's routes under `/api/tracelake/v1`: labels, propagation, discovery
sessions, policy checks and hotness, each a call to `tracelake.app.review.Review` (as the CLI's
commands are). Decisions are recorded under the name of the token that made them (`api` when
the server runs without tokens).

Policy files are read only from the folder the server was started with (`--policy-dir`): a
name that leads outside it is refused, and so is every file when none was configured; a policy
document can also be posted for checking.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, Field

from tracelake.api.deps import READ, WRITE, RequestError, actor_of, get_service
from tracelake.api.gate import GatedJsonBodyRoute
from tracelake.app.review import CARRIED_BY_DEFAULT, Review
from tracelake.app.service import Tracelake
from tracelake.model import Confidence, Problem, Transformation

if TYPE_CHECKING:
    from tracelake.graph.discovery import Session
    from tracelake.graph.policy import Policy, Violation

router = APIRouter(
    prefix="/api/tracelake/v1", tags=["labels, discovery and policies"], route_class=GatedJsonBodyRoute
)
Actor = Annotated[str, Depends(actor_of)]


async def get_review(service: Annotated[Tracelake, Depends(get_service)]) -> Review:
    return Review(service)


Reviewer = Annotated[Review, Depends(get_review)]


class Labelling(BaseModel):
    node: str
    labels: list[str] = Field(..., min_length=1)


class Rules(BaseModel):
    min_confidence: Confidence = Confidence.MEDIUM
    carry: list[Transformation] = Field(default_factory=lambda: list(CARRIED_BY_DEFAULT))
    stop_kind: list[str] = []
    stop_zone: list[str] = []
    max_depth: int | None = Field(None, ge=1)
    label: list[str] = []


class Start(BaseModel):
    label: str
    sources: list[str] = []  # default: every node declaring the label
    threshold: Confidence = Confidence.HIGH


class Decision(BaseModel):
    node: str
    include: bool
    reason: str = Field(..., min_length=1)


class Rule(BaseModel):
    include_kind: list[str] = []
    exclude_zone: list[str] = []
    name: str = "rule"


def _session(session: Session, new: list[str] | None = None) -> dict[str, Any]:
    return {
        **session.to_dict(),
        "stable": session.stable,
        "candidates": session.candidates,
        "confirmed": session.confirmed,
        "new": new or [],
    }


# ---------------------------------------------------------------- labels


@router.get("/labels", dependencies=[READ])
def labels(review: Reviewer, label: str | None = None, node: str | None = None) -> list[dict[str, Any]]:
    """Declared, inferred and confirmed labels, with the source and path of inferred ones."""
    return [
        {
            "label": a.label,
            "node": a.urn,
            "provenance": a.provenance,
            "source": a.source,
            "path": list(a.path),
        }
        for a in review.assignments(node=node, label=label)
    ]


@router.post("/labels", dependencies=[WRITE])
def declare(review: Reviewer, body: Labelling) -> dict[str, Any]:
    urn, held = review.declare(body.node, body.labels)
    return {"node": urn, "declared": list(held)}


@router.post("/labels/remove", dependencies=[WRITE])
def undeclare(review: Reviewer, body: Labelling) -> dict[str, Any]:
    urn, held = review.undeclare(body.node, body.labels)
    return {"node": urn, "declared": list(held)}


@router.post("/propagate", dependencies=[WRITE])
def propagate(review: Reviewer, actor: Actor, rules: Rules) -> dict[str, Any]:
    """Spread declared labels downstream under the rules and store what they reach."""
    outcome = review.propagate(
        min_confidence=rules.min_confidence,
        carry=rules.carry,
        stop_kinds=rules.stop_kind,
        stop_zones=rules.stop_zone,
        max_depth=rules.max_depth,
        only=set(rules.label),
        actor=actor,
    )
    result = outcome.result
    assert result is not None  # the in-memory engine's walks
    return {
        "labels": {name: sorted(result.nodes_with(name)) for name in result.walks},
        "added": len(outcome.changes.added),
        "removed": len(outcome.changes.removed),
        "unchanged": outcome.changes.kept,
    }


# ---------------------------------------------------------------- discovery sessions


@router.post("/discovery", dependencies=[WRITE], status_code=201)
def start(review: Reviewer, actor: Actor, body: Start) -> dict[str, Any]:
    """Start a session and run its first round."""
    started = review.start(body.label, body.sources, threshold=body.threshold, actor=actor)
    return _session(started.session, started.new)


@router.get("/discovery/{session_id}", dependencies=[READ])
def session(review: Reviewer, session_id: str) -> dict[str, Any]:
    return _session(review.session(session_id))


@router.post("/discovery/{session_id}/next", dependencies=[WRITE])
def next_round(review: Reviewer, actor: Actor, session_id: str) -> dict[str, Any]:
    done = review.next_round(session_id, actor=actor)
    return _session(done.session, done.new)


@router.post("/discovery/{session_id}/decisions", dependencies=[WRITE])
def decide(review: Reviewer, actor: Actor, session_id: str, body: Decision) -> dict[str, Any]:
    """Include a candidate or exclude a node (the exclusion cascades)."""
    urn, gone = review.decide(session_id, body.node, body.include, reason=body.reason, actor=actor)
    return {"node": urn, "include": body.include, "also_excluded": gone}


@router.post("/discovery/{session_id}/rule", dependencies=[WRITE])
def rule(review: Reviewer, actor: Actor, session_id: str, body: Rule) -> dict[str, Any]:
    found, decided = review.apply_rule(
        session_id,
        include_kinds=body.include_kind,
        exclude_zones=body.exclude_zone,
        name=body.name,
        actor=actor,
    )
    return {**decided, "candidates": found.candidates}


@router.get("/discovery/{session_id}/export", dependencies=[READ])
def export(review: Reviewer, actor: Actor, session_id: str) -> dict[str, Any]:
    return review.export(session_id, actor=actor)


@router.post("/discovery/{session_id}/confirm", dependencies=[WRITE])
def confirm(review: Reviewer, actor: Actor, session_id: str) -> dict[str, Any]:
    """Store a stable session's set as confirmed labels; 409 while it is not stable."""
    return review.export(session_id, confirm=True, actor=actor)


# ---------------------------------------------------------------- policies and hotness


@router.get("/policies/violations", dependencies=[READ])
def violations(review: Reviewer, request: Request, file: str | None = None) -> dict[str, Any]:
    """Violations of the policy files in the server's policy folder (or of one of them)."""
    folder: Path | None = request.app.state.settings.policy_dir
    if folder is None:
        raise RequestError("the server has no policy folder (start it with --policy-dir)", status=404)
    root = folder.resolve()
    if file is None:
        paths = sorted([*root.glob("*.yml"), *root.glob("*.yaml")])
    else:
        path = (root / file).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise RequestError(f"no policy file {file!r} in the policy folder", "file", status=404)
        paths = [path]
    policies: list[Policy] = []
    problems: list[Problem] = []
    for path in paths:
        loaded, found = review.policies_from_file(path)
        policies += loaded
        problems += [Problem(str(path.relative_to(root)), p.reason, p.location) for p in found]
    return _report(policies, problems, review.check(policies))


@router.post("/policies/check", dependencies=[READ])
def check_posted(review: Reviewer, document: Annotated[str, Body(media_type="text/yaml")]) -> dict[str, Any]:
    """Check posted policies (YAML, as in a policy file) against the graph."""
    policies, problems = review.policies_from_text(document, "body")
    if problems:
        raise RequestError("; ".join(str(p) for p in problems), "$")
    return _report(policies, problems, review.check(policies))


def _report(policies: list[Policy], problems: list[Problem], found: list[Violation]) -> dict[str, Any]:
    return {
        "policies": len(policies),
        "problems": [{"source": p.source, "location": p.location, "reason": p.reason} for p in problems],
        "violations": [
            {"policy": v.policy, "kind": v.kind, "message": v.message, "path": list(v.path)} for v in found
        ],
    }


@router.get("/hot", dependencies=[READ])
def hot(review: Reviewer, limit: Annotated[int, Query(ge=1, le=10_000)] = 20) -> list[dict[str, Any]]:
    """Assets ranked by PageRank over what depends on what, reads voting too: the most relied-upon
    first, with how many runs read each without writing from it and how many readers they were."""
    return [
        {"asset": hot.asset, "score": hot.score, "reading_runs": hot.reading_runs, "readers": hot.readers}
        for hot in review.hottest(limit)
    ]
