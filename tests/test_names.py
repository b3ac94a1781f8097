"""Dataset identity (`tracelake.model.names`): an OpenLineage (namespace, name) and its URN, both ways.

The worst naming failures are false lineage (two datasets on one node) and lost lineage (one
dataset on two nodes). The property tests generate identities and check that the URN gives back
exactly what went in wherever the naming spec says nothing may be merged, and that every URN is a
fixed point of the round trip. The tables below are worked out by hand from the OpenLineage naming
spec (`postgres://{host}:{port}` + `{database}.{schema}.{table}`, `hive://{host}:{port}` +
`{database}.{table}`, `s3://{bucket}` + `{key}`, `file` + `{path}`).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracelake.collect.openlineage import event_to_batch
from tracelake.collect.sql import collect_sql
from tracelake.model import parse_urn
from tracelake.model.names import (
    DatasetName,
    asset_urn,
    dataset_of,
    hive_namespace_from_uris,
    job_of,
    job_urn,
    location_urn,
    naming,
    resolve_node,
)

# -- by hand -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "urn"),
    [
        ("postgres://db.example.com:5432", "shop.public.orders", "postgres.table//db.example.com:5432/shop.public.orders"),  # noqa: E501
        ("hive://metastore-a:9083", "sales.t", "hive.table//metastore-a:9083/sales.t"),
        ("hive://metastore-b:9083", "sales.t", "hive.table//metastore-b:9083/sales.t"),
        ("kafka://broker:9092", "orders", "kafka.topic//broker:9092/orders"),
        ("snowflake://org-account", "DB.SCHEMA.T", "snowflake.table//org-account/DB.SCHEMA.T"),
        ("hive", "Sales.`T`", "hive.table/sales.t"),
        ("hive", "spark_catalog.sales.t", "hive.table/sales.t"),
        ("kafka", "orders", "kafka.topic/orders"),
        ("bigquery", "project.dataset.t", "bigquery.table/project.dataset.t"),
        ("s3://lake", "raw/events", "file.dataset/s3://lake/raw/events"),
        ("s3a://lake", "raw/events/", "file.dataset/s3://lake/raw/events"),
        ("s3://lake", "raw/events/ds=2024-01-01/hr=01", "file.dataset/s3://lake/raw/events"),
        ("gs://lake", "raw/events", "file.dataset/gs://lake/raw/events"),
        ("hdfs://namenode:8020", "/warehouse/t", "file.dataset/hdfs://namenode:8020/warehouse/t"),
        ("file", "/data/events", "file.dataset//data/events"),
        ("file", "/data/events/", "file.dataset//data/events"),
        ("file://nfs-1", "/data/events", "file.dataset/file://nfs-1/data/events"),
        ("file", "/data/a#b", "file.dataset//data/a%23b"),
        ("arn:aws:glue:us-east-1:123456789012", "table/db/t", "openlineage.dataset/arn:aws:glue:us-east-1:123456789012/table/db/t"),  # noqa: E501
        ("food_delivery", "public.orders", "food_delivery.dataset/public.orders"),
        ("ai.model", "ranker", "ai.model/ranker"),
        ("web", "/api/users", "web.endpoint/%2Fapi/users"),
    ],
)  # fmt: skip
def test_spec_names_and_their_urns(namespace: str, name: str, urn: str) -> None:
    assert asset_urn(namespace, name) == urn
    parse_urn(urn)  # a well-formed URN, so every part of Tracelake can read it


@pytest.mark.parametrize(
    ("urn", "identity"),
    [
        ("postgres.table//db.example.com:5432/shop.public.orders", ("postgres://db.example.com:5432", "shop.public.orders")),  # noqa: E501
        ("hive.table//metastore-b:9083/sales.t", ("hive://metastore-b:9083", "sales.t")),
        ("hive.table/sales.t", ("hive", "sales.t")),
        ("file.dataset/s3://lake/raw/events", ("s3://lake", "raw/events")),
        ("file.dataset//data/events", ("file", "/data/events")),
        ("file.dataset/file://nfs-1/data/events", ("file://nfs-1", "/data/events")),
        ("file.dataset/hdfs://namenode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        # a store written before formats left the name still reads back
        ("file.parquet//data/events", ("file", "/data/events")),
        ("ai.model/ranker", ("ai.model", "ranker")),
        ("web.endpoint/%2Fapi/users", ("web", "/api/users")),
    ],
)  # fmt: skip
def test_urns_give_their_identity_back(urn: str, identity: tuple[str, str]) -> None:
    assert dataset_of(urn) == DatasetName(*identity)
    assert dataset_of(urn + "#a.b") == DatasetName(*identity)  # a field names its dataset


def test_two_metastores_never_share_a_node_and_the_home_one_meets_the_sql_collector() -> None:
    a, b = asset_urn("hive://metastore-a:9083", "sales.t"), asset_urn("hive://metastore-b:9083", "sales.t")
    assert a != b and "hive.table/sales.t" not in (a, b)
    with naming(hive="hive://metastore-a:9083"):
        assert asset_urn("HIVE://metastore-a:9083/", "Sales.T") == "hive.table/sales.t"
        assert asset_urn("hive://metastore-b:9083", "sales.t") == b
        assert dataset_of("hive.table/sales.t") == ("hive://metastore-a:9083", "sales.t")


def test_the_home_metastore_from_hive_metastore_uris() -> None:
    assert hive_namespace_from_uris("thrift://meta-1:9083,thrift://meta-2:9083") == "hive://meta-1:9083"
    assert hive_namespace_from_uris("") is None


def test_jobs_round_trip_whatever_their_namespace() -> None:
    for namespace, name in [("airflow", "dag.task"), ("spark://master:7077", "app/1"), ("a%2Fb", "x#y")]:
        assert job_of(job_urn(namespace, name)) == (namespace, name)
    assert job_of("sql.job/abc") is None


def test_what_a_user_types_resolves_to_the_one_node() -> None:
    assert resolve_node("Dating.Users#Religion") == "hive.table/dating.users#religion"
    assert resolve_node("hive.table/Dating.`Users`") == "hive.table/dating.users"
    assert resolve_node("file.parquet//data/events/") == "file.dataset//data/events"
    assert (
        resolve_node("postgres.table//DB:5432/shop.Public.Orders")
        == "postgres.table//DB:5432/shop.Public.Orders"
    )
    assert resolve_node("openlineage.job/airflow/dag.task") == "openlineage.job/airflow/dag.task"


# -- one dataset, every signal -------------------------------------------------------------------------


def _ol_dataset(namespace: str, name: str, facets: dict[str, object] | None = None) -> dict[str, object]:
    dataset: dict[str, object] = {"namespace": namespace, "name": name}
    if facets:
        dataset["facets"] = facets
    return dataset


def _ol_urns(*datasets: dict[str, object]) -> list[str]:
    event = {
        "eventTime": "2024-05-01T00:00:00Z",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "tests", "name": "job"},
        "inputs": list(datasets),
    }
    return [asset.urn for asset in event_to_batch(event).assets]


def test_files_are_one_node_from_sql_spark_and_openlineage() -> None:
    sql = collect_sql(
        "INSERT INTO parquet.`/data/out/` SELECT * FROM parquet.`file:/data/events/dt=2024-01-01`"
    ).batches[0]
    sql_nodes = {asset.urn for asset in sql.assets}
    # the Spark tracker names the files a relation reads by their location
    spark_node = location_urn("file:/data/events/dt=2024-01-02/")
    delta = {"storage": {"storageLayer": "delta", "fileFormat": "parquet"}}
    ol_nodes = _ol_urns(_ol_dataset("file", "/data/events"), _ol_dataset("file", "/data/events/", delta))
    assert sql_nodes == {"file.dataset//data/events", "file.dataset//data/out"}
    assert spark_node == "file.dataset//data/events"
    assert ol_nodes == ["file.dataset//data/events"]


def test_s3_files_are_one_node_however_the_connector_spells_them() -> None:
    sql = collect_sql("INSERT INTO d.t SELECT * FROM delta.`s3a://Lake/raw/events/`").batches[0]
    assert "file.dataset/s3://Lake/raw/events" in {asset.urn for asset in sql.assets}
    assert location_urn("s3n://lake/raw/events/ds=2024-01-01") == "file.dataset/s3://lake/raw/events"
    assert _ol_urns(_ol_dataset("s3://lake", "raw/events")) == ["file.dataset/s3://lake/raw/events"]


def test_tables_are_one_node_from_sql_and_the_home_metastores_events() -> None:
    sql = collect_sql("INSERT INTO Sales.T SELECT * FROM spark_catalog.sales.src").batches[0]
    assert {asset.urn for asset in sql.assets} == {"hive.table/sales.t", "hive.table/sales.src"}
    with naming(hive="hive://metastore:9083"):
        assert _ol_urns(_ol_dataset("hive://metastore:9083", "sales.T")) == ["hive.table/sales.t"]
    assert _ol_urns(_ol_dataset("hive://metastore:9083", "sales.t")) == ["hive.table//metastore:9083/sales.t"]


# -- generated -------------------------------------------------------------------------------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
_HOSTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9.-]{0,15}(:[0-9]{1,5})?", fullmatch=True)
# systems whose names the spec keeps exactly as sent
_EXACT_SCHEMES = st.sampled_from(["postgres", "mysql", "snowflake", "trino", "kafka", "redshift", "mongodb"])


@st.composite
def _namespaces(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["authority", "bare", "system.kind", "file", "hive", "other"]))
    if kind == "authority":
        return f"{draw(_EXACT_SCHEMES)}://{draw(_HOSTS)}"
    if kind == "bare":
        return draw(st.sampled_from(["kafka", "bigquery", "food_delivery", "web", "custom"]))
    if kind == "system.kind":
        return draw(st.sampled_from(["ai.model", "ai.feature", "serving.endpoint"]))
    if kind == "file":
        return draw(st.sampled_from(["file", "s3://lake", "gs://bucket-1", "hdfs://nn:8020", "file://nfs"]))
    if kind == "hive":
        return draw(st.sampled_from(["hive", "hive://meta-1:9083", "hive://meta-2:9083"]))
    return draw(_TEXT)


@given(_namespaces(), _TEXT)
def test_every_urn_is_a_fixed_point_of_the_round_trip(namespace: str, name: str) -> None:
    urn = asset_urn(namespace, name)
    parse_urn(urn)
    identity = dataset_of(urn)
    assert asset_urn(*identity) == urn
    assert dataset_of(asset_urn(*identity)) == identity


@given(_EXACT_SCHEMES, _HOSTS, _TEXT, _TEXT)
def test_names_the_spec_keeps_exactly_are_never_merged(scheme: str, host: str, name: str, other: str) -> None:
    namespace = f"{scheme}://{host}"
    assert dataset_of(asset_urn(namespace, name)) == (namespace, name)
    if other != name:
        assert asset_urn(namespace, other) != asset_urn(namespace, name)


_SYSTEM_LIKE = re.compile(r"[a-z][a-z0-9_+-]*(\.[a-z][a-z0-9_+-]*)?")
_OTHER_NAMESPACES = _TEXT.filter(
    lambda text: "://" not in text and text == text.strip() and not _SYSTEM_LIKE.fullmatch(text)
)


@given(_OTHER_NAMESPACES, _TEXT)
def test_a_namespace_of_no_known_form_is_kept_exactly(namespace: str, name: str) -> None:
    assert dataset_of(asset_urn(namespace, name)) == (namespace, name)
