"""Compressed request bodies over a real server: the OpenLineage client's own gzip transport, deflate,
a gzip bomb that must stop at the limit without the server holding it, and bodies that claim an
encoding they are not in."""

from __future__ import annotations

import gzip
import json
import resource
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.api.test_api import client_event, run_event
from tracelake.api.app import ApiSettings, create_app
from tracelake.api.server import serve_in_thread
from tracelake.app.service import Tracelake
from tracelake.store import LineageStore

LIMIT = 1024 * 1024  # the server's body limit in these tests: 1 MiB, as sent and as decoded


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    service = Tracelake(LineageStore(str(tmp_path / "lineage.db")))
    settings = ApiSettings(max_body_bytes=LIMIT, subscription_interval=None)
    with serve_in_thread(create_app(service, settings)) as base:
        yield base
    service.close()


def _found(url: str, job: str) -> bool:
    response = requests.get(f"{url}/api/v1/lineage", params={"nodeId": f"job:airflow:{job}"}, timeout=10)
    return response.status_code == 200


def test_the_openlineage_clients_gzip_transport_is_understood(url: str) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.http import HttpCompression, HttpConfig, HttpTransport

    config = HttpConfig(url=url, endpoint="api/v1/lineage", compression=HttpCompression.GZIP)
    client = OpenLineageClient(transport=HttpTransport(config))
    client.emit(client_event("gzipped", [("s3://lake", "gzipped/out")]))
    graph = requests.get(f"{url}/api/v1/lineage", params={"nodeId": "job:airflow:gzipped"}, timeout=10).json()
    job = next(node for node in graph["graph"] if node["id"] == "job:airflow:gzipped")
    assert job["data"]["outputs"] == [{"namespace": "s3://lake", "name": "gzipped/out"}]


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("GZIP", gzip.compress)],
)
def test_gzip_and_deflate_bodies_are_decoded_on_every_ingest_route(
    url: str, encoding: str, compress: object
) -> None:
    assert callable(compress)
    body = compress(json.dumps(run_event(f"job.{encoding}")).encode())
    response = requests.post(
        f"{url}/api/v1/lineage", data=body, headers={"Content-Encoding": encoding}, timeout=10
    )
    assert response.status_code == 201, response.text
    assert _found(url, f"job.{encoding}")

    batch = {"assets": [{"urn": f"hive.table/d.{encoding.lower()}_batch"}]}
    response = requests.post(
        f"{url}/api/tracelake/v1/batches",
        data=compress(json.dumps(batch).encode()),
        headers={"Content-Encoding": encoding, "Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 201, response.text


def test_a_gzip_bomb_is_a_413_and_the_server_never_holds_it(url: str) -> None:
    # 512 MiB of zeros, about 0.5 MiB compressed: under the limit as sent, 512 times over it decoded
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    bomb = b"".join(compressor.compress(block) for _ in range(512)) + compressor.flush()
    assert len(bomb) < LIMIT
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux; the server runs here

    response = requests.post(
        f"{url}/api/v1/lineage", data=bomb, headers={"Content-Encoding": "gzip"}, timeout=60
    )

    assert response.status_code == 413
    assert "decoded is over the limit" in response.json()["error"]
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, f"the server grew by {grown_mib:.0f} MiB on a bomb it refused"


def test_a_body_that_claims_gzip_and_is_not_is_a_400_and_the_next_one_lands(url: str) -> None:
    plain = json.dumps(run_event("job.plain")).encode()
    response = requests.post(
        f"{url}/api/v1/lineage", data=plain, headers={"Content-Encoding": "gzip"}, timeout=10
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("the body is not valid gzip")

    cut = gzip.compress(plain)[:-12]  # the stream ends before its end
    response = requests.post(
        f"{url}/api/v1/lineage", data=cut, headers={"Content-Encoding": "gzip"}, timeout=10
    )
    assert response.status_code == 400
    assert "ends before its compressed stream does" in response.json()["error"]

    response = requests.post(f"{url}/api/v1/lineage", data=plain, timeout=10)
    assert response.status_code == 201
    assert _found(url, "job.plain")


def test_an_encoding_that_is_not_known_is_a_415(url: str) -> None:
    response = requests.post(
        f"{url}/api/v1/lineage", data=b"...", headers={"Content-Encoding": "br"}, timeout=10
    )
    assert response.status_code == 415
    assert response.json() == {"error": "Content-Encoding 'br' is not gzip or deflate", "path": "$"}
