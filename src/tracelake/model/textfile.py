"""Reading the small text files users hand Tracelake (policies, token files, configs, schemas,
entity definitions) with a one-line reason when a file cannot be: missing, a folder, a device,
unreadable, too big, holding NUL bytes or not UTF-8. Large inputs (SQL scripts, query logs) are
streamed by their collectors instead; this is for files read whole.
"""

from __future__ import annotations

import stat
from pathlib import Path

from tracelake.model import InputError

# Files read whole are configuration, not data: anything bigger is a wrong path.
MAX_TEXT_FILE_BYTES = 64 * 1024 * 1024


class TextFileError(InputError):
    """A file that cannot be read as text: its name and why, said on one line."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = source, reason


def read_text(path: Path | str, *, limit: int = MAX_TEXT_FILE_BYTES) -> str:
    """The file's text (UTF-8, a byte-order mark dropped), or a TextFileError.

    A missing file raises FileNotFoundError, which callers already report as a user mistake.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise
    except OSError as error:
        raise TextFileError(str(path), f"cannot read it ({error.strerror or error})") from None
    if stat.S_ISDIR(mode):
        raise TextFileError(str(path), "is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise TextFileError(str(path), "not a regular file")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise TextFileError(str(path), f"cannot read it ({error.strerror or error})") from None
    if len(data) > limit:
        raise TextFileError(str(path), f"over {limit // (1024 * 1024)} MiB, too big for this kind of file")
    return decode_text(data, str(path))


def decode_text(data: bytes, source: str) -> str:
    """`data` as UTF-8 text, or a TextFileError naming `source` and the first bad byte."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise TextFileError(source, f"not a text file (a NUL byte at byte {nul})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TextFileError(source, f"not UTF-8 text (at byte {error.start})") from None
