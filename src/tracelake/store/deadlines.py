"""The table of declared deadlines: each a JSON definition (`temporal.deadlines`) by asset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from tracelake.model import utcnow
from tracelake.store import schema as s
from tracelake.store.sqlstore import LineageStore


def save_deadlines(store: LineageStore, definitions: Mapping[str, dict[str, Any]]) -> int:
    """Store (or replace) deadlines by asset, all in one transaction."""
    now = s.to_micros(utcnow())
    table = s.deadlines
    with store.engine.begin() as conn:
        if definitions:
            conn.execute(table.delete().where(table.c.asset.in_(list(definitions))))
            conn.execute(
                table.insert(),
                [
                    {"asset": asset, "definition": data, "loaded_at": now}
                    for asset, data in definitions.items()
                ],
            )
    return len(definitions)


def stored_deadlines(store: LineageStore) -> list[dict[str, Any]]:
    table = s.deadlines
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(table.c.definition).order_by(table.c.asset)).scalars())
