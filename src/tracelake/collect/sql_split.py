"""Split SQL text into statements and parse each one on its own.

One unparseable statement must not cost the lineage of its neighbours, so the text is
tokenized once with the dialect's tokenizer (which knows that a semicolon inside a string
or a comment ends nothing), cut at semicolon tokens, and every piece is parsed separately.
When the tokenizer itself gives up (an unterminated string, say), the text is cut at raw
semicolons instead and each piece is tokenized alone, so only the broken piece is lost.
Failures come back as `StatementError`s carrying the line and sqlglot's reason.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

_EXCERPT_CHARS = 120
# sqlglot names the offending token by its repr; people want to see the token's text.
_TOKEN_REPR = re.compile(
    r"<Token token_type: [\w.]+, text: (.*?), line: \d+, col: \d+, start: \d+, end: \d+, "
    r"comments: \[.*?\]>"
)
_LITERALS = frozenset({TokenType.STRING, TokenType.NUMBER})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True, slots=True)
class ParsedStatement:
    """One statement: its number in the text (1-based), first line, text and parse tree."""

    index: int
    line: int
    text: str
    expression: exp.Expr | None = None
    shape: str = ""


@dataclass(frozen=True, slots=True)
class StatementError:
    """A statement that could not be tokenized or parsed."""

    index: int
    line: int
    reason: str
    excerpt: str


def excerpt(text: str) -> str:
    """The first characters of a statement on one line, for problem reports."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 1] + "…"


class _QuietCommandFallback(logging.Filter):
    """sqlglot warns once per statement it keeps as an opaque Command (SET, ADD JAR, MSCK,
    SHOW…); a query log holds thousands of them and they move no data, so the warnings go."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


_QUIET = _QuietCommandFallback()
_SQLGLOT_LOGGER = logging.getLogger("sqlglot")


def parse_statements(text: str, dialect: Dialect) -> Iterator[ParsedStatement | StatementError]:
    """Yield each statement of `text` parsed, or the reason it could not be, in order."""
    _SQLGLOT_LOGGER.addFilter(_QUIET)
    try:
        yield from _parse_statements(text, dialect)
    finally:
        _SQLGLOT_LOGGER.removeFilter(_QUIET)


def _parse_statements(text: str, dialect: Dialect) -> Iterator[ParsedStatement | StatementError]:
    lines = _LineIndex(text)
    try:
        tokens = dialect.tokenize(text)
    except TokenError:
        yield from _parse_pieces(text, dialect, lines)
        return
    except RecursionError:
        yield StatementError(1, 1, "the text is nested too deeply to tokenize", excerpt(text))
        return
    for index, chunk in enumerate(_chunks(tokens), start=1):
        start, end = chunk[0].start, chunk[-1].end + 1
        yield _parse_chunk(dialect, chunk, text, index, lines.line_of(start), text[start:end], absolute=True)


def _parse_pieces(
    text: str, dialect: Dialect, lines: _LineIndex
) -> Iterator[ParsedStatement | StatementError]:
    """The fallback when the whole text does not tokenize: cut at every raw semicolon."""
    index = 0
    offset = 0
    for piece in text.split(";"):
        piece_start = offset
        offset += len(piece) + 1
        stripped = piece.strip()
        if not stripped:
            continue
        index += 1
        leading = len(piece) - len(piece.lstrip())
        line = lines.line_of(piece_start + leading)
        try:
            tokens = dialect.tokenize(piece)
        except (TokenError, RecursionError) as error:
            yield StatementError(index, line, _clean_reason(error) or "cannot tokenize", excerpt(stripped))
            continue
        code = [token for token in tokens if token.token_type != TokenType.SEMICOLON]
        if not code:
            index -= 1
            continue
        yield _parse_chunk(dialect, code, piece, index, line, stripped, absolute=False)


def _chunks(tokens: list[Token]) -> Iterator[list[Token]]:
    """Statements cut at semicolons, except inside the BEGIN … END body of a CREATE PROCEDURE
    or FUNCTION, which holds statements of its own."""
    chunk: list[Token] = []
    depth = 0  # open BEGIN/CASE blocks of a routine's body
    for position, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON and depth == 0:
            if chunk:
                yield chunk
            chunk = []
            continue
        chunk.append(token)
        if _in_routine(chunk):
            word = token.text.upper()
            if word in ("BEGIN", "CASE"):
                depth += 1
            elif word == "END" and depth > 0:
                following = tokens[position + 1].text.upper() if position + 1 < len(tokens) else ""
                if following not in _BLOCK_ENDINGS:  # END IF, END LOOP: no BEGIN opened them
                    depth -= 1
    if chunk:
        yield chunk


_BLOCK_ENDINGS = frozenset({"IF", "LOOP", "WHILE", "REPEAT", "FOR"})


def _in_routine(chunk: list[Token]) -> bool:
    """True when the statement so far is `CREATE [OR REPLACE] PROCEDURE|FUNCTION …`."""
    head = [t.text.upper() for t in chunk[:5]]
    return (
        bool(head) and head[0] == "CREATE" and ("PROCEDURE" in head or "FUNCTION" in head or "PROC" in head)
    )


def _parse_chunk(
    dialect: Dialect, tokens: list[Token], sql: str, index: int, line: int, text: str, *, absolute: bool
) -> ParsedStatement | StatementError:
    try:
        expressions = dialect.parser().parse(tokens, sql)
    except ParseError as error:
        return StatementError(index, line, _parse_reason(error, absolute), excerpt(text))
    except RecursionError:
        return StatementError(index, line, "the statement is nested too deeply to parse", excerpt(text))
    except SqlglotError as error:
        return StatementError(index, line, _clean_reason(error) or type(error).__name__, excerpt(text))
    expression = next((e for e in expressions if e is not None), None)
    return ParsedStatement(index, line, text, expression, _shape(tokens))


def _shape(tokens: list[Token]) -> str:
    """The statement with its literals blanked out, so the same job run daily with another
    date literal is recognised as the same query."""
    return " ".join("?" if t.token_type in _LITERALS else t.text.lower() for t in tokens)


def _parse_reason(error: ParseError, absolute: bool) -> str:
    if error.errors:
        first = error.errors[0]
        description = _TOKEN_REPR.sub(lambda m: repr(m.group(1)), str(first.get("description", "")))
        # positions are only worth quoting when they count from the top of the file
        where = f" (line {first['line']}, col {first['col']})" if absolute and first.get("line") else ""
        return _ANSI.sub("", description) + where
    return _clean_reason(error)


def _clean_reason(error: BaseException) -> str:
    message = _ANSI.sub("", str(error)).strip()
    return " ".join(message.split())[:500]


class _LineIndex:
    """Line numbers of character offsets, without rescanning the text for each statement."""

    def __init__(self, text: str) -> None:
        self._newlines = [match.start() for match in re.finditer("\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_left(self._newlines, offset) + 1
