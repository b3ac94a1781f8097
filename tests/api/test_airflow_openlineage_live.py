"""Airflow's own OpenLineage provider, unchanged, sending to a running Tracelake (issue 27).

A DAG of four SQL tasks on a real PostgreSQL (`airflow_openlineage_dags/shop.py`) runs with
`airflow dags test` in Airflow 2 and in Airflow 3 (each in its venv, with the OpenLineage and
Postgres providers `scripts/airflow_test_server.py` installs), the provider configured as for
Marquez but with a composite transport: HTTP to Tracelake, and a file, so the test knows exactly
what was sent. Then every dataset and job the provider sent is looked up at `/api/v1/lineage` by
its namespace and name as sent, each job with the datasets of its latest event, and the provider's
column lineage is looked up at `/api/v1/column-lineage`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from tests.temporal.airflow_support import VENVS
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

DAGS = Path(__file__).parent / "airflow_openlineage_dags"


def _airflow(major: int) -> Path:
    airflow = VENVS[major] / "bin" / "airflow"
    python = VENVS[major] / "bin" / "python"
    has_provider = (
        airflow.exists()
        and subprocess.run(
            [str(python), "-c", "import airflow.providers.openlineage, airflow.providers.postgres"],
            capture_output=True,
        ).returncode
        == 0
    )
    if not has_provider:
        install = f"scripts/airflow_test_server.py --major {major} --install-only"
        message = (
            f"no Airflow {major} with the OpenLineage and Postgres providers in {VENVS[major]} ({install})"
        )
        if os.environ.get("TRACELAKE_REQUIRE_AIRFLOW") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return airflow


@pytest.fixture
def shop_database(postgres_server: str) -> Iterator[sa.URL]:
    """An empty database for the DAG's tables."""
    name = f"shop_{os.getpid()}"
    admin = sa.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(postgres_server).set(database=name)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _run_dag(airflow: Path, home: Path, database: sa.URL, url: str, sent: Path) -> None:
    connection = f"postgres://{database.username}@{database.host}:{database.port}/{database.database}"
    transport = {
        "type": "composite",
        "transports": {
            "tracelake": {"type": "http", "url": url, "endpoint": "api/v1/lineage"},
            "file": {"type": "file", "log_file_path": str(sent), "append": True},
        },
    }
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "OPENLINEAGE"))},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_SHOP_DB": connection,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "shop_airflow",
        "PYTHONWARNINGS": "ignore",
    }
    for command in (["db", "migrate"], ["dags", "test", "shop", "2024-03-12"]):
        done = subprocess.run([str(airflow), *command], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"airflow {' '.join(command)}: {done.stderr[-3000:]}"


def _lineage(url: str, node_id: str, route: str = "lineage") -> dict[str, dict[str, Any]]:
    response = requests.get(f"{url}/api/v1/{route}", params={"nodeId": node_id, "depth": 1}, timeout=30)
    assert response.status_code == 200, f"{node_id}: {response.text}"
    return {node["id"]: node for node in response.json()["graph"]}


@pytest.mark.parametrize("major", [2, 3])
def test_the_providers_events_are_found_by_the_names_they_carry(
    major: int, shop_database: sa.URL, tmp_path: Path
) -> None:
    airflow = _airflow(major)
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    sent = tmp_path / "sent.jsonl"
    with serve_in_thread(create_app(service, ApiSettings(subscription_interval=None))) as url:
        _run_dag(airflow, tmp_path / "airflow-home", shop_database, url, sent)
        events = [json.loads(line) for line in sent.read_text().splitlines() if line.strip()]
        problems = requests.get(f"{url}/api/tracelake/v1/problems", timeout=10).json()
        assert problems == []

        tables = {d["name"] for e in events for d in [*e.get("inputs", []), *e.get("outputs", [])]}
        schema = f"{shop_database.database}.public"
        assert {f"{schema}.{t}" for t in ("customers", "orders", "order_facts", "customer_totals")} <= tables

        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for event in events:
            if event.get("inputs") or event.get("outputs"):
                latest[(event["job"]["namespace"], event["job"]["name"])] = event
        jobs = {(e["job"]["namespace"], e["job"]["name"]) for e in events}
        assert ("shop_airflow", "shop") in jobs  # the DAG's own job, which names no dataset
        for namespace, name in sorted(jobs):
            graph = _lineage(url, f"job:{namespace}:{name}")
            job = graph[f"job:{namespace}:{name}"]
            event = latest.get((namespace, name))
            if event is None:
                continue
            for key in ("inputs", "outputs"):
                expected = {(d["namespace"], d["name"]) for d in event.get(key, [])}
                assert expected <= {(d["namespace"], d["name"]) for d in job["data"][key]}, (name, key)
                for dataset in event.get(key, []):
                    around = _lineage(url, f"dataset:{dataset['namespace']}:{dataset['name']}")
                    assert f"job:{namespace}:{name}" in around

        column_lineage = [
            (output, facet)
            for event in events
            for output in event.get("outputs", [])
            if (facet := output.get("facets", {}).get("columnLineage"))
        ]
        assert column_lineage, "the provider sent no column lineage for the INSERT … SELECT"
        for output, facet in column_lineage:
            for field, lineage in facet["fields"].items():
                node_id = f"datasetField:{output['namespace']}:{output['name']}:{field}"
                graph = _lineage(url, node_id, "column-lineage")
                got = {
                    (f["namespace"], f["dataset"], f["field"]) for f in graph[node_id]["data"]["inputFields"]
                }
                expected = {(f["namespace"], f["name"], f["field"]) for f in lineage["inputFields"]}
                assert expected <= got, node_id
    service.close()
