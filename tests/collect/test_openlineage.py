"""OpenLineage events in: hand-written events with hand-worked expectations, malformed events refused
or kept without their bad part, each with the exact JSON path at fault, the round trip through
Tracelake's own emitter, and a real SQLite store."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from openlineage.client.event_v2 import DatasetEvent, Job, JobEvent, OutputDataset, StaticDataset
from openlineage.client.event_v2 import InputDataset as OlInput
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_job,
    ownership_job,
    schema_dataset,
)
from openlineage.client.serde import Serde

from tracelake.collect.openlineage import JOB_DATASETS, EventError, event_to_batch, events_to_batch
from tracelake.collect.sql import collect_sql
from tracelake.emit.openlineage import run_event
from tracelake.model import (
    Asset,
    AssetRead,
    Confidence,
    Field,
    FlowEdge,
    LineageBatch,
    Process,
    Run,
    Signal,
    Transformation,
    parse_urn,
)
from tracelake.model.names import asset_urn, dataset_of, job_of, job_urn, naming, openlineage_run_id
from tracelake.store import LineageStore
from tracelake.store import schema as store_schema
from tracelake.store.schema import from_micros

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
RUN_ID = "0190B1E2-7A4C-7D3E-9A55-0F4A2B6C7D81"  # upper case: read as the canonical lower-case UUID
PARENT_RUN_ID = "01902f4a-1111-7000-8000-000000000001"
# the home metastore: only `with naming(hive=HIVE)` are its tables the SQL collector's `hive.table/db.t`
HIVE = "hive://metastore:9083"
LOG = "hive.table/dating.safety_log_tbl"
TRAINING = "hive.table/dating.safety_training_tbl"
# the format (and storage layer) is no part of a file's name
EVENTS = "file.dataset/s3://dating-lake/raw/events"
PROCESS = "openlineage.job/spark-prod/build_safety_training"
ENDED = datetime(2024, 5, 1, 3, 4, 30, 250000, tzinfo=UTC)
# a second job, of the minimal events below
NIGHTLY = "openlineage.job/spark-prod/nightly_copy"
NIGHTLY_RUN_ID = "0190b1e2-7a4c-7d3e-9a55-00000000beef"


@pytest.fixture(autouse=True)
def _no_home_metastore_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set the home metastore themselves (`naming`), whatever the shell running them says."""
    monkeypatch.delenv("TRACELAKE_HIVE_NAMESPACE", raising=False)


def as_json(event: Any) -> dict[str, Any]:
    """An openlineage-python event as the JSON a server receives."""
    return json.loads(Serde.to_json(event))


def input_field(field: str, *transformations: dict[str, Any]) -> dict[str, Any]:
    """An inputField of the Hive table dating.safety_log_tbl."""
    entry: dict[str, Any] = {"namespace": HIVE, "name": "dating.safety_log_tbl", "field": field}
    if transformations:
        entry["transformations"] = list(transformations)
    return entry


def spark_event() -> dict[str, Any]:
    """A Spark job's COMPLETE: a Hive table joined with a Delta table on S3 into a Hive table."""
    return {
        "eventType": "COMPLETE",
        "eventTime": "2024-05-01T03:04:30.250Z",
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
        "run": {
            "runId": RUN_ID,
            "facets": {
                "parent": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json",
                    "run": {"runId": PARENT_RUN_ID},
                    "job": {"namespace": "airflow", "name": "dating_dag.build_training"},
                }
            },
        },
        "job": {
            "namespace": "spark-prod",
            "name": "build_safety_training",
            "facets": {"jobType": {"processingType": "BATCH", "integration": "SPARK", "jobType": "SQL_JOB"}},
        },
        "inputs": [
            {
                "namespace": HIVE,
                "name": "dating.safety_log_tbl",
                "facets": {
                    "schema": {
                        "fields": [
                            {"name": "user_id", "type": "bigint"},
                            {"name": "Religion", "type": "string"},
                            {"name": "ds", "type": "string"},
                            {"name": "profile", "fields": [{"name": "city", "type": "string"}]},
                        ]
                    },
                    "ownership": {"owners": [{"name": "team:trust-safety", "type": "MAINTAINER"}]},
                    "documentation": {"description": "Safety reports, one row per report"},
                },
            },
            {
                "namespace": "s3://dating-lake",
                "name": "raw/events",
                "facets": {
                    "storage": {"storageLayer": "delta", "fileFormat": "parquet"},
                    "schema": {"fields": [{"name": "user_id", "type": "bigint"}]},
                },
            },
        ],
        "outputs": [
            {
                "namespace": HIVE,
                "name": "dating.safety_training_tbl",
                "facets": {
                    "schema": {
                        "fields": [
                            {"name": "target_user_id", "type": "bigint"},
                            {"name": "target_religion", "type": "string"},
                        ]
                    },
                    "columnLineage": {
                        "fields": {
                            "target_user_id": {
                                "inputFields": [
                                    input_field("user_id", {"type": "DIRECT", "subtype": "IDENTITY"}),
                                    {
                                        "namespace": "s3://dating-lake",
                                        "name": "raw/events",
                                        "field": "user_id",
                                        "transformations": [
                                            {
                                                "type": "INDIRECT",
                                                "subtype": "JOIN",
                                                "description": "l.id = e.id",
                                            }
                                        ],
                                    },
                                ]
                            },
                            "target_religion": {
                                "inputFields": [
                                    input_field(
                                        "religion",
                                        {
                                            "type": "DIRECT",
                                            "subtype": "TRANSFORMATION",
                                            "description": "upper()",
                                        },
                                        {"type": "INDIRECT", "subtype": "CONDITIONAL", "masking": False},
                                    )
                                ]
                            },
                            # the older form: the kind on the output field, no transformations
                            "city": {
                                "transformationType": "IDENTITY",
                                "transformationDescription": "copied",
                                "inputFields": [input_field("profile.city")],
                            },
                        },
                        "dataset": [
                            input_field(
                                "ds", {"type": "INDIRECT", "subtype": "FILTER", "description": "ds = ?"}
                            )
                        ],
                    },
                },
            }
        ],
    }


def edge_set(batch: LineageBatch) -> set[tuple[str, str, str | None, str | None]]:
    return {(e.source, e.target, e.transformation, e.description) for e in batch.edges}


# -- RunEvent, DatasetEvent, JobEvent ---------------------------------------------------------------


def test_run_event_with_schema_and_column_lineage() -> None:
    event = spark_event()
    with naming(hive=HIVE):
        batch = event_to_batch(event)

    assert batch.observed_at == ENDED
    assert batch.problems == []
    assert batch.events == [event]
    # the home metastore's tables are the SQL collector's nodes
    assert [(a.urn, a.owner, a.description) for a in batch.assets] == [
        (LOG, "team:trust-safety", "Safety reports, one row per report"),
        (EVENTS, None, None),
        (TRAINING, None, None),
    ]
    # how the Delta table's files are kept is a property of the dataset, lower-cased
    assert [a.metadata for a in batch.assets] == [{}, {"storage_layer": "delta", "format": "parquet"}, {}]
    # schema fields first (nested as a.b, the untyped struct `profile` only a way to `city`), then
    # the output fields that only the column lineage names
    assert [(f.urn, f.data_type) for f in batch.fields] == [
        (f"{LOG}#user_id", "bigint"),
        (f"{LOG}#religion", "string"),
        (f"{LOG}#ds", "string"),
        (f"{LOG}#profile.city", "string"),
        (f"{EVENTS}#user_id", "bigint"),
        (f"{TRAINING}#target_user_id", "bigint"),
        (f"{TRAINING}#target_religion", "string"),
        (f"{TRAINING}#city", None),
    ]
    assert batch.processes == [Process(PROCESS, name="build_safety_training", kind="sql_job")]
    assert batch.processes[0].metadata == {
        "processing_type": "BATCH",
        JOB_DATASETS: {"inputs": [EVENTS, LOG], "outputs": [TRAINING]},
    }
    assert batch.described == []
    assert batch.runs == [
        Run(
            RUN_ID.lower(),
            PROCESS,
            started_at=None,
            ended_at=ENDED,
            status="COMPLETE",
            job_id=PARENT_RUN_ID,
        )
    ]
    T = Transformation
    expected = {
        (LOG, TRAINING, None, None),
        (EVENTS, TRAINING, None, None),
        (f"{LOG}#user_id", f"{TRAINING}#target_user_id", T.IDENTITY, None),
        (f"{EVENTS}#user_id", f"{TRAINING}#target_user_id", T.JOIN, "l.id = e.id"),
        (f"{LOG}#religion", f"{TRAINING}#target_religion", T.TRANSFORMATION, "upper()"),
        (f"{LOG}#religion", f"{TRAINING}#target_religion", T.CONDITIONAL, None),
        (f"{LOG}#profile.city", f"{TRAINING}#city", T.IDENTITY, "copied"),
        # the dataset-wide FILTER reaches every field of the output
        (f"{LOG}#ds", f"{TRAINING}#target_user_id", T.FILTER, "ds = ?"),
        (f"{LOG}#ds", f"{TRAINING}#target_religion", T.FILTER, "ds = ?"),
        (f"{LOG}#ds", f"{TRAINING}#city", T.FILTER, "ds = ?"),
    }
    assert edge_set(batch) == expected
    assert len(batch.edges) == len(expected)
    assert {(e.process, e.signal, e.confidence) for e in batch.edges} == {
        (PROCESS, Signal.OPENLINEAGE, Confidence.HIGH)
    }
    for node in (*batch.assets, *batch.fields, *batch.processes):
        parse_urn(node.urn)


def lineage_of(column: dict[str, Any]) -> set[tuple[str, str | None, str | None]]:
    """The field edges into TRAINING#out that one columnLineage entry gives: (source path, kind, note)."""
    event = spark_event()
    event["outputs"][0]["facets"] = {"columnLineage": {"fields": {"out": column}}}
    with naming(hive=HIVE):
        batch = event_to_batch(event)
    assert batch.problems == []
    return {
        (parse_urn(e.source).path, e.transformation, e.description)
        for e in batch.edges
        if e.target == f"{TRAINING}#out"
    }


@pytest.mark.parametrize(
    ("transformation", "kind"),
    [
        ({"type": "DIRECT", "subtype": "AGGREGATION"}, Transformation.AGGREGATION),
        ({"type": "INDIRECT", "subtype": "window"}, Transformation.WINDOW),  # case-insensitive
        # no subtype, or one outside the vocabulary: DIRECT says computed, not copied unchanged
        ({"type": "DIRECT"}, Transformation.TRANSFORMATION),
        ({"type": "DIRECT", "subtype": "HASH"}, Transformation.TRANSFORMATION),
        # an INDIRECT edge has no kind of its own in the vocabulary, nor does a contradictory one
        ({"type": "INDIRECT"}, None),
        ({"type": "INDIRECT", "subtype": "IDENTITY"}, None),
    ],
)
def test_transformation_types_and_subtypes(
    transformation: dict[str, Any], kind: Transformation | None
) -> None:
    column = {"inputFields": [input_field("user_id", transformation)]}
    assert lineage_of(column) == {("user_id", kind, None)}


@pytest.mark.parametrize(
    ("transformation_type", "kind"),
    [
        ("IDENTITY", Transformation.IDENTITY),
        ("MASKED", Transformation.TRANSFORMATION),
        (None, Transformation.TRANSFORMATION),
    ],
)
def test_the_older_field_level_transformation_type(
    transformation_type: str | None, kind: Transformation
) -> None:
    column = {
        "inputFields": [input_field("user_id"), input_field("religion")],
        "transformationType": transformation_type,
        "transformationDescription": "sha2(user_id || religion)",
    }
    note = "sha2(user_id || religion)"
    assert lineage_of(column) == {("user_id", kind, note), ("religion", kind, note)}


def test_per_field_transformations_win_over_the_older_form() -> None:
    column = {
        "transformationType": "IDENTITY",
        "inputFields": [
            input_field("user_id", {"type": "DIRECT", "subtype": "AGGREGATION"}),
            input_field("ds"),
        ],
    }
    assert lineage_of(column) == {
        ("user_id", Transformation.AGGREGATION, None),
        ("ds", Transformation.IDENTITY, None),
    }


def test_dataset_event_gives_an_asset_and_its_fields_only() -> None:
    event = DatasetEvent(
        eventTime="2024-05-02T08:00:00+02:00",
        producer=PRODUCER,
        dataset=StaticDataset(
            namespace="kafka://broker-1:9092",
            name="profile_updates",
            facets={
                "schema": schema_dataset.SchemaDatasetFacet(
                    fields=[
                        schema_dataset.SchemaDatasetFacetFields(name="user_id", type="long"),
                        schema_dataset.SchemaDatasetFacetFields(
                            name="identity_map",
                            type="map<string,struct<id:string>>",
                            fields=[
                                schema_dataset.SchemaDatasetFacetFields(
                                    name="value", fields=[schema_dataset.SchemaDatasetFacetFields(name="id")]
                                )
                            ],
                        ),
                    ]
                )
            },
        ),
    )
    batch = event_to_batch(as_json(event))

    # the broker is part of the name: another cluster's topic of that name is another dataset
    topic = "kafka.topic//broker-1:9092/profile_updates"
    assert [a.urn for a in batch.assets] == [topic]
    assert [(f.urn, f.data_type) for f in batch.fields] == [
        (f"{topic}#user_id", "long"),
        (f"{topic}#identity_map", "map<string,struct<id:string>>"),
        (f"{topic}#identity_map.value.id", None),
    ]
    assert batch.processes == batch.described == batch.runs == batch.edges == batch.problems == []
    assert batch.observed_at == datetime(2024, 5, 2, 6, 0, tzinfo=UTC)


def test_job_event_gives_a_process_and_edges_but_no_run() -> None:
    event = JobEvent(
        eventTime="2024-05-03T00:00:00Z",
        producer=PRODUCER,
        job=Job(
            namespace="dbt",
            name="dating.safety_training",
            facets={
                "documentation": documentation_job.DocumentationJobFacet(
                    description="Builds the training set"
                ),
                "ownership": ownership_job.OwnershipJobFacet(
                    owners=[ownership_job.Owner(name="team:ml"), ownership_job.Owner(name="user:ana")]
                ),
            },
        ),
        inputs=[OlInput(namespace="postgres://db:5432", name="dating.public.reports")],
        outputs=[
            OutputDataset(
                namespace="postgres://db:5432",
                name="dating.public.training",
                facets={
                    "columnLineage": column_lineage_dataset.ColumnLineageDatasetFacet(
                        fields={
                            "report_id": column_lineage_dataset.Fields(
                                inputFields=[
                                    column_lineage_dataset.InputField(
                                        namespace="postgres://db:5432",
                                        name="dating.public.reports",
                                        field="id",
                                        transformations=[
                                            column_lineage_dataset.Transformation(
                                                type="DIRECT", subtype="IDENTITY"
                                            )
                                        ],
                                    )
                                ]
                            )
                        }
                    )
                },
            )
        ],
    )
    batch = event_to_batch(as_json(event))

    reports = "postgres.table//db:5432/dating.public.reports"
    training = "postgres.table//db:5432/dating.public.training"
    process = "openlineage.job/dbt/dating.safety_training"
    assert batch.processes == [
        Process(
            process,
            name="dating.safety_training",
            kind="openlineage",
            owner="team:ml",
            description="Builds the training set",
        )
    ]
    assert batch.processes[0].metadata == {
        "owners": ["team:ml", "user:ana"],
        JOB_DATASETS: {"inputs": [reports], "outputs": [training]},
    }
    assert batch.described == batch.runs == batch.problems == []
    assert edge_set(batch) == {
        (reports, training, None, None),
        (f"{reports}#id", f"{training}#report_id", Transformation.IDENTITY, None),
    }


def minimal_event(event_type: str | None, *, outputs: bool = True) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventTime": "2024-05-01T03:00:00Z",
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
        "run": {"runId": NIGHTLY_RUN_ID},
        "job": {"namespace": "spark-prod", "name": "nightly_copy"},
        "inputs": [{"namespace": "hive", "name": "dating.safety_log_tbl"}],
        "outputs": [{"namespace": "hive", "name": "dating.safety_training_tbl"}] if outputs else [],
    }
    if event_type is not None:
        event["eventType"] = event_type
    return event


STARTED = datetime(2024, 5, 1, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("event_type", "outputs", "run", "lineage"),
    [
        ("START", True, (STARTED, None, "RUNNING"), True),
        ("RUNNING", True, (None, None, "RUNNING"), True),
        ("COMPLETE", True, (None, STARTED, "COMPLETE"), True),
        ("FAIL", True, (None, STARTED, "FAIL"), True),
        ("ABORT", True, (None, STARTED, "ABORT"), True),
        # the lifecycle's news without lineage: listing the process would erase its edges
        ("START", False, (STARTED, None, "RUNNING"), False),
        ("RUNNING", False, (None, None, "RUNNING"), False),
        # no lifecycle news: no Run, which would overwrite the run's end in the store
        ("OTHER", True, None, True),
        (None, True, None, True),
    ],
)
def test_what_each_event_type_records(
    event_type: str | None, outputs: bool, run: tuple[Any, ...] | None, lineage: bool
) -> None:
    batch = event_to_batch(minimal_event(event_type, outputs=outputs))

    assert [(r.started_at, r.ended_at, r.status) for r in batch.runs] == ([run] if run else [])
    assert [p.urn for p in batch.processes] == ([NIGHTLY] if lineage else [])
    # the job is a node either way: without edges only described, its recorded edges left alone
    assert [p.urn for p in batch.described] == ([] if lineage else [NIGHTLY])
    assert edge_set(batch) == ({(LOG, TRAINING, None, None)} if lineage else set())
    # the datasets are known either way, and kept with the job
    assert [a.urn for a in batch.assets] == ([LOG, TRAINING] if outputs else [LOG])
    [job] = batch.processes + batch.described
    assert job.metadata == {JOB_DATASETS: {"inputs": [LOG], "outputs": [TRAINING] if outputs else []}}
    assert batch.problems == []


@pytest.mark.parametrize(
    ("namespace", "name", "urn"),
    [
        ("hive", "dating.users", "hive.table/dating.users"),
        # another metastore's table keeps its host: no home metastore is configured here
        ("hive://metastore:9083", "Dating.`Users`", "hive.table//metastore:9083/dating.users"),
        ("HIVE://Metastore:9083", "dating.users", "hive.table//Metastore:9083/dating.users"),
        ("hive", "spark_catalog.dating.users", "hive.table/dating.users"),
        ("hive", "iceberg.dating.users", "hive.table/iceberg.dating.users"),
        ("kafka", "profile_updates", "kafka.topic/profile_updates"),
        ("kafka://broker-1:9092", "profile_updates", "kafka.topic//broker-1:9092/profile_updates"),
        (
            "jdbc",
            "jdbc:postgresql://db:5432/dating/reports",
            "jdbc.table/jdbc:postgresql://db:5432/dating/reports",
        ),
        ("web", "profile.update", "web.endpoint/profile.update"),
        ("ai", "dating_ranking_model", "ai.dataset/dating_ranking_model"),
        ("ai.model", "dating_ranking_model", "ai.model/dating_ranking_model"),
        ("file", "/data/events", "file.dataset//data/events"),
        ("file", "/data/events/", "file.dataset//data/events"),
        ("file", "/data/events/ds=2024-05-01", "file.dataset//data/events"),  # as the Spark collector
        ("file", "file:/data/events", "file.dataset//data/events"),
        ("file://nfs-1", "/data/events", "file.dataset/file://nfs-1/data/events"),
        ("hdfs://nn:8020", "/data/events", "file.dataset/hdfs://nn:8020/data/events"),
        ("s3://dating-lake", "raw/events", "file.dataset/s3://dating-lake/raw/events"),
        ("s3a://dating-lake", "raw/events", "file.dataset/s3://dating-lake/raw/events"),
        ("gs://dating-lake", "raw/events", "file.dataset/gs://dating-lake/raw/events"),
        ("postgres://db:5432", "dating.public.reports", "postgres.table//db:5432/dating.public.reports"),
        ("bigquery", "proj.dating.reports", "bigquery.table/proj.dating.reports"),
        (
            "arn:aws:glue:eu-west-1:123",
            "table/dating/reports",
            "openlineage.dataset/arn:aws:glue:eu-west-1:123/table/dating/reports",
        ),
        ("file", "/data/a#b", "file.dataset//data/a%23b"),
    ],
)
def test_dataset_names_to_urns(namespace: str, name: str, urn: str) -> None:
    event = {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": "x"}
    event["dataset"] = {"namespace": namespace, "name": name}
    [asset] = event_to_batch(event).assets
    assert asset.urn == urn
    assert str(parse_urn(urn)) == urn
    # reversible: the URN's (namespace, name) names the same node
    assert asset_urn(*dataset_of(urn)) == urn


def sales_t(namespace: str) -> dict[str, Any]:
    """A DatasetEvent of the table sales.t in `namespace`."""
    return {
        "eventTime": "2024-05-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": namespace, "name": "sales.t"},
    }


def test_two_metastores_tables_are_two_nodes() -> None:
    batch = events_to_batch([sales_t("hive://metastore-a:9083"), sales_t("hive://metastore-b:9083")])
    assert [a.urn for a in batch.assets] == [
        "hive.table//metastore-a:9083/sales.t",
        "hive.table//metastore-b:9083/sales.t",
    ]
    # and neither is the SQL collector's sales.t, which lives in the home metastore
    [sql] = collect_sql("INSERT INTO sales.t SELECT id FROM sales.src").batches
    assert "hive.table/sales.t" in {a.urn for a in sql.assets}
    assert "hive.table/sales.t" not in {a.urn for a in batch.assets}


def test_the_home_metastores_tables_meet_the_sql_collectors() -> None:
    [sql] = collect_sql("INSERT INTO sales.t SELECT id FROM sales.src").batches
    events = [sales_t("hive://metastore-a:9083"), sales_t("hive://metastore-b:9083"), sales_t("hive")]
    with naming(hive="hive://metastore-a:9083"):
        batch = events_to_batch(events)
        # and back: the home metastore's table is named in its namespace
        assert tuple(dataset_of("hive.table/sales.t")) == ("hive://metastore-a:9083", "sales.t")
    # metastore-a is home, and the bare `hive` namespace is home too; metastore-b stays apart
    assert [a.urn for a in batch.assets] == ["hive.table/sales.t", "hive.table//metastore-b:9083/sales.t"]
    assert "hive.table/sales.t" in {a.urn for a in sql.assets}
    # the setting lasts as long as the block
    assert [a.urn for a in event_to_batch(events[0]).assets] == ["hive.table//metastore-a:9083/sales.t"]


def test_the_home_metastore_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELAKE_HIVE_NAMESPACE", "hive://metastore-a:9083")
    batch = events_to_batch([sales_t("hive://metastore-a:9083"), sales_t("hive://metastore-b:9083")])
    assert [a.urn for a in batch.assets] == ["hive.table/sales.t", "hive.table//metastore-b:9083/sales.t"]


def test_a_kafka_brokers_topic_is_not_the_bare_topic() -> None:
    event = sales_t("kafka")
    event["dataset"]["name"] = "orders"
    other = sales_t("kafka://broker:9092")
    other["dataset"]["name"] = "orders"
    batch = events_to_batch([event, other])
    assert [a.urn for a in batch.assets] == ["kafka.topic/orders", "kafka.topic//broker:9092/orders"]


@pytest.mark.parametrize(
    ("storage", "metadata"),
    [
        ({"storageLayer": "delta", "fileFormat": "parquet"}, {"storage_layer": "delta", "format": "parquet"}),
        ({"storageLayer": "iceberg"}, {"storage_layer": "iceberg"}),
        ({"storageLayer": "default", "fileFormat": "ORC"}, {"storage_layer": "default", "format": "orc"}),
        ({"storageLayer": "Delta", "fileFormat": " "}, {"storage_layer": "delta"}),
        # a facet marked deleted is no facet
        ({"storageLayer": "delta", "_deleted": True}, {}),
    ],
)
def test_the_storage_facet_is_a_property_not_the_name(
    storage: dict[str, Any], metadata: dict[str, str]
) -> None:
    event = {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": "x"}
    event["dataset"] = {"namespace": "file", "name": "/data/events", "facets": {"storage": storage}}
    [asset] = event_to_batch(event).assets
    assert asset.urn == "file.dataset//data/events"
    assert asset.metadata == metadata


def s3_events_job(name: str, *, side: str, facets: dict[str, Any] | None = None) -> dict[str, Any]:
    """A COMPLETE of a job `name` that reads (side "inputs") or writes ("outputs") the S3 events."""
    events: dict[str, Any] = {"namespace": "s3a://dating-lake", "name": "raw/events/"}
    if facets is not None:
        events = {"namespace": "s3://dating-lake", "name": "raw/events", "facets": facets}
    other = {"namespace": "hive", "name": "dating.safety_log_tbl" if side == "outputs" else "dating.t"}
    return {
        "eventType": "COMPLETE",
        "eventTime": "2024-05-01T03:00:00Z",
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
        "run": {"runId": NIGHTLY_RUN_ID if side == "outputs" else RUN_ID},
        "job": {"namespace": "spark-prod", "name": name},
        "inputs": [events] if side == "inputs" else [other],
        "outputs": [events] if side == "outputs" else [other],
    }


def test_a_delta_table_written_and_read_without_the_facet_is_one_node(tmp_path: Path) -> None:
    delta = {"storage": {"storageLayer": "delta", "fileFormat": "parquet"}}
    writer = s3_events_job("write_events", side="outputs", facets=delta)
    reader = s3_events_job("read_events", side="inputs")
    table = "hive.table/dating.t"
    for events in ([writer, reader], [reader, writer]):
        batch = events_to_batch(events)
        [node] = [a for a in batch.assets if a.urn == EVENTS]
        assert node.metadata == {"storage_layer": "delta", "format": "parquet"}
        assert sorted(a.urn for a in batch.assets) == sorted([EVENTS, LOG, table])
        assert edge_set(batch) == {(LOG, EVENTS, None, None), (EVENTS, table, None, None)}

    store = LineageStore(str(tmp_path / "l.db"))
    try:
        store.ingest(event_to_batch(writer))
        store.ingest(event_to_batch(reader))
        assert store.find_urns("raw/events") == [EVENTS]
        record = store.node(EVENTS)
        assert record is not None and record.properties == {"storage_layer": "delta", "format": "parquet"}
        assert {(e.source, e.target) for e in store.edges()} == {(LOG, EVENTS), (EVENTS, table)}
    finally:
        store.close()


def test_null_is_an_optional_member_not_given() -> None:
    event = minimal_event("COMPLETE")
    event["run"]["facets"] = event["job"]["facets"] = event["inputs"] = None
    event["outputs"][0]["facets"] = {"schema": None, "columnLineage": None}
    batch = event_to_batch(event)
    assert [a.urn for a in batch.assets] == [TRAINING]
    # an output and no input is no edge: listing the process would erase the edges it has
    assert batch.edges == batch.fields == batch.processes == batch.problems == []
    assert [(p.urn, p.metadata) for p in batch.described] == [
        (NIGHTLY, {JOB_DATASETS: {"inputs": [], "outputs": [TRAINING]}})
    ]
    assert [r.status for r in batch.runs] == ["COMPLETE"]


# -- jobs, whatever they move -----------------------------------------------------------------------

READS_LOG = {"namespace": "hive", "name": "dating.safety_log_tbl"}
WRITES_TRAINING = {"namespace": "hive", "name": "dating.safety_training_tbl"}
# the log table rewritten in place, one column computed from another
REWRITES_LOG = {
    "namespace": "hive",
    "name": "dating.safety_log_tbl",
    "facets": {
        "columnLineage": {
            "fields": {"user_hash": {"inputFields": [{**READS_LOG, "field": "user_id"}]}},
        }
    },
}


@pytest.mark.parametrize(
    ("inputs", "outputs", "observed", "datasets", "edges"),
    [
        pytest.param([], [WRITES_TRAINING], False, ([], [TRAINING]), set(), id="outputs only"),
        pytest.param([READS_LOG], [], False, ([LOG], []), set(), id="inputs only"),
        # no dataset named: nothing to say of its datasets
        pytest.param([], [], False, None, set(), id="no datasets"),
        # a dataset is no source of itself
        pytest.param([READS_LOG], [READS_LOG], False, ([LOG], [LOG]), set(), id="reads what it writes"),
        pytest.param(
            [READS_LOG],
            [REWRITES_LOG],
            True,
            ([LOG], [LOG]),
            {(f"{LOG}#user_id", f"{LOG}#user_hash", Transformation.TRANSFORMATION, None)},
            id="rewrites a column of what it reads",
        ),
        pytest.param(
            [READS_LOG],
            [WRITES_TRAINING],
            True,
            ([LOG], [TRAINING]),
            {(LOG, TRAINING, None, None)},
            id="reads and writes",
        ),
    ],
)
def test_every_job_is_a_node_with_its_datasets(
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    observed: bool,
    datasets: tuple[list[str], list[str]] | None,
    edges: set[tuple[str, str, str | None, str | None]],
) -> None:
    event = minimal_event("COMPLETE")
    event["inputs"], event["outputs"] = inputs, outputs
    batch = event_to_batch(event)

    # listed as observed only with edges; else described: node and properties, edges left alone
    assert [p.urn for p in batch.processes] == ([NIGHTLY] if observed else [])
    assert [p.urn for p in batch.described] == ([] if observed else [NIGHTLY])
    [job] = batch.processes + batch.described
    expected = {} if datasets is None else {JOB_DATASETS: {"inputs": datasets[0], "outputs": datasets[1]}}
    assert job.metadata == expected
    assert (job.name, job.kind) == ("nightly_copy", "openlineage")
    assert edge_set(batch) == edges
    assert [(r.run_id, r.status) for r in batch.runs] == [(NIGHTLY_RUN_ID, "COMPLETE")]
    assert batch.problems == []


def test_a_jobs_datasets_are_those_of_its_events() -> None:
    start = minimal_event("START")
    start["inputs"] = start["outputs"] = []  # a START that does not know its datasets yet
    complete = minimal_event("COMPLETE", outputs=False)
    complete["eventTime"] = "2024-05-01T03:10:00Z"
    other = minimal_event("COMPLETE")
    other["job"]["name"] = "other_copy"
    other["run"]["runId"] = RUN_ID
    other["inputs"] = []
    other["job"]["facets"] = {"jobType": {"processingType": "streaming", "jobType": "JOB"}}
    batch = events_to_batch([start, complete, other])

    assert batch.processes == []
    assert [(p.urn, p.kind, p.metadata) for p in batch.described] == [
        (NIGHTLY, "openlineage", {JOB_DATASETS: {"inputs": [LOG], "outputs": []}}),
        (
            "openlineage.job/spark-prod/other_copy",
            "job",
            {"processing_type": "STREAMING", JOB_DATASETS: {"inputs": [], "outputs": [TRAINING]}},
        ),
    ]
    assert batch.events == [start, complete, other]


def test_a_run_that_completed_writing_nothing_read_its_inputs() -> None:
    start = minimal_event("START", outputs=False)
    complete = minimal_event("COMPLETE", outputs=False)
    complete["eventTime"] = "2024-05-01T03:10:00Z"

    assert event_to_batch(complete).reads == [
        AssetRead(
            LOG, NIGHTLY_RUN_ID, NIGHTLY, datetime(2024, 5, 1, 3, 10, tzinfo=UTC), None, Signal.OPENLINEAGE
        )
    ]
    assert events_to_batch([start, complete]).reads == event_to_batch(complete).reads


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([minimal_event("START", outputs=False)], id="started, not yet read"),
        pytest.param([minimal_event("RUNNING", outputs=False)], id="running"),
        pytest.param([minimal_event("FAIL", outputs=False)], id="failed"),
        pytest.param([minimal_event("COMPLETE")], id="its inputs are lineage"),
        pytest.param(
            [minimal_event("START"), minimal_event("COMPLETE", outputs=False)],
            id="outputs named at its start",
        ),
        pytest.param(
            [minimal_event("OTHER"), minimal_event("COMPLETE", outputs=False)], id="outputs named by another"
        ),
    ],
)
def test_no_read_but_of_a_run_that_completed_writing_nothing(events: list[dict[str, Any]]) -> None:
    assert events_to_batch(events).reads == []


def test_described_jobs_in_the_store(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "l.db"))
    try:
        store.ingest(event_to_batch(minimal_event("COMPLETE")))
        assert {(e.source, e.target) for e in store.edges(process=NIGHTLY)} == {(LOG, TRAINING)}
        # a heartbeat naming no dataset: the job's edges and datasets stay as they were
        heartbeat = minimal_event("RUNNING")
        heartbeat["inputs"] = heartbeat["outputs"] = []
        store.ingest(event_to_batch(heartbeat))
        assert {(e.source, e.target) for e in store.edges(process=NIGHTLY)} == {(LOG, TRAINING)}
        job = store.node(NIGHTLY)
        assert job is not None
        assert job.properties[JOB_DATASETS] == {"inputs": [LOG], "outputs": [TRAINING]}

        # a job that only writes is a node, its dataset kept with it though no edge says so
        writer = minimal_event("COMPLETE")
        writer["job"]["name"], writer["inputs"] = "load_training", []
        store.ingest(event_to_batch(writer))
        loader = store.node("openlineage.job/spark-prod/load_training")
        assert loader is not None
        assert loader.properties[JOB_DATASETS] == {"inputs": [], "outputs": [TRAINING]}
        assert store.edges(process="openlineage.job/spark-prod/load_training") == []
    finally:
        store.close()


def test_a_slash_in_a_job_namespace_is_encoded() -> None:
    event = minimal_event("COMPLETE")
    event["job"] = {"namespace": "airflow/prod", "name": "dating_dag.nightly_copy"}
    batch = event_to_batch(event)
    urn = "openlineage.job/airflow%2Fprod/dating_dag.nightly_copy"
    assert [p.urn for p in batch.processes] == [urn]
    assert [r.process for r in batch.runs] == [urn]
    assert job_of(urn) == ("airflow/prod", "dating_dag.nightly_copy")
    assert job_urn("airflow/prod", "dating_dag.nightly_copy") == urn


def test_an_unknown_event_type_is_a_problem_not_an_error() -> None:
    event = minimal_event("DONE")
    batch = event_to_batch(event)

    # taken as OTHER: the lineage is kept, the run's lifecycle untold
    assert batch.runs == []
    assert [p.urn for p in batch.processes] == [NIGHTLY]
    assert edge_set(batch) == {(LOG, TRAINING, None, None)}
    assert batch.events == [event]
    [problem] = batch.problems
    assert (problem.source, problem.location) == ("openlineage", "$.eventType")
    assert "'DONE'" in problem.reason

    # among many events, the path names the event
    batch = events_to_batch([minimal_event("START"), minimal_event("DONE")])
    assert [(r.status, r.started_at) for r in batch.runs] == [("RUNNING", STARTED)]
    assert [p.location for p in batch.problems] == ["$[1].eventType"]


# -- malformed events -------------------------------------------------------------------------------


def change(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set (or, with ..., delete) the member at a dotted path; digits index lists."""

    def apply(event: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = event
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        key: Any = int(last) if last.isdigit() else last
        if value is ...:
            del node[key]
        else:
            node[key] = value

    return apply


LINEAGE = "$.outputs[0].facets.columnLineage"
RELIGION = "outputs/0/facets/columnLineage/fields/target_religion"


# Where Marquez refuses an event (a 400): its required members, the job's and datasets' names
@pytest.mark.parametrize(
    ("mutate", "path", "reason"),
    [
        (change("eventTime", ...), "$.eventTime", "required"),
        (change("eventTime", "yesterday"), "$.eventTime", "not an RFC 3339 date-time: 'yesterday'"),
        (change("eventTime", "2024-05-01"), "$.eventTime", "not an RFC 3339 date-time: '2024-05-01'"),
        (change("eventTime", 1714532670), "$.eventTime", "expected a string, got number"),
        (change("producer", ...), "$.producer", "required"),
        (change("run/runId", ...), "$.run.runId", "required"),
        (change("job/namespace", ...), "$.job.namespace", "required"),
        (change("job/name", 42), "$.job.name", "expected a string, got number"),
        (change("job/name", " "), "$.job.name", "must not be empty"),
        (change("job", [1]), "$.job", "expected an object, got array"),
        (change("inputs", {}), "$.inputs", "expected an array, got object"),
        (change("outputs/0/namespace", ...), "$.outputs[0].namespace", "required"),
        (change("inputs/1/name", None), "$.inputs[1].name", "expected a string, got null"),
    ],
)
def test_malformed_run_events_are_refused(
    mutate: Callable[[dict[str, Any]], None], path: str, reason: str
) -> None:
    event = spark_event()
    mutate(event)
    with pytest.raises(EventError) as caught:
        event_to_batch(event)
    assert (caught.value.path, caught.value.reason) == (path, reason)
    assert str(caught.value) == f"{path}: {reason}"


# What is left out of a kept event, checked on its batch. The intact event has runs, edges, fields
# and assets as `test_run_event_with_schema_and_column_lineage` works out.


def run_as_sent(batch: LineageBatch) -> None:
    assert batch.runs == [
        Run(RUN_ID.lower(), PROCESS, ended_at=ENDED, status="COMPLETE", job_id=PARENT_RUN_ID)
    ]
    assert len(batch.edges) == 10


def no_run(batch: LineageBatch) -> None:
    # taken as OTHER: nothing said of the run's lifecycle, the lineage kept
    assert batch.runs == []
    assert len(batch.edges) == 10


def run_under(run_id: str, job_id: str | None) -> Callable[[LineageBatch], None]:
    def check(batch: LineageBatch) -> None:
        assert batch.runs == [Run(run_id, PROCESS, ended_at=ENDED, status="COMPLETE", job_id=job_id)]

    return check


def untyped_log_fields(batch: LineageBatch) -> None:
    # only the fields the column lineage names, without the types the schema facet gave
    assert {f.urn: f.data_type for f in batch.fields if f.urn.startswith(f"{LOG}#")} == {
        f"{LOG}#user_id": None,
        f"{LOG}#religion": None,
        f"{LOG}#profile.city": None,
        f"{LOG}#ds": None,
    }
    assert Field(f"{EVENTS}#user_id", "bigint") in batch.fields
    assert len(batch.edges) == 10


def no_storage(batch: LineageBatch) -> None:
    [events] = [a for a in batch.assets if a.urn == EVENTS]
    assert events.metadata == {}
    assert Field(f"{EVENTS}#user_id", "bigint") in batch.fields


def log_owned_by(owner: str | None) -> Callable[[LineageBatch], None]:
    def check(batch: LineageBatch) -> None:
        log = batch.assets[0]
        assert (log.urn, log.owner, log.description) == (LOG, owner, "Safety reports, one row per report")

    return check


def log_undocumented(batch: LineageBatch) -> None:
    log = batch.assets[0]
    assert (log.urn, log.owner, log.description) == (LOG, "team:trust-safety", None)


def untyped_job(batch: LineageBatch) -> None:
    [process] = batch.processes
    assert process.kind == "openlineage"
    assert process.metadata == {JOB_DATASETS: {"inputs": [EVENTS, LOG], "outputs": [TRAINING]}}


def no_column_edges(batch: LineageBatch) -> None:
    # one bad part of an output's columnLineage drops all of that output's field edges
    assert edge_set(batch) == {(LOG, TRAINING, None, None), (EVENTS, TRAINING, None, None)}


def owners(*entries: Any) -> Callable[[dict[str, Any]], None]:
    return change("inputs/0/facets/ownership/owners", list(entries))


@pytest.mark.parametrize(
    ("mutate", "path", "reason", "check"),
    [
        pytest.param(change("schemaURL", ...), "$.schemaURL", "missing", run_as_sent, id="no schemaURL"),
        pytest.param(
            change("eventType", "DONE"),
            "$.eventType",
            "expected one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER, got 'DONE'",
            no_run,
            id="unknown eventType",
        ),
        pytest.param(
            change("eventType", 3), "$.eventType", "expected a string, got number", no_run, id="eventType 3"
        ),
        pytest.param(
            change("run/runId", "run-1"),
            "$.run.runId",
            "not a UUID: 'run-1'",
            run_under(openlineage_run_id("run-1"), PARENT_RUN_ID),
            id="runId not a UUID",
        ),
        pytest.param(
            change("run/facets/parent/run/runId", "scheduled__2024-05-01"),
            "$.run.facets.parent.run.runId",
            "not a UUID: 'scheduled__2024-05-01'",
            run_under(RUN_ID.lower(), openlineage_run_id("scheduled__2024-05-01")),
            id="parent runId not a UUID",
        ),
        pytest.param(
            change("run/facets/parent/run", ...),
            "$.run.facets.parent.run",
            "required",
            run_under(RUN_ID.lower(), None),
            id="parent without run",
        ),
        pytest.param(
            change("job/facets/jobType/jobType", 5),
            "$.job.facets.jobType.jobType",
            "expected a string, got number",
            untyped_job,
            id="bad jobType",
        ),
        pytest.param(
            change("inputs/0/facets/schema/fields/3/fields/0/name", ...),
            "$.inputs[0].facets.schema.fields[3].fields[0].name",
            "required",
            untyped_log_fields,
            id="schema field without name",
        ),
        pytest.param(
            change("inputs/0/facets/schema/fields", {}),
            "$.inputs[0].facets.schema.fields",
            "expected an array, got object",
            untyped_log_fields,
            id="schema fields not an array",
        ),
        pytest.param(
            change("inputs/1/facets/storage/storageLayer", ...),
            "$.inputs[1].facets.storage.storageLayer",
            "required",
            no_storage,
            id="storage without layer",
        ),
        pytest.param(
            owners("alice"),
            "$.inputs[0].facets.ownership.owners[0]",
            "expected an object, got string",
            log_owned_by(None),
            id="owner not an object",
        ),
        pytest.param(
            owners({"type": "MAINTAINER"}, {"name": "team:safety-eng"}),
            "$.inputs[0].facets.ownership.owners[0].name",
            "required",
            log_owned_by("team:safety-eng"),
            id="owner without name",
        ),
        pytest.param(
            change("inputs/0/facets/documentation/description", ...),
            "$.inputs[0].facets.documentation.description",
            "required",
            log_undocumented,
            id="documentation without description",
        ),
        pytest.param(
            change(f"{RELIGION}/inputFields", {}),
            f"{LINEAGE}.fields.target_religion.inputFields",
            "expected an array, got object",
            no_column_edges,
            id="inputFields not an array",
        ),
        pytest.param(
            change(f"{RELIGION}/inputFields", ...),
            f"{LINEAGE}.fields.target_religion.inputFields",
            "required",
            no_column_edges,
            id="no inputFields",
        ),
        pytest.param(
            change("outputs/0/facets/columnLineage/fields/target_user_id/inputFields/1/name", ...),
            f"{LINEAGE}.fields.target_user_id.inputFields[1].name",
            "required",
            no_column_edges,
            id="inputField without name",
        ),
        pytest.param(
            change(f"{RELIGION}/inputFields/0/transformations/1/type", "SIDEWAYS"),
            f"{LINEAGE}.fields.target_religion.inputFields[0].transformations[1].type",
            "expected DIRECT or INDIRECT, got 'SIDEWAYS'",
            no_column_edges,
            id="unknown transformation type",
        ),
        pytest.param(
            change("outputs/0/facets/columnLineage/fields/profile.city", []),
            f'{LINEAGE}.fields["profile.city"]',
            "expected an object, got array",
            no_column_edges,
            id="column not an object",
        ),
        pytest.param(
            change("outputs/0/facets/columnLineage/fields", ...),
            f"{LINEAGE}.fields",
            "required",
            no_column_edges,
            id="columnLineage without fields",
        ),
        pytest.param(
            change("outputs/0/facets/columnLineage/dataset/0/field", ""),
            f"{LINEAGE}.dataset[0].field",
            "must not be empty",
            no_column_edges,
            id="dataset-wide input without field",
        ),
    ],
)
def test_a_part_breaking_the_spec_is_left_out_with_a_problem(
    mutate: Callable[[dict[str, Any]], None],
    path: str,
    reason: str,
    check: Callable[[LineageBatch], None],
) -> None:
    event = spark_event()
    mutate(event)
    with naming(hive=HIVE):
        batch = event_to_batch(event)

    # the event is kept, with its job, datasets and dataset edges
    assert batch.events == [event]
    assert [a.urn for a in batch.assets] == [LOG, EVENTS, TRAINING]
    assert [p.urn for p in batch.processes] == [PROCESS]
    assert {(LOG, TRAINING, None, None), (EVENTS, TRAINING, None, None)} <= edge_set(batch)
    # the part left out is named by its JSON path, the reason kept
    [problem] = batch.problems
    assert (problem.source, problem.location) == ("openlineage", path)
    assert problem.reason.startswith(reason), problem.reason
    check(batch)


def test_a_dropped_column_lineage_facet_leaves_no_nodes_behind() -> None:
    event = spark_event()
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    # read after the intact columns: an input of a topic named nowhere else, then a broken one
    fields["x"] = {
        "inputFields": [{"namespace": "kafka", "name": "clicks", "field": "a"}, {"namespace": "kafka"}]
    }
    with naming(hive=HIVE):
        batch = event_to_batch(event)

    assert [p.location for p in batch.problems] == [f"{LINEAGE}.fields.x.inputFields[1].name"]
    no_column_edges(batch)
    # the dropped facet was the only one to name kafka.topic/clicks, TRAINING#city and TRAINING#x
    assert [a.urn for a in batch.assets] == [LOG, EVENTS, TRAINING]
    assert {(f.urn, f.data_type) for f in batch.fields} == {
        (f"{LOG}#user_id", "bigint"),
        (f"{LOG}#religion", "string"),
        (f"{LOG}#ds", "string"),
        (f"{LOG}#profile.city", "string"),
        (f"{EVENTS}#user_id", "bigint"),
        (f"{TRAINING}#target_user_id", "bigint"),
        (f"{TRAINING}#target_religion", "string"),
    }


def test_a_problems_path_names_its_event_among_many() -> None:
    bad = minimal_event("COMPLETE")
    bad["run"]["runId"] = "nightly-2024-05-01"
    del bad["schemaURL"]
    batch = events_to_batch([minimal_event("START"), bad])
    assert [p.location for p in batch.problems] == ["$[1].schemaURL", "$[1].run.runId"]
    # two runs: the START's, and the COMPLETE kept under a UUID made from its id
    assert [(r.run_id, r.status) for r in batch.runs] == [
        (NIGHTLY_RUN_ID, "RUNNING"),
        (openlineage_run_id("nightly-2024-05-01"), "COMPLETE"),
    ]
    assert len(batch.events) == 2


@pytest.mark.parametrize(
    ("event", "path", "reason"),
    [
        ([], "$", "expected an object, got array"),
        (
            {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": "https://example.com/x"},
            "$",
            "not an OpenLineage event: a RunEvent has `run`, a DatasetEvent `dataset`, a JobEvent `job`",
        ),
        # the schemaURL names the kind, as Marquez reads it: a RunEvent needs its run
        (
            {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": RUN_SCHEMA, "job": {}},
            "$.run",
            "required",
        ),
        (
            {
                "eventTime": "2024-05-01T00:00:00Z",
                "producer": PRODUCER,
                "schemaURL": "x",
                "dataset": {"name": "t"},
            },
            "$.dataset.namespace",
            "required",
        ),
    ],
)
def test_malformed_events_of_any_kind(event: Any, path: str, reason: str) -> None:
    with pytest.raises(EventError) as caught:
        event_to_batch(event)
    assert (caught.value.path, caught.value.reason) == (path, reason)


# -- many events ------------------------------------------------------------------------------------


def test_events_to_batch_is_all_or_nothing() -> None:
    bad = minimal_event("COMPLETE")
    del bad["job"]["name"]
    events = [minimal_event("START"), minimal_event("COMPLETE"), spark_event(), bad]
    with pytest.raises(EventError) as caught:
        events_to_batch(events)
    assert str(caught.value) == "$[3].job.name: required"

    with pytest.raises(EventError, match=r"^\$: expected an array of events, got object$"):
        events_to_batch(spark_event())  # type: ignore[arg-type]


def test_events_to_batch_merges_a_run_and_its_lineage() -> None:
    start = minimal_event("START")
    complete = minimal_event("COMPLETE")
    complete["eventTime"] = "2024-05-01T03:10:00Z"
    # out of order, as a retrying transport may deliver them
    batch = events_to_batch([complete, start])

    ended = datetime(2024, 5, 1, 3, 10, tzinfo=UTC)
    assert batch.runs == [Run(NIGHTLY_RUN_ID, NIGHTLY, started_at=STARTED, ended_at=ended, status="COMPLETE")]
    assert [p.urn for p in batch.processes] == [NIGHTLY]
    assert batch.described == []
    assert edge_set(batch) == {(LOG, TRAINING, None, None)}
    assert batch.observed_at == ended
    assert batch.events == [complete, start]


# -- the round trip through Tracelake's emitter -----------------------------------------------------

CLICKS = "kafka.topic/profile_clicks"
REPORTS = "jdbc.table/jdbc:postgresql://db:5432/dating/reports"
RAW = "file.dataset/s3://dating-lake/raw/events"
SQL_JOB = "sql.job/build_safety_training"


def emitted_batch() -> LineageBatch:
    def edge(
        source: str, target: str, kind: Transformation | None = None, note: str | None = None
    ) -> FlowEdge:
        return FlowEdge(source, target, SQL_JOB, Signal.SQL_STATIC, Confidence.HIGH, kind, note)

    return LineageBatch(
        assets=[Asset(LOG), Asset(CLICKS), Asset(REPORTS), Asset(RAW), Asset(TRAINING)],
        fields=[
            Field(f"{LOG}#user_id", "bigint"),
            Field(f"{LOG}#religion", "string"),
            Field(f"{CLICKS}#profile.id", "string"),
            Field(f"{TRAINING}#target_user_id", "bigint"),
            Field(f"{TRAINING}#target_religion", "string"),
        ],
        processes=[Process(SQL_JOB, name="build_safety_training", kind="sql")],
        edges=[
            *(edge(source, TRAINING) for source in (LOG, CLICKS, REPORTS, RAW)),
            edge(f"{LOG}#user_id", f"{TRAINING}#target_user_id", Transformation.IDENTITY),
            edge(f"{LOG}#religion", f"{TRAINING}#target_religion", Transformation.TRANSFORMATION, "lower()"),
            edge(f"{CLICKS}#profile.id", f"{TRAINING}#target_user_id", Transformation.JOIN),
            edge(f"{REPORTS}#status", f"{TRAINING}#target_religion", Transformation.FILTER),
            edge(f"{RAW}#ds", f"{TRAINING}#target_user_id", Transformation.GROUP_BY),
        ],
    )


def test_round_trip_through_the_emitter() -> None:
    original = emitted_batch()
    run = Run("3f9a1c0d2b7e4a55", SQL_JOB, started_at=STARTED, ended_at=ENDED)
    doc = as_json(run_event("COMPLETE", run, original, namespace="tracelake", producer=PRODUCER))

    batch = event_to_batch(doc)

    # a dataset's URN is its (namespace, name), reversibly: every node comes back as it went out
    assert {a.urn for a in batch.assets} == {a.urn for a in original.assets}
    assert edge_set(batch) == {(e.source, e.target, e.transformation, e.description) for e in original.edges}
    assert {(f.urn, f.data_type) for f in batch.fields if f.data_type} == {
        (f.urn, f.data_type) for f in original.fields
    }
    assert batch.processes == [
        Process("openlineage.job/tracelake/build_safety_training", "build_safety_training", "query")
    ]
    assert batch.processes[0].metadata == {
        "processing_type": "BATCH",
        JOB_DATASETS: {"inputs": [RAW, LOG, REPORTS, CLICKS], "outputs": [TRAINING]},
    }
    assert batch.problems == []
    assert batch.observed_at == ENDED


def test_round_trip_of_another_metastores_table() -> None:
    other = "hive.table//metastore-b:9083/dating.safety_log_tbl"
    original = LineageBatch(
        processes=[Process(SQL_JOB, name="build_safety_training")],
        edges=[FlowEdge(other, TRAINING, SQL_JOB, Signal.SQL_STATIC)],
    )
    run = Run("3f9a1c0d2b7e4a55", SQL_JOB, started_at=STARTED, ended_at=ENDED)
    with naming(hive="hive://metastore-a:9083"):
        doc = as_json(run_event("COMPLETE", run, original, namespace="tracelake", producer=PRODUCER))
        assert [(d["namespace"], d["name"]) for d in doc["inputs"]] == [
            ("hive://metastore-b:9083", "dating.safety_log_tbl")
        ]
        assert [(d["namespace"], d["name"]) for d in doc["outputs"]] == [
            ("hive://metastore-a:9083", "dating.safety_training_tbl")
        ]
        batch = event_to_batch(doc)
    assert edge_set(batch) == {(other, TRAINING, None, None)}


# -- into the store ---------------------------------------------------------------------------------


def test_ingesting_events_into_the_store(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "l.db"))
    try:
        first = store.ingest(event_to_batch(spark_event()))
        assert (first.versions_added, first.edges_added, first.runs) == (1, 10, 1)
        assert len(store.edges(process=PROCESS)) == 10

        again = store.ingest(event_to_batch(spark_event()))
        assert (again.versions_unchanged, again.versions_added, again.edges_added) == (1, 0, 0)

        # a START with the same datasets, then its COMPLETE: one version, one run with both ends
        start, complete = minimal_event("START"), minimal_event("COMPLETE")
        complete["eventTime"] = "2024-05-01T03:10:00Z"
        assert store.ingest(event_to_batch(start)).versions_added == 1
        assert store.ingest(event_to_batch(complete)).versions_unchanged == 1
        with store.engine.connect() as conn:
            runs = store_schema.runs
            query = sa.select(runs.c.status, runs.c.started_at, runs.c.ended_at)
            row = conn.execute(query.where(runs.c.run_id == NIGHTLY_RUN_ID)).one()
        assert row.status == "COMPLETE"
        assert (from_micros(row.started_at), from_micros(row.ended_at)) == (
            STARTED,
            datetime(2024, 5, 1, 3, 10, tzinfo=UTC),
        )
    finally:
        store.close()
