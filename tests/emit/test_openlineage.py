"""OpenLineage emitter: events built by hand-checked mapping, validated against the spec's JSON schema.

Every event a test builds goes through `assert_valid`, which validates the serialised event
against the RunEvent schema (spec 2-0-2) and each facet against its own schema, found by its
`_schemaURL`, from the files in tests/emit/schema (see the README there).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.serde import Serde
from openlineage.client.transport.transport import Transport
from referencing import Registry, Resource

from tracelake.emit import LineageEmitter, OpenLineageEmitter, run_event
from tracelake.emit.openlineage import DEFAULT_PRODUCER
from tracelake.model import (
    Asset,
    AssetChange,
    Confidence,
    Field,
    FlowEdge,
    Lifecycle,
    LineageBatch,
    Process,
    Run,
    Signal,
    Transformation,
    UrnError,
)
from tracelake.model.names import DatasetName, dataset_of, location_urn, naming, openlineage_run_id

# -- validation against the OpenLineage JSON schema ---------------------------------------------

SCHEMA_DIR = Path(__file__).parent / "schema"
RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
DIRECT_SUBTYPES = {"IDENTITY", "TRANSFORMATION", "AGGREGATION"}
INDIRECT_SUBTYPES = {"FILTER", "JOIN", "GROUP_BY", "SORT", "WINDOW", "CONDITIONAL"}


# Facet schemas read in place from the spec's own files (shared/ beside the clone; CI has it)
SPEC_FACETS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "openlineage-spec" / "facets"
FROM_THE_SPEC = ("LifecycleStateChangeDatasetFacet.json", "ParentRunFacet.json")


def _registry() -> Registry:
    resources = []
    spec = [SPEC_FACETS / name for name in FROM_THE_SPEC if (SPEC_FACETS / name).exists()]
    for path in [*sorted(SCHEMA_DIR.glob("*.json")), *spec]:
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


REGISTRY = _registry()
# jsonschema checks `uuid` itself; `date-time` and `uri` need optional packages, so check them here
FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if "T" not in value.upper():
        return False
    # RFC 3339 needs an offset; fromisoformat takes `Z` from Python 3.11 on
    return datetime.fromisoformat(value).tzinfo is not None


@FORMATS.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and bool(parts.netloc or parts.path)


def _validator(ref: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": ref}, registry=REGISTRY, format_checker=FORMATS)


def _facets(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every facet of an event with where it sits, for validation against its own schema."""
    for where, holder in (("run", doc["run"]), ("job", doc["job"])):
        for name, facet in (holder.get("facets") or {}).items():
            yield f"{where}.facets.{name}", facet
    for side in ("inputs", "outputs"):
        for index, dataset in enumerate(doc.get(side) or []):
            for key in ("facets", "inputFacets", "outputFacets"):
                for name, facet in (dataset.get(key) or {}).items():
                    yield f"{side}[{index}].{key}.{name}", facet


def schema_errors(doc: dict[str, Any]) -> list[str]:
    errors = [f"event: {e.json_path}: {e.message}" for e in _validator(RUN_EVENT_SCHEMA).iter_errors(doc)]
    for where, facet in _facets(doc):
        url = facet.get("_schemaURL", "")
        try:
            REGISTRY.resolver().lookup(url)
        except Exception:
            errors.append(f"{where}: no schema for _schemaURL {url!r} in tests/emit/schema")
            continue
        errors.extend(f"{where}: {e.json_path}: {e.message}" for e in _validator(url).iter_errors(facet))
    return errors


def assert_valid(event: RunEvent | dict[str, Any]) -> dict[str, Any]:
    """Validate an event (model or parsed JSON) and return it as JSON."""
    doc = json.loads(Serde.to_json(event)) if isinstance(event, RunEvent) else event
    errors = schema_errors(doc)
    assert not errors, "\n".join(errors)
    # the spec leaves these free strings; Tracelake promises the documented vocabulary
    for output in doc.get("outputs") or []:
        lineage = (output.get("facets") or {}).get("columnLineage")
        for column in (lineage or {}).get("fields", {}).values():
            for input_field in column["inputFields"]:
                for t in input_field.get("transformations", []):
                    allowed = DIRECT_SUBTYPES if t["type"] == "DIRECT" else INDIRECT_SUBTYPES
                    assert t["type"] in {"DIRECT", "INDIRECT"} and t["subtype"] in allowed, t
    return doc


@pytest.fixture(autouse=True)
def _no_home_metastore_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set the home metastore themselves (`naming`), whatever the shell running them says."""
    monkeypatch.delenv("TRACELAKE_HIVE_NAMESPACE", raising=False)


# -- batches built by hand ------------------------------------------------------------------------

PRODUCER = "https://github.com/tracelake/tracelake/tree/0.1.0"
LOG = "hive.table/dating.safety_log_tbl"
TRAINING = "hive.table/dating.safety_training_tbl"
SQL_JOB = "sql.job/build_safety_training"
STARTED = datetime(2024, 5, 1, 3, 0, tzinfo=UTC)
ENDED = datetime(2024, 5, 1, 3, 4, 30, tzinfo=UTC)


def sql_edge(source: str, target: str, kind: Transformation | None = None) -> FlowEdge:
    return FlowEdge(source, target, SQL_JOB, Signal.SQL_STATIC, Confidence.HIGH, kind)


def dating_batch() -> LineageBatch:
    """INSERT INTO safety_training_tbl SELECT user_id, religion FROM safety_log_tbl WHERE ds = …"""
    return LineageBatch(
        assets=[Asset(LOG, labels=frozenset({"religion"})), Asset(TRAINING)],
        fields=[
            Field(f"{LOG}#user_id", "bigint"),
            Field(f"{LOG}#religion", "string", labels=frozenset({"religion"})),
            Field(f"{LOG}#ds", "string"),
            Field(f"{TRAINING}#target_user_id", "bigint"),
            Field(f"{TRAINING}#target_religion", "string"),
        ],
        processes=[Process(SQL_JOB, name="build_safety_training", kind="sql")],
        runs=[dating_run()],
        edges=[
            sql_edge(LOG, TRAINING),
            sql_edge(f"{LOG}#user_id", f"{TRAINING}#target_user_id", Transformation.IDENTITY),
            sql_edge(f"{LOG}#religion", f"{TRAINING}#target_religion", Transformation.IDENTITY),
            sql_edge(f"{LOG}#ds", f"{TRAINING}#target_user_id", Transformation.FILTER),
            sql_edge(f"{LOG}#ds", f"{TRAINING}#target_religion", Transformation.FILTER),
        ],
    )


def dating_run() -> Run:
    # the SQL collector's run ids are fingerprints, not UUIDs
    return Run("3f9a1c0d2b7e4a55", SQL_JOB, started_at=STARTED, ended_at=ENDED, status="COMPLETE")


EVENTS = "file.dataset//data/events"
DAILY = "file.dataset//data/events_daily"
USERS = "hive.table/dating.users"
SPARK_JOB = "spark.job/daily_dating_features"
SPARK_RUN_ID = "8c1f0e52-3c4b-4d7e-9a55-0f4a2b6c7d81"


def spark_batch() -> LineageBatch:
    """A PySpark job over Parquet files: nested fields, a GROUP BY, a join, and a read-only table."""

    def edge(source: str, target: str, kind: Transformation | None = None) -> FlowEdge:
        return FlowEdge(source, target, SPARK_JOB, Signal.SPARK_RUNTIME, Confidence.HIGH, kind)

    return LineageBatch(
        assets=[Asset(EVENTS), Asset(DAILY), Asset(USERS)],
        fields=[
            Field(f"{EVENTS}#identity_map.value.id", "string"),
            Field(f"{EVENTS}#ts", "timestamp"),
            Field(f"{DAILY}#user_id", "string"),
            Field(f"{DAILY}#events", "bigint"),
            Field(f"{USERS}#id", "string"),
        ],
        processes=[
            Process(
                SPARK_JOB,
                name="daily_dating_features",
                kind="spark",
                metadata={"engine": "spark", "engine_version": "4.0.1", "reads": [f"{USERS}#id"]},
            )
        ],
        runs=[spark_run()],
        edges=[
            edge(EVENTS, DAILY),
            edge(f"{EVENTS}#identity_map.value.id", f"{DAILY}#user_id", Transformation.IDENTITY),
            edge(f"{EVENTS}#identity_map.value.id", f"{DAILY}#user_id", Transformation.GROUP_BY),
            edge(f"{EVENTS}#identity_map.value.id", f"{DAILY}#events", Transformation.GROUP_BY),
            edge(f"{EVENTS}#ts", f"{DAILY}#events", Transformation.AGGREGATION),
        ],
    )


def spark_run() -> Run:
    return Run(
        SPARK_RUN_ID,
        SPARK_JOB,
        started_at=datetime(2024, 5, 1, 5, 0, 0),  # naive: taken as UTC
        ended_at=datetime(2024, 5, 1, 7, 30, 0, tzinfo=timezone(timedelta(hours=2))),
    )


def event_doc(event_type: str, run: Run, batch: LineageBatch, **kwargs: Any) -> dict[str, Any]:
    event = run_event(event_type, run, batch, namespace="tracelake", producer=PRODUCER, **kwargs)
    return assert_valid(event)


def by_field(doc: dict[str, Any], output: int = 0) -> dict[str, list[tuple[str, str, str, list]]]:
    """columnLineage of one output as {field: [(namespace, name, field, [(type, subtype)])]}."""
    fields = doc["outputs"][output]["facets"]["columnLineage"]["fields"]
    return {
        name: [
            (i["namespace"], i["name"], i["field"], [(t["type"], t["subtype"]) for t in i["transformations"]])
            for i in column["inputFields"]
        ]
        for name, column in fields.items()
    }


# -- the mapping ----------------------------------------------------------------------------------


def test_complete_event_of_the_dating_job() -> None:
    doc = event_doc("COMPLETE", dating_run(), dating_batch())

    assert doc["eventType"] == "COMPLETE"
    assert doc["eventTime"] == "2024-05-01T03:04:30.000Z"
    assert doc["producer"] == PRODUCER
    assert doc["schemaURL"] == RUN_EVENT_SCHEMA
    assert doc["job"]["namespace"] == "tracelake"
    assert doc["job"]["name"] == "build_safety_training"
    assert doc["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert doc["job"]["facets"]["jobType"]["jobType"] == "QUERY"
    assert doc["run"]["runId"] == str(uuid.UUID(doc["run"]["runId"]))
    assert doc["run"]["facets"] == {}

    assert [(d["namespace"], d["name"]) for d in doc["inputs"]] == [("hive", "dating.safety_log_tbl")]
    assert [(d["namespace"], d["name"]) for d in doc["outputs"]] == [("hive", "dating.safety_training_tbl")]
    assert doc["inputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "user_id", "type": "bigint"},
        {"name": "religion", "type": "string"},
        {"name": "ds", "type": "string"},
    ]
    assert "columnLineage" not in doc["inputs"][0]["facets"]
    output = doc["outputs"][0]["facets"]
    assert output["schema"]["fields"] == [
        {"name": "target_user_id", "type": "bigint"},
        {"name": "target_religion", "type": "string"},
    ]
    log = ("hive", "dating.safety_log_tbl")
    assert by_field(doc) == {
        "target_user_id": [
            (*log, "user_id", [("DIRECT", "IDENTITY")]),
            (*log, "ds", [("INDIRECT", "FILTER")]),
        ],
        "target_religion": [
            (*log, "religion", [("DIRECT", "IDENTITY")]),
            (*log, "ds", [("INDIRECT", "FILTER")]),
        ],
    }
    assert output["columnLineage"]["_producer"] == PRODUCER
    assert "dataset" not in output["columnLineage"]


def test_start_event_is_timed_at_the_start_and_shares_the_run_id() -> None:
    start = event_doc("START", dating_run(), dating_batch())
    complete = event_doc(RunState.COMPLETE, dating_run(), dating_batch())
    assert start["eventType"] == "START"
    assert start["eventTime"] == "2024-05-01T03:00:00.000Z"
    assert start["run"]["runId"] == complete["run"]["runId"]
    # a START carries the same datasets, so a consumer sees the lineage even if the job dies
    assert start["inputs"] == complete["inputs"]
    assert start["outputs"] == complete["outputs"]


def test_fail_event_carries_the_error_class_only() -> None:
    doc = event_doc(
        "FAIL", dating_run(), dating_batch(), error_class="ValueError: religion='Muslim' for user 42"
    )
    assert doc["eventType"] == "FAIL"
    assert doc["eventTime"] == "2024-05-01T03:04:30.000Z"
    error = doc["run"]["facets"]["errorMessage"]
    assert error["message"] == "ValueError"
    assert error["programmingLanguage"] == "python"
    assert "stackTrace" not in error
    assert "Muslim" not in json.dumps(doc)


def test_fail_keeps_a_qualified_class_name() -> None:
    doc = event_doc(
        "FAIL",
        dating_run(),
        dating_batch(),
        error_class="pyspark.errors.exceptions.captured.AnalysisException",
    )
    assert doc["run"]["facets"]["errorMessage"]["message"] == (
        "pyspark.errors.exceptions.captured.AnalysisException"
    )


def test_spark_job_over_parquet_files() -> None:
    doc = event_doc("COMPLETE", spark_run(), spark_batch())

    assert doc["job"]["name"] == "daily_dating_features"
    assert doc["job"]["facets"]["jobType"]["jobType"] == "JOB"
    assert doc["run"]["runId"] == SPARK_RUN_ID  # a uuid4 from the tracker goes out unchanged
    # 07:30+02:00 is 05:30 UTC
    assert doc["eventTime"] == "2024-05-01T05:30:00.000Z"
    engine = doc["run"]["facets"]["processing_engine"]
    assert (engine["name"], engine["version"], engine["openlineageAdapterVersion"]) == (
        "spark",
        "4.0.1",
        "0.1.0",
    )

    # dating.users is only read (a count, a collect): an input all the same
    assert [(d["namespace"], d["name"]) for d in doc["inputs"]] == [
        ("file", "/data/events"),
        ("hive", "dating.users"),
    ]
    assert [(d["namespace"], d["name"]) for d in doc["outputs"]] == [("file", "/data/events_daily")]
    # a nested path is nested in the schema facet
    assert doc["inputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "identity_map", "fields": [{"name": "value", "fields": [{"name": "id", "type": "string"}]}]},
        {"name": "ts", "type": "timestamp"},
    ]
    assert doc["inputs"][1]["facets"]["schema"]["fields"] == [{"name": "id", "type": "string"}]
    events = ("file", "/data/events")
    assert by_field(doc) == {
        # one input field, two roles: copied and grouped by
        "user_id": [(*events, "identity_map.value.id", [("DIRECT", "IDENTITY"), ("INDIRECT", "GROUP_BY")])],
        "events": [
            (*events, "identity_map.value.id", [("INDIRECT", "GROUP_BY")]),
            (*events, "ts", [("DIRECT", "AGGREGATION")]),
        ],
    }


def test_what_a_run_did_to_datasets_goes_out_as_their_lifecycle_state_change() -> None:
    if not (SPEC_FACETS / FROM_THE_SPEC[0]).exists():
        message = f"no OpenLineage facet schemas at {SPEC_FACETS} (shared/ beside the clone)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    old, new, scratch = "hive.table/dating.users_v1", "hive.table/dating.users", "hive.table/dating.scratch"
    at = datetime(2024, 5, 1, 6, 0, tzinfo=UTC)
    batch = spark_batch()
    batch.changes = [
        AssetChange(scratch, Lifecycle.CREATE, at, Signal.SPARK_RUNTIME, SPARK_JOB, SPARK_RUN_ID),
        AssetChange(scratch, Lifecycle.DROP, at, Signal.SPARK_RUNTIME, SPARK_JOB, SPARK_RUN_ID),
        AssetChange(new, Lifecycle.RENAME, at, Signal.SPARK_RUNTIME, SPARK_JOB, SPARK_RUN_ID, previous=old),
        AssetChange(old, Lifecycle.TRUNCATE, at, Signal.SPARK_RUNTIME, SPARK_JOB, "another-run"),
    ]
    doc = event_doc("COMPLETE", spark_run(), batch)
    facets = {d["name"]: d["facets"].get("lifecycleStateChange") for d in doc["outputs"]}
    # each dataset the run changed is an output with its last change; another run's is not here
    assert facets["dating.scratch"]["lifecycleStateChange"] == "DROP"
    assert facets["dating.users"]["lifecycleStateChange"] == "RENAME"
    assert facets["dating.users"]["previousIdentifier"] == {"namespace": "hive", "name": "dating.users_v1"}
    assert "dating.users_v1" not in facets
    assert facets["/data/events_daily"] is None  # written, not changed


def test_only_the_runs_own_process_counts() -> None:
    batch = dating_batch()
    batch.extend(spark_batch())
    doc = event_doc("COMPLETE", dating_run(), batch)
    assert [d["name"] for d in doc["inputs"]] == ["dating.safety_log_tbl"]
    assert [d["name"] for d in doc["outputs"]] == ["dating.safety_training_tbl"]
    assert "processing_engine" not in doc["run"]["facets"]


def test_a_run_of_an_unknown_process_is_named_after_its_urn() -> None:
    run = Run("r1", "sql.query/ab12cd34", started_at=STARTED)
    doc = event_doc("START", run, LineageBatch())
    assert doc["job"]["name"] == "ab12cd34"
    assert doc["inputs"] == [] and doc["outputs"] == []


def test_edge_description_and_untyped_field_edges() -> None:
    batch = LineageBatch(
        processes=[Process(SQL_JOB, name="build_safety_training")],
        edges=[
            FlowEdge(
                f"{LOG}#religion",
                f"{TRAINING}#religion_score",
                SQL_JOB,
                Signal.SQL_STATIC,
                transformation=Transformation.TRANSFORMATION,
                description="CASE WHEN religion IS NULL THEN 0 ELSE 1 END",
            ),
            FlowEdge(f"{LOG}#user_id", f"{TRAINING}#user_id", SQL_JOB, Signal.MANUAL),
        ],
    )
    doc = event_doc("COMPLETE", dating_run(), batch)
    fields = doc["outputs"][0]["facets"]["columnLineage"]["fields"]
    assert fields["religion_score"]["inputFields"][0]["transformations"] == [
        {
            "type": "DIRECT",
            "subtype": "TRANSFORMATION",
            "description": "CASE WHEN religion IS NULL THEN 0 ELSE 1 END",
        }
    ]
    # a field edge of unknown kind is lineage without a claimed transformation
    assert fields["user_id"]["inputFields"][0]["transformations"] == []
    # no types known: the schema facet still names the fields lineage points at
    assert doc["outputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "religion_score"},
        {"name": "user_id"},
    ]


@pytest.mark.parametrize(
    ("urn", "expected"),
    [
        ("file.dataset//data/events", ("file", "/data/events")),
        ("file.dataset/s3://lake-bucket/events/day", ("s3://lake-bucket", "events/day")),
        ("file.dataset/hdfs://namenode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        ("file.dataset/file://nfs-1/data/events", ("file://nfs-1", "/data/events")),
        ("file.dataset//data/a%23b#c", ("file", "/data/a#b")),
        # URNs of stores written while the format was part of a file's name
        ("file.parquet//data/events", ("file", "/data/events")),
        ("file.csv/file:///data/raw/x.csv", ("file", "/data/raw/x.csv")),
        ("file.parquet/s3a://lake-bucket/events/day", ("s3://lake-bucket", "events/day")),
        ("file.orc/gs://bkt/a/b", ("gs://bkt", "a/b")),
        ("file.parquet/hdfs://namenode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        ("hive.table/dating.safety_log_tbl", ("hive", "dating.safety_log_tbl")),
        ("hive.table/dating.users#address.city", ("hive", "dating.users")),
        ("hive.table//metastore-b:9083/dating.users", ("hive://metastore-b:9083", "dating.users")),
        ("kafka.topic/profile_updates", ("kafka", "profile_updates")),
        ("kafka.topic//broker-1:9092/profile_updates", ("kafka://broker-1:9092", "profile_updates")),
        ("postgres.table//db:5432/dating.public.reports", ("postgres://db:5432", "dating.public.reports")),
        ("bigquery.table/proj.dating.reports", ("bigquery", "proj.dating.reports")),
        ("ai.dataset/dating_ranking_model", ("ai", "dating_ranking_model")),
        # not ai's usual kind: the namespace is the whole `<system>.<kind>`, as config collectors name it
        ("ai.feature/DATING_USER_RELIGION_SCORE", ("ai.feature", "DATING_USER_RELIGION_SCORE")),
        (
            "openlineage.dataset/arn:aws:glue:eu-west-1:123/table/dating/reports",
            ("arn:aws:glue:eu-west-1:123", "table/dating/reports"),
        ),
    ],
)
def test_dataset_naming(urn: str, expected: tuple[str, str]) -> None:
    assert dataset_of(urn) == DatasetName(*expected)


def test_dataset_naming_of_the_home_metastore() -> None:
    with naming(hive="hive://metastore:9083"):
        assert dataset_of(LOG) == DatasetName("hive://metastore:9083", "dating.safety_log_tbl")
        doc = event_doc("COMPLETE", dating_run(), dating_batch())
        # another metastore's table is named in its own namespace, home or not
        assert dataset_of("hive.table//metastore-b:9083/t.u") == DatasetName("hive://metastore-b:9083", "t.u")
    assert [(d["namespace"], d["name"]) for d in doc["inputs"]] == [
        ("hive://metastore:9083", "dating.safety_log_tbl")
    ]
    assert [(d["namespace"], d["name"]) for d in doc["outputs"]] == [
        ("hive://metastore:9083", "dating.safety_training_tbl")
    ]
    assert dataset_of(LOG) == DatasetName("hive", "dating.safety_log_tbl")


def test_files_go_out_under_their_location_whatever_their_format() -> None:
    raw = location_urn("s3a://dating-lake/raw/events/ds=2024-05-01/")
    assert raw == "file.dataset/s3://dating-lake/raw/events"
    batch = LineageBatch(
        processes=[Process(SQL_JOB, name="build_safety_training")],
        edges=[sql_edge(raw, TRAINING), sql_edge(f"{raw}#user_id", f"{TRAINING}#target_user_id")],
    )
    doc = event_doc("COMPLETE", dating_run(), batch)
    # the spec's naming of an object store: the bucket, then the key without a leading slash
    assert [(d["namespace"], d["name"]) for d in doc["inputs"]] == [("s3://dating-lake", "raw/events")]
    assert by_field(doc) == {"target_user_id": [("s3://dating-lake", "raw/events", "user_id", [])]}


@pytest.mark.parametrize("urn", ["no_slash", "hive.table/", "/name", "logger/dating_profile_log"])
def test_dataset_naming_rejects_non_urns(urn: str) -> None:
    with pytest.raises(UrnError):
        dataset_of(urn)


def test_run_ids() -> None:
    assert openlineage_run_id(SPARK_RUN_ID) == SPARK_RUN_ID
    assert openlineage_run_id(SPARK_RUN_ID.upper()) == SPARK_RUN_ID
    derived = openlineage_run_id("3f9a1c0d2b7e4a55")
    assert uuid.UUID(derived).version == 5
    assert derived == openlineage_run_id("3f9a1c0d2b7e4a55")  # stable, so START and COMPLETE pair up
    assert derived != openlineage_run_id("3f9a1c0d2b7e4a56")
    with pytest.raises(ValueError):
        openlineage_run_id("")


def test_programming_errors_raise() -> None:
    with pytest.raises(ValueError):
        run_event("FINISHED", dating_run(), dating_batch(), namespace="t", producer=PRODUCER)
    with pytest.raises(ValueError, match="FAIL"):
        run_event("COMPLETE", dating_run(), dating_batch(), namespace="t", producer=PRODUCER, error_class="E")
    bad = LineageBatch(edges=[FlowEdge("not a urn", TRAINING, SQL_JOB, Signal.MANUAL)])
    with pytest.raises(UrnError):
        run_event("START", dating_run(), bad, namespace="t", producer=PRODUCER)


def test_serde_round_trip() -> None:
    for event_type in ("START", "COMPLETE", "FAIL"):
        error = "RuntimeError" if event_type == "FAIL" else None
        event = run_event(
            event_type,
            spark_run(),
            spark_batch(),
            namespace="tracelake",
            producer=PRODUCER,
            error_class=error,
        )
        text = Serde.to_json(event)
        doc = json.loads(text)
        assert doc == Serde.to_dict(event)
        # Serde writes sorted keys with default separators: re-encoding gives the same bytes
        assert json.dumps(doc, sort_keys=True) == text
        assert_valid(doc)


# -- the validator itself: it must reject what the spec rejects ------------------------------------


def _column(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["outputs"][0]["facets"]["columnLineage"]["fields"]["target_user_id"]


# (what is broken, how, what the validator must say)
BROKEN: list[tuple[str, Any, str]] = [
    ("run without runId", lambda d: d["run"].pop("runId"), "'runId' is a required property"),
    ("runId not a uuid", lambda d: d["run"].update(runId="run-42"), "is not a 'uuid'"),
    ("event without producer", lambda d: d.pop("producer"), "'producer' is a required property"),
    ("eventTime without offset", lambda d: d.update(eventTime="2024-05-01T03:00:00"), "is not a 'date-time'"),
    ("unknown eventType", lambda d: d.update(eventType="DONE"), "'DONE' is not one of"),
    ("job without name", lambda d: d["job"].pop("name"), "'name' is a required property"),
    ("dataset without namespace", lambda d: d["inputs"][0].pop("namespace"), "'namespace' is a required"),
    (
        "errorMessage without language",
        lambda d: d["run"]["facets"]["errorMessage"].pop("programmingLanguage"),
        "run.facets.errorMessage: $: 'programmingLanguage' is a required property",
    ),
    (
        "facet without _producer",
        lambda d: d["job"]["facets"]["jobType"].pop("_producer"),
        "'_producer' is a required property",
    ),
    (
        "inputField without field",
        lambda d: _column(d)["inputFields"][0].pop("field"),
        "inputFields[0]: 'field' is a required property",
    ),
    (
        "transformation without type",
        lambda d: _column(d)["inputFields"][0]["transformations"][0].pop("type"),
        "transformations[0]: 'type' is a required property",
    ),
    ("column without inputFields", lambda d: _column(d).pop("inputFields"), "'inputFields' is a required"),
    (
        "schema field without name",
        lambda d: d["inputs"][0]["facets"]["schema"]["fields"][0].pop("name"),
        "inputs[0].facets.schema: $.fields[0]: 'name' is a required property",
    ),
    (
        "facet of an unknown schema",
        lambda d: d["outputs"][0]["facets"]["schema"].update(
            _schemaURL="https://openlineage.io/spec/facets/9-9-9/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
        ),
        "no schema for _schemaURL",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [pytest.param(c, e, id=i) for i, c, e in BROKEN])
def test_validator_rejects_broken_events(change: Any, expected: str) -> None:
    doc = copy.deepcopy(event_doc("FAIL", dating_run(), dating_batch(), error_class="RuntimeError"))
    change(doc)
    errors = schema_errors(doc)
    assert any(expected in error for error in errors), errors


# -- emitting through transports ------------------------------------------------------------------


def test_emitter_fits_the_protocol() -> None:
    emitter: LineageEmitter = OpenLineageEmitter.console()
    assert isinstance(emitter, OpenLineageEmitter)
    assert emitter.namespace == "tracelake"
    assert emitter.producer == DEFAULT_PRODUCER == "https://github.com/tracelake/tracelake/tree/0.1.0"


def test_file_transport_appends_one_event_per_line(tmp_path: Path) -> None:
    path = tmp_path / "lineage" / "events.jsonl"
    emitter = OpenLineageEmitter.file(path, namespace="dating")
    run, batch = dating_run(), dating_batch()
    emitter.start(run, batch)
    emitter.complete(run, batch)
    # a second emitter on the same file appends rather than truncating
    OpenLineageEmitter.file(path, namespace="dating").fail(run, batch, "RuntimeError")

    lines = path.read_text().splitlines()
    assert len(lines) == 3
    docs = [assert_valid(json.loads(line)) for line in lines]
    assert [d["eventType"] for d in docs] == ["START", "COMPLETE", "FAIL"]
    assert len({d["run"]["runId"] for d in docs}) == 1
    assert {(d["job"]["namespace"], d["job"]["name"]) for d in docs} == {("dating", "build_safety_training")}
    assert docs[0]["producer"] == DEFAULT_PRODUCER
    assert by_field(docs[1])["target_religion"][0][2] == "religion"
    assert docs[2]["run"]["facets"]["errorMessage"]["message"] == "RuntimeError"


def test_console_transport_logs_the_event(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="openlineage.client.transport.console"):
        OpenLineageEmitter.console().complete(dating_run(), dating_batch())
    [record] = [r for r in caplog.records if r.name == "openlineage.client.transport.console"]
    doc = assert_valid(json.loads(record.getMessage()))
    assert doc["eventType"] == "COMPLETE"


class _Recording(Transport):
    kind = "recording"

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


class _Broken(Transport):
    kind = "broken"

    def emit(self, event: Any) -> None:
        raise OSError("disk full")


def test_emitter_over_a_configured_client() -> None:
    transport = _Recording()
    emitter = OpenLineageEmitter(OpenLineageClient(transport=transport), namespace="prod", producer=PRODUCER)
    emitter.start(spark_run(), spark_batch())
    emitter.fail(spark_run(), spark_batch(), "org.apache.spark.SparkException")
    emitter.close()
    assert [e.eventType for e in transport.events] == [RunState.START, RunState.FAIL]
    docs = [assert_valid(e) for e in transport.events]
    assert docs[1]["run"]["facets"]["errorMessage"]["message"] == "org.apache.spark.SparkException"
    assert (docs[0]["job"]["namespace"], docs[0]["job"]["name"]) == ("prod", "daily_dating_features")
    assert docs[0]["producer"] == PRODUCER


def test_a_failing_transport_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    emitter = OpenLineageEmitter(OpenLineageClient(transport=_Broken()))
    with caplog.at_level(logging.WARNING, logger="tracelake.openlineage"):
        emitter.complete(dating_run(), dating_batch())
    [record] = [r for r in caplog.records if r.name == "tracelake.openlineage"]
    assert "COMPLETE" in record.getMessage() and "OSError: disk full" in record.getMessage()


def _closed_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_http_transport_to_a_closed_port_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    port = _closed_loopback_port()
    emitter = OpenLineageEmitter.http(f"http://127.0.0.1:{port}", api_key="secret", timeout=2.0, retries=0)
    run, batch = dating_run(), dating_batch()
    with caplog.at_level(logging.WARNING, logger="tracelake.openlineage"):
        emitter.start(run, batch)
        emitter.complete(run, batch)
        emitter.fail(run, batch, "RuntimeError")
    messages = [r.getMessage() for r in caplog.records if r.name == "tracelake.openlineage"]
    assert len(messages) == 3
    assert all("http transport" in m for m in messages)
    assert not any("secret" in m for m in messages)


def test_file_emitter_into_an_unwritable_place_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the path is a directory, so every write fails
    emitter = OpenLineageEmitter.file(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tracelake.openlineage"):
        emitter.complete(dating_run(), dating_batch())
    assert any(r.name == "tracelake.openlineage" for r in caplog.records)
