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
from typing import Any, BinaryIO

from tracelake.collect.sql_input import read_lines, read_whole
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


def read_log(handle: BinaryIO, source: str) -> LogReading:
    """The runs of the log read from `handle`, a line at a time."""
    reading = LogReading()
    jobs: dict[str, list[LogEntry]] = {}
    for entry in _entries(handle, source, reading):
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


def _entries(handle: BinaryIO, source: str, reading: LogReading) -> Iterator[LogEntry]:
    for number, item, raw in _json_items(handle, source, reading):
        entry = _entry(number, item, raw, source, reading)
        if entry is not None:
            yield entry


# Lines that are all not JSON before this many: the file is not a query log at all.
NOT_A_LOG_AFTER = 1000


def _json_items(handle: BinaryIO, source: str, reading: LogReading) -> Iterator[tuple[int, Any, str]]:
    """(entry number, parsed JSON, its text) for each entry: JSON lines, or one JSON array."""
    first, read = True, 0
    for line in read_lines(handle, source):
        if not read and reading.rejected >= NOT_A_LOG_AFTER:
            # a script or a data file given as a log: one problem, not one per line
            reading.problems = reading.problems[:1]
            reading.problems.append(
                Problem(source, f"not a query log: its first {NOT_A_LOG_AFTER:,} lines are not JSON; stopped")
            )
            return
        if isinstance(line, Problem):
            # one line that is not text costs that entry alone
            reading.rejected += 1
            number = line.location.removeprefix("line ")
            reading.problems.append(Problem(source, line.reason, f"entry {number}"))
            continue
        if not line.text.strip():
            continue
        if first and line.text.lstrip().startswith("["):
            yield from _json_array(line.text, handle, source, reading)
            return
        first = False
        try:
            item = json.loads(line.text)
            read += 1
            yield line.number, item, line.text
        except json.JSONDecodeError as error:
            reading.rejected += 1
            reading.problems.append(
                Problem(source, f"not a JSON object: {error.msg}", f"entry {line.number}", excerpt(line.text))
            )
        except RecursionError:
            reading.rejected += 1
            reading.problems.append(
                Problem(source, "not a JSON object: nested too deep", f"entry {line.number}")
            )


def _json_array(
    first_line: str, handle: BinaryIO, source: str, reading: LogReading
) -> Iterator[tuple[int, Any, str]]:
    """A .json file holding one array of entries rather than one entry per line."""
    rest = read_whole(handle, source)
    if isinstance(rest, Problem):
        reading.problems.append(rest)
        reading.rejected += 1
        return
    try:
        items = json.loads(f"{first_line}\n{rest}")
    except json.JSONDecodeError as error:
        reading.problems.append(Problem(source, f"not valid JSON: {error.msg}", f"line {error.lineno}"))
        reading.rejected += 1
        return
    except RecursionError:
        reading.problems.append(Problem(source, "not valid JSON: nested too deep"))
        reading.rejected += 1
        return
    if not isinstance(items, list):
        reading.problems.append(Problem(source, "not valid JSON: a log is one array, or one object a line"))
        reading.rejected += 1
        return
    for number, item in enumerate(items, 1):
        yield number, item, json.dumps(item)


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
