"""The lineage store: `LineageStore` opens a database (`engine`), writes batches through the one
ingest path (`ingest`) and answers the reads the analyses need, returning `records`.

The same code runs on SQLite (the embedded default, in WAL mode) and on PostgreSQL through
psycopg 3, for any number of writing processes at once: the schema is created under a lock, an
ingest locks its nodes in one order, and a transaction the database gave up over a lock is run
again (docs/decisions.md, "Many writers").
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model import (
    AssetChange,
    AssetRead,
    Lifecycle,
    LineageBatch,
    Problem,
    Signal,
    utcnow,
)
from tracelake.store import owed, snapshots
from tracelake.store import reads as asset_reads
from tracelake.store import schema as s
from tracelake.store.engine import CHUNK, chunks, driver_execute, open_engine, until_won
from tracelake.store.ingest import within_columns, write_batches
from tracelake.store.location import as_url, default_url
from tracelake.store.reads import ReadCounts
from tracelake.store.records import (
    NODE_TYPES,
    EdgeRecord,
    GraphChanges,
    GraphDiff,
    GraphSnapshot,
    IngestReport,
    NodeRecord,
    edge_query,
    edge_record,
    node_record,
)
from tracelake.store.schema import from_micros, to_micros


class LineageStore:
    """The lineage graph in a SQL database (SQLite by default, PostgreSQL in production)."""

    def __init__(self, url: str | None = None, *, echo: bool = False) -> None:
        self.url = as_url(url) if url else default_url()
        self.engine = open_engine(self.url, echo=echo)
        self._ids: dict[str, int] = {}  # node ids learnt by ingests, by URN

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        owed.settle(self.url)  # what another thread is writing here lands first
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ ingest

    def ingest(
        self, batches: LineageBatch | Iterable[LineageBatch], *, now: datetime | None = None
    ) -> IngestReport:
        """Write batches in one transaction; the same batches twice add nothing but last_seen.

        A transaction the database gave up over a lock (a deadlock, a serialization failure,
        SQLite busy) is run again whole, up to `engine.ATTEMPTS` times: it wrote nothing, and the
        same batches at the same `now` make the same rows (observations are keyed by process
        and instant, not counted), so a retried ingest is the ingest it would have been.
        """
        batch_list = [
            within_columns(b) for b in ([batches] if isinstance(batches, LineageBatch) else batches)
        ]
        now_us = to_micros(now or utcnow())
        return until_won(lambda: self._ingest_once(batch_list, now_us))

    def _ingest_once(self, batch_list: list[LineageBatch], now_us: int) -> IngestReport:
        try:
            with self.engine.begin() as conn:
                return write_batches(conn, batch_list, now_us, self._ids)
        except BaseException:
            # Ids minted inside the rolled-back transaction do not exist.
            self._ids.clear()
            raise

    def changes(
        self,
        asset: str | None = None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        asset_ids: Collection[int] | None = None,
    ) -> list[AssetChange]:
        """Lifecycle changes, oldest first: of one asset (and of the names it was renamed from,
        as a RENAME of it names them), of the assets with these store ids, or of all, within
        [since, until]."""
        if asset_ids is not None and len(asset_ids) > CHUNK:
            found = [
                change
                for part in chunks(sorted(asset_ids))
                for change in self.changes(asset, since=since, until=until, asset_ids=part)
            ]
            return sorted(found, key=lambda c: (c.at, c.asset, str(c.change)))
        a, n = s.asset_changes, s.nodes
        owner, process, previous = n.alias("owner"), n.alias("process"), n.alias("previous")
        query = (
            sa.select(owner.c.urn, a.c.change, a.c.at, a.c.signal)
            .add_columns(process.c.urn, a.c.run_id, a.c.columns, previous.c.urn)
            .join(owner, owner.c.id == a.c.asset_id)
            .outerjoin(process, process.c.id == a.c.process_id)
            .outerjoin(previous, previous.c.id == a.c.previous_id)
        )
        if asset is not None:
            query = query.where(sa.or_(owner.c.urn == asset, previous.c.urn == asset))
        if asset_ids is not None:
            query = query.where(a.c.asset_id.in_(sa.bindparam("asset_ids", list(asset_ids), expanding=True)))
        if since is not None:
            query = query.where(a.c.at >= to_micros(since))
        if until is not None:
            query = query.where(a.c.at <= to_micros(until))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(a.c.at, owner.c.urn, a.c.change)).all()
        return [
            AssetChange(
                urn,
                Lifecycle(change),
                from_micros(at),
                Signal(signal),
                process_urn,
                run_id,
                tuple((str(c[0]), c[1]) for c in columns) if columns is not None else None,
                previous_urn,
            )
            for urn, change, at, signal, process_urn, run_id, columns, previous_urn in rows
        ]

    def readers(
        self,
        urn: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = 100,
    ) -> list[AssetRead]:
        """Who read the asset without writing from it (`tracelake.store.reads`), newest first."""
        with self.engine.connect() as conn:
            return asset_reads.readers(conn, urn, since=since, until=until, limit=limit)

    def read_counts(
        self, *, asset: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> dict[str, ReadCounts]:
        """Per asset read: its reading runs, distinct readers and reading processes (hotness's votes)."""
        with self.engine.connect() as conn:
            return asset_reads.read_counts(conn, asset=asset, since=since, until=until)

    def ended_assets(self) -> dict[str, datetime]:
        """Assets whose life has ended — their last change a DROP, or a RENAME away from them —
        with when. Their edges that began before are over at that moment (in `edges` and in
        `snapshot`); a later change (a CREATE, a RENAME back) or a later observation of an edge
        starts them anew."""
        with self.engine.connect() as conn:
            return {urn: from_micros(at) for urn, at in snapshots.ended_assets(conn).values()}

    # ------------------------------------------------------------------ reads

    def graph_version(self) -> int:
        """Grows with every ingest; an in-memory index reloads when it changes."""
        with self.engine.connect() as conn:
            return snapshots.graph_version(conn)

    def identity(self) -> int:
        """A number drawn for this store the first time it is asked for, and kept in it: files kept
        beside a store (its graph index) are its own only if they name it, since a store deleted
        and made again at the same place counts its versions from the start again."""
        with self.engine.connect() as conn:
            found = conn.execute(_IDENTITY).scalar()
        if found is not None:
            return int(found)
        drawn = secrets.randbits(62)
        with self.engine.begin() as conn:  # whoever draws first wins; the others read theirs
            draw = "INSERT INTO store_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
            driver_execute(conn, draw, ("identity", drawn))
            return int(conn.execute(_IDENTITY).scalar_one())

    def snapshot(self) -> GraphSnapshot:
        """All nodes and edge versions as arrays (one consistent read; `snapshots`)."""
        with self.engine.connect() as conn, conn.begin():
            return snapshots.read_snapshot(conn)

    def changes_since(self, version: int, ended: Mapping[int, int]) -> GraphChanges | None:
        """What changed in the graph after `version`, for an index of that version whose assets'
        ends were `ended` to catch up (one consistent read); None when the store's change log
        does not reach back to it (`snapshots.read_changes`)."""
        with self.engine.connect() as conn, conn.begin():
            return snapshots.read_changes(conn, version, ended)

    def nodes(self, urns: Iterable[str]) -> dict[str, NodeRecord]:
        found: dict[str, NodeRecord] = {}
        wanted = list(dict.fromkeys(urns))
        with self.engine.connect() as conn:
            for chunk in chunks(wanted):
                for row in conn.execute(_NODES_BY_URN, {"urns": list(chunk)}):
                    found[row.urn] = node_record(row)
        return found

    def node(self, urn: str) -> NodeRecord | None:
        return self.nodes([urn]).get(urn)

    def fields_of(self, asset_urn: str, declared: Sequence[str] = ()) -> list[NodeRecord]:
        """The asset's fields: the `declared` columns first, in that order, then the rest by name
        (never in the order the store happened to see them)."""
        parent = s.nodes.alias("parent")
        query = (
            sa.select(s.nodes)
            .join(parent, s.nodes.c.parent_id == parent.c.id)
            .where(parent.c.urn == asset_urn)
        )
        with self.engine.connect() as conn:
            records = [node_record(row) for row in conn.execute(query)]
        place = {name: position for position, name in enumerate(declared)}

        def order(record: NodeRecord) -> tuple[int, str]:
            path = record.urn.partition("#")[2]
            return place.get(path.split(".", 1)[0], len(place)), path

        return sorted(records, key=order)

    def labelled(self, prefix: str) -> dict[str, tuple[str, ...]]:
        """Nodes with a label starting with `prefix` (e.g. "identity."), and those labels."""
        query = sa.select(s.nodes.c.urn, s.nodes.c.labels).where(s.nodes.c.labels.is_not(None))
        found = {}
        with self.engine.connect() as conn:
            for urn, labels in conn.execute(query):
                matching = tuple(label for label in labels or () if label.startswith(prefix))
                if matching:
                    found[urn] = matching
        return found

    def property_of(self, key: str, *, urn_prefix: str) -> dict[str, Any]:
        """The property `key` of every node whose URN starts with `urn_prefix`, by URN."""
        pattern = urn_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = sa.select(s.nodes.c.urn, s.nodes.c.properties).where(
            s.nodes.c.urn.like(pattern, escape="\\"), s.nodes.c.properties.is_not(None)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {urn: properties[key] for urn, properties in rows if properties and key in properties}

    def find_urns(self, suffix: str, *, node_type: str | None = None, limit: int = 20) -> list[str]:
        """URNs that end with `suffix` (how a plain name typed by a user is matched)."""
        query = sa.select(s.nodes.c.urn).where(s.nodes.c.urn.endswith(suffix, autoescape=True))
        if node_type:
            query = query.where(s.nodes.c.node_type == node_type)
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(s.nodes.c.urn).limit(limit)).scalars())

    def search_urns(self, text: str, *, node_type: str | None = None, limit: int = 20) -> list[str]:
        """URNs that contain `text`, ignoring case; shorter (assets before fields) first."""
        query = sa.select(s.nodes.c.urn).where(s.nodes.c.urn.icontains(text, autoescape=True))
        if node_type:
            query = query.where(s.nodes.c.node_type == node_type)
        order = (sa.func.length(s.nodes.c.urn), s.nodes.c.urn)
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(*order).limit(limit)).scalars())

    def edges(
        self,
        *,
        as_of: datetime | None = None,
        ids: Sequence[int] | None = None,
        touching: str | None = None,
        process: str | None = None,
    ) -> list[EdgeRecord]:
        """Edge versions valid at `as_of` (now if None), optionally by id, touching one node, or
        made by one process."""
        query = edge_query()
        e = s.edges
        if ids is not None:
            records: list[EdgeRecord] = []
            with self.engine.connect() as conn:
                for chunk in chunks(list(ids)):
                    records.extend(edge_record(r) for r in conn.execute(query.where(e.c.id.in_(chunk))))
            return records
        moment = to_micros(as_of) if as_of else None
        query = query.where(_valid_at(moment) if moment is not None else e.c.valid_to.is_(None))
        if touching is not None:
            node_id = sa.select(s.nodes.c.id).where(s.nodes.c.urn == touching).scalar_subquery()
            query = query.where(sa.or_(e.c.source_id == node_id, e.c.target_id == node_id))
        if process is not None:
            process_id = sa.select(s.nodes.c.id).where(s.nodes.c.urn == process).scalar_subquery()
            query = query.where(e.c.process_id == process_id)
        with self.engine.connect() as conn:
            records = [edge_record(r) for r in conn.execute(query.order_by(e.c.id))]
            ended = snapshots.ended_assets(conn)
        if not ended:
            return records
        ends = {urn: at for urn, at in ended.values() if moment is None or at <= moment}
        return [r for r in records if not _ended_before(r, ends)]

    def diff(self, since: datetime, until: datetime) -> GraphDiff:
        """Edges valid at `until` but not at `since` (added), and the reverse (removed)."""
        before = {e.key: e for e in self.edges(as_of=since)}
        after = {e.key: e for e in self.edges(as_of=until)}
        return GraphDiff(
            added=[e for key, e in after.items() if key not in before],
            removed=[e for key, e in before.items() if key not in after],
        )

    def known_columns(self) -> dict[str, list[str]]:
        """Columns of every asset as far as the store has seen them: a schema for `SELECT *`."""
        parent = s.nodes.alias("parent")
        query = (
            sa.select(parent.c.urn, s.nodes.c.urn)
            .join(parent, s.nodes.c.parent_id == parent.c.id)
            .where(s.nodes.c.node_type == "field")
            .order_by(s.nodes.c.id)
        )
        columns: dict[str, list[str]] = defaultdict(list)
        with self.engine.connect() as conn:
            for asset_urn, field_urn in conn.execute(query):
                path = field_urn.partition("#")[2]
                if "." not in path:  # top-level columns only; nested paths live under them
                    columns[asset_urn].append(path)
        return dict(columns)

    def declared_columns(self, urn: str | None = None) -> dict[str, list[tuple[datetime, list[str]]]]:
        """Column orders declared for assets (by DDL, a CREATE … AS SELECT, a table write), each
        with the time it was declared, oldest first; of one asset if `urn` is given."""
        o = s.column_orders
        query = sa.select(s.nodes.c.urn, o.c.at, o.c.columns).join(s.nodes, s.nodes.c.id == o.c.asset_id)
        if urn is not None:
            query = query.where(s.nodes.c.urn == urn)
        declared: dict[str, list[tuple[datetime, list[str]]]] = {}
        with self.engine.connect() as conn:
            for asset, at, columns in conn.execute(query.order_by(o.c.at)):
                declared.setdefault(asset, []).append((from_micros(at), list(columns)))
        return declared

    def problems(self, limit: int = 100) -> list[Problem]:
        query = sa.select(s.problems).order_by(s.problems.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [Problem(r.source, r.reason, r.location, r.excerpt) for r in conn.execute(query)]

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            by_type: dict[str, int] = dict(
                conn.execute(
                    sa.select(s.nodes.c.node_type, sa.func.count()).group_by(s.nodes.c.node_type)
                ).all()
            )
            open_edges = (
                conn.execute(sa.select(sa.func.count()).where(s.edges.c.valid_to.is_(None))).scalar() or 0
            )
            all_edges = conn.execute(sa.select(sa.func.count()).select_from(s.edges)).scalar() or 0
        return {**{t: by_type.get(t, 0) for t in NODE_TYPES}, "edges": open_edges, "edge_versions": all_edges}


# The statements of the reads, built once: building one cost more than running it.
_IDENTITY = sa.select(s.store_state.c.value).where(s.store_state.c.key == "identity")
_NODES_BY_URN = sa.select(s.nodes).where(s.nodes.c.urn.in_(sa.bindparam("urns", expanding=True)))


def _valid_at(moment_us: int) -> sa.ColumnElement[bool]:
    e = s.edges
    return sa.and_(e.c.valid_from <= moment_us, sa.or_(e.c.valid_to.is_(None), e.c.valid_to > moment_us))


def _ended_before(edge: EdgeRecord, ends: dict[str, int]) -> bool:
    """Whether an end of one of the edge's datasets closes it: it began before that end."""
    began = to_micros(edge.valid_from)
    for urn in (edge.source, edge.target):
        end = ends.get(urn.partition("#")[0])
        if end is not None and began < end:
            return True
    return False
