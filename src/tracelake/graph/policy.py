"""Policies checked against the lineage graph, each violation with the path that breaks it.

Four kinds, declared in YAML (`policies:` list):
- `purpose`: data labelled `label` must not reach assets in a zone (`zone:` URN prefixes and/or
  `layer:`), e.g. `religion` must not reach `hive.table/ads.`. Labels are the declared ones
  spread by `propagate` under the policy's rules, so the path shows how the data gets there;
- `security_level`: an asset's security level never drops downstream (a flow from level 3 to
  level 1 is a leak);
- `layer`: assets of layer `to` must not read layer `from` directly (no `ads` reading `ods`);
- `redundant`: two assets fed by the same upstream assets with the same columns, in different
  layers (one of them is probably a copy to retire).
Only the graph as it is now (open edges) is checked. A pure function over the index and node
properties; `tracelake check` loads both and exits non-zero when anything is violated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tracelake.graph.index import GraphIndex
from tracelake.graph.propagate import PropagationRules, propagate
from tracelake.model import Problem
from tracelake.model.textfile import TextFileError, read_text
from tracelake.store.facts import AssetFacts

KINDS = ("purpose", "security_level", "layer", "redundant")


@dataclass(frozen=True)
class Policy:
    name: str
    kind: str
    label: str = ""
    zones: tuple[str, ...] = ()
    layer: str = ""  # purpose: the zone's layer
    source_layer: str = ""  # layer: `from`
    target_layer: str = ""  # layer: `to`


@dataclass(frozen=True)
class Violation:
    policy: str
    kind: str
    message: str
    path: tuple[str, ...]


def load_policies(path: Path) -> tuple[list[Policy], list[Problem]]:
    """Policies from a YAML file; every malformed entry is a problem, the rest load."""
    try:
        text = read_text(path)
    except TextFileError as error:
        return [], [Problem(error.source, error.reason)]
    return parse_policies(text, str(path))


def parse_policies(text: str, source: str) -> tuple[list[Policy], list[Problem]]:
    """Policies from YAML text (`source` names it in problems)."""
    try:
        document = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as error:  # ValueError: a date or tagged scalar that is not one
        return [], [Problem(source, f"not valid YAML: {error}")]
    except RecursionError:  # PyYAML recurses once a level: hundreds of nested `[` overflow it
        return [], [Problem(source, "not valid YAML: it nests too deep")]
    entries = document.get("policies") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        return [], [Problem(source, "expected a list of policies (or `policies:` with one)")]
    policies, problems = [], []
    for number, entry in enumerate(entries, 1):
        try:
            policies.append(_policy(entry))
        except ValueError as error:
            problems.append(Problem(source, str(error), f"policy {number}"))
    return policies, problems


def _policy(entry: Any) -> Policy:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ValueError("a policy is a mapping with a `name`")
    name, kind = entry["name"], entry.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{name}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == "purpose":
        zones = entry.get("zone", [])
        zones = [zones] if isinstance(zones, str) else zones
        if not isinstance(zones, list) or not all(isinstance(zone, str) for zone in zones):
            raise ValueError(f"{name}: `zone` is a zone or a list of them")
        if not entry.get("label") or not (zones or entry.get("layer")):
            raise ValueError(f"{name}: a purpose policy needs a `label` and a `zone` or `layer`")
        return Policy(
            name, kind, label=str(entry["label"]), zones=tuple(zones), layer=str(entry.get("layer", ""))
        )
    if kind == "layer":
        if not entry.get("from") or not entry.get("to"):
            raise ValueError(f"{name}: a layer policy needs `from` and `to` layers")
        return Policy(name, kind, source_layer=str(entry["from"]), target_layer=str(entry["to"]))
    return Policy(name, kind)


def check(
    index: GraphIndex,
    policies: Sequence[Policy],
    facts: Mapping[str, AssetFacts],
    declared: Mapping[str, Iterable[str]],
    rules: PropagationRules | None = None,
) -> list[Violation]:
    """Every violation of `policies` on the graph now."""
    pairs = _asset_flows(index)
    found: list[Violation] = []
    labels_needed = {policy.label for policy in policies if policy.kind == "purpose"}
    spread = propagate(
        index,
        {urn: [name for name in names if name in labels_needed] for urn, names in declared.items()},
        rules,
    )
    for policy in policies:
        if policy.kind == "purpose":
            found.extend(_purpose(index, policy, facts, spread))
        elif policy.kind == "security_level":
            for source, target in pairs:
                high, low = (
                    facts.get(source, AssetFacts()).security_level,
                    facts.get(target, AssetFacts()).security_level,
                )
                if high is not None and low is not None and low < high:
                    message = f"security level drops from {high} to {low}"
                    found.append(Violation(policy.name, policy.kind, message, (source, target)))
        elif policy.kind == "layer":
            for source, target in pairs:
                if (facts.get(source, AssetFacts()).layer, facts.get(target, AssetFacts()).layer) == (
                    policy.source_layer,
                    policy.target_layer,
                ):
                    message = f"a {policy.target_layer} asset reads a {policy.source_layer} asset directly"
                    found.append(Violation(policy.name, policy.kind, message, (source, target)))
        else:
            found.extend(_redundant(policy, pairs, facts))
    return found


def _asset_flows(index: GraphIndex) -> list[tuple[str, str]]:
    return [(index.urns[int(source)], index.urns[int(target)]) for source, target in index.asset_flows()]


def _purpose(
    index: GraphIndex, policy: Policy, facts: Mapping[str, AssetFacts], spread: Any
) -> list[Violation]:
    walk = spread.walks.get(policy.label)
    if walk is None:
        return []
    found = []
    for position in walk.reached:
        asset = index.asset_urn(int(position))
        if asset is None:
            continue
        in_zone = any(asset.startswith(zone) for zone in policy.zones)
        in_layer = bool(policy.layer) and facts.get(asset, AssetFacts()).layer == policy.layer
        if in_zone or in_layer:
            path = spread.path(walk, int(position))
            message = f"{policy.label} reaches {index.urns[int(position)]}"
            found.append(Violation(policy.name, policy.kind, message, path))
    return found


def _redundant(
    policy: Policy, pairs: Sequence[tuple[str, str]], facts: Mapping[str, AssetFacts]
) -> list[Violation]:
    upstreams: dict[str, set[str]] = {}
    for source, target in pairs:
        upstreams.setdefault(target, set()).add(source)
    groups: dict[tuple[frozenset[str], frozenset[str]], list[str]] = {}
    for asset, sources in upstreams.items():
        columns = facts.get(asset, AssetFacts()).columns
        if columns:
            groups.setdefault((frozenset(sources), columns), []).append(asset)
    found = []
    for (shared, _), assets in sorted(groups.items(), key=lambda item: sorted(item[1])):
        layers = {facts[asset].layer for asset in assets}
        if len(assets) > 1 and len(layers) > 1:
            ordered = tuple(sorted(assets))
            upstream = ", ".join(sorted(shared))
            message = f"{', '.join(ordered)} read the same upstreams ({upstream}) with the same columns"
            found.append(Violation(policy.name, policy.kind, message, ordered))
    return found
