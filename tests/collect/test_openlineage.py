"""OpenLineage events in: hand-written events with hand-worked expectations, malformed events with the
exact JSON path at fault, the round trip through Tracelake's own emitter, and a real SQLite store."""

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

from tracelake.collect.openlineage import EventError, event_to_batch, events_to_batch
from tracelake.emit.openlineage import run_event
from tracelake.model import (
    Asset,
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
from tracelake.store import LineageStore
from tracelake.store import schema as store_schema
from tracelake.store.schema import from_micros

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/integration/spark"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
RUN_ID = "0190B1E2-7A4C-7D3E-9A55-0F4A2B6C7D81"  # upper case: read as the canonical lower-case UUID
PARENT_RUN_ID = "01902f4a-1111-7000-8000-000000000001"
HIVE = "hive://metastore:9083"
LOG = "hive.table/dating.safety_log_tbl"
TRAINING = "hive.table/dating.safety_training_tbl"
EVENTS = "file.delta/s3://dating-lake/raw/events"
PROCESS = "openlineage.job/spark-prod/build_safety_training"
ENDED = datetime(2024, 5, 1, 3, 4, 30, 250000, tzinfo=UTC)
# a second job, of the minimal events below
NIGHTLY = "openlineage.job/spark-prod/nightly_copy"
NIGHTLY_RUN_ID = "0190b1e2-7a4c-7d3e-9a55-00000000beef"


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
    batch = event_to_batch(spark_event())

    assert batch.observed_at == ENDED
    assert [(a.urn, a.owner, a.description) for a in batch.assets] == [
        (LOG, "team:trust-safety", "Safety reports, one row per report"),
        (EVENTS, None, None),
        (TRAINING, None, None),
    ]
    assert batch.assets[0].metadata == {"openlineage": {"namespace": HIVE, "name": "dating.safety_log_tbl"}}
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
    batch = event_to_batch(event)
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

    topic = "kafka.topic/profile_updates"
    assert [a.urn for a in batch.assets] == [topic]
    assert [(f.urn, f.data_type) for f in batch.fields] == [
        (f"{topic}#user_id", "long"),
        (f"{topic}#identity_map", "map<string,struct<id:string>>"),
        (f"{topic}#identity_map.value.id", None),
    ]
    assert batch.processes == batch.runs == batch.edges == []
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

    reports = "postgres.dataset/db:5432/dating.public.reports"
    training = "postgres.dataset/db:5432/dating.public.training"
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
        "openlineage": {"namespace": "dbt", "name": "dating.safety_training"},
        "owners": ["team:ml", "user:ana"],
    }
    assert batch.runs == []
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
    assert edge_set(batch) == ({(LOG, TRAINING, None, None)} if lineage else set())
    # the datasets are known either way
    assert [a.urn for a in batch.assets] == ([LOG, TRAINING] if outputs else [LOG])


@pytest.mark.parametrize(
    ("namespace", "name", "urn"),
    [
        ("hive", "dating.users", "hive.table/dating.users"),
        ("hive://metastore:9083", "Dating.`Users`", "hive.table/dating.users"),
        ("hive", "spark_catalog.dating.users", "hive.table/dating.users"),
        ("hive", "iceberg.dating.users", "hive.table/iceberg.dating.users"),
        ("kafka", "profile_updates", "kafka.topic/profile_updates"),
        ("kafka://broker-1:9092", "profile_updates", "kafka.topic/profile_updates"),
        (
            "jdbc",
            "jdbc:postgresql://db:5432/dating/reports",
            "jdbc.table/jdbc:postgresql://db:5432/dating/reports",
        ),
        ("web", "profile.update", "web.endpoint/profile.update"),
        ("ai", "dating_ranking_model", "ai.dataset/dating_ranking_model"),
        ("file", "/data/events", "file.files//data/events"),
        ("file", "/data/events/ds=2024-05-01", "file.files//data/events"),  # as the Spark collector
        ("file://nfs-1", "/data/events", "file.files//data/events"),
        ("hdfs://nn:8020", "/data/events", "file.files/hdfs://nn:8020/data/events"),
        ("s3://dating-lake", "raw/events", "file.files/s3://dating-lake/raw/events"),
        ("s3a://dating-lake", "raw/events", "file.files/s3://dating-lake/raw/events"),
        ("gs://dating-lake", "raw/events", "file.files/gs://dating-lake/raw/events"),
        ("postgres://db:5432", "dating.public.reports", "postgres.dataset/db:5432/dating.public.reports"),
        ("bigquery", "proj.dating.reports", "bigquery.dataset/proj.dating.reports"),
        (
            "arn:aws:glue:eu-west-1:123",
            "table/dating/reports",
            "openlineage.dataset/arn:aws:glue:eu-west-1:123/table/dating/reports",
        ),
        ("file", "/data/a#b", "file.files//data/a%23b"),
    ],
)
def test_dataset_names_to_urns(namespace: str, name: str, urn: str) -> None:
    event = {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": "x"}
    event["dataset"] = {"namespace": namespace, "name": name}
    [asset] = event_to_batch(event).assets
    assert asset.urn == urn
    assert str(parse_urn(urn)) == urn


@pytest.mark.parametrize(
    ("storage", "urn"),
    [
        ({"storageLayer": "delta", "fileFormat": "parquet"}, "file.delta//data/events"),
        ({"storageLayer": "iceberg"}, "file.iceberg//data/events"),
        ({"storageLayer": "default", "fileFormat": "ORC"}, "file.orc//data/events"),
        ({"storageLayer": "default"}, "file.files//data/events"),
        # a facet marked deleted is no facet
        ({"storageLayer": "delta", "_deleted": True}, "file.files//data/events"),
    ],
)
def test_file_format_from_the_storage_facet(storage: dict[str, Any], urn: str) -> None:
    event = {"eventTime": "2024-05-01T00:00:00Z", "producer": PRODUCER, "schemaURL": "x"}
    event["dataset"] = {"namespace": "file", "name": "/data/events", "facets": {"storage": storage}}
    assert [a.urn for a in event_to_batch(event).assets] == [urn]


def test_null_is_an_optional_member_not_given() -> None:
    event = minimal_event("COMPLETE")
    event["run"]["facets"] = event["job"]["facets"] = event["inputs"] = None
    event["outputs"][0]["facets"] = {"schema": None, "columnLineage": None}
    batch = event_to_batch(event)
    assert [a.urn for a in batch.assets] == [TRAINING]
    # an output and no input is no edge: listing the process would erase the edges it has
    assert batch.edges == batch.fields == batch.processes == []
    assert [r.status for r in batch.runs] == ["COMPLETE"]


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


@pytest.mark.parametrize(
    ("mutate", "path", "reason"),
    [
        (change("eventTime", ...), "$.eventTime", "required"),
        (change("eventTime", "yesterday"), "$.eventTime", "not an RFC 3339 date-time: 'yesterday'"),
        (change("eventTime", "2024-05-01"), "$.eventTime", "not an RFC 3339 date-time: '2024-05-01'"),
        (change("eventTime", 1714532670), "$.eventTime", "expected a string, got number"),
        (change("producer", ...), "$.producer", "required"),
        (
            change("eventType", "DONE"),
            "$.eventType",
            "expected one of START, RUNNING, COMPLETE, ABORT, FAIL, OTHER, got 'DONE'",
        ),
        (change("run/runId", ...), "$.run.runId", "required"),
        (change("run/runId", "run-1"), "$.run.runId", "not a UUID: 'run-1'"),
        (change("run/facets/parent/run", ...), "$.run.facets.parent.run", "required"),
        (change("job/namespace", ...), "$.job.namespace", "required"),
        (change("job/name", 42), "$.job.name", "expected a string, got number"),
        (change("job/name", " "), "$.job.name", "must not be empty"),
        (change("job", [1]), "$.job", "expected an object, got array"),
        (change("inputs", {}), "$.inputs", "expected an array, got object"),
        (change("outputs/0/namespace", ...), "$.outputs[0].namespace", "required"),
        (change("inputs/1/name", None), "$.inputs[1].name", "expected a string, got null"),
        (
            change("inputs/0/facets/schema/fields/3/fields/0/name", ...),
            "$.inputs[0].facets.schema.fields[3].fields[0].name",
            "required",
        ),
        (
            change("inputs/1/facets/storage/storageLayer", ...),
            "$.inputs[1].facets.storage.storageLayer",
            "required",
        ),
        (
            change("inputs/0/facets/ownership/owners/0", "alice"),
            "$.inputs[0].facets.ownership.owners[0]",
            "expected an object, got string",
        ),
        (
            change(f"{RELIGION}/inputFields", {}),
            f"{LINEAGE}.fields.target_religion.inputFields",
            "expected an array, got object",
        ),
        (change(f"{RELIGION}/inputFields", ...), f"{LINEAGE}.fields.target_religion.inputFields", "required"),
        (
            change("outputs/0/facets/columnLineage/fields/target_user_id/inputFields/1/name", ...),
            f"{LINEAGE}.fields.target_user_id.inputFields[1].name",
            "required",
        ),
        (
            change(f"{RELIGION}/inputFields/0/transformations/1/type", "SIDEWAYS"),
            f"{LINEAGE}.fields.target_religion.inputFields[0].transformations[1].type",
            "expected DIRECT or INDIRECT, got 'SIDEWAYS'",
        ),
        (
            change("outputs/0/facets/columnLineage/fields/profile.city", []),
            f'{LINEAGE}.fields["profile.city"]',
            "expected an object, got array",
        ),
        (change("outputs/0/facets/columnLineage/fields", ...), f"{LINEAGE}.fields", "required"),
        (
            change("outputs/0/facets/columnLineage/dataset/0/field", ""),
            f"{LINEAGE}.dataset[0].field",
            "must not be empty",
        ),
    ],
)
def test_malformed_run_events(mutate: Callable[[dict[str, Any]], None], path: str, reason: str) -> None:
    event = spark_event()
    mutate(event)
    with pytest.raises(EventError) as caught:
        event_to_batch(event)
    assert (caught.value.path, caught.value.reason) == (path, reason)
    assert str(caught.value) == f"{path}: {reason}"


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
    assert edge_set(batch) == {(LOG, TRAINING, None, None)}
    assert batch.observed_at == ended


# -- the round trip through Tracelake's emitter -----------------------------------------------------

CLICKS = "kafka.topic/profile_clicks"
REPORTS = "jdbc.table/jdbc:postgresql://db:5432/dating/reports"
RAW = "file.parquet/s3a://dating-lake/raw/events"
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

    # `dataset_name` keeps no file format and aliases s3a to s3: that much of a file URN is lost
    renamed = {RAW: "file.files/s3://dating-lake/raw/events"}

    def back(urn: str) -> str:
        asset, hash_, path = urn.partition("#")
        return renamed.get(asset, asset) + hash_ + path

    assert {a.urn for a in batch.assets} == {back(a.urn) for a in original.assets}
    assert edge_set(batch) == {
        (back(e.source), back(e.target), e.transformation, e.description) for e in original.edges
    }
    assert {(f.urn, f.data_type) for f in batch.fields if f.data_type} == {
        (back(f.urn), f.data_type) for f in original.fields
    }
    assert batch.processes == [
        Process("openlineage.job/tracelake/build_safety_training", "build_safety_training", "query")
    ]
    assert batch.observed_at == ENDED


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
