"""What the policy checks need to know of each asset: its layer, security level and columns."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore


@dataclass(frozen=True)
class AssetFacts:
    """What the policies need to know of an asset besides its edges."""

    layer: str | None = None
    security_level: int | None = None
    columns: frozenset[str] = frozenset()


def asset_facts(store: LineageStore) -> dict[str, AssetFacts]:
    nodes = s.nodes
    parent = nodes.alias("parent")
    columns: dict[str, set[str]] = {}
    assets = sa.select(nodes.c.urn, nodes.c.layer, nodes.c.security_level).where(nodes.c.node_type == "asset")
    fields = (
        sa.select(parent.c.urn, nodes.c.urn)
        .join(parent, nodes.c.parent_id == parent.c.id)
        .where(nodes.c.node_type == "field")
    )
    with store.engine.connect() as conn:
        for asset, field in conn.execute(fields):
            columns.setdefault(asset, set()).add(field.partition("#")[2])
        return {
            urn: AssetFacts(layer, level, frozenset(columns.get(urn, ())))
            for urn, layer, level in conn.execute(assets)
        }
