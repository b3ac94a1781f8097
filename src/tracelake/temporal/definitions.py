"""Reading entity definitions from YAML, with the file and line of every mistake.

One file or a folder of `*.yml`/`*.yaml` files, each a list of entities (or a mapping with an
`entities:` list). Every problem is collected, not only the first, and a set with any problem
is refused whole by the callers, so a broken definition never reaches the store in part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from tracelake.model import Problem
from tracelake.model.textfile import TextFileError, read_text
from tracelake.temporal.entities import (
    DEFAULT_STATE,
    AirflowBinding,
    DateRange,
    Dependency,
    Entity,
    EntityState,
    Kind,
    TzRule,
    check,
)
from tracelake.temporal.periods import WEEKDAYS, Period


@dataclass
class Definitions:
    """What `load_definitions` read: the entities by name, and every problem found."""

    entities: dict[str, Entity] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class DefinitionError(ValueError):
    """Definitions that cannot be used; `problems` says what and where."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(problem) for problem in problems))


# ---------------------------------------------------------------------- reading YAML


class Located(dict[Any, Any]):
    """A YAML mapping (keys as YAML gives them: text, or a number) that remembers the line of
    itself and of each of its keys."""

    line: int = 0
    key_lines: dict[str, int]


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_located(loader: _LineLoader, node: yaml.MappingNode) -> Located:
    mapping = Located(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_located)


def time_zone(name: Any) -> ZoneInfo | None:
    """The IANA time zone `name` names, or None when it names none."""
    if not isinstance(name, str):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def definition_files(path: Path) -> list[Path]:
    """The YAML files of `path`: itself, or every `*.yml`/`*.yaml` under it, sorted."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in {".yml", ".yaml"} and p.is_file())
    if not path.exists():
        raise FileNotFoundError(f"no such file or folder: {path}")
    return [path]


def load_definitions(paths: Iterable[Path], known: Mapping[str, Entity] | None = None) -> Definitions:
    """Read and check entity definitions; `known` are entities stored earlier that they may name.

    Every problem is reported (file, line, what), not only the first. An entity in the files
    replaces a known one of the same name, and the known ones are checked again with it (a
    stored entity may depend on a state the new definition no longer has).
    """
    found = Definitions()
    for path in paths:
        for file in definition_files(path):
            _read_file(file, found)
    merged = {**dict(known or {}), **found.entities}
    found.problems.extend(check(merged))
    found.entities = {name: merged[name] for name in found.entities}  # with their default ranges
    return found


def yaml_items(file: Path, key: str, problems: list[Problem]) -> list[Located]:
    """The mappings of a YAML file that is a list of them, or a mapping with `key:` holding one;
    what is not is a problem (file, line, what), and no item."""
    source = str(file)
    try:
        document = yaml.load(read_text(file), Loader=_LineLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}" if mark else ""
        problems.append(Problem(source, f"not valid YAML: {error.problem}", where))
        return []
    except TextFileError as error:
        problems.append(Problem(source, error.reason))
        return []
    except OSError as error:
        problems.append(Problem(source, f"cannot read the file: {error.strerror or error}"))
        return []
    except RecursionError:  # PyYAML recurses once a level of nesting
        problems.append(Problem(source, "not valid YAML: it nests too deep"))
        return []
    except ValueError as error:  # a scalar YAML reads as a date or a tagged value that is not one
        problems.append(Problem(source, f"not valid YAML: {error}"))
        return []
    if isinstance(document, dict) and key in document:
        document = document[key]
    if document is None:
        return []
    if not isinstance(document, list):
        problems.append(Problem(source, f"expected a list of {key} (or `{key}:` with one)", "line 1"))
        return []
    items = []
    for item in document:
        if isinstance(item, Located):
            items.append(item)
        else:
            problems.append(Problem(source, f"each of the {key} must be a mapping, not {item!r}"))
    return items


def _read_file(file: Path, found: Definitions) -> None:
    source = str(file)
    for item in yaml_items(file, "entities", found.problems):
        entity = _parse_entity(item, source, found.problems)
        if entity is None:
            continue
        if entity.name in found.entities:
            first = found.entities[entity.name]
            found.problems.append(
                Problem(
                    source,
                    f"entity {entity.name!r} is defined twice (first at {first.source}:{first.line})",
                    f"line {entity.line}",
                )
            )
            continue
        found.entities[entity.name] = entity


def entity_from_dict(data: Mapping[str, Any]) -> Entity:
    """An entity back from `Entity.to_dict()` (as the store keeps it)."""
    kept = {key: value for key, value in data.items() if key not in {"source", "line"}}
    fields = {key: value for key, value in kept.items() if value is not None}
    problems: list[Problem] = []
    entity = _parse_entity(_located(fields), str(data.get("source", "")), problems)
    if entity is None:
        raise DefinitionError(problems)
    return replace(entity, line=int(data.get("line", 0)))


def _located(value: Any) -> Any:
    """Plain data as the YAML reader builds it (mappings that know their lines; here, none)."""
    if isinstance(value, Mapping):
        located = Located({key: _located(item) for key, item in value.items()})
        located.key_lines = {}
        return located
    if isinstance(value, list):
        return [_located(item) for item in value]
    return value


_ENTITY_KEYS = {
    "name", "period", "timezone", "kind", "week_start", "window", "cumulative_over", "states",
    "depends_on", "start", "airflow", "asset", "description", "owner",
}  # fmt: skip
_DEPENDENCY_KEYS = {"entity", "dates", "states", "timezones"}


class _Invalid(Exception):
    """One mistake in one definition, at a line."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        super().__init__(reason)


def _parse_entity(item: Located, source: str, problems: list[Problem]) -> Entity | None:
    def line_of(key: str) -> int:
        return item.key_lines.get(key, item.line)

    try:
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _Invalid(item.line, "an entity needs a `name`")
        unknown = sorted(set(item) - _ENTITY_KEYS)
        if unknown:
            raise _Invalid(line_of(unknown[0]), f"{name}: unknown key {unknown[0]!r}")
        kind = _choice(Kind, item.get("kind", Kind.TIME_SERIES.value), line_of("kind"), f"{name}: kind")
        period = None
        if kind is not Kind.STATIC:
            if "period" not in item:
                raise _Invalid(
                    item.line,
                    f"{name}: a {kind.value} entity needs a `period` (hourly, daily, weekly, monthly)",
                )
            period = _choice(Period, item["period"], line_of("period"), f"{name}: period")
        timezone = str(item.get("timezone", "UTC"))
        if time_zone(timezone) is None:
            raise _Invalid(line_of("timezone"), f"{name}: unknown time zone {timezone!r}")
        week_start = None
        if "week_start" in item:
            text = str(item["week_start"]).lower()
            if text not in WEEKDAYS:
                raise _Invalid(line_of("week_start"), f"{name}: week_start must be a day name, not {text!r}")
            week_start = WEEKDAYS.index(text)
        elif period is Period.WEEKLY:
            raise _Invalid(
                item.line, f"{name}: a weekly entity must declare its `week_start` (monday … sunday)"
            )
        window = item.get("window")
        if kind is Kind.SLIDING_WINDOW and (not isinstance(window, int) or window < 1):
            raise _Invalid(
                line_of("window") if "window" in item else item.line,
                f"{name}: a sliding window needs `window`: its length in periods (≥ 1)",
            )
        cumulative_over = None
        if kind is Kind.CUMULATIVE:
            if "cumulative_over" not in item:
                raise _Invalid(
                    item.line,
                    f"{name}: a cumulative entity needs `cumulative_over` (the period it resets at)",
                )
            cumulative_over = _choice(
                Period, item["cumulative_over"], line_of("cumulative_over"), f"{name}: cumulative_over"
            )
            if cumulative_over is Period.WEEKLY and week_start is None:
                raise _Invalid(line_of("cumulative_over"), f"{name}: a weekly reset needs `week_start`")
        start = item.get("start")
        if isinstance(start, date | datetime):
            start = start.isoformat()
        states = _parse_states(item, name, line_of)
        airflow = _parse_airflow(item.get("airflow"), name, line_of("airflow"))
        asset = item.get("asset")
        return Entity(
            name=name.strip(), period=period, timezone=timezone, kind=kind, week_start=week_start,
            window=window if kind is Kind.SLIDING_WINDOW else None, cumulative_over=cumulative_over,
            states=states, start=str(start) if start is not None else None, airflow=airflow,
            asset=str(asset) if asset else None, source=source, line=item.line,
        )  # fmt: skip
    except _Invalid as error:
        problems.append(Problem(source, str(error), f"line {error.line}"))
        return None


def _choice(enum: type[StrEnum], value: Any, line: int, what: str) -> Any:
    try:
        return enum(str(value).lower())
    except ValueError:
        choices = ", ".join(member.value for member in enum)
        raise _Invalid(line, f"{what} {value!r} is not one of {choices}") from None


def _parse_states(item: Located, name: str, line_of: Any) -> tuple[EntityState, ...]:
    if "states" in item and "depends_on" in item:
        raise _Invalid(
            line_of("depends_on"), f"{name}: give `depends_on` under each state, not beside `states`"
        )
    if "states" not in item:
        return (
            EntityState(
                DEFAULT_STATE, _parse_dependencies(item.get("depends_on"), name, line_of("depends_on"))
            ),
        )
    raw = item["states"]
    if isinstance(raw, list):  # states with no dependencies of their own: [estimated, completed]
        raw = _located({str(state): None for state in raw})
    if not isinstance(raw, Located) or not raw:
        raise _Invalid(line_of("states"), f"{name}: `states` must map each state to its dependencies")
    states = []
    for state, body in raw.items():
        body_line = raw.key_lines.get(state, raw.line)
        if body is not None and not isinstance(body, dict):
            raise _Invalid(body_line, f"{name}: state {state!r} must be a mapping with `depends_on`")
        dependencies = (body or {}).get("depends_on")
        line = body.key_lines.get("depends_on", body_line) if isinstance(body, Located) else body_line
        states.append(EntityState(str(state), _parse_dependencies(dependencies, name, line)))
    return tuple(states)


def _parse_dependencies(raw: Any, name: str, line: int) -> tuple[Dependency, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _Invalid(line, f"{name}: `depends_on` must be a list")
    dependencies = []
    for entry in raw:
        if isinstance(entry, str):
            entry = Located(entity=entry)
            entry.line, entry.key_lines = line, {}
        if not isinstance(entry, Located) or not isinstance(entry.get("entity"), str):
            raise _Invalid(line, f"{name}: each dependency needs an `entity`")
        unknown = sorted(set(entry) - _DEPENDENCY_KEYS)
        if unknown:
            raise _Invalid(
                entry.key_lines.get(unknown[0], entry.line), f"{name}: unknown dependency key {unknown[0]!r}"
            )
        dates = None
        if "dates" in entry:
            try:
                dates = DateRange.parse(str(entry["dates"]))
            except ValueError as error:
                raise _Invalid(entry.key_lines.get("dates", entry.line), f"{name}: {error}") from None
        accepted = entry.get("states", [DEFAULT_STATE])
        if isinstance(accepted, str):
            accepted = [accepted]
        if not isinstance(accepted, list) or not accepted:
            raise _Invalid(
                entry.key_lines.get("states", entry.line),
                f"{name}: a dependency's `states` must be a non-empty list",
            )
        timezones = None
        if "timezones" in entry:
            timezones = _choice(
                TzRule, entry["timezones"], entry.key_lines.get("timezones", entry.line), f"{name}: timezones"
            )
        dependencies.append(
            Dependency(
                entity=entry["entity"].strip(),
                # None until the upstream is known: its kind decides the default (`check` fills it in)
                dates=dates,
                states=tuple(str(state) for state in accepted),
                timezones=timezones,
                line=entry.line,
            )
        )
    return tuple(dependencies)


def _parse_airflow(raw: Any, name: str, line: int) -> AirflowBinding | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        dag, _, task = raw.partition(".")
        return AirflowBinding(dag, task or None)
    if isinstance(raw, dict) and isinstance(raw.get("dag"), str):
        unknown = sorted(set(raw) - {"dag", "task", "logical_date", "state"})
        if unknown:
            raise _Invalid(line, f"{name}: unknown airflow key {unknown[0]!r}")
        bound_task, state = raw.get("task"), raw.get("state")
        logical_date = str(raw.get("logical_date", "start"))
        if logical_date not in ("start", "end"):
            raise _Invalid(line, f"{name}: airflow logical_date is `start` or `end` of the instance")
        return AirflowBinding(
            raw["dag"], str(bound_task) if bound_task else None, logical_date, str(state) if state else None
        )
    raise _Invalid(line, f"{name}: `airflow` is `dag.task` or a mapping with `dag` and `task`")
