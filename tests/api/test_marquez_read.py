"""Marquez's read routes through a real uvicorn server over a real SQLite store, read as a tool
built on Marquez reads them, after OpenLineage events posted as producers send them.

The store holds, from events: an Airflow task `airflow`/`shop.load` reading a Postgres table and
writing an S3 object, run twice (run A completed, then run B failed); a Flink streaming job writing
a Kafka topic from that object; a DatasetEvent; and, from a SQL query log, a job of Tracelake's
own (`tracelake` namespace) copying `dating.a` into `dating.b`. Expected values are those the
events sent. The event store's queries also run on PostgreSQL (`store` fixture).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import requests

from tracelake.api.app import create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.collect.openlineage import event_to_batch
from tracelake.model.names import asset_urn
from tracelake.store import LineageStore
from tracelake.store import events as stored
from tracelake.store.labels import LabelStore

POSTGRES = "postgres://db.example.com:5432"
S3 = "s3://bucket"
KAFKA = "kafka://broker:9092"
ORDERS, LAKE, TOPIC = "shop.public.orders", "lake/orders/daily", "orders.enriched"
RUN_A = "0190c6c1-2b3a-7000-8000-00000000000a"
RUN_B = "0190c6c1-2b3a-7000-8000-00000000000b"
RUN_FLINK = "0190c6c1-2b3a-7000-8000-00000000000f"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/1.8.0"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def facet(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{kind}.json#/$defs/{kind}",
        **fields,
    }


ORDERS_SCHEMA = facet(
    "SchemaDatasetFacet",
    fields=[{"name": "order_id", "type": "INTEGER"}, {"name": "amount", "type": "DECIMAL(10,2)"}],
)
JOB_FACETS = {
    "jobType": facet("JobTypeJobFacet", processingType="BATCH", integration="AIRFLOW", jobType="TASK"),
    "sql": facet("SQLJobFacet", query="COPY (SELECT order_id, amount FROM orders) TO 's3://bucket/lake'"),
}
START_FACETS = {
    "nominalTime": facet("NominalTimeRunFacet", nominalStartTime="2024-03-12T09:00:00Z"),
    "parent": facet(
        "ParentRunFacet",
        run={"runId": "0190c6c1-2b3a-7000-8000-0000000000ff"},
        job={"namespace": "airflow", "name": "shop"},
    ),
}
COMPLETE_FACETS = {"processing_engine": facet("ProcessingEngineRunFacet", version="2.9.0", name="Airflow")}


def airflow_event(event_type: str, time: str, run_id: str, run_facets: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": time,
        "run": {"runId": run_id, "facets": run_facets},
        "job": {"namespace": "airflow", "name": "shop.load", "facets": JOB_FACETS},
        "inputs": [{"namespace": POSTGRES, "name": ORDERS, "facets": {"schema": ORDERS_SCHEMA}}],
        "outputs": [{"namespace": S3, "name": LAKE, "facets": {"schema": ORDERS_SCHEMA}}],
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
    }


FLINK_EVENT = {
    "eventType": "COMPLETE",
    "eventTime": "2024-03-12T12:00:00Z",
    "run": {"runId": RUN_FLINK},
    "job": {
        "namespace": "flink",
        "name": "orders_enrichment",
        "facets": {
            "jobType": facet(
                "JobTypeJobFacet", processingType="STREAMING", integration="FLINK", jobType="JOB"
            )
        },
    },
    "inputs": [{"namespace": S3, "name": LAKE}],
    "outputs": [{"namespace": KAFKA, "name": TOPIC}],
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.20.0/integration/flink",
    "schemaURL": SCHEMA_URL,
}
DATASET_EVENT = {
    "eventTime": "2024-03-12T08:00:00Z",
    "dataset": {
        "namespace": POSTGRES,
        "name": ORDERS,
        "facets": {"documentation": facet("DocumentationDatasetFacet", description="Every order")},
    },
    "producer": PRODUCER,
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
}
# a name that reads as a route once its slash is decoded
TRICKY = "exports/versions"
TRICKY_EVENT = {
    **DATASET_EVENT,
    "dataset": {"namespace": S3, "name": TRICKY, "facets": {"schema": ORDERS_SCHEMA}},
}
# posted in this order: event times are not the order of arrival
EVENTS = [
    airflow_event("START", "2024-03-12T10:00:00Z", RUN_A, START_FACETS),
    DATASET_EVENT,
    TRICKY_EVENT,
    airflow_event("COMPLETE", "2024-03-12T10:05:00Z", RUN_A, COMPLETE_FACETS),
    FLINK_EVENT,
    airflow_event("START", "2024-03-12T11:00:00Z", RUN_B, {}),
    airflow_event("FAIL", "2024-03-12T11:02:00Z", RUN_B, {}),
]
RUN_EVENT_TIMES = sorted(e["eventTime"] for e in EVENTS if "run" in e)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tracelake]:
    folder = tmp_path_factory.mktemp("marquez_read")
    service = Tracelake(LineageStore(str(folder / "lineage.db")))
    log = folder / "etl.sql"
    log.write_text("INSERT INTO dating.b SELECT user_id, religion FROM dating.a;\n")
    service.ingest_sql(log)
    yield service
    service.close()


@pytest.fixture(scope="module")
def url(service: Tracelake) -> Iterator[str]:
    with serve_in_thread(create_app(service)) as base:
        for event in EVENTS:
            response = requests.post(f"{base}/api/v1/lineage", json=event, timeout=30)
            assert response.status_code == 201, response.text
        LabelStore(service.store).declare(asset_urn(POSTGRES, ORDERS), ["PII"])
        yield base


def get(url: str, path: str, **params: Any) -> Any:
    response = requests.get(f"{url}/api/v1{path}", params=params, timeout=30)
    assert response.status_code == 200, (path, response.text)
    return response.json()


def part(name: str) -> str:
    """A name as a path segment, percent-encoded as Marquez's clients send it."""
    return quote(name, safe="")


def not_found(url: str, path: str) -> str:
    response = requests.get(f"{url}/api/v1{path}", timeout=30)
    assert response.status_code == 404, (path, response.text)
    return str(response.json()["error"])


# ---------------------------------------------------------------- namespaces and sources


def test_namespaces_are_those_of_datasets_and_jobs_by_name(url: str) -> None:
    names = [n["name"] for n in get(url, "/namespaces")["namespaces"]]

    assert names == sorted(names)
    assert {"airflow", "flink", "tracelake", POSTGRES, S3, KAFKA} <= set(names)
    assert [n["name"] for n in get(url, "/namespaces", limit=2, offset=1)["namespaces"]] == names[1:3]


def test_a_namespace_named_by_a_uri_is_found_with_its_slashes_encoded(url: str) -> None:
    namespace = get(url, f"/namespaces/{part(POSTGRES)}")

    assert namespace["name"] == POSTGRES
    assert namespace["createdAt"] <= namespace["updatedAt"]


def test_an_unknown_namespace_is_a_404_with_an_error(url: str) -> None:
    assert "nowhere://x" in not_found(url, f"/namespaces/{part('nowhere://x')}")
    not_found(url, f"/namespaces/{part('nowhere://x')}/datasets")
    not_found(url, "/namespaces/nowhere/jobs")


def test_sources_are_the_dataset_namespaces(url: str) -> None:
    sources = {s["name"]: s for s in get(url, "/sources")["sources"]}

    assert {POSTGRES, S3, KAFKA} <= set(sources)
    assert "airflow" not in sources  # a job namespace holds no dataset
    assert sources[POSTGRES]["type"] == "POSTGRES"
    assert sources[POSTGRES]["connectionUrl"] == POSTGRES
    assert get(url, f"/sources/{part(KAFKA)}")["name"] == KAFKA
    not_found(url, "/sources/airflow")


# ---------------------------------------------------------------- datasets


def test_a_dataset_is_listed_in_its_namespace_by_the_name_sent_with_its_fields(url: str) -> None:
    listing = get(url, f"/namespaces/{part(POSTGRES)}/datasets")

    assert listing["totalCount"] == 1
    (dataset,) = listing["datasets"]
    assert dataset["id"] == {"namespace": POSTGRES, "name": ORDERS}
    assert (dataset["name"], dataset["namespace"], dataset["sourceName"]) == (ORDERS, POSTGRES, POSTGRES)
    assert dataset["type"] == "DB_TABLE"
    # in the order of the schema facet, with the types it gave
    assert [(f["name"], f["type"]) for f in dataset["fields"]] == [
        ("order_id", "INTEGER"),
        ("amount", "DECIMAL(10,2)"),
    ]
    assert dataset["tags"] == ["PII"]
    assert dataset["description"] == "Every order"
    # what the events naming it said: the schema of the run events, the DatasetEvent's documentation
    assert dataset["facets"] == {
        "schema": ORDERS_SCHEMA,
        "documentation": DATASET_EVENT["dataset"]["facets"]["documentation"],
    }


def test_a_dataset_whose_name_has_slashes_is_found_by_its_encoded_name(url: str) -> None:
    dataset = get(url, f"/namespaces/{part(S3)}/datasets/{part(LAKE)}")

    assert dataset["id"] == {"namespace": S3, "name": LAKE}
    # the Flink job read it last, sending no facets: those sent before still hold
    assert dataset["facets"] == {"schema": ORDERS_SCHEMA}
    assert dataset["lastModifiedAt"] == "2024-03-12T10:05:00Z"  # run B failed: A wrote it last


def test_an_encoded_slash_never_makes_a_name_read_as_a_route(url: str) -> None:
    dataset = get(url, f"/namespaces/{part(S3)}/datasets/{part(TRICKY)}")
    versions = get(url, f"/namespaces/{part(S3)}/datasets/{part(TRICKY)}/versions")["versions"]

    assert dataset["id"] == {"namespace": S3, "name": TRICKY}
    assert [v["name"] for v in versions] == [TRICKY]
    assert [f["name"] for f in dataset["fields"]] == ["order_id", "amount"]
    # a literal `%2F` in a name (sent as `%252F`) is not a slash
    not_found(url, f"/namespaces/{part(S3)}/datasets/{part('exports%2Fversions')}")


def test_a_kafka_topic_is_a_stream(url: str) -> None:
    assert get(url, f"/namespaces/{part(KAFKA)}/datasets/{part(TOPIC)}")["type"] == "STREAM"


def test_an_unknown_dataset_is_a_404_with_an_error(url: str) -> None:
    assert "public.nothing" in not_found(url, f"/namespaces/{part(POSTGRES)}/datasets/public.nothing")
    not_found(url, f"/namespaces/{part(POSTGRES)}/datasets/{part(LAKE)}")  # another namespace's


def test_a_datasets_versions_are_the_runs_that_wrote_it_latest_first(url: str) -> None:
    base = f"/namespaces/{part(S3)}/datasets/{part(LAKE)}"
    versions = get(url, f"{base}/versions")["versions"]

    assert [v["createdByRun"]["id"] for v in versions] == [RUN_B, RUN_A]
    assert [v["createdByRun"]["state"] for v in versions] == ["FAILED", "COMPLETED"]
    assert [v["createdAt"] for v in versions] == ["2024-03-12T11:02:00Z", "2024-03-12T10:05:00Z"]
    assert all(v["id"] == {"namespace": S3, "name": LAKE, "version": v["version"]} for v in versions)
    assert get(url, base)["currentVersion"] == versions[0]["version"]
    assert get(url, f"{base}/versions/{versions[1]['version']}") == versions[1]
    not_found(url, f"{base}/versions/00000000-0000-0000-0000-000000000000")


def test_a_dataset_no_run_wrote_has_one_version(url: str) -> None:
    versions = get(url, f"/namespaces/{part(POSTGRES)}/datasets/{ORDERS}/versions")["versions"]

    assert len(versions) == 1
    assert "createdByRun" not in versions[0]


# ---------------------------------------------------------------- jobs and runs


def test_a_job_has_its_datasets_and_its_latest_runs_state(url: str) -> None:
    listing = get(url, "/namespaces/airflow/jobs")

    assert listing["totalCount"] == 1
    (job,) = listing["jobs"]
    assert job["id"] == {"namespace": "airflow", "name": "shop.load"}
    assert job["type"] == "BATCH"
    assert job["inputs"] == [{"namespace": POSTGRES, "name": ORDERS}]
    assert job["outputs"] == [{"namespace": S3, "name": LAKE}]
    assert job["latestRun"]["id"] == RUN_B
    assert job["latestRun"]["state"] == "FAILED"
    assert [run["id"] for run in job["latestRuns"]] == [RUN_B, RUN_A]
    assert job["facets"] == JOB_FACETS
    assert get(url, "/namespaces/airflow/jobs/shop.load") == job


def test_a_streaming_job_says_so(url: str) -> None:
    job = get(url, "/namespaces/flink/jobs/orders_enrichment")

    assert job["type"] == "STREAMING"
    assert job["outputs"] == [{"namespace": KAFKA, "name": TOPIC}]


def test_every_job_is_listed_with_those_of_other_signals(url: str) -> None:
    listing = get(url, "/jobs")
    names = [(j["namespace"], j["name"]) for j in listing["jobs"]]

    assert listing["totalCount"] == len(names)
    assert {("airflow", "shop.load"), ("flink", "orders_enrichment")} <= set(names)
    (sql_job,) = get(url, "/namespaces/tracelake/jobs")["jobs"]
    assert sql_job["inputs"] == [{"namespace": "hive", "name": "dating.a"}]
    assert sql_job["outputs"] == [{"namespace": "hive", "name": "dating.b"}]
    assert sql_job["facets"] == {}
    assert get(url, f"/namespaces/tracelake/jobs/{part(sql_job['name'])}")["id"] == sql_job["id"]


def test_a_jobs_runs_are_listed_latest_first(url: str) -> None:
    listing = get(url, "/namespaces/airflow/jobs/shop.load/runs")

    assert listing["totalCount"] == 2
    assert [(r["id"], r["state"]) for r in listing["runs"]] == [(RUN_B, "FAILED"), (RUN_A, "COMPLETED")]
    assert [
        r["id"] for r in get(url, "/namespaces/airflow/jobs/shop.load/runs", limit=1, offset=1)["runs"]
    ] == [RUN_A]


def test_a_run_has_its_times_state_and_the_facets_its_events_sent(url: str) -> None:
    run = get(url, f"/jobs/runs/{RUN_A}")

    assert run["state"] == "COMPLETED"
    assert (run["startedAt"], run["endedAt"], run["durationMs"]) == (
        "2024-03-12T10:00:00Z",
        "2024-03-12T10:05:00Z",
        300_000,
    )
    assert run["nominalStartTime"] == "2024-03-12T09:00:00Z"
    assert run["facets"] == {**START_FACETS, **COMPLETE_FACETS}
    assert run["jobVersion"]["name"] == "shop.load"
    outputs = [v["datasetVersionId"] for v in run["outputDatasetVersions"]]
    assert [(v["namespace"], v["name"]) for v in outputs] == [(S3, LAKE)]
    assert get(url, f"/jobs/runs/{RUN_A.upper()}")["id"] == RUN_A


def test_run_and_job_facets_of_a_run(url: str) -> None:
    run_facets = get(url, f"/jobs/runs/{RUN_A}/facets", type="run")
    job_facets = get(url, f"/jobs/runs/{RUN_A}/facets", type="job")

    assert run_facets == {"runId": RUN_A, "facets": {**START_FACETS, **COMPLETE_FACETS}}
    assert job_facets == {"runId": RUN_A, "facets": JOB_FACETS}


def test_an_unknown_job_or_run_is_a_404_with_an_error(url: str) -> None:
    assert "nothing" in not_found(url, "/namespaces/airflow/jobs/nothing")
    not_found(url, "/namespaces/airflow/jobs/nothing/runs")
    not_found(url, "/jobs/runs/0190c6c1-2b3a-7000-8000-000000000999")
    not_found(url, "/jobs/runs/0190c6c1-2b3a-7000-8000-000000000999/facets?type=run")


def test_a_job_whose_datasets_stay_the_same_has_one_version(url: str) -> None:
    versions = get(url, "/namespaces/airflow/jobs/shop.load/versions")["versions"]

    assert len(versions) == 1
    assert versions[0]["createdAt"] == "2024-03-12T10:00:00Z"  # run A's START named them first
    assert versions[0]["outputs"] == [{"namespace": S3, "name": LAKE}]
    assert versions[0]["latestRun"]["id"] == RUN_B
    assert get(url, "/namespaces/airflow/jobs/shop.load")["currentVersion"] == versions[0]["version"]
    assert get(url, f"/namespaces/airflow/jobs/shop.load/versions/{versions[0]['version']}") == versions[0]


# ---------------------------------------------------------------- search, tags, events


def test_search_finds_datasets_and_jobs_by_part_of_their_name(url: str) -> None:
    found = get(url, "/search", q="ORDER")

    assert [(r["type"], r["name"]) for r in found["results"]] == [
        ("DATASET", LAKE),
        ("DATASET", TOPIC),
        ("JOB", "orders_enrichment"),
        ("DATASET", ORDERS),
    ]
    assert found["totalCount"] == 4
    by_name = {r["name"]: r for r in found["results"]}
    assert by_name[ORDERS]["nodeId"] == f"dataset:{POSTGRES}:{ORDERS}"
    assert by_name["orders_enrichment"]["nodeId"] == "job:flink:orders_enrichment"
    jobs = get(url, "/search", q="order%", filter="job")["results"]
    assert [r["name"] for r in jobs] == ["orders_enrichment"]
    assert get(url, "/search", q="order", limit=1)["totalCount"] == 1
    assert [r["name"] for r in get(url, "/search", q="shop._ublic", namespace=POSTGRES)["results"]] == [
        ORDERS
    ]


def test_tags_are_the_labels_declared(url: str) -> None:
    assert {"name": "PII"} in get(url, "/tags")["tags"]


def test_the_events_listing_gives_run_events_as_sent_latest_first(url: str) -> None:
    listing = get(url, "/events/lineage")

    assert listing["totalCount"] == len(RUN_EVENT_TIMES)  # the DatasetEvent is not a run's
    assert [e["eventTime"] for e in listing["events"]] == RUN_EVENT_TIMES[::-1]
    assert listing["events"][-1] == EVENTS[0]
    ascending = get(url, "/events/lineage", sortDirection="asc", limit=2, offset=1)
    assert [e["eventTime"] for e in ascending["events"]] == RUN_EVENT_TIMES[1:3]
    window = get(url, "/events/lineage", after="2024-03-12T10:05:00Z", before="2024-03-12T11:02:00Z")
    assert [e["eventTime"] for e in window["events"]] == [
        "2024-03-12T11:00:00Z",
        "2024-03-12T10:05:00Z",
    ]
    assert window["totalCount"] == 2
    # a page bound past 64 bits (the OpenAPI fuzzing's) is a page like any other, not a 500
    huge = get(url, "/events/lineage", limit=90415076124349817683968, offset=90415076124349817683968)
    assert huge == {"events": [], "totalCount": len(RUN_EVENT_TIMES)}


def test_an_event_array_refused_whole_leaves_no_event(url: str) -> None:
    broken = copy.deepcopy(EVENTS[0])
    del broken["job"]
    before = get(url, "/events/lineage")["totalCount"]

    response = requests.post(f"{url}/api/v1/lineage", json=[EVENTS[0], broken], timeout=30)

    assert response.status_code == 400
    assert get(url, "/events/lineage")["totalCount"] == before


# ---------------------------------------------------------------- the event store on both backends


def test_the_event_store_reads_alike_on_sqlite_and_postgres(store: LineageStore) -> None:
    for event in EVENTS:
        store.ingest(event_to_batch(json.loads(json.dumps(event))))

    events, total = stored.list_events(store, descending=False, limit=2, offset=1)
    assert total == len(RUN_EVENT_TIMES)
    assert [e["eventTime"] for e in events] == RUN_EVENT_TIMES[1:3]
    assert stored.run_facets(store, RUN_A) == {**START_FACETS, **COMPLETE_FACETS}
    assert stored.job_facets(store, "airflow", "shop.load") == JOB_FACETS
    assert stored.dataset_facets(store, asset_urn(S3, LAKE), LAKE) == {"schema": ORDERS_SCHEMA}
    assert stored.dataset_facets(store, asset_urn(POSTGRES, ORDERS), ORDERS, run_id=RUN_FLINK) == {}
    assert [r.run_id for r in stored.runs(store, process=stored.runs(store, run_id=RUN_A)[0].process)] == [
        RUN_B,
        RUN_A,
    ]


def test_a_deleted_facet_is_no_longer_the_runs(store: LineageStore) -> None:
    deleted = {"nominalTime": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "_deleted": True}}
    for event in (EVENTS[0], airflow_event("COMPLETE", "2024-03-12T10:05:00Z", RUN_A, deleted)):
        store.ingest(event_to_batch(event))

    assert stored.run_facets(store, RUN_A) == {"parent": START_FACETS["parent"]}


def test_facets_that_are_no_objects_are_none_on_reading(store: LineageStore) -> None:
    """Events are kept as received: `facets` that are no object were left out of the lineage with a
    problem, and are no facets on reading either (they failed the read routes with a 500)."""
    odd = airflow_event("COMPLETE", "2024-03-12T10:05:00Z", RUN_A, {})
    odd["run"]["facets"], odd["job"]["facets"] = "text", ["a", "list"]
    odd["outputs"][0].update(facets=5, outputFacets="text")
    store.ingest(event_to_batch(odd))

    assert stored.run_facets(store, RUN_A) == {}
    assert stored.job_facets(store, "airflow", "shop.load") == {}
    assert stored.dataset_facets(store, asset_urn(S3, LAKE), LAKE) == {}
