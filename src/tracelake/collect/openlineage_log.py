"""OpenLineage events that did not come over HTTP: a file or a stream of them, read as
`tracelake ingest openlineage` reads it.

Three shapes are understood, told apart by the first line that is not blank: JSON lines, one event
(or one page) a line, as the OpenLineage client's file transport writes them and as teams dump a
Kafka topic; a JSON array of events; or Marquez's page of events, `{"events": [...]}`, as
`GET /api/v1/events/lineage` answers (a backfill from Marquez). JSON lines are read a line at a
time, so a file of any size streams. Each event is read on its own, exactly as the HTTP route
reads it (`event_to_batch`): one that cannot be read is a problem naming its line (or index) and
JSON path, and the events around it are kept; the parts an event had to leave out are problems
too, with the line in front of their path.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

from tracelake.collect.openlineage import EventError, event_to_batch
from tracelake.collect.sql_input import Line, read_lines
from tracelake.model import LineageBatch, Problem

__all__ = ["batches_from_log", "log_lines"]


def log_lines(handle: BinaryIO, source: str) -> Iterator[str | Problem]:
    """A log's lines as `batches_from_log` takes them: text with its line break, or the problem
    of a line that is not text (read a line at a time, each bounded)."""
    for line in read_lines(handle, source):
        yield line.text + "\n" if isinstance(line, Line) else line


def batches_from_log(lines: Iterable[str | Problem], source: str) -> Iterator[LineageBatch]:
    """One batch per event of the log `lines` (named `source` in problems); an event that cannot be
    read gives a batch holding only its problem. A line given as a Problem (not text, too long)
    is refused on its own in JSON lines; in an array or a page it spoils the whole document."""
    lines = iter(lines)
    head: list[str | Problem] = []
    for line in lines:
        head.append(line)
        if isinstance(line, str) and line.strip():
            break
    first = head[-1].strip() if head and isinstance(head[-1], str) else ""
    if not first:
        for line in head:
            if isinstance(line, Problem):
                yield _refused(source, line.location, line.reason)
        return
    if not first.startswith("[") and _one_value(first):
        # JSON lines: the first line is a whole value, so every line is
        for number, line in enumerate(itertools.chain(head, lines), 1):
            if isinstance(line, Problem):
                yield _refused(source, line.location, line.reason)
            elif line.strip():
                yield from _from_line(line, number, source)
        return
    document: list[str] = []
    for line in itertools.chain(head, lines):
        if isinstance(line, Problem):
            yield _refused(source, line.location, f"{line.reason}: the document around it is not read")
            return
        document.append(line)
    yield from _from_document("".join(document), source)


def _one_value(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _from_line(line: str, number: int, source: str) -> Iterator[LineageBatch]:
    where = f"line {number}"
    try:
        value = json.loads(line)
    except ValueError as error:
        yield _refused(source, where, f"not JSON: {error}")
        return
    except RecursionError:
        yield _refused(source, where, "not JSON: nested too deep")
        return
    if _is_page(value):
        for index, event in enumerate(value["events"]):
            yield _from_event(event, f"{where} $.events[{index}]", source)
    else:
        yield _from_event(value, where, source)


def _from_document(text: str, source: str) -> Iterator[LineageBatch]:
    try:
        value = json.loads(text)
    except ValueError as error:
        yield _refused(source, "$", f"not JSON lines, a JSON array nor a page of events: {error}")
        return
    except RecursionError:
        yield _refused(source, "$", "not JSON: nested too deep")
        return
    if isinstance(value, list):
        events, prefix = value, "$"
    elif _is_page(value):
        events, prefix = value["events"], "$.events"
    else:
        events, prefix = [value], ""
    for index, event in enumerate(events):
        yield _from_event(event, f"{prefix}[{index}]" if prefix else "$", source)


def _is_page(value: Any) -> bool:
    """Marquez's `{"events": [...], "totalCount": n}`: a list of events, not an event itself."""
    return isinstance(value, Mapping) and isinstance(value.get("events"), list) and "eventTime" not in value


def _from_event(event: Any, where: str, source: str) -> LineageBatch:
    try:
        batch = event_to_batch(event)
    except EventError as error:
        return _refused(source, _at(where, error.path), error.reason)
    batch.problems = [Problem(source, p.reason, _at(where, p.location), p.excerpt) for p in batch.problems]
    return batch


def _at(where: str, path: str) -> str:
    """`line 3` and `$.run.runId` → `line 3 $.run.runId`; `$[2]` and `$.run` → `$[2].run`."""
    if where.startswith("$"):
        return where + path[1:]
    return f"{where} {path}"


def _refused(source: str, where: str, reason: str) -> LineageBatch:
    return LineageBatch(problems=[Problem(source, reason, where)])
