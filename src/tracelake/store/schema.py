"""The lineage store's tables, as SQLAlchemy Core metadata shared by SQLite and PostgreSQL.

Every node (asset, field, process) lives in `nodes` under an integer id so edges stay
narrow. Edges are temporal: each belongs to one version of its process, identified by
(process_id, valid_from), and is valid over [valid_from, valid_to); an open version has
valid_to NULL. Times are integer microseconds since the epoch, which compare exactly and
load into numpy without parsing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from tracelake.model import as_utc

metadata = sa.MetaData()

nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("urn", sa.String(2000), nullable=False, unique=True),
    # asset | field | process
    sa.Column("node_type", sa.String(16), nullable=False),
    # the asset kind (`hive.table`); a field carries its asset's kind; a process its own kind
    sa.Column("kind", sa.String(200), nullable=False),
    sa.Column("parent_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=True),
    sa.Column("data_type", sa.String(500)),
    sa.Column("owner", sa.String(200)),
    sa.Column("layer", sa.String(50)),
    sa.Column("security_level", sa.Integer),
    # NULL means none: bulk inserts of bare nodes then skip JSON encoding altogether
    sa.Column("labels", sa.JSON, nullable=True),
    sa.Column("description", sa.Text),
    sa.Column("properties", sa.JSON, nullable=True),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
    sa.Column("last_seen", sa.BigInteger, nullable=False),
)
sa.Index("ix_nodes_parent", nodes.c.parent_id)

process_versions = sa.Table(
    "process_versions",
    metadata,
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
    sa.Column("valid_from", sa.BigInteger, primary_key=True),
    sa.Column("valid_to", sa.BigInteger, nullable=True),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("edge_count", sa.Integer, nullable=False),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
    sa.Column("last_seen", sa.BigInteger, nullable=False),
)

# Every instant a process was observed at, with the content hash of what it did then: the
# versions are derived from these (store/history.py), so late observations land right.
process_observations = sa.Table(
    "process_observations",
    metadata,
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
    sa.Column("at", sa.BigInteger, primary_key=True),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
)

# The column order an asset was declared with (DDL, CREATE … AS SELECT, a table write), from
# the moment it was declared: positional INSERTs are mapped by the order in force at their time.
column_orders = sa.Table(
    "column_orders",
    metadata,
    sa.Column("asset_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
    sa.Column("at", sa.BigInteger, primary_key=True),
    sa.Column("columns", sa.JSON, nullable=False),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
)

edges = sa.Table(
    "edges",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("target_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("signal", sa.String(32), nullable=False),
    sa.Column("confidence", sa.String(8), nullable=False),
    sa.Column("transformation", sa.String(32), nullable=True),
    sa.Column("description", sa.Text),
    sa.Column("valid_from", sa.BigInteger, nullable=False),
    sa.Column("valid_to", sa.BigInteger, nullable=True),
    sa.Column("first_seen", sa.BigInteger, nullable=False),
    sa.Column("last_seen", sa.BigInteger, nullable=False),
)
sa.Index("ix_edges_source", edges.c.source_id)
sa.Index("ix_edges_target", edges.c.target_id)
sa.Index("ix_edges_version", edges.c.process_id, edges.c.valid_from)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("job_id", sa.String(500)),
    sa.Column("user_name", sa.String(200)),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("status", sa.String(32)),
)
sa.Index("ix_runs_process", runs.c.process_id, runs.c.started_at)  # a process's runs in a window

# Every accepted OpenLineage event as it was received, for Marquez's read API: the events
# listing, and run, job and dataset facets (which the graph does not keep). A dataset or job
# event has no run; a dataset event no job.
openlineage_events = sa.Table(
    "openlineage_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("event_time", sa.BigInteger, nullable=False),
    sa.Column("event_type", sa.String(32)),  # START, COMPLETE, …; NULL when the event has none
    sa.Column("run_id", sa.String(200)),  # as the runs table keeps it (a UUID in canonical form)
    sa.Column("job_namespace", sa.String(2000)),
    sa.Column("job_name", sa.String(2000)),
    sa.Column("received_at", sa.BigInteger, nullable=False),
    sa.Column("body", sa.JSON, nullable=False),
)
sa.Index("ix_openlineage_events_time", openlineage_events.c.event_time)
sa.Index("ix_openlineage_events_run", openlineage_events.c.run_id)
sa.Index("ix_openlineage_events_job", openlineage_events.c.job_namespace, openlineage_events.c.job_name)

# What happened to datasets themselves (OpenLineage's lifecycle states): CREATE, ALTER, DROP,
# TRUNCATE, RENAME (on the new name; `previous_id` the old), OVERWRITE. No flow edge: a dropped
# table's edges end at its drop when nothing re-created it since (sqlstore.ended_assets).
asset_changes = sa.Table(
    "asset_changes",
    metadata,
    sa.Column("asset_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
    sa.Column("at", sa.BigInteger, primary_key=True),
    sa.Column("change", sa.String(16), primary_key=True),
    sa.Column("signal", sa.String(32), nullable=False),
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=True),
    sa.Column("run_id", sa.String(200), nullable=True),
    sa.Column("columns", sa.JSON, nullable=True),
    sa.Column("previous_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=True),
)
sa.Index("ix_asset_changes_at", asset_changes.c.at)

# Who read an asset without writing from it (a SELECT-only query, a Spark count or collect):
# one row per asset and run, `columns` the paths read (a JSON list, empty when not known).
asset_reads = sa.Table(
    "asset_reads",
    metadata,
    sa.Column("asset_id", sa.Integer, sa.ForeignKey("nodes.id"), primary_key=True),
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("process_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("user_name", sa.String(200)),
    sa.Column("signal", sa.String(32), nullable=False),
    sa.Column("columns", sa.JSON, nullable=False),
)
sa.Index("ix_asset_reads_at", asset_reads.c.asset_id, asset_reads.c.at)  # an asset's, newest first
sa.Index("ix_asset_reads_run", asset_reads.c.run_id)  # a run reported again (ingest looks it up)

# Runs in progress and who runs them: a tracked Spark driver renews its lease every 30 s and
# drops it when the run ends; a lease whose driver is gone marks its run ABORT (store/leases.py).
run_leases = sa.Table(
    "run_leases",
    metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("process_urn", sa.String(2000), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("heard_at", sa.BigInteger, nullable=False),
)

problems = sa.Table(
    "problems",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source", sa.String(2000), nullable=False),
    sa.Column("location", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("excerpt", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.BigInteger, nullable=False),
)

# What each ingest changed in the graph, by the graph version it made (commit order, also on
# PostgreSQL: the version's row is locked from the bump to the commit), so that an index can catch
# up from the store instead of reading it all again (graph/catch_up.py). `what` is "nodes", with
# the id range [a, b] the ingest inserted (it may also hold ids of concurrent writers, which is
# harmless: rows are read by id), or "version", a process version (a = process id, b =
# valid_from) whose edges were inserted, retimed or deleted.
graph_log = sa.Table(
    "graph_log",
    metadata,
    sa.Column("version", sa.BigInteger, primary_key=True),
    sa.Column("what", sa.String(8), primary_key=True),
    sa.Column("a", sa.BigInteger, primary_key=True),
    sa.Column("b", sa.BigInteger, primary_key=True),
)

store_state = sa.Table(
    "store_state",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

# Privacy requests: a queue with states, and an append-only audit trail. A request's user ids
# are kept (`subject`) only while it is open; once it ends only their fingerprint stays.
privacy_requests = sa.Table(
    "privacy_requests",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # access | delete
    sa.Column("requester", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # pending | running | done | failed
    sa.Column("subject", sa.JSON, nullable=True),  # the ids, while the request is open
    sa.Column("subject_fingerprint", sa.String(64), nullable=False),
    sa.Column("id_count", sa.Integer, nullable=False),
    sa.Column("datasets", sa.JSON, nullable=True),  # restricted to these; NULL = every target
    sa.Column("submitted_at", sa.BigInteger, nullable=False),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("error", sa.Text),
    sa.Column("receipt", sa.JSON),  # counts and timings, never record values
)
sa.Index("ix_privacy_requests_status", privacy_requests.c.status, privacy_requests.c.kind)

# Who runs a privacy request: the process that took it renews its lease every 30 s and drops it
# when the request ends; a request whose holder is gone is taken over by the next run
# (privacy/queue.py, judged as store/leases.py judges a Spark driver).
privacy_leases = sa.Table(
    "privacy_leases",
    metadata,
    sa.Column("request_id", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("heard_at", sa.BigInteger, nullable=False),
)

privacy_audit = sa.Table(
    "privacy_audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(64), nullable=False),
    # submitted | resubmitted (asked again while open) | started | resumed (after a dead run) | done | failed
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("requester", sa.String(200), nullable=False),
    sa.Column("details", sa.JSON),  # datasets, files rewritten, rows removed/found, error class
)
sa.Index("ix_privacy_audit_request", privacy_audit.c.request_id)

# Time-partitioned entities: their definitions, and the status of each instance. `entity_instances`
# holds the current status; every change is also appended to `entity_instance_history`, so the
# status of an instance at any past moment can be read back. Instance bounds are epoch seconds
# (the planner's unit); `changed_at` is microseconds like every other moment in the store.
entity_definitions = sa.Table(
    "entity_definitions",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("definition", sa.JSON, nullable=False),
    sa.Column("loaded_at", sa.BigInteger, nullable=False),
)


# By when a table must be ready each day (`temporal.deadlines`), keyed by the asset as declared.
deadlines = sa.Table(
    "deadlines",
    metadata,
    sa.Column("asset", sa.String(2000), primary_key=True),
    sa.Column("definition", sa.JSON, nullable=False),
    sa.Column("loaded_at", sa.BigInteger, nullable=False),
)


def _instance_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("entity", sa.String(200), nullable=False),
        sa.Column("start_s", sa.BigInteger, nullable=False),
        sa.Column("end_s", sa.BigInteger, nullable=False),
        sa.Column("states", sa.JSON, nullable=False),  # the states it holds, in the entity's order
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text),  # why it was tainted or downgraded
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("changed_at", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.String(250)),
    ]


entity_instances = sa.Table(
    "entity_instances",
    metadata,
    *_instance_columns(),
    sa.PrimaryKeyConstraint("entity", "start_s"),
)

entity_instance_history = sa.Table(
    "entity_instance_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    *_instance_columns(),
)
sa.Index(
    "ix_entity_instance_history",
    entity_instance_history.c.entity,
    entity_instance_history.c.start_s,
    entity_instance_history.c.changed_at,
)

# Every clearTaskInstances call a taint plan made (or would make, when a dry run).
airflow_clears = sa.Table(
    "airflow_clears",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("tainted", sa.Text, nullable=False),  # the plan's root: entity [start, end)
    sa.Column("dag_id", sa.String(250), nullable=False),
    sa.Column("task_ids", sa.JSON, nullable=False),  # empty: every task of the DAG
    sa.Column("start_date", sa.String(40), nullable=False),  # logical dates, inclusive
    sa.Column("end_date", sa.String(40), nullable=False),
    sa.Column("dry_run", sa.Boolean, nullable=False),
    sa.Column("cleared", sa.JSON, nullable=False),  # task_id@logical_date, as Airflow answered
)

# Labels that were not declared on a node but inferred (by propagation) or confirmed (in a
# discovery session), with where they came from. Declared labels are `nodes.labels`.
label_assignments = sa.Table(
    "label_assignments",
    metadata,
    sa.Column("urn", sa.String(2000), nullable=False),
    sa.Column("label", sa.String(200), nullable=False),
    sa.Column("provenance", sa.String(16), nullable=False),  # inferred | confirmed
    sa.Column("source", sa.String(2000), nullable=False),  # the declared node it came from
    sa.Column("path", sa.JSON, nullable=False),  # node URNs from source to urn
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("assigned_at", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("urn", "label", "provenance"),
)
sa.Index("ix_label_assignments_label", label_assignments.c.label, label_assignments.c.provenance)

# Discovery sessions, stored whole (a session is small plain data) so they resume and share by id.
discovery_sessions = sa.Table(
    "discovery_sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("label", sa.String(200), nullable=False),
    sa.Column("session", sa.JSON, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

# Subscriptions to the upstream or downstream closure of a node, the changes found in it (the
# event log, numbered by `seq`), and every webhook delivery attempt.
subscriptions = sa.Table(
    "subscriptions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("node", sa.String(2000), nullable=False),
    sa.Column("direction", sa.String(16), nullable=False),  # upstream | downstream
    sa.Column("depth", sa.Integer),
    sa.Column("webhook_url", sa.String(2000)),
    sa.Column("secret", sa.String(200)),  # signs webhook bodies (HMAC-SHA256)
    sa.Column("closure", sa.JSON, nullable=False),  # {"nodes": [...], "edges": [[s, t], ...]}
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

subscription_events = sa.Table(
    "subscription_events",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("subscription_id", sa.String(64), nullable=False, index=True),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("graph_version", sa.BigInteger, nullable=False),
    sa.Column("change", sa.JSON, nullable=False),  # added/removed nodes and edges
    # webhook delivery: pending → delivered, or failed after the last attempt, or refused (its address)
    sa.Column("delivery", sa.String(16), nullable=False),  # pending | delivered | failed | refused | none
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("next_attempt_at", sa.BigInteger),
)

subscription_deliveries = sa.Table(
    "subscription_deliveries",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("seq", sa.Integer, nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("status_code", sa.Integer),
    sa.Column("error", sa.String(2000)),
)

MICROS = 1_000_000


def width(column: sa.Column[Any]) -> int:
    """The most characters a string column holds (values are bounded to it before they are written)."""
    kind = column.type
    if not isinstance(kind, sa.String) or kind.length is None:
        raise TypeError(f"{column.table.name}.{column.name} is no bounded string column")
    return kind.length


def to_micros(moment: datetime) -> int:
    moment = as_utc(moment)
    return (moment - _EPOCH) // _ONE_MICRO


def from_micros(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / MICROS, UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICRO = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH
