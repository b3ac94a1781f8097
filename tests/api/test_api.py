"""The HTTP API through a real uvicorn server on loopback, over a real SQLite store holding the
dating example's query log (examples/dating).

Expected lineage is read off the log's statements (see tests/graph/test_dating_discovery.py):
safety_training_tbl is written from the temporary view over safety_log_tbl, which is written
from abuse_reports ⋈ user_profile; ads.user_segments.segment is a CASE over user_profile.religion
and country (CONDITIONAL) filtered on ds (FILTER).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

from tests.store.test_reads import write_read_log
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.auth import new_token
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dating"
API = "/api/tracelake/v1"
RUN_ID = "0190c6c1-2b3a-7000-8000-000000000001"


def run_event(job: str = "ads.export", run_id: str = RUN_ID, **overrides: Any) -> dict[str, Any]:
    """An Airflow-style COMPLETE event: ads.user_segments → a Kafka topic, segment copied."""
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": "2024-03-12T10:00:00Z",
        "run": {"runId": run_id},
        "job": {"namespace": "airflow", "name": job},
        "inputs": [{"namespace": "hive", "name": "ads.user_segments"}],
        "outputs": [
            {
                "namespace": "kafka://broker:9092",
                "name": f"{job}_topic",
                "facets": {
                    "columnLineage": {
                        "_producer": "https://example.com/producer",
                        "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
                        "fields": {
                            "segment": {
                                "inputFields": [
                                    {
                                        "namespace": "hive",
                                        "name": "ads.user_segments",
                                        "field": "segment",
                                        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                                    }
                                ]
                            }
                        },
                    }
                },
            }
        ],
        "producer": "https://example.com/producer",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    event.update(overrides)
    return event


def client_event(
    job: str,
    outputs: list[tuple[str, str]],
    inputs: Sequence[tuple[str, str]] = (),
    state: RunState = RunState.COMPLETE,
) -> RunEvent:
    """A RunEvent as the OpenLineage Python client builds it: job `airflow`/`job`, datasets as
    (namespace, name)."""
    return RunEvent(
        eventType=state,
        eventTime="2024-03-12T11:00:00+00:00",
        run=Run(runId=RUN_ID),
        job=Job(namespace="airflow", name=job),
        producer="https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python",
        inputs=[InputDataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[OutputDataset(namespace=ns, name=name) for ns, name in outputs],
    )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Tracelake]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    service.ingest_sql(EXAMPLE / "query_log.jsonl", schema_file=EXAMPLE / "schema.yaml")
    yield service
    service.close()


@pytest.fixture
def url(service: Tracelake) -> Iterator[str]:
    with serve_in_thread(create_app(service)) as base:
        yield base


def get(url: str, path: str, **params: Any) -> Any:
    response = requests.get(url + path, params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


# ---------------------------------------------------------------- OpenLineage in


def test_an_event_posted_as_to_marquez_appears_in_the_lineage(url: str) -> None:
    response = requests.post(f"{url}/api/v1/lineage", json=run_event(), timeout=10)
    assert response.status_code == 201

    view = get(
        url,
        f"{API}/lineage",
        node="kafka.topic//broker:9092/ads.export_topic#segment",
        direction="upstream",
        depth=1,
    )
    edges = {(e["source"], e["target"], e["signal"], e["transformation"]) for e in view["edges"]}
    assert edges == {
        (
            "hive.table/ads.user_segments#segment",
            "kafka.topic//broker:9092/ads.export_topic#segment",
            "openlineage",
            "IDENTITY",
        )
    }


def test_the_openlineage_python_clients_http_transport_works_unchanged(url: str) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    # configured exactly as for Marquez: the base URL and its default endpoint
    client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, endpoint="api/v1/lineage")))
    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "religion_bucket": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace="hive",
                        name="dating.user_profile",
                        field="religion",
                        transformations=[
                            column_lineage_dataset.Transformation(type="DIRECT", subtype="TRANSFORMATION")
                        ],
                    )
                ],
                transformationDescription="",
                transformationType="",
            )
        }
    )
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields("religion_bucket", "string")]
    )
    for state in (RunState.START, RunState.COMPLETE):
        client.emit(
            RunEvent(
                eventType=state,
                eventTime="2024-03-12T11:00:00+00:00",
                run=Run(runId=RUN_ID),
                job=Job(namespace="dbt", name="analytics.religion_buckets"),
                producer="https://github.com/OpenLineage/OpenLineage/tree/1.0.0/integration/dbt",
                inputs=[InputDataset(namespace="hive", name="dating.user_profile")],
                outputs=[
                    OutputDataset(
                        namespace="hive",
                        name="analytics.religion_buckets",
                        facets={"columnLineage": lineage, "schema": schema},
                    )
                ],
            )
        )

    view = get(url, f"{API}/lineage", node="dating.user_profile#religion", direction="downstream", depth=1)
    assert "hive.table/analytics.religion_buckets#religion_bucket" in {n["id"] for n in view["nodes"]}
    node = get(url, f"{API}/nodes/hive.table/analytics.religion_buckets")
    assert node["fields"] == [
        {"id": "hive.table/analytics.religion_buckets#religion_bucket", "data_type": "string", "labels": []}
    ]
    assert {e["process"] for e in node["inputs"]} == {"openlineage.job/dbt/analytics.religion_buckets"}


def test_a_tables_readers(service: Tracelake, url: str, tmp_path: Path) -> None:
    # the reads of tests/store/test_reads.py's log: alice twice, bob once, each a query of its own
    service.ingest_sql(write_read_log(tmp_path / "reads.jsonl"))

    node = get(url, f"{API}/nodes/hive.table/dating.user_profile")
    assert node["reads"] == {"runs": 3, "readers": 2}
    assert [(r["user"], r["at"], r["columns"]) for r in node["readers"]] == [
        ("alice", "2024-03-12T08:15:00+00:00", ["religion"]),
        ("bob", "2024-03-11T14:30:00+00:00", ["user_id"]),
        ("alice", "2024-03-10T09:00:00+00:00", ["country", "religion", "user_id"]),
    ]
    assert node["readers"][1].keys() == {"user", "process", "run_id", "at", "signal", "columns"}

    since = get(url, f"{API}/readers", node="dating.user_profile", since="2024-03-11T00:00:00Z", limit=1)
    assert (since["asset"], since["runs"], since["readers"]) == ("hive.table/dating.user_profile", 2, 2)
    assert [r["user"] for r in since["reads"]] == ["alice"]
    reports = get(url, f"{API}/readers", node="dating.abuse_reports")
    assert [(r["user"], r["columns"], r["signal"]) for r in reports["reads"]] == [
        ("bob", ["reported_user_id"], "sql_static")
    ]
    assert get(url, f"{API}/readers", node="dating.safety_log_tbl") == {
        "asset": "hive.table/dating.safety_log_tbl",
        "runs": 0,
        "readers": 0,
        "reads": [],
    }
    assert requests.get(f"{url}{API}/readers", params={"node": "dating.nope"}, timeout=10).status_code == 404

    hot = {e["asset"]: (e["reading_runs"], e["readers"]) for e in get(url, f"{API}/hot", limit=100)}
    assert hot["hive.table/dating.user_profile"] == (3, 2)
    assert hot["hive.table/dating.safety_log_tbl"] == (0, 0)


def test_kinds_lists_the_asset_kinds_the_kind_filter_takes(url: str) -> None:
    assert get(url, f"{API}/kinds") == {"asset_kinds": ["hive.table"]}  # the query log's tables only
    requests.post(f"{url}/api/v1/lineage", json=run_event(), timeout=10).raise_for_status()
    assert get(url, f"{API}/kinds") == {"asset_kinds": ["hive.table", "kafka.topic"]}

    downstream = {"node": "ads.user_segments", "direction": "downstream"}
    every_kind = get(url, f"{API}/lineage", **downstream)
    tables_only = get(url, f"{API}/lineage", **downstream, kind="hive.table")
    assert "kafka.topic//broker:9092/ads.export_topic" in {n["id"] for n in every_kind["nodes"]}
    assert "kafka.topic//broker:9092/ads.export_topic" not in {n["id"] for n in tables_only["nodes"]}


def test_a_malformed_event_is_a_400_naming_the_json_path_and_is_recorded(url: str) -> None:
    event = run_event()
    del event["job"]["name"]
    response = requests.post(f"{url}/api/v1/lineage", json=event, timeout=10)

    assert response.status_code == 400
    assert response.json()["path"] == "$.job.name"
    problems = get(url, f"{API}/problems")
    assert {"source": "openlineage", "location": "$.job.name"}.items() <= problems[0].items()


def test_a_body_that_is_not_json_is_a_400(url: str) -> None:
    response = requests.post(f"{url}/api/v1/lineage", data=b"{not json", timeout=10)
    assert response.status_code == 400
    assert response.json()["path"] == "$"


def test_an_array_of_events_is_all_or_nothing(url: str) -> None:
    good, bad = run_event("job.one"), run_event("job.two", eventTime="yesterday")
    response = requests.post(f"{url}/api/v1/lineage", json=[good, bad], timeout=10)
    assert response.status_code == 400
    assert response.json()["path"] == "$[1].eventTime"
    assert get(url, f"{API}/search", q="job.one") == []

    assert requests.post(f"{url}/api/v1/lineage", json=[good], timeout=10).status_code == 201
    assert [n["id"] for n in get(url, f"{API}/search", q="job.one_topic", node_type="asset")] == [
        "kafka.topic//broker:9092/job.one_topic"
    ]


def test_concurrent_events_all_land_sharing_transactions(service: Tracelake, tmp_path: Path) -> None:
    app = create_app(service)
    events = [run_event(f"job.{i}", run_id=f"0190c6c1-2b3a-7000-8000-{i:012d}") for i in range(200)]
    with serve_in_thread(app) as base, ThreadPoolExecutor(8) as pool:

        def post(event: dict[str, Any]) -> int:
            with requests.Session() as http:
                return http.post(f"{base}/api/v1/lineage", json=event, timeout=30).status_code

        codes = list(pool.map(post, events))
    assert codes == [201] * 200
    processes = {urn for urn in service.store.find_urns("", node_type="process", limit=10_000)}
    assert {f"openlineage.job/airflow/job.{i}" for i in range(200)} <= processes
    assert service.writer_stats.groups <= 200


def test_a_body_over_the_limit_is_refused(service: Tracelake) -> None:
    with serve_in_thread(create_app(service, ApiSettings(max_body_bytes=10_000))) as base:
        response = requests.post(f"{base}/api/v1/lineage", data=b" " * 20_000, timeout=10)
    assert response.status_code == 413


# ---------------------------------------------------------------- Marquez-shaped lineage out


def test_marquez_lineage_alternates_datasets_and_jobs(url: str) -> None:
    requests.post(f"{url}/api/v1/lineage", json=run_event(), timeout=10).raise_for_status()

    graph = get(url, "/api/v1/lineage", nodeId="dataset:kafka://broker:9092:ads.export_topic", depth=2)[
        "graph"
    ]
    by_id = {node["id"]: node for node in graph}
    topic, job = by_id["dataset:kafka://broker:9092:ads.export_topic"], by_id["job:airflow:ads.export"]
    assert topic["type"] == "DATASET"
    assert topic["inEdges"] == [
        {"origin": "job:airflow:ads.export", "destination": "dataset:kafka://broker:9092:ads.export_topic"}
    ]
    assert job["data"]["inputs"] == [{"namespace": "hive", "name": "ads.user_segments"}]
    assert job["data"]["outputs"] == [{"namespace": "kafka://broker:9092", "name": "ads.export_topic"}]
    # two jobs away upstream: the SQL job that writes ads.user_segments
    assert by_id["dataset:hive:ads.user_segments"]["inEdges"] == [
        {"origin": "job:tracelake:sql.job/ads.segments", "destination": "dataset:hive:ads.user_segments"}
    ]


def test_a_job_named_with_a_hash_keeps_its_name_in_marquez_ids(url: str) -> None:
    requests.post(f"{url}/api/v1/lineage", json=run_event("export#2"), timeout=10).raise_for_status()

    graph = get(url, "/api/v1/lineage", nodeId="job:airflow:export#2", depth=1)["graph"]
    # the job's datasets, and one job beyond them: the SQL job that writes ads.user_segments
    assert {node["id"] for node in graph} == {
        "job:airflow:export#2",
        "dataset:hive:ads.user_segments",
        "dataset:kafka://broker:9092:export#2_topic",
        "job:tracelake:sql.job/ads.segments",
        "dataset:hive:dating.user_profile",
    }


def test_marquez_column_lineage_lists_each_fields_inputs(url: str) -> None:
    graph = get(url, "/api/v1/column-lineage", nodeId="datasetField:hive:ads.user_segments:segment", depth=1)
    segment = next(n for n in graph["graph"] if n["id"] == "datasetField:hive:ads.user_segments:segment")
    inputs = {
        (f["dataset"], f["field"], f["transformations"][0]["subtype"]) for f in segment["data"]["inputFields"]
    }
    assert inputs == {
        ("dating.user_profile", "religion", "CONDITIONAL"),
        ("dating.user_profile", "country", "CONDITIONAL"),
        ("dating.user_profile", "ds", "FILTER"),
    }


def test_a_body_nested_a_thousand_arrays_deep_is_a_400(url: str) -> None:
    for body in (b"[" * 1000 + b"]" * 1000, b"[" * 100_000 + b"]" * 100_000):
        response = requests.post(f"{url}/api/v1/lineage", data=body, timeout=10)
        assert response.status_code == 400, response.text
        assert "nests deeper than" in response.json()["error"]
    deep_facet = run_event()
    deep_facet["run"]["facets"] = {"custom": {"x": [[[[[]]]]] * 1}}
    for _ in range(200):
        deep_facet["run"]["facets"] = {"custom": deep_facet["run"]["facets"]}
    response = requests.post(f"{url}/api/v1/lineage", json=deep_facet, timeout=10)
    assert response.status_code == 400
    assert response.json()["path"].startswith("$.run.facets.custom")


def test_what_marquez_accepts_is_accepted_and_the_bad_part_recorded(url: str) -> None:
    event = run_event("lenient.job", run_id="not-a-uuid")
    del event["schemaURL"]
    event["job"]["facets"] = {"ownership": {"owners": [{"type": "team"}, {"name": "ads"}]}}
    response = requests.post(f"{url}/api/v1/lineage", json=event, timeout=10)

    assert response.status_code == 201, response.text
    locations = {p["location"] for p in get(url, f"{API}/problems")}
    assert {"$.schemaURL", "$.run.runId", "$.job.facets.ownership.owners[0].name"} <= locations
    graph = get(url, "/api/v1/lineage", nodeId="job:airflow:lenient.job", depth=1)["graph"]
    job = next(node for node in graph if node["id"] == "job:airflow:lenient.job")
    assert job["data"]["outputs"] == [{"namespace": "kafka://broker:9092", "name": "lenient.job_topic"}]


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [
        ([], [{"namespace": "s3://lake", "name": "only/written"}]),
        ([{"namespace": "s3://lake", "name": "only/read"}], []),
        ([], []),
        ([{"namespace": "s3://lake", "name": "same"}], [{"namespace": "s3://lake", "name": "same"}]),
    ],
    ids=["outputs only", "inputs only", "no datasets", "reads what it writes"],
)
def test_a_job_is_found_whatever_datasets_it_names(
    url: str, inputs: list[dict[str, str]], outputs: list[dict[str, str]]
) -> None:
    event = run_event("odd.job", inputs=inputs, outputs=outputs)
    assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=10).status_code == 201

    graph = {node["id"]: node for node in get(url, "/api/v1/lineage", nodeId="job:airflow:odd.job")["graph"]}
    job = graph["job:airflow:odd.job"]
    assert job["data"]["inputs"] == inputs and job["data"]["outputs"] == outputs
    as_a_job = get(url, "/api/v1/namespaces/airflow/jobs/odd.job")
    assert (as_a_job["inputs"], as_a_job["outputs"]) == (inputs, outputs)
    for dataset in [*inputs, *outputs]:
        dataset_id = f"dataset:{dataset['namespace']}:{dataset['name']}"
        assert dataset_id in graph
        around = get(url, "/api/v1/lineage", nodeId=dataset_id)["graph"]
        assert "job:airflow:odd.job" in {node["id"] for node in around}


def test_a_streaming_job_is_streaming_in_marquez_shapes(url: str) -> None:
    event = run_event("stream.job")
    event["job"]["facets"] = {
        "jobType": {"processingType": "streaming", "integration": "FLINK", "jobType": "JOB"}
    }
    assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=10).status_code == 201

    graph = get(url, "/api/v1/lineage", nodeId="job:airflow:stream.job", depth=1)["graph"]
    by_id = {node["id"]: node for node in graph}
    assert by_id["job:airflow:stream.job"]["data"]["type"] == "STREAMING"
    assert by_id["dataset:kafka://broker:9092:stream.job_topic"]["data"]["type"] == "STREAM"
    assert by_id["dataset:hive:ads.user_segments"]["data"]["type"] == "DB_TABLE"
    assert get(url, "/api/v1/namespaces/airflow/jobs/stream.job")["type"] == "STREAMING"


def test_one_input_field_with_two_transformations_is_one_input(url: str) -> None:
    event = run_event()
    lineage = event["outputs"][0]["facets"]["columnLineage"]["fields"]["segment"]["inputFields"][0]
    lineage["transformations"] = [
        {"type": "DIRECT", "subtype": "IDENTITY"},
        {"type": "INDIRECT", "subtype": "FILTER"},
    ]
    assert requests.post(f"{url}/api/v1/lineage", json=event, timeout=10).status_code == 201

    node_id = "datasetField:kafka://broker:9092:ads.export_topic:segment"
    graph = get(url, "/api/v1/column-lineage", nodeId=node_id, depth=1)["graph"]
    segment = next(n for n in graph if n["id"] == node_id)
    [source] = segment["data"]["inputFields"]
    assert (source["namespace"], source["dataset"], source["field"]) == (
        "hive",
        "ads.user_segments",
        "segment",
    )
    assert sorted((t["type"], t["subtype"]) for t in source["transformations"]) == [
        ("DIRECT", "IDENTITY"),
        ("INDIRECT", "FILTER"),
    ]
    assert segment["inEdges"] == [
        {"origin": "datasetField:hive:ads.user_segments:segment", "destination": node_id}
    ]


def test_an_unknown_marquez_node_is_a_404(url: str) -> None:
    response = requests.get(f"{url}/api/v1/lineage", params={"nodeId": "dataset:hive:no.such"}, timeout=10)
    assert response.status_code == 404


# ---------------------------------------------------------------- Tracelake's own API


def test_lineage_of_many_starts_with_filters(url: str) -> None:
    body = {
        "node": ["dating.safety_training_tbl#target_religion", "ads.user_segments#segment"],
        "direction": "upstream",
        "depth": 1,
        "transformation": ["CONDITIONAL"],
    }
    response = requests.post(f"{url}{API}/lineage", json=body, timeout=10)
    assert response.status_code == 200
    sources = {(e["source"], e["target"]) for e in response.json()["edges"]}
    # only the CASE feeds ads.user_segments.segment; target_religion is a plain copy, no CONDITIONAL
    assert sources == {
        ("hive.table/dating.user_profile#religion", "hive.table/ads.user_segments#segment"),
        ("hive.table/dating.user_profile#country", "hive.table/ads.user_segments#segment"),
    }


def test_impact_lists_downstream_assets_nearest_first(url: str) -> None:
    impact = get(url, f"{API}/impact", node="dating.safety_log_tbl")
    assert [(i["id"], i["distance"]) for i in impact][:2] == [
        ("hive.table/dating.safety_training_tbl", 1),
        ("hive.table/dating.user_blocklist", 1),
    ]


def test_paths_between_two_fields(url: str) -> None:
    found = get(
        url,
        f"{API}/paths",
        source="dating.user_profile#religion",
        target="dating.safety_training_tbl#target_religion",
    )
    assert [[e["target"] for e in path] for path in found] == [
        ["hive.table/dating.safety_log_tbl#religion", "hive.table/dating.safety_training_tbl#target_religion"]
    ]


def test_an_unknown_node_is_a_404_with_near_matches(url: str) -> None:
    response = requests.get(f"{url}{API}/lineage", params={"node": "dating.safety_trainin_tbl"}, timeout=10)
    assert response.status_code == 404
    assert "hive.table/dating.safety_training_tbl" in response.json()["candidates"]


def test_a_bad_filter_is_a_422_naming_the_parameter(url: str) -> None:
    response = requests.get(
        f"{url}{API}/lineage", params={"node": "dating.matches", "min_confidence": "SURE"}, timeout=10
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "min_confidence"]


def test_the_openapi_spec_lists_both_apis(url: str) -> None:
    spec = get(url, "/openapi.json")
    assert {"/api/v1/lineage", "/api/v1/column-lineage", f"{API}/lineage", f"{API}/batches"} <= set(
        spec["paths"]
    )


# ---------------------------------------------------------------- batches and probes over HTTP


def test_privacy_probes_ship_over_http(url: str) -> None:
    from tracelake.collect.probes import HttpShipper, ProbeConfig, Probes

    probes = Probes(HttpShipper(url), ProbeConfig(sample_rate=1.0))
    with probes.request("profile.update"):
        probes.source("web.endpoint/profile.update", {"religion": "Atheist"})
        probes.sink("web.logger/audit", {"line": "religion=Atheist"})
    assert probes.flush()
    probes.close()
    assert probes.stats.shipped == 1

    view = get(url, f"{API}/lineage", node="web.endpoint/profile.update#religion", direction="downstream")
    assert [(e["target"], e["signal"], e["confidence"]) for e in view["edges"]] == [
        ("web.logger/audit#line", "probe", "HIGH")
    ]


def test_a_malformed_batch_is_refused_whole(url: str) -> None:
    batch = {"edges": [{"source": "a.b/c", "target": "not a urn", "process": "p.q/r", "signal": "manual"}]}
    response = requests.post(f"{url}{API}/batches", json=batch, timeout=10)
    assert response.status_code == 400
    assert response.json()["path"] == "$.edges[0].target"
    assert get(url, f"{API}/search", q="a.b/c") == []


# ---------------------------------------------------------------- tokens


@pytest.fixture
def secured(service: Tracelake, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    tokens = tmp_path / "tokens.yml"
    reader = new_token("ui", ["read"], tokens)
    writer = new_token("airflow", ["write"], tokens)
    with serve_in_thread(create_app(service, ApiSettings(token_file=tokens))) as base:
        yield base, reader, writer


def test_the_token_file_keeps_digests_only(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yml"
    token = new_token("ui", ["read"], tokens)
    assert token not in tokens.read_text()
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"


def test_with_a_token_file_every_route_needs_a_token_of_its_scope(secured: tuple[str, str, str]) -> None:
    base, reader, writer = secured
    query = f"{base}{API}/lineage?node=dating.matches"

    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    assert requests.get(query, timeout=10).status_code == 401
    assert requests.get(query, headers=bearer("tl_wrong"), timeout=10).status_code == 401
    assert requests.get(query, headers=bearer(writer), timeout=10).status_code == 403
    assert requests.get(query, headers=bearer(reader), timeout=10).status_code == 200

    post = f"{base}/api/v1/lineage"
    assert requests.post(post, json=run_event(), timeout=10).status_code == 401
    assert requests.post(post, json=run_event(), headers=bearer(reader), timeout=10).status_code == 403
    assert requests.post(post, json=run_event(), headers=bearer(writer), timeout=10).status_code == 201


def test_the_openlineage_clients_api_key_is_the_bearer_token(secured: tuple[str, str, str]) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport

    base, reader, writer = secured

    def emit(token: str) -> None:
        auth = ApiKeyTokenProvider({"apiKey": token})
        config = HttpConfig(url=base, endpoint="api/v1/lineage", auth=auth, retry={"total": 0})
        OpenLineageClient(transport=HttpTransport(config)).emit(
            client_event("keyed", [("s3://lake", "keyed/out")])
        )

    with pytest.raises(Exception, match="403"):
        emit(reader)  # a read token may not write
    emit(writer)
    response = requests.get(
        f"{base}/api/v1/lineage",
        params={"nodeId": "job:airflow:keyed"},
        headers={"Authorization": f"Bearer {reader}"},
        timeout=10,
    )
    assert response.status_code == 200
    assert "dataset:s3://lake:keyed/out" in {node["id"] for node in response.json()["graph"]}


def test_the_openlineage_client_configured_by_environment_alone(
    secured: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from openlineage.client import OpenLineageClient

    base, reader, writer = secured
    monkeypatch.delenv("OPENLINEAGE_CONFIG", raising=False)
    monkeypatch.setenv("OPENLINEAGE_URL", base)
    monkeypatch.setenv("OPENLINEAGE_API_KEY", writer)
    OpenLineageClient().emit(client_event("by_env", [("s3://lake", "env/out")]))
    response = requests.get(
        f"{base}/api/v1/lineage",
        params={"nodeId": "job:airflow:by_env"},
        headers={"Authorization": f"Bearer {reader}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
