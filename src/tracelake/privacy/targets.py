"""Which datasets can hold identities: declared ones, and those lineage says identities reach.

A dataset is declared with its identity columns (`declare`): its asset and the fields of those
columns go into the lineage store through the one ingest path, the fields labelled
`identity.<column>`. Identities then propagate: every field reached downstream of an
`identity.*`-labelled field along HIGH-confidence direct column edges (values copied or
computed, not rows filtered or joined) can hold identities too, so its dataset is a privacy
request target, with the path that shows why. Only datasets on a file system (`file.*` assets)
can be searched; others are listed, marked as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracelake.graph.index import GraphIndex
from tracelake.graph.traverse import TraversalFilters, lineage
from tracelake.model import Asset, Confidence, Field, LineageBatch, parse_urn
from tracelake.model.names import field_urn, location_urn
from tracelake.privacy.index import dataset_root
from tracelake.store import LineageStore

IDENTITY_LABEL = "identity."


@dataclass(frozen=True)
class Target:
    """A dataset privacy requests must cover."""

    asset: str
    identity: tuple[str, ...]  # its top-level identity columns
    path: Path | None  # where its files are; None when it is not a file dataset
    reason: tuple[str, ...] = ()  # field URNs from a declared identity to this dataset; () if declared

    @property
    def declared(self) -> bool:
        return not self.reason


def declare(
    store: LineageStore, path: str | Path, identity: Sequence[str], *, file_format: str = "parquet"
) -> Target:
    """Record that the dataset at `path` holds identities in `identity` columns; the folder must
    be there (a mistyped path would be a target no request can search)."""
    if not identity:
        raise ValueError("name at least one identity column")
    root = dataset_root(path)
    if not root.is_dir():
        raise ValueError(f"dataset {root} does not exist (or is not a folder)")
    asset = location_urn(str(root))
    store.ingest(
        LineageBatch(
            assets=[Asset(asset, metadata={"format": file_format.lower()})],
            fields=[
                Field(field_urn(asset, column), labels=frozenset({f"{IDENTITY_LABEL}{column}"}))
                for column in identity
            ],
        )
    )
    return Target(asset, tuple(identity), root)


def find_targets(store: LineageStore) -> list[Target]:
    """Every declared dataset, and every dataset identities reach through sure column lineage."""
    labelled = [urn for urn in store.labelled(IDENTITY_LABEL) if parse_urn(urn).is_field]
    columns: dict[str, set[str]] = {}
    reasons: dict[str, tuple[str, ...]] = {}
    for urn in labelled:
        columns.setdefault(parse_urn(urn).asset, set()).add(_column(urn))
    index = GraphIndex.from_store(store)
    starts = [urn for urn in labelled if urn in index.positions]
    if starts:
        walk = lineage(
            index,
            starts,
            "downstream",
            filters=TraversalFilters(min_confidence=Confidence.HIGH, direct_only=True),
        )
        distance = walk.distance_by_urn()
        parent: dict[str, str] = {}
        for source, target in sorted(walk.edge_pairs()):
            if distance.get(source, -2) == distance.get(target, -1) - 1:
                parent.setdefault(target, source)
        for urn in sorted(distance, key=lambda u: (distance[u], u)):
            if distance[urn] == 0 or not parse_urn(urn).is_field:
                continue
            asset = parse_urn(urn).asset
            if asset not in columns or asset in reasons:
                columns.setdefault(asset, set()).add(_column(urn))
                reasons.setdefault(asset, _route(urn, parent))
    return [
        Target(asset, tuple(sorted(found)), _path_of(asset), reasons.get(asset, ()))
        for asset, found in sorted(columns.items())
    ]


def _column(urn: str) -> str:
    return parse_urn(urn).path.split(".", 1)[0]


def _route(urn: str, parent: dict[str, str]) -> tuple[str, ...]:
    route = [urn]
    while route[-1] in parent and len(route) < 100:
        route.append(parent[route[-1]])
    return tuple(reversed(route))


def _path_of(asset: str) -> Path | None:
    parsed = parse_urn(asset)
    if not parsed.asset_kind.startswith("file.") or not parsed.name.startswith("/"):
        return None  # a catalog table, or a file on another file system (s3://…)
    return Path(parsed.name)
