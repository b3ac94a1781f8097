"""Deadlines: by when a table must be ready each day, read from YAML with the file and line of
every mistake, as entity definitions are.

    deadlines:
      - asset: ads.user_segments   # a table name or URN, as the CLI takes them
        by: "09:00"                # ready by this time each day (HH:MM)
        timezone: Europe/Paris     # the day's and the time's zone (default UTC)
        owner: ads-team            # who to tell (optional)

A set with any problem is refused whole by the callers, so a broken file never reaches the
store in part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import time
from pathlib import Path
from typing import Any

from tracelake.model import Problem
from tracelake.temporal.definitions import definition_files, time_zone, yaml_items

_KEYS = {"asset", "by", "timezone", "owner"}


@dataclass(frozen=True, slots=True)
class Deadline:
    asset: str  # as written
    by: time
    timezone: str = "UTC"
    owner: str | None = None
    source: str = ""
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "by": self.by.strftime("%H:%M")}


def deadline_from_dict(data: Mapping[str, Any]) -> Deadline:
    """A deadline back from `Deadline.to_dict()` (as the store keeps it)."""
    return Deadline(**{**data, "by": time.fromisoformat(data["by"])})


def load_deadlines(paths: Iterable[Path]) -> tuple[list[Deadline], list[Problem]]:
    """Every deadline of the files (or folders of `*.yml`), and every problem with them; an asset
    given twice is a problem."""
    found: dict[str, Deadline] = {}
    problems: list[Problem] = []
    for path in paths:
        for file in definition_files(path):
            source = str(file)
            for item in yaml_items(file, "deadlines", problems):
                line = item.line
                unknown = sorted(str(key) for key in item if key not in _KEYS)
                asset, by, timezone = item.get("asset"), item.get("by"), item.get("timezone", "UTC")
                owner = item.get("owner")
                reason = None
                if unknown:
                    reason = f"unknown key {unknown[0]!r} (a deadline takes {', '.join(sorted(_KEYS))})"
                elif not isinstance(asset, str) or not asset.strip():
                    reason = "a deadline needs `asset:`, the table it is for"
                elif _time_of(by) is None:
                    reason = f"`by:` must be a time of day as HH:MM, not {by!r}"
                elif time_zone(timezone) is None:
                    reason = f"unknown time zone {timezone!r} (an IANA name, e.g. UTC or Europe/Paris)"
                elif owner is not None and not isinstance(owner, str):
                    reason = "`owner:` must be text"
                elif asset in found:
                    first = found[asset]
                    reason = f"{asset} has a deadline already (at {first.source}:{first.line})"
                if reason is not None:
                    problems.append(Problem(source, reason, f"line {line}"))
                    continue
                at = _time_of(by)
                assert isinstance(asset, str) and at is not None
                found[asset] = Deadline(asset, at, str(timezone), owner, source, line)
    return list(found.values()), problems


def _time_of(value: Any) -> time | None:
    """HH:MM (YAML reads an unquoted 09:00 as the number of minutes, 540: that is taken too)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 24 * 60:
        return time(value // 60, value % 60)
    if isinstance(value, str) and len(value) == 5 and value[2] == ":":
        try:
            return time.fromisoformat(value)
        except ValueError:
            return None
    return None
