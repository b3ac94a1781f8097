"""The dating app's front end (`examples/dating/web.py`) under a real uvicorn server on loopback,
driven through real HTTP, its probes shipping into a real SQLite store.

The seed's table, read off the handler: "Atheist" is logged by the event logger as the record's
`value` (EXACT_MATCH, HIGH); "Buddhist" is written by the audit log inside `metadata: religion:
Buddhist` (CONTAINS, HIGH); `["Catholic", "Christian"]` reaches the preference stats log only as
`count: 2` (NO_MATCH, LOW).
"""

from __future__ import annotations

from pathlib import Path

import requests
from examples.dating import web

from tracelake.api.server import serve_in_thread
from tracelake.collect.probes import ProbeConfig, Probes, StoreShipper
from tracelake.model import Confidence
from tracelake.store import LineageStore

E = web.ENDPOINT


def test_the_seeds_table_comes_out_of_real_requests(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "lineage.db"))
    probes = Probes(StoreShipper(store), ProbeConfig(sample_rate=1.0), landings=web.LANDINGS)
    app = web.make_app(probes)
    with serve_in_thread(app) as url, requests.Session() as http:
        for body in web.SEED_REQUESTS:
            assert http.post(f"{url}/profile", json=body, timeout=10).json() == {"status": "ok"}
    assert probes.flush()
    probes.close()

    flows = {(e.source, e.target): (e.description, e.confidence) for e in probes.batch().edges}
    assert flows[(f"{E}#religion", f"{web.EVENT_LOG}#value")] == ("EXACT_MATCH", Confidence.HIGH)
    assert flows[(f"{E}#religion", f"{web.AUDIT_LOG}#message")] == ("CONTAINS", Confidence.HIGH)
    assert flows[(f"{E}#partner_religions", f"{web.STATS_LOG}#count")] == ("NO_MATCH", Confidence.LOW)
    assert flows[(f"{E}#religion", f"{web.PROFILES}#religion")] == ("EXACT_MATCH", Confidence.HIGH)
    assert flows[(f"{web.EVENT_LOG}#value", "hive.table/raw.web_profile_events#event.value")] == (
        None,
        Confidence.HIGH,
    )
    # the requests were served: three event records for religion, two for city
    assert [(r["user_id"], r["field"]) for r in app.state.events] == [
        (1001, "religion"),
        (1001, "city"),
        (1002, "religion"),
        (1002, "city"),
        (1003, "religion"),
    ]
    assert probes.stats.errors == 0
    assert probes.stats.shipped == 1
    snapshot = store.snapshot()
    assert len(snapshot.edge_source) == len(probes.batch().edges)


def test_a_service_with_probes_at_zero_percent_serves_the_same_answers(tmp_path: Path) -> None:
    probes = Probes(config=ProbeConfig(sample_rate=0.0))
    app = web.make_app(probes)
    with serve_in_thread(app) as url, requests.Session() as http:
        answers = [http.post(f"{url}/profile", json=body, timeout=10).json() for body in web.SEED_REQUESTS]
    assert answers == [{"status": "ok"}] * 3
    assert probes.stats.requests == 3
    assert probes.stats.captures == 0
    assert len(app.state.events) == 5


def test_concurrent_requests_on_the_server_never_mix_their_payloads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    probes = Probes(config=ProbeConfig(sample_rate=1.0, capture_budget_us=1e6, match_budget_ms=1e3))
    app = web.make_app(probes)
    bodies = [{"user_id": 5000 + i, "religion": f"religion-{i:03d}"} for i in range(40)]
    with serve_in_thread(app) as url, ThreadPoolExecutor(8) as pool:

        def post(body: dict[str, object]) -> int:
            with requests.Session() as http:
                return http.post(f"{url}/profile", json=body, timeout=10).status_code

        assert list(pool.map(post, bodies)) == [200] * 40
    assert probes.flush()
    probes.close()

    flows = probes.flows.handlers["profile.update"]
    assert flows.requests == 40
    # each request found its own values in its own sinks: had two requests' captures mixed,
    # a religion would have met a sink without it and left a NO_MATCH guess
    religion = f"{E}#religion"
    assert flows.matched[(religion, f"{web.EVENT_LOG}#value")].samples == 40
    assert flows.matched[(religion, f"{web.AUDIT_LOG}#message")].samples == 40
    assert flows.matched[(religion, f"{web.PROFILES}#religion")].samples == 40
    assert [key for key in flows.unmatched if key[0] == religion] == []
