"""The one place datasets and jobs are named: an OpenLineage (namespace, name) and its Tracelake URN.

A dataset's identity is its OpenLineage (namespace, name), as the naming spec defines them:
`postgres://host:port` + `db.schema.table`, `hive://host:port` + `db.table`, `kafka://broker:port`
+ topic, `s3://bucket` + key, `file` + absolute path. Every collector (SQL, Spark, OpenLineage,
configs), the privacy targets and the emitter name datasets through this module, so one dataset is
one node whichever signal saw it (probes take the URNs their code gives). Two spellings are merged
only where the system itself says they are one dataset: URI schemes compare case-insensitively
(`s3a://`, `s3n://` are `s3://`; authorities are kept as sent);
Hive and Spark table names follow SQL identifier rules (`Db.T`, `` `db`.`t` `` and
`spark_catalog.db.t` are `db.t`); file locations drop a `file:` prefix, trailing slashes and
Hive-style partition folders (`…/ds=2024-01-01`). A file's format or storage layer (Parquet, Delta,
Iceberg) is a property of the dataset, never part of its name. Everything else is kept exactly.

The URN (`<system>.<kind>/<name>`) is derived from the identity reversibly, dropping nothing:

- tables of the home metastore — a namespace of `hive`, or the configured `hive://host:port`
  (`TRACELAKE_HIVE_NAMESPACE`, or `hive.metastore.uris` in a Spark session) — are
  `hive.table/db.t`, the node the SQL and Spark collectors make for `db.t`;
- files are `file.dataset/<location>`: `/data/events`, `s3://bucket/key`, `hdfs://nn:8020/path`;
- a namespace with an authority is `<scheme>.<kind>//<authority>/<name>`
  (`postgres.table//db.example.com:5432/shop.public.orders`, `hive.table//metastore-b:9083/db.t`);
- a bare namespace is `<namespace>.<kind>/<name>` (`kafka.topic/orders`), and one already of the
  form `<system>.<kind>` is that (`ai.model/ranker`, as config collectors name models);
- anything else (`arn:aws:glue:…`, a namespace with spaces) is `openlineage.dataset/<ns>/<name>`.

The kind is `table` for databases, `topic` for streams, `endpoint` for `web`, else `dataset`. In
names, `%` and `#` are percent-encoded (a `#` starts a field path), as is a leading `/` where it
would read as an authority. A job is the process `openlineage.job/<namespace>/<name>` (a `/` in
the namespace encoded).
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from typing import NamedTuple
from urllib.parse import unquote

from tracelake.model import UrnError, bounded_urn, parse_urn

__all__ = [
    "DEFAULT_CATALOGS",
    "DEFAULT_DATABASE",
    "DEFAULT_SYSTEM",
    "DatasetName",
    "asset_urn",
    "dataset_of",
    "field_urn",
    "hive_namespace",
    "hive_namespace_from_uris",
    "job_of",
    "job_urn",
    "location_of",
    "location_urn",
    "naming",
    "resolve_node",
    "set_hive_namespace",
    "split_qualified_name",
    "table_name",
    "table_urn",
    "uri_urn",
]

DEFAULT_SYSTEM = "hive"
DEFAULT_DATABASE = "default"
# Catalog names that mean "the session's default catalog" in Spark and Hive.
DEFAULT_CATALOGS = frozenset({"spark_catalog", "hive", "hive_metastore"})
JOB_KIND = "openlineage.job"
FILE_KIND = "file.dataset"
_FALLBACK_KIND = "openlineage.dataset"

# Hadoop's S3 connectors are one store to OpenLineage: its naming spec says `s3://{bucket}`.
SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3"}
# Object stores name a dataset by its key, which has no leading slash.
OBJECT_STORES = frozenset({"s3", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs"})
# The spec's file-system namespaces (and Hadoop's), after SCHEME_ALIASES.
FILE_SCHEMES = OBJECT_STORES | {"file", "hdfs", "viewfs", "dbfs"}
_TABLE_SYSTEMS = frozenset(
    {
        "hive", "jdbc", "postgres", "postgresql", "mysql", "mariadb", "sqlserver", "mssql", "oracle",
        "redshift", "snowflake", "bigquery", "trino", "presto", "teradata", "db2", "sqlite", "duckdb",
        "awsathena", "athena", "clickhouse", "databricks", "vertica", "hana", "spark", "glue",
    }
)  # fmt: skip
_STREAM_SYSTEMS = frozenset({"kafka", "kinesis", "pubsub", "pulsar", "eventhubs", "rabbitmq"})
# Systems whose URNs this module reads specially; a bare namespace never takes them as `<system>.<kind>`.
_RESERVED = frozenset({"file", "openlineage"})

_SYSTEM = re.compile(r"[a-z][a-z0-9_+-]*")
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(.*)", re.DOTALL)
_PARTITION_DIR = re.compile(r"[^/=]+=[^/]*")


class DatasetName(NamedTuple):
    """A dataset as OpenLineage names it: the datasource (`postgres://db:5432`) and the name in it."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"


# -- settings -------------------------------------------------------------------------------------

_hive_namespace: str | None = None


def hive_namespace() -> str | None:
    """The home metastore's namespace (`hive://host:9083`): set by `naming`, else the environment."""
    configured = _hive_namespace or os.environ.get("TRACELAKE_HIVE_NAMESPACE") or None
    return _normal_namespace(configured) if configured else None


@contextlib.contextmanager
def naming(*, hive: str | None) -> Iterator[None]:
    """Name datasets with `hive` (`hive://host:port`) as the home metastore inside the block."""
    global _hive_namespace
    before = _hive_namespace
    _hive_namespace = hive
    try:
        yield
    finally:
        _hive_namespace = before


def set_hive_namespace(namespace: str | None) -> None:
    """Set the home metastore for the rest of the process (the server's `--hive-namespace`)."""
    global _hive_namespace
    _hive_namespace = namespace


def hive_namespace_from_uris(uris: str) -> str | None:
    """`thrift://meta-1:9083,thrift://meta-2:9083` (Hive's `hive.metastore.uris`) → `hive://meta-1:9083`."""
    first = uris.split(",")[0].strip()
    match = _URI.fullmatch(first)
    return f"hive://{match.group(2)}" if match and match.group(2) else None


# -- tables, as SQL engines compare their names ---------------------------------------------------


def _clean_identifier(part: str) -> str:
    """SQL identifier rules for Spark/Hive: unquote, and compare case-insensitively."""
    part = part.strip()
    if len(part) >= 2 and part[0] == part[-1] and part[0] in '`"':
        part = part[1:-1]
    return part.lower()


def split_qualified_name(name: str) -> list[str]:
    """Split `a.b.c` on dots outside quotes, unquoting each part."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    for char in name:
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in '`"':
            quote = char
            current.append(char)
        elif char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [_clean_identifier(p) for p in parts]


def table_name(
    table: str, db: str | None = None, catalog: str | None = None, *, default_db: str = DEFAULT_DATABASE
) -> str:
    """The canonical `db.table` (or `catalog.db.table` for a non-default catalog)."""
    catalog_name = _clean_identifier(catalog) if catalog else ""
    db_name = _clean_identifier(db) if db else _clean_identifier(default_db)
    name = f"{db_name}.{_clean_identifier(table)}"
    if catalog_name and catalog_name not in DEFAULT_CATALOGS:
        name = f"{catalog_name}.{name}"
    return name


def table_urn(
    table: str,
    db: str | None = None,
    catalog: str | None = None,
    *,
    default_db: str = DEFAULT_DATABASE,
    system: str = DEFAULT_SYSTEM,
) -> str:
    return bounded_urn(
        f"{system}.table/{_quote(table_name(table, db, catalog, default_db=default_db), leading_slash=True)}"
    )


def _table_from_parts(parts: list[str], default_db: str, system: str) -> str:
    if len(parts) == 1:
        return table_urn(parts[0], default_db=default_db, system=system)
    if len(parts) == 2:
        return table_urn(parts[1], parts[0], system=system)
    if len(parts) == 3:
        return table_urn(parts[2], parts[1], parts[0], system=system)
    raise UrnError(f"{'.'.join(parts)!r} has more parts than catalog.database.table")


def field_urn(asset_urn: str, path: str) -> str:
    """A field URN; the path is lower-cased since Spark resolves columns case-insensitively."""
    return bounded_urn(f"{asset_urn}#{'.'.join(_clean_identifier(p) for p in split_qualified_name(path))}")


def resolve_node(text: str, *, default_db: str = DEFAULT_DATABASE, system: str = DEFAULT_SYSTEM) -> str:
    """Turn what a user typed into a canonical node URN.

    Accepts a URN in any spelling of it (`hive.table/Db.Tbl#Col`, `file.dataset//data/x/`) or a plain
    table name (`tbl`, `db.tbl`, `catalog.db.tbl`, optionally followed by `#col`), normalised with
    SQL identifier rules.
    """
    text = text.strip()
    if not text:
        raise UrnError("an empty name is not a node")
    head, _, path = text.partition("#")
    if "/" in head:
        urn = parse_urn(text)
        if urn.asset_kind == JOB_KIND:
            return str(urn)
        # a dataset's URN spelt otherwise is the same dataset: one round trip through its identity
        asset = asset_urn(*_dataset_of(urn.asset))
        return field_urn(asset, urn.path) if urn.path else asset
    asset = _table_from_parts(split_qualified_name(head), default_db, system)
    return field_urn(asset, path) if path else asset


# -- datasets -------------------------------------------------------------------------------------


def asset_urn(namespace: str, name: str) -> str:
    """The asset URN of the dataset (namespace, name); see the module's docstring for the rules."""
    return bounded_urn(_asset_urn(namespace, name))


def _asset_urn(namespace: str, name: str) -> str:
    namespace = _normal_namespace(namespace)
    scheme, authority = _scheme(namespace)
    if scheme in FILE_SCHEMES and (authority is not None or scheme == "file"):
        return f"{FILE_KIND}/{_location_text(*_files(scheme, authority, name))}"
    if scheme == "hive" and (authority is None or namespace == hive_namespace()):
        table = _hive_table(name)
        if table is not None:
            return f"hive.table/{_quote(table, leading_slash=True)}"
    if (
        authority is not None
        and _SYSTEM.fullmatch(scheme)
        and scheme not in _RESERVED
        and "/" not in authority
    ):
        table = _hive_table(name) if scheme == "hive" else None
        return f"{scheme}.{_kind(scheme)}//{_quote(authority)}/{_quote(table or name)}"
    if authority is None and _SYSTEM.fullmatch(namespace) and namespace not in _RESERVED:
        return f"{namespace}.{_kind(namespace)}/{_quote(name, leading_slash=True)}"
    system, dot, kind = namespace.partition(".")
    if dot and _SYSTEM.fullmatch(system) and _SYSTEM.fullmatch(kind) and system not in _RESERVED:
        return f"{namespace}/{_quote(name, leading_slash=True)}"
    return f"{_FALLBACK_KIND}/{_quote(namespace, slashes=True)}/{_quote(name)}"


def dataset_of(urn: str) -> DatasetName:
    """The (namespace, name) of an asset URN (or of a field URN's asset); the inverse of `asset_urn`."""
    return DatasetName(*_dataset_of(urn.partition("#")[0].strip()))


def _dataset_of(asset: str) -> tuple[str, str]:
    head, slash, rest = asset.partition("/")
    system, dot, kind = head.partition(".")
    if not slash or not rest or not dot or not system or not kind:
        raise UrnError(f"{asset!r} is not an asset URN of the form <system>.<kind>/<name>")
    if system == "file":
        # any kind: stores written before formats left the name had `file.parquet/…`
        namespace, name = _parse_location(rest)
        return unquote(namespace), unquote(name)
    if head == _FALLBACK_KIND:
        namespace, _, name = rest.partition("/")
        return unquote(namespace), unquote(name)
    if rest.startswith("/"):  # `<system>.<kind>//<authority>/<name>`; a bare name's `/` is encoded
        authority, _, name = rest[1:].partition("/")
        return f"{system}://{unquote(authority)}", unquote(name)
    name = unquote(rest)
    if system == "hive" and kind == "table":
        return hive_namespace() or "hive", name
    return (system if kind == _kind(system) else head), name


def uri_urn(uri: str) -> str:
    """The asset URN of a dataset written as one URI, the spec's `namespace/name`
    (`postgres://db:5432/shop.public.orders`, `s3://lake/raw/events`, `kafka://broker:9092/topic`)."""
    match = _URI.fullmatch(uri.strip())
    if match is None:
        raise UrnError(f"{uri!r} is not a URI of the form scheme://authority/name")
    scheme = SCHEME_ALIASES.get(match.group(1).lower(), match.group(1).lower())
    if scheme in FILE_SCHEMES:
        return location_urn(uri)
    return asset_urn(f"{scheme}://{match.group(2)}", match.group(3).removeprefix("/"))


def location_urn(location: str) -> str:
    """The asset URN of files at `location` (`file:/data/x/`, `/data/x`, `s3a://bkt/key/ds=1`)."""
    return asset_urn(*location_of(location))


def location_of(location: str) -> tuple[str, str]:
    """(namespace, name) of files at `location`, as the spec names file systems."""
    return _parse_location(location.strip())


def _parse_location(text: str) -> tuple[str, str]:
    if text.startswith("file:") and not text.startswith("file://"):
        text = "/" + text[len("file:") :].lstrip("/")  # Hadoop's `file:/data/x`
    match = _URI.fullmatch(text)
    if match is None:
        return _files("file", None, text)
    scheme = SCHEME_ALIASES.get(match.group(1).lower(), match.group(1).lower())
    return _files(scheme, match.group(2), match.group(3))


def _files(scheme: str, authority: str | None, name: str) -> tuple[str, str]:
    """The (namespace, name) of files, one spelling per place: trailing slashes and partition
    folders dropped; an object store's key without a leading slash, another file system's path
    with one."""
    path = name.strip()
    local = scheme == "file" and authority in (None, "", "localhost")
    if local and path.startswith("file:"):
        path = "/" + path[len("file:") :].lstrip("/")
    parts = path.rstrip("/").split("/")
    while len(parts) > 2 and _PARTITION_DIR.fullmatch(parts[-1]):
        parts.pop()  # `…/ds=2024-01-01`: a partition of the dataset, not a dataset
    path = "/".join(parts)
    if local:
        return "file", path or "/"
    if scheme in OBJECT_STORES:
        return f"{scheme}://{authority}", path.lstrip("/")
    return f"{scheme}://{authority}", "/" + path.lstrip("/")


def _location_text(namespace: str, name: str) -> str:
    """The URN's spelling of files: the local path, or the URI of the place."""
    if namespace == "file":
        # a relative local name that looks like a URI must not read as one
        return _quote(name).replace("://", "%3A//") if _URI.fullmatch(name) else _quote(name)
    return (
        f"{_quote(namespace)}/{_quote(name)}"
        if name and not name.startswith("/")
        else _quote(namespace + name)
    )


def _normal_namespace(namespace: str) -> str:
    """A scheme compares case-insensitively; `s3a://` is `s3://`; no trailing slash. The authority is
    kept as sent: it is how producers and Marquez name the datasource."""
    namespace = namespace.strip()
    match = _URI.fullmatch(namespace)
    if match is None:
        return namespace
    scheme = match.group(1).lower()
    return f"{SCHEME_ALIASES.get(scheme, scheme)}://{match.group(2)}{match.group(3).rstrip('/')}"


def _scheme(namespace: str) -> tuple[str, str | None]:
    """(scheme, authority) of `scheme://authority`; (namespace, None) for a bare one."""
    match = _URI.fullmatch(namespace)
    if match is None:
        return namespace, None
    return match.group(1), match.group(2) + match.group(3)


def _kind(system: str) -> str:
    if system in _TABLE_SYSTEMS:
        return "table"
    if system in _STREAM_SYSTEMS:
        return "topic"
    return "endpoint" if system == "web" else "dataset"


def _hive_table(name: str) -> str | None:
    """`Db.T`, `` `db`.`t` ``, `spark_catalog.db.t` → `db.t`; None past catalog.db.table."""
    parts = split_qualified_name(name)
    if len(parts) > 3 or not all(parts):
        return None
    return table_name(parts[-1], parts[-2] if len(parts) > 1 else None, parts[0] if len(parts) == 3 else None)


def _quote(text: str, *, slashes: bool = False, leading_slash: bool = False) -> str:
    """`%` and `#` percent-encoded (and `/` everywhere or at the start), as is whitespace at either
    end (URNs are read stripped), so `unquote` gives the text back exactly."""
    text = text.replace("%", "%25").replace("#", "%23")
    if slashes:
        text = text.replace("/", "%2F")
    elif leading_slash and text.startswith("/"):
        text = "%2F" + text[1:]
    core = text.strip()
    if core == text:
        return text
    if not core:
        return _percent(text)
    start = text.index(core[0])
    return _percent(text[:start]) + core + _percent(text[start + len(core) :])


def _percent(text: str) -> str:
    return "".join(f"%{byte:02X}" for byte in text.encode())


# -- jobs -----------------------------------------------------------------------------------------


def job_urn(namespace: str, name: str) -> str:
    """The process URN of an OpenLineage job: `openlineage.job/<namespace>/<name>`."""
    return bounded_urn(f"{JOB_KIND}/{_quote(namespace, slashes=True)}/{_quote(name)}")


def job_of(urn: str) -> tuple[str, str] | None:
    """The OpenLineage (namespace, name) of a process URN made by `job_urn`; None for others."""
    if not urn.startswith(JOB_KIND + "/"):
        return None
    namespace, _, name = urn[len(JOB_KIND) + 1 :].partition("/")
    return unquote(namespace), unquote(name)


# Fixed, so a run id that is not a UUID always maps to the same OpenLineage runId and a
# START and its COMPLETE, sent by different processes, still pair up.
_RUN_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/tracelake/tracelake#run")


def openlineage_run_id(run_id: str) -> str:
    """The run's id as OpenLineage wants it: a UUID as is, anything else as a stable uuid5 of it."""
    if not run_id:
        raise ValueError("a run needs a run id")
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return str(uuid.uuid5(_RUN_ID_NAMESPACE, run_id))
