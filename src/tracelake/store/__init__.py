"""The lineage store: SQLAlchemy Core schema and the one ingest path."""

from tracelake.store.sqlstore import LineageStore, default_url

__all__ = ["LineageStore", "default_url"]
