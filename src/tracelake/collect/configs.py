"""Lineage from ML configs: training jobs that read tables and features and write a model, and
inference services that read a model.

A config (YAML or JSON) names its inputs and outputs somewhere in its tree; a `ConfigShape`
says where, as key paths with `[*]` over lists (`training.tables[*]`, `model.uri`). A value is
an asset reference — `asset://ai.model/ranker`, a URN such as `hive.table/db.t`, or a mapping
with a `uri` or `name` — and a bare name gets the path's default kind (`features[*]` names are
`ai.feature/…`). Each config becomes one process (`ml.training/<name>`) with a flow from every
input to every output, signal `config`. Shapes are declared in a small YAML file
(`shapes: [{name, match, inputs, outputs}]`), tried in order, the built-in one last. A config
that does not parse, or whose shape finds no input or no output, is a `Problem` with its file;
the rest are collected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tracelake.model import Confidence, FlowEdge, LineageBatch, Problem, Process, Signal, UrnError
from tracelake.model.names import resolve_node, uri_urn
from tracelake.model.textfile import TextFileError, read_text

ASSET_SCHEME = "asset://"
SUFFIXES = {".yml", ".yaml", ".json"}


@dataclass(frozen=True)
class KeyPath:
    """`training.tables[*]`, with the kind given to bare names found there (`hive.table`)."""

    path: str
    kind: str = "hive.table"

    def values(self, document: Any) -> Iterator[Any]:
        nodes = [document]
        for part in self.path.split("."):
            key, spread = (part[:-3], True) if part.endswith("[*]") else (part, False)
            found = []
            for node in nodes:
                value = node.get(key) if isinstance(node, dict) else None
                if value is None:
                    continue
                if spread and isinstance(value, list):
                    found.extend(value)
                elif spread and isinstance(value, dict):
                    found.extend(value.values())
                else:
                    found.append(value)
            nodes = found
        yield from nodes


@dataclass(frozen=True)
class ConfigShape:
    name: str
    inputs: tuple[KeyPath, ...]
    outputs: tuple[KeyPath, ...]
    match: dict[str, Any] = field(default_factory=dict, hash=False)  # top-level key → required value
    process_kind: str = "ml.training"
    confidence: Confidence = Confidence.HIGH

    def applies_to(self, document: Any) -> bool:
        return isinstance(document, dict) and all(document.get(k) == v for k, v in self.match.items())


DEFAULT_SHAPE = ConfigShape(
    name="default",
    inputs=(
        KeyPath("inputs[*]"),
        KeyPath("training.inputs[*]"),
        KeyPath("datasets[*]"),
        KeyPath("features[*]", "ai.feature"),
        KeyPath("training.features[*]", "ai.feature"),
        KeyPath("serving.model", "ai.model"),
    ),
    outputs=(
        KeyPath("output"),
        KeyPath("outputs[*]"),
        KeyPath("model", "ai.model"),
        KeyPath("training.model", "ai.model"),
        KeyPath("serving.endpoint", "web.endpoint"),
    ),
)


@dataclass
class ConfigCollection:
    batch: LineageBatch = field(default_factory=LineageBatch)
    configs: int = 0
    problems: list[Problem] = field(default_factory=list)


def load_shapes(path: Path) -> list[ConfigShape]:
    """Shapes from YAML: `shapes: [{name, match?, kind?, inputs: [path | {path, kind}], outputs: …}]`.

    Quote paths with `[*]` inside a `[...]` list (`inputs: ['data.tables[*]']`): YAML reads a bare
    `*` as an alias."""
    try:
        document = yaml.safe_load(read_text(path)) or {}
    except TextFileError as error:
        raise ValueError(str(error)) from None
    except RecursionError:
        raise ValueError(f"{path}: not valid YAML: it nests too deep") from None
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {_first_line(error)}") from None
    entries = document.get("shapes", []) if isinstance(document, dict) else document
    shapes = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not entry.get("inputs") or not entry.get("outputs"):
            raise ValueError(f"{path}: shape {number} needs `inputs` and `outputs` key paths")
        shapes.append(
            ConfigShape(
                name=str(entry.get("name", f"shape {number}")),
                inputs=tuple(_key_path(item) for item in entry["inputs"]),
                outputs=tuple(_key_path(item) for item in entry["outputs"]),
                match=dict(entry.get("match", {})),
                process_kind=str(entry.get("kind", "ml.training")),
            )
        )
    return shapes


def _key_path(item: Any) -> KeyPath:
    if isinstance(item, str):
        return KeyPath(item)
    return KeyPath(str(item["path"]), str(item.get("kind", "hive.table")))


def collect_configs(paths: Iterable[Path], shapes: Sequence[ConfigShape] = ()) -> ConfigCollection:
    """Read every config under `paths` (files, or folders of .yml/.yaml/.json)."""
    collection = ConfigCollection()
    candidates = [*shapes, DEFAULT_SHAPE]
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES) if path.is_dir() else [path]
        for file in files:
            collection.configs += 1
            try:
                document = _read(file)
            except RecursionError:
                collection.problems.append(Problem(str(file), "cannot read the config: it nests too deep"))
                continue
            except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as error:
                reason = f"cannot read the config: {_first_line(error)}"
                collection.problems.append(Problem(str(file), reason))
                continue
            problem = _collect_one(file, document, candidates, collection.batch)
            if problem:
                collection.problems.append(problem)
    return collection


def _read(file: Path) -> Any:
    text = read_text(file)
    return json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)


def _collect_one(
    file: Path, document: Any, shapes: Sequence[ConfigShape], batch: LineageBatch
) -> Problem | None:
    shape = next((shape for shape in shapes if shape.applies_to(document)), None)
    if shape is None:
        return Problem(str(file), "not a mapping: a config is a YAML or JSON object")
    inputs = _references(shape.inputs, document)
    outputs = _references(shape.outputs, document)
    if not inputs or not outputs:
        missing = "input" if not inputs else "output"
        return Problem(str(file), f"no {missing} found with the {shape.name!r} shape")
    name = str(document.get("name") or file.stem)
    process = Process(urn=f"{shape.process_kind}/{name}", name=name, kind=shape.process_kind)
    batch.processes.append(process)
    for source in inputs:
        for target in outputs:
            if source != target:
                edge = FlowEdge(source, target, process.urn, Signal.CONFIG, shape.confidence, None)
                batch.edges.append(edge)
    return None


def _references(paths: Sequence[KeyPath], document: Any) -> list[str]:
    found: list[str] = []
    for key_path in paths:
        for value in key_path.values(document):
            urn = _urn(value, key_path.kind)
            if urn and urn not in found:
                found.append(urn)
    return found


def _urn(value: Any, kind: str) -> str | None:
    if isinstance(value, dict):
        value = value.get("uri") or value.get("name")
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if text.startswith(ASSET_SCHEME):
            return resolve_node(text[len(ASSET_SCHEME) :])
        if "://" in text:
            return uri_urn(text)  # `s3://lake/features`, `postgres://db:5432/shop.public.orders`
        head, _, rest = text.partition("/")
        # a URN as is, else a name of the key's kind; named as every collector names them
        return resolve_node(text if rest and "." in head else f"{kind}/{text}")
    except UrnError:
        return None


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
