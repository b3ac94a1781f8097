"""Bearer tokens with read and write scopes, for the HTTP API.

Authentication is off for the embedded default and on as soon as a token file is configured.
The file (YAML) keeps only SHA-256 digests of the tokens, never the tokens themselves:

    tokens:
      - name: airflow
        sha256: 9f86d08…
        scopes: [write]
      - name: ui
        sha256: 60303ae…
        scopes: [read]

`write` does not imply `read`: a producer that only sends events cannot read the graph.
`new_token` makes a token and its entry; the token is shown once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from tracelake.model import InputError
from tracelake.model.textfile import TextFileError, read_text

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")


class TokenFileError(InputError):
    """The token file cannot be used; the server refuses to start rather than run unprotected."""


@dataclass(frozen=True, slots=True)
class Token:
    name: str
    sha256: str
    scopes: frozenset[Scope]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Tokens:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens

    @classmethod
    def load(cls, path: Path) -> Tokens:
        entries = _token_document(path).get("tokens")
        if not isinstance(entries, list) or not entries:
            raise TokenFileError(f"{path}: expected `tokens:` with at least one entry")
        tokens = []
        for number, entry in enumerate(entries, 1):
            where = f"{path}: token {number}"
            if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
                raise TokenFileError(f"{where}: expected name, sha256 and scopes")
            scopes = entry.get("scopes") or []
            if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
                raise TokenFileError(f"{where}: scopes must be a list of {', '.join(SCOPES)}")
            tokens.append(Token(str(entry.get("name", number)), entry["sha256"].lower(), frozenset(scopes)))
        return cls(tokens)

    def find(self, presented: str) -> Token | None:
        wanted = digest(presented)
        found = None
        for token in self.tokens:  # compare with every entry, in constant time each
            if hmac.compare_digest(token.sha256, wanted):
                found = token
        return found


def _token_document(path: Path, *, missing_ok: bool = False) -> dict[str, Any]:
    """The token file's YAML mapping, or a TokenFileError saying why it is not one."""
    try:
        document = yaml.safe_load(read_text(path))
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise TokenFileError(f"{path}: no such token file") from None
    except TextFileError as error:
        raise TokenFileError(str(error)) from None
    except RecursionError:
        raise TokenFileError(f"{path}: not valid YAML: it nests too deep") from None
    except ValueError as error:  # a scalar YAML reads as a date or a tagged value that is not one
        raise TokenFileError(f"{path}: not valid YAML: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TokenFileError(f"{path}: not valid YAML{where}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise TokenFileError(f"{path}: expected a YAML mapping with `tokens:`")
    return document


def new_token(name: str, scopes: list[Scope], path: Path) -> str:
    """Add a fresh token to the file (created if missing); returns the token, shown only once."""
    token = f"tl_{secrets.token_urlsafe(32)}"
    # A file that is there but unreadable, or not a token file, is refused rather than replaced.
    document = _token_document(path, missing_ok=True)
    if not isinstance(document.get("tokens", []), list):
        raise TokenFileError(f"{path}: `tokens:` should be a list")
    document.setdefault("tokens", []).append({"name": name, "sha256": digest(token), "scopes": list(scopes)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return token
