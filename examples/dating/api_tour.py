"""A tour of the HTTP API on the dating store: a producer configured for Marquez sends an
OpenLineage event, a subscriber is told that the downstream closure of ads.user_segments changed,
and a Marquez-shaped lineage query sees the new job.

    python examples/dating/api_tour.py [--db URL]

It serves the API on loopback in this process (as `tracelake serve` would) and talks to it over
real HTTP with the openlineage-python client and `requests`.
"""

from __future__ import annotations

import argparse
import time

import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport

from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

API = "/api/tracelake/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="store URL or SQLite path (default: $TRACELAKE_DB)")
    args = parser.parse_args()
    service = Tracelake(LineageStore(args.db))
    with serve_in_thread(create_app(service, ApiSettings(subscription_interval=0.1))) as url:
        made = requests.post(
            f"{url}{API}/subscriptions",
            json={"node": "ads.user_segments", "direction": "downstream"},
            timeout=10,
        ).json()
        print(
            f"subscribed to the downstream closure of {made['node']} ({made['closure_size']['nodes']} nodes)"
        )

        client = OpenLineageClient(transport=HttpTransport(HttpConfig(url=url, endpoint="api/v1/lineage")))
        client.emit(
            RunEvent(
                eventType=RunState.COMPLETE,
                eventTime="2024-03-12T10:00:00+00:00",
                run=Run(runId="0190c6c1-2b3a-7000-8000-000000000001"),
                job=Job(namespace="airflow", name="ads.export_segments"),
                producer="https://github.com/apache/airflow/tree/providers-openlineage",
                inputs=[InputDataset(namespace="hive", name="ads.user_segments")],
                outputs=[OutputDataset(namespace="kafka://broker:9092", name="ads_segments")],
            )
        )
        print("an Airflow-style COMPLETE event: ads.user_segments → kafka topic ads_segments")

        events: list[dict[str, object]] = []
        deadline = time.monotonic() + 10
        while not events and time.monotonic() < deadline:
            time.sleep(0.1)
            events = requests.get(f"{url}{API}/subscriptions/{made['id']}/events", timeout=10).json()
        for event in events:
            print(f"subscription event {event['seq']}: added {event['added_nodes']}")

        graph = requests.get(
            f"{url}/api/v1/lineage",
            params={"nodeId": "dataset:kafka://broker:9092:ads_segments", "depth": 1},
            timeout=10,
        ).json()["graph"]
        print("Marquez-shaped lineage of dataset:kafka://broker:9092:ads_segments at depth 1:")
        for node in graph:
            edges = [e["origin"] for e in node["inEdges"]]
            print(f"  {node['type']:<8} {node['id']}  ← {', '.join(edges) or '-'}")
    service.close()


if __name__ == "__main__":
    main()
