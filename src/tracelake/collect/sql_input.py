"""Reading SQL scripts and query logs incrementally, so memory stays bounded whatever the input.

A query log is read a line at a time; a script in pieces of whole statements, cut where a line
ends with a semicolon outside any string, quoted name or comment, once a piece has grown past
`PIECE_BYTES`. Nothing is held beyond one line or one statement of `MAX_STATEMENT_BYTES`: a
longer one is a problem at its place and is skipped, as is a line that is not UTF-8 or holds a
NUL byte (in a script, the whole statement around it, since a statement missing a line could
say lineage that is not there). Only regular files, pipes and standard input are read: a device
like /dev/zero would never end.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tracelake.model import Problem
from tracelake.model.textfile import TextFileError

MAX_STATEMENT_BYTES = 16 * 1024 * 1024  # also the longest line of a query log
PIECE_BYTES = 4 * 1024 * 1024
# A log written as one JSON array has to be parsed whole.
MAX_JSON_ARRAY_BYTES = 256 * 1024 * 1024
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based
    text: str  # without its line break


@dataclass(frozen=True, slots=True)
class Piece:
    """Whole statements of a script, starting at `first_line`."""

    first_line: int
    text: str


def open_input(path: Path) -> BinaryIO:
    """`path` opened for reading, when it is a file or a pipe; else a TextFileError."""
    try:
        mode = path.stat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise TextFileError(str(path), "not a regular file")
        return path.open("rb")
    except OSError as error:
        raise TextFileError(str(path), f"cannot read the file ({error.strerror or error})") from None


def read_lines(
    handle: BinaryIO, source: str, *, limit: int = MAX_STATEMENT_BYTES
) -> Iterator[Line | Problem]:
    """Each line of `handle` as text, or a Problem at "line N" when it cannot be one."""
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            _skip_to_line_end(handle)
            yield Problem(source, f"a line over {_size(limit)}", f"line {number}")
            continue
        text = _decoded(raw.rstrip(b"\r\n"), first=number == 1)
        if isinstance(text, str):
            yield Line(number, text)
        else:
            yield Problem(source, text.reason, f"line {number}")


@dataclass(frozen=True, slots=True)
class Skipped:
    """A statement of a script left out, from its first line, and why."""

    line: int
    reason: str


def read_pieces(
    handle: BinaryIO,
    source: str,
    *,
    backslash_escapes: bool,
    limit: int = MAX_STATEMENT_BYTES,
    piece_bytes: int = PIECE_BYTES,
) -> Iterator[Piece | Skipped]:
    """A script as pieces of whole statements, in order, and each statement that was skipped."""
    scanner = _Scanner(backslash_escapes)
    kept: list[str] = []  # the current piece's lines, from `first_line` on
    kept_bytes = first_line = 0
    statement_line = 0  # first non-blank line of the statement being read; 0 before it
    statement_bytes = statement_kept = 0  # its size so far, and its lines in `kept`
    bad: str | None = None  # why the statement being read will be skipped
    for item in read_lines(handle, source, limit=limit):
        if isinstance(item, Problem):
            # the line is not text: the statement it belongs to cannot be read whole
            number = int(item.location.removeprefix("line "))
            bad = bad or f"line {number}: {item.reason}; the statement is skipped"
            ends, size, blank = False, 0, False
            scanner.reset_line()
        else:
            number, size, blank = item.number, len(item.text) + 1, not item.text.strip()
            ends = scanner.feed(item.text)
        if not statement_line and not blank:
            statement_line = number
        statement_bytes += size
        if bad is None and statement_bytes > limit:
            bad = f"a statement over {_size(limit)}; skipped"
        if bad is None:
            if not kept:
                first_line = number
            kept.append(item.text if isinstance(item, Line) else "")
            kept_bytes += size
            statement_kept += 1
        if not ends:
            continue
        if bad is not None:
            # the piece so far ends before the statement; the next one starts after it
            before = kept[: len(kept) - statement_kept]
            if any(line.strip() for line in before):
                yield Piece(first_line, "\n".join(before))
            yield Skipped(statement_line or number, bad)
            kept, kept_bytes, bad = [], 0, None
        elif kept_bytes >= piece_bytes:
            yield Piece(first_line, "\n".join(kept))
            kept, kept_bytes = [], 0
        statement_line = statement_bytes = statement_kept = 0
    before = kept[: len(kept) - statement_kept] if bad is not None else kept
    if any(line.strip() for line in before):
        yield Piece(first_line, "\n".join(before))
    if bad is not None:
        yield Skipped(statement_line, bad)


def read_whole(handle: BinaryIO, source: str, *, limit: int = MAX_JSON_ARRAY_BYTES) -> str | Problem:
    """The rest of `handle` as text, when it is at most `limit` bytes."""
    data = handle.read(limit + 1)
    if len(data) > limit:
        return Problem(source, f"a JSON array over {_size(limit)}: write the log as JSON lines")
    text = _decoded(data, first=True)
    return text if isinstance(text, str) else Problem(source, text.reason)


@dataclass(frozen=True, slots=True)
class _Undecodable:
    reason: str


def _decoded(raw: bytes, *, first: bool) -> str | _Undecodable:
    nul = raw.find(b"\x00")
    if nul >= 0:
        return _Undecodable(f"not text: a NUL byte at column {nul + 1}")
    try:
        return raw.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError as error:
        return _Undecodable(f"not UTF-8 text at column {error.start + 1}")


def _size(limit: int) -> str:
    return f"{limit // _MIB} MiB" if limit % _MIB == 0 else f"{limit:,} bytes"


def _skip_to_line_end(handle: BinaryIO) -> None:
    while True:
        chunk = handle.readline(_MIB)
        if not chunk or chunk.endswith(b"\n"):
            return


# What opens a string, a quoted name, a comment or a dollar-quoted body.
_OPENING = re.compile(r"--|/\*|['\"`]|\$(?:[A-Za-z_]\w*)?\$")


class _Scanner:
    """Whether a line ends a statement: a semicolon at its end, outside strings and comments.

    It only has to be right about where it is safe to cut: mistaking a semicolon inside a
    string for an end would cut a statement in two (both halves then fail to parse, each a
    recorded problem), so strings, quoted names, block comments and dollar quotes are followed
    across lines.
    """

    def __init__(self, backslash_escapes: bool) -> None:
        self.closing: str | None = None  # what ends the string, name or comment we are inside
        escape = r"\\.|" if backslash_escapes else ""
        # a doubled quote stays inside; with backslash escapes, so does any escaped character
        self._ends = {
            quote: re.compile(f"{escape if quote != '`' else ''}{re.escape(quote * 2)}|{re.escape(quote)}")
            for quote in ("'", '"', "`")
        }
        self._last = ""  # the last character of code seen: ";" when a statement just ended

    def reset_line(self) -> None:
        """A line that could not be read: what it held is unknown, so assume nothing is open."""
        self.closing, self._last = None, ""

    def feed(self, line: str) -> bool:
        i = 0
        while True:
            if self.closing is not None:
                i = self._close(line, i)
                if i < 0:
                    return False
            opening = _OPENING.search(line, i)
            code = (line[i:] if opening is None else line[i : opening.start()]).rstrip()
            if code:
                self._last = code[-1]
            if opening is None or opening.group() == "--":
                if self._last != ";":
                    return False
                self._last = ""  # the next statement starts
                return True
            token = opening.group()
            self.closing = "*/" if token == "/*" else token
            if token != "/*":
                self._last = token[-1]  # a string or name is code, and not a semicolon
            i = opening.end()

    def _close(self, line: str, start: int) -> int:
        """Where the open string or comment ends on `line` (after its closing), or -1."""
        assert self.closing is not None
        pattern = self._ends.get(self.closing)
        if pattern is None:  # a block comment or a dollar-quoted body
            closing, end = self.closing, line.find(self.closing, start)
            if end < 0:
                return -1
            self.closing = None
            return end + len(closing)
        for match in pattern.finditer(line, start):
            if match.group() == self.closing:
                self.closing = None
                return match.end()
        return -1
