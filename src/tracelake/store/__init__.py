"""The lineage store: SQLAlchemy Core schema and the one ingest path."""

from tracelake.store.location import default_url
from tracelake.store.sqlstore import LineageStore

__all__ = ["LineageStore", "default_url"]
