"""What privacy probes learnt, as lineage: sampled requests in, one `LineageBatch` out.

Each sampled request's payloads are matched (`probe_match`) and folded into a `FlowSet`, which
keeps, per request handler, every source/sink pair it has seen. The batch it gives holds:
- the match set: a HIGH field edge for each (source field, sink field) with a value in common,
  IDENTITY when the value arrived whole, TRANSFORMATION when inside a longer one;
- the full set: for a source field never matched in a sink, a LOW edge to each field of that
  sink, since the value may have gone there transformed (`["Catholic", "Christian"]` logged as
  `count: 2`); a reviewer decides;
- an asset edge per (source, sink) pair, HIGH when any of its fields matched;
- for a logger whose records land in a warehouse table (a `Landing`), the edges from its fields
  to the table's columns, which is where warehouse lineage takes over.
The handler is the process (`web.handler/<name>`): the set is cumulative, so each batch
re-registers every flow seen so far and the store keeps one version until something new shows
up. Evidence per flow — match kind, samples, first and last seen, the sink's stack, keyed
fingerprints of the two values — goes in the process's metadata; the values themselves only
when `keep_raw` is set.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracelake.collect.probe_match import Leaf, MatchKind, Scalar, canonical, match
from tracelake.model import Confidence, FlowEdge, LineageBatch, Process, Signal, Transformation, parse_urn

HANDLER_KIND = "web.handler"
DELIVERY_KIND = "web.delivery"
MAX_LOW_EDGES_PER_PAIR = 32  # full-set edges from one source field into one sink


@dataclass(frozen=True, slots=True)
class Capture:
    """One payload a request read (a source) or wrote (a sink), flattened when captured."""

    asset: str
    leaves: tuple[Leaf, ...]
    at: float  # epoch seconds
    stack: tuple[str, ...] = ()
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class SampledRequest:
    handler: str
    trace_id: str
    sources: tuple[Capture, ...]
    sinks: tuple[Capture, ...]


@dataclass(frozen=True, slots=True)
class Landing:
    """Where a logger's records are stored: `table`, each record under `column` (a struct) or
    as top-level columns when None."""

    table: str
    column: str | None = None

    def field(self, path: str) -> str:
        return f"{self.table}#{self.column}.{path}" if self.column else f"{self.table}#{path}"


@dataclass(slots=True)
class Evidence:
    match: MatchKind
    first_seen: float
    last_seen: float
    stack: tuple[str, ...]
    source_fingerprint: str = ""
    sink_fingerprint: str = ""
    equal: bool = False  # the whole value arrived (rather than inside a longer one)
    samples: int = 1
    source_value: Scalar | None = None
    sink_value: Scalar | None = None

    def seen_again(self, at: float) -> None:
        self.samples += 1
        self.first_seen = min(self.first_seen, at)
        self.last_seen = max(self.last_seen, at)


@dataclass(slots=True)
class _HandlerFlows:
    requests: int = 0
    sink_fields: dict[str, set[str]] = field(default_factory=dict)  # sink asset → its fields seen
    pairs: set[tuple[str, str]] = field(default_factory=set)  # (source asset, sink asset)
    matched: dict[tuple[str, str], Evidence] = field(default_factory=dict)  # (source field, sink field)
    unmatched: dict[tuple[str, str], Evidence] = field(default_factory=dict)  # (source field, sink asset)


@dataclass
class FlowSet:
    """Flows from sampled requests, accumulated per handler; `batch()` gives them all."""

    key: bytes
    min_length: int = 3
    keep_raw: bool = False
    landings: dict[str, Landing] = field(default_factory=dict)
    handlers: dict[str, _HandlerFlows] = field(default_factory=dict)
    cut_short: int = 0  # requests whose matching hit its deadline

    def fingerprint(self, value: Scalar) -> str:
        value = canonical(value)
        data = value if isinstance(value, bytes) else str(value).encode()
        return hashlib.blake2b(data, key=self.key, digest_size=8).hexdigest()

    def observe(self, request: SampledRequest, deadline_ns: int | None = None) -> None:
        flows = self.handlers.setdefault(request.handler, _HandlerFlows())
        flows.requests += 1
        for sink in request.sinks:
            flows.sink_fields.setdefault(sink.asset, set()).update(leaf.path for leaf in sink.leaves)
        for source in request.sources:
            for sink in request.sinks:
                flows.pairs.add((source.asset, sink.asset))
                matches, cut = match(
                    list(source.leaves),
                    list(sink.leaves),
                    min_length=self.min_length,
                    deadline_ns=deadline_ns,
                )
                self.cut_short += cut
                for found in matches:
                    key = (f"{source.asset}#{found.source.path}", f"{sink.asset}#{found.sink.path}")
                    self._note(flows.matched, key, found.kind, sink, found.source.value, found.sink.value)
                    flows.matched[key].equal |= canonical(found.source.value) == canonical(found.sink.value)
                matched_fields = {m.source.path for m in matches}
                unmatched = {leaf.path: leaf for leaf in reversed(source.leaves)}  # a field's first value
                for path, leaf in unmatched.items():
                    if path not in matched_fields:
                        key = (f"{source.asset}#{path}", sink.asset)
                        self._note(flows.unmatched, key, MatchKind.NO_MATCH, sink, leaf.value, None)

    def _note(
        self,
        evidence: dict[tuple[str, str], Evidence],
        key: tuple[str, str],
        kind: MatchKind,
        sink: Capture,
        source_value: Scalar,
        sink_value: Scalar | None,
    ) -> None:
        known = evidence.get(key)
        if known is not None:
            known.seen_again(sink.at)
            if kind is MatchKind.EXACT_MATCH:
                known.match = kind  # the strongest kind seen stands
            return
        evidence[key] = Evidence(
            match=kind,
            first_seen=sink.at,
            last_seen=sink.at,
            stack=sink.stack,
            source_fingerprint=self.fingerprint(source_value),
            sink_fingerprint=self.fingerprint(sink_value) if sink_value is not None else "",
            source_value=source_value if self.keep_raw else None,
            sink_value=sink_value if self.keep_raw else None,
        )

    def batch(self) -> LineageBatch:
        batch = LineageBatch()
        delivered: dict[str, set[str]] = {}
        for handler, flows in sorted(self.handlers.items()):
            process = f"{HANDLER_KIND}/{handler}"
            edges = _handler_edges(process, flows)
            batch.edges.extend(edges)
            batch.processes.append(
                Process(
                    process,
                    name=handler,
                    kind=HANDLER_KIND,
                    metadata={"probe": _evidence_metadata(flows, self.keep_raw)},
                )
            )
            for sink, paths in flows.sink_fields.items():
                if sink in self.landings:
                    delivered.setdefault(sink, set()).update(paths)
        for sink, paths in sorted(delivered.items()):
            landing = self.landings[sink]
            process = f"{DELIVERY_KIND}/{parse_urn(sink).name}"
            batch.processes.append(Process(process, name=f"{sink} → {landing.table}", kind=DELIVERY_KIND))
            batch.edges.append(FlowEdge(sink, landing.table, process, Signal.PROBE))
            batch.edges.extend(
                FlowEdge(
                    f"{sink}#{path}",
                    landing.field(path),
                    process,
                    Signal.PROBE,
                    transformation=Transformation.IDENTITY,
                )
                for path in sorted(paths)
            )
        return batch


def _handler_edges(process: str, flows: _HandlerFlows) -> list[FlowEdge]:
    edges: list[FlowEdge] = []
    matched_pairs = {(parse_urn(s).asset, parse_urn(t).asset) for s, t in flows.matched}
    for source, sink in sorted(flows.pairs):
        confidence = Confidence.HIGH if (source, sink) in matched_pairs else Confidence.LOW
        edges.append(FlowEdge(source, sink, process, Signal.PROBE, confidence))
    for (source, sink), evidence in sorted(flows.matched.items()):
        transformation = Transformation.IDENTITY if evidence.equal else Transformation.TRANSFORMATION
        edges.append(
            FlowEdge(
                source, sink, process, Signal.PROBE, Confidence.HIGH, transformation, evidence.match.value
            )
        )
    reaching = {(source, parse_urn(sink).asset) for source, sink in flows.matched}
    for source, sink_asset in sorted(flows.unmatched):
        if (source, sink_asset) in reaching:
            continue  # found whole elsewhere in this sink: no guesses about its other fields
        for path in sorted(flows.sink_fields.get(sink_asset, ()))[:MAX_LOW_EDGES_PER_PAIR]:
            edges.append(
                FlowEdge(
                    source,
                    f"{sink_asset}#{path}",
                    process,
                    Signal.PROBE,
                    Confidence.LOW,
                    Transformation.TRANSFORMATION,
                    MatchKind.NO_MATCH.value,
                )
            )
    return edges


def _evidence_metadata(flows: _HandlerFlows, keep_raw: bool) -> dict[str, Any]:
    def entry(source: str, target: str, evidence: Evidence) -> dict[str, Any]:
        row: dict[str, Any] = {
            "source": source,
            "target": target,
            "match": evidence.match.value,
            "samples": evidence.samples,
            "first_seen": _iso(evidence.first_seen),
            "last_seen": _iso(evidence.last_seen),
            "stack": list(evidence.stack),
            "source_fingerprint": evidence.source_fingerprint,
            "sink_fingerprint": evidence.sink_fingerprint,
        }
        if keep_raw:
            row["source_value"] = _jsonable(evidence.source_value)
            row["sink_value"] = _jsonable(evidence.sink_value)
        return row

    rows = [entry(s, t, e) for (s, t), e in sorted(flows.matched.items())]
    rows += [entry(s, t, e) for (s, t), e in sorted(flows.unmatched.items())]
    return {"requests_sampled": flows.requests, "flows": rows}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


def _jsonable(value: Scalar | None) -> Any:
    return value.hex() if isinstance(value, bytes) else value
