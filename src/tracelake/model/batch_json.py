"""A `LineageBatch` as JSON: how a collector in another process (a service's privacy probes, a
job on another machine) hands its batch to a Tracelake server.

The shape mirrors the dataclasses one to one (`assets`, `fields`, `processes`, `runs`, `edges`,
`problems`, `observed_at`), with enums as their values and times as ISO 8601. Reading checks
every field and raises `BatchError` with the JSON path of the first problem, so a bad batch is
refused whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from tracelake.model import (
    Asset,
    Confidence,
    Field,
    FlowEdge,
    InputError,
    LineageBatch,
    Problem,
    Process,
    Run,
    Signal,
    Transformation,
    UrnError,
    parse_urn,
)

T = TypeVar("T")


class BatchError(InputError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def batch_to_json(batch: LineageBatch) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, datetime):
            return value.isoformat()
        if isinstance(value, frozenset | set):
            return sorted(value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    def record(item: Any) -> dict[str, Any]:
        return {f.name: plain(getattr(item, f.name)) for f in dataclasses.fields(item)}

    return {
        "assets": [record(a) for a in batch.assets],
        "fields": [record(f) for f in batch.fields],
        "processes": [record(p) for p in batch.processes],
        "runs": [record(r) for r in batch.runs],
        "edges": [record(e) for e in batch.edges],
        "problems": [record(p) for p in batch.problems],
        "described": [record(p) for p in batch.described],
        "observed_at": plain(batch.observed_at),
    }


def batch_from_json(document: Any, path: str = "$") -> LineageBatch:
    if not isinstance(document, Mapping):
        raise BatchError(path, "a batch is a JSON object")
    parts = {"assets", "fields", "processes", "runs", "edges", "problems", "described", "observed_at"}
    unknown = set(document) - parts
    if unknown:
        raise BatchError(f"{path}.{sorted(unknown)[0]}", "not a part of a batch")
    return LineageBatch(
        assets=_items(document, "assets", path, _asset),
        fields=_items(document, "fields", path, _field),
        processes=_items(document, "processes", path, _process),
        runs=_items(document, "runs", path, _run),
        edges=_items(document, "edges", path, _edge),
        problems=_items(document, "problems", path, _problem),
        described=_items(document, "described", path, _process),
        observed_at=_time(document.get("observed_at"), f"{path}.observed_at"),
    )


class _Reader:
    """One object's fields, each read with its path for the error."""

    def __init__(self, item: Any, path: str) -> None:
        if not isinstance(item, Mapping):
            raise BatchError(path, "expected an object")
        self.item = item
        self.path = path

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.item.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value:
            raise BatchError(f"{self.path}.{key}", "expected a non-empty string")
        return value

    def urn(self, key: str) -> str:
        value = self.text(key, required=True)
        assert value is not None
        try:
            parse_urn(value)
        except UrnError as error:
            raise BatchError(f"{self.path}.{key}", str(error)) from None
        return value

    def choice(self, key: str, kind: type[T], default: T | None = None) -> T | None:
        value = self.item.get(key)
        if value is None:
            return default
        try:
            return kind(value)  # type: ignore[call-arg]  # `kind` is an Enum class: called with a value
        except ValueError:
            allowed = ", ".join(m.value for m in kind)  # type: ignore[attr-defined]  # an Enum's members have .value
            raise BatchError(f"{self.path}.{key}", f"{value!r} is not one of {allowed}") from None

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.item.get(key) or {}
        if not isinstance(value, Mapping):
            raise BatchError(f"{self.path}.{key}", "expected an object")
        return dict(value)

    def labels(self) -> frozenset[str]:
        value = self.item.get("labels") or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise BatchError(f"{self.path}.labels", "expected a list of strings")
        return frozenset(value)

    def integer(self, key: str) -> int | None:
        value = self.item.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise BatchError(f"{self.path}.{key}", "expected an integer")
        return value

    def time(self, key: str) -> datetime | None:
        return _time(self.item.get(key), f"{self.path}.{key}")


def _items(document: Mapping[str, Any], key: str, path: str, read: Callable[[_Reader], T]) -> list[T]:
    items = document.get(key) or []
    if not isinstance(items, list):
        raise BatchError(f"{path}.{key}", "expected a list")
    return [read(_Reader(item, f"{path}.{key}[{i}]")) for i, item in enumerate(items)]


def _time(value: Any, path: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise BatchError(path, "expected an ISO 8601 time with its offset") from None
    if moment.tzinfo is None:
        raise BatchError(path, "the time has no offset (write +00:00 or Z)")
    return moment


def _asset(r: _Reader) -> Asset:
    return Asset(
        r.urn("urn"),
        owner=r.text("owner"),
        layer=r.text("layer"),
        security_level=r.integer("security_level"),
        labels=r.labels(),
        description=r.text("description"),
        metadata=r.mapping("metadata"),
    )


def _field(r: _Reader) -> Field:
    return Field(r.urn("urn"), data_type=r.text("data_type"), labels=r.labels())


def _process(r: _Reader) -> Process:
    urn = r.urn("urn")
    return Process(
        urn,
        name=r.text("name") or urn,
        kind=r.text("kind") or "unknown",
        owner=r.text("owner"),
        description=r.text("description"),
        metadata=r.mapping("metadata"),
    )


def _run(r: _Reader) -> Run:
    run_id = r.text("run_id", required=True)
    assert run_id is not None
    return Run(
        run_id,
        process=r.urn("process"),
        started_at=r.time("started_at"),
        ended_at=r.time("ended_at"),
        status=r.text("status"),
        job_id=r.text("job_id"),
        user=r.text("user"),
    )


def _edge(r: _Reader) -> FlowEdge:
    signal = r.choice("signal", Signal)
    if signal is None:
        raise BatchError(f"{r.path}.signal", "every edge says which signal saw it")
    return FlowEdge(
        r.urn("source"),
        r.urn("target"),
        r.urn("process"),
        signal,
        confidence=r.choice("confidence", Confidence, Confidence.HIGH) or Confidence.HIGH,
        transformation=r.choice("transformation", Transformation),
        description=r.text("description"),
    )


def _problem(r: _Reader) -> Problem:
    source = r.text("source", required=True)
    reason = r.text("reason", required=True)
    assert source is not None and reason is not None
    return Problem(source, reason, r.text("location") or "", r.text("excerpt") or "")
