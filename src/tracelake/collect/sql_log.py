"""Reading a SQL query log into runs: which entries executed together, and in what order.

A log is JSON lines (or one JSON array) of `{"query", "user", "timestamp", "job_id",
"engine", "job_name"}` objects. Entries that share a `job_id` are one run, replayed in time
order (so a temp view created by one entry is there for the next); an entry without a job id
is a run of its own. A line that is not a JSON object, or has no query, is a `Problem` at
"entry N" (N is its line number) and the rest of the log is still read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tracelake.collect.sql_split import excerpt
from tracelake.model import Problem, as_utc


@dataclass(frozen=True, slots=True)
class LogEntry:
    number: int
    query: str
    engine: str | None = None
    timestamp: datetime | None = None
    job_id: str | None = None
    job_name: str | None = None
    user: str | None = None


@dataclass
class LogReading:
    """The runs of a log, the problems met reading it, and how many entries were unreadable."""

    runs: list[list[LogEntry]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    rejected: int = 0


def read_log(text: str, source: str) -> LogReading:
    reading = LogReading()
    jobs: dict[str, list[LogEntry]] = {}
    for entry in _entries(text, source, reading):
        if entry.job_id is None:
            reading.runs.append([entry])
        elif entry.job_id in jobs:
            jobs[entry.job_id].append(entry)
        else:
            jobs[entry.job_id] = [entry]
            reading.runs.append(jobs[entry.job_id])
    reading.runs = [_in_time_order(run) for run in reading.runs]
    return reading


def _in_time_order(run: list[LogEntry]) -> list[LogEntry]:
    """Logs merged from several hosts are not always in order; when every entry has a time, trust it."""
    if len(run) > 1 and all(e.timestamp is not None for e in run):
        return sorted(run, key=lambda e: e.timestamp or datetime.min.replace(tzinfo=UTC))
    return run


def _entries(text: str, source: str, reading: LogReading) -> Iterator[LogEntry]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        # a .json file holding one array of entries rather than one entry per line
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as error:
            reading.problems.append(Problem(source, f"not valid JSON: {error.msg}", f"line {error.lineno}"))
            reading.rejected += 1
            return
        numbered: Iterator[tuple[int, Any, str]] = (
            (i, item, json.dumps(item)) for i, item in enumerate(items, 1)
        )
    else:
        numbered = _json_lines(text, source, reading)
    for number, item, raw in numbered:
        entry = _entry(number, item, raw, source, reading)
        if entry is not None:
            yield entry


def _json_lines(text: str, source: str, reading: LogReading) -> Iterator[tuple[int, Any, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), line
        except json.JSONDecodeError as error:
            reading.rejected += 1
            reading.problems.append(
                Problem(source, f"not a JSON object: {error.msg}", f"entry {number}", excerpt(line))
            )


def _entry(number: int, item: Any, raw: str, source: str, reading: LogReading) -> LogEntry | None:
    if not isinstance(item, dict):
        reason = f"an entry should be a JSON object, got {type(item).__name__}"
    elif not isinstance(item.get("query"), str) or not item["query"].strip():
        reason = "the entry has no query"
    else:
        timestamp = _timestamp(item.get("timestamp"))
        if item.get("timestamp") is not None and timestamp is None:
            reading.problems.append(
                Problem(source, f"unreadable timestamp {item['timestamp']!r}; ignored", f"entry {number}")
            )
        return LogEntry(
            number=number,
            query=item["query"],
            engine=_text(item.get("engine")),
            timestamp=timestamp,
            job_id=_text(item.get("job_id")),
            job_name=_text(item.get("job_name")),
            user=_text(item.get("user")),
        )
    reading.rejected += 1
    reading.problems.append(Problem(source, reason, f"entry {number}", excerpt(raw)))
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            # epoch seconds, or milliseconds as many engines log them
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return None
