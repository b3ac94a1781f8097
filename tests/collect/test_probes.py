"""Privacy probes at run time: request scopes, sampling, budgets, concurrency, failure isolation,
shipping into a real SQLite store, and what the store keeps of the values (fingerprints only)."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tracelake.collect.probe_flows import Landing
from tracelake.collect.probes import ProbeConfig, Probes, StoreShipper
from tracelake.model import Confidence, LineageBatch, Transformation
from tracelake.store import LineageStore

ENDPOINT = "web.endpoint/profile.update"
# Every request sampled; budgets so large no request meets them: the budgets have tests of their
# own, and a busy machine (CI) once stretched a capture past the default 500 µs here.
ALWAYS = ProbeConfig(sample_rate=1.0, capture_budget_us=1e6, match_budget_ms=1e3)


def edges(batch: LineageBatch) -> set[tuple[str, str, Confidence, Transformation | None, str | None]]:
    return {(e.source, e.target, e.confidence, e.transformation, e.description) for e in batch.edges}


def run_seed(probes: Probes) -> None:
    """The seed's three examples, one request each, to three loggers."""
    with probes.request("profile.update"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        probes.sink("web.logger/copy", {"religion": "Atheist"})
    with probes.request("profile.update"):
        probes.source(ENDPOINT, {"religion": "Buddhist"})
        probes.sink("web.logger/meta", "metadata: religion: Buddhist")
    with probes.request("profile.update"):
        probes.source(ENDPOINT, {"religions": ["Catholic", "Christian"]})
        probes.sink("web.logger/count", {"count": 2})
    assert probes.flush()


def test_the_seeds_three_flows_come_out_as_match_set_and_full_set() -> None:
    probes = Probes(config=ALWAYS)
    run_seed(probes)

    h = Confidence.HIGH
    assert edges(probes.batch()) == {
        (ENDPOINT, "web.logger/copy", h, None, None),
        (ENDPOINT, "web.logger/meta", h, None, None),
        (ENDPOINT, "web.logger/count", Confidence.LOW, None, None),
        (f"{ENDPOINT}#religion", "web.logger/copy#religion", h, Transformation.IDENTITY, "EXACT_MATCH"),
        (f"{ENDPOINT}#religion", "web.logger/meta#value", h, Transformation.TRANSFORMATION, "CONTAINS"),
        (
            f"{ENDPOINT}#religions",
            "web.logger/count#count",
            Confidence.LOW,
            Transformation.TRANSFORMATION,
            "NO_MATCH",
        ),
    }
    assert {p.urn for p in probes.batch().processes} == {"web.handler/profile.update"}


def test_a_field_found_whole_in_a_sink_gets_no_guesses_about_the_sinks_other_fields() -> None:
    probes = Probes(config=ALWAYS)
    with probes.request("h"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        probes.sink("web.logger/x", {"user": "someone", "ts": "2024-03-10"})  # not here: LOW to both
    with probes.request("h"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        probes.sink("web.logger/x", {"user": "someone", "value": "Atheist"})
    probes.flush()

    into_x = {(t, c) for s, t, c, _, _ in edges(probes.batch()) if s == f"{ENDPOINT}#religion"}
    assert into_x == {("web.logger/x#value", Confidence.HIGH)}


def test_a_logger_landing_in_a_table_links_its_fields_to_the_tables_columns() -> None:
    landing = Landing("hive.table/raw.web_profile_events", column="event")
    probes = Probes(config=ALWAYS, landings={"web.logger/events": landing})
    with probes.request("h"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        probes.sink("web.logger/events", {"field": "religion", "value": "Atheist"})
    probes.flush()

    delivery = [e for e in probes.batch().edges if e.process == "web.delivery/events"]
    assert {(e.source, e.target) for e in delivery} == {
        ("web.logger/events", "hive.table/raw.web_profile_events"),
        ("web.logger/events#field", "hive.table/raw.web_profile_events#event.field"),
        ("web.logger/events#value", "hive.table/raw.web_profile_events#event.value"),
    }


# ---------------------------------------------------------------- sampling and budgets


def test_an_unsampled_request_captures_nothing() -> None:
    probes = Probes(config=ProbeConfig(sample_rate=0.0))
    run_seed(probes)
    assert probes.stats.requests == 3
    assert probes.stats.sampled == 0
    assert probes.stats.captures == 0
    assert probes.batch().edges == []


def test_about_one_request_in_a_hundred_is_sampled_at_one_percent() -> None:
    probes = Probes(config=ProbeConfig(sample_rate=0.01), sampler=random.Random(7).random)
    for i in range(10_000):
        with probes.request("h"):
            probes.source(ENDPOINT, {"v": f"value-{i}"})
    # binomial(10,000, 0.01): mean 100, standard deviation ~10
    assert 60 <= probes.stats.sampled <= 140
    assert probes.stats.captures == probes.stats.sampled


def test_a_request_stops_capturing_when_its_time_budget_is_spent() -> None:
    probes = Probes(config=ProbeConfig(sample_rate=1.0, capture_budget_us=0.001))
    with probes.request("h"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        probes.sink("web.logger/x", {"religion": "Atheist"})
    assert probes.stats.captures == 1
    assert probes.stats.over_budget == 1
    probes.flush()
    assert probes.batch().edges == []  # a source without sinks says nothing


def test_matching_past_its_budget_is_counted() -> None:
    probes = Probes(config=ProbeConfig(sample_rate=1.0, match_budget_ms=0.0))
    with probes.request("h"):
        probes.source(ENDPOINT, {f"f{i}": f"value-{i}" for i in range(50)})
        probes.sink("web.logger/x", {"v": "value-3"})
    probes.flush()
    assert probes.stats.cut_short == 1


def test_sampled_requests_beyond_the_queue_bound_are_dropped_and_counted() -> None:
    probes = Probes(config=ProbeConfig(sample_rate=1.0, max_pending=0))
    run_seed(probes)
    assert probes.stats.dropped == 3


# ---------------------------------------------------------------- concurrency


def test_concurrent_asyncio_requests_never_see_each_others_payloads() -> None:
    probes = Probes(config=ALWAYS)

    async def handle(name: str, value: str) -> None:
        with probes.request(name):
            probes.source(ENDPOINT, {"religion": value})
            await asyncio.sleep(0.01)  # the other request runs here
            await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0.005))
            probes.sink(f"web.logger/{name}", {"religion": value})

    async def both() -> None:
        await asyncio.gather(*(handle(f"h{i}", f"value-{i}") for i in range(20)))

    asyncio.run(both())
    probes.flush()
    for i in range(20):
        flows = probes.flows.handlers[f"h{i}"]
        assert flows.requests == 1
        assert flows.pairs == {(ENDPOINT, f"web.logger/h{i}")}
        assert list(flows.matched) == [(f"{ENDPOINT}#religion", f"web.logger/h{i}#religion")]


def test_a_task_started_inside_a_request_reports_to_that_request() -> None:
    probes = Probes(config=ALWAYS)

    async def write(value: str) -> None:
        await asyncio.sleep(0)
        probes.sink("web.logger/task", {"religion": value})

    async def handle() -> None:
        with probes.request("h"):
            probes.source(ENDPOINT, {"religion": "Atheist"})
            await asyncio.create_task(write("Atheist"))

    asyncio.run(handle())
    probes.flush()
    assert list(probes.flows.handlers["h"].matched) == [(f"{ENDPOINT}#religion", "web.logger/task#religion")]


def test_concurrent_threads_never_mix_their_requests() -> None:
    # budgets are wall-clock time, which eight threads sharing two cores stretch: not tested here
    probes = Probes(config=ALWAYS)
    barrier = threading.Barrier(8)

    def serve(thread: int) -> None:
        barrier.wait()
        for i in range(200):
            with probes.request(f"t{thread}"):
                probes.source(ENDPOINT, {"religion": f"value-{thread}-{i}"})
                probes.sink(f"web.logger/t{thread}", {"religion": f"value-{thread}-{i}"})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(serve, range(8)))
    probes.flush()
    for thread in range(8):
        flows = probes.flows.handlers[f"t{thread}"]
        assert flows.requests == 200
        assert flows.pairs == {(ENDPOINT, f"web.logger/t{thread}")}
        assert flows.matched[(f"{ENDPOINT}#religion", f"web.logger/t{thread}#religion")].samples == 200
        assert flows.unmatched == {}
    assert probes.stats.over_budget == probes.stats.cut_short == 0


def test_a_nested_scope_joins_the_request_already_open() -> None:
    probes = Probes(config=ALWAYS)
    with probes.request("outer"):
        probes.source(ENDPOINT, {"religion": "Atheist"})
        with probes.request("inner"):
            probes.sink("web.logger/x", {"religion": "Atheist"})
    probes.flush()
    assert list(probes.flows.handlers) == ["outer"]
    assert probes.stats.requests == 1


# ---------------------------------------------------------------- decorators and the log handler


def test_decorated_sync_and_async_handlers_open_a_scope_with_their_body_as_source() -> None:
    probes = Probes(config=ALWAYS)

    @probes.sink_call("sqlite.table/profiles", arg="row")
    def save(row: dict[str, Any]) -> str:
        return "saved"

    @probes.endpoint(ENDPOINT, body="update")
    def update(update: dict[str, Any], user: str = "") -> str:
        return save({"religion": update["religion"], "by": user})

    @probes.endpoint("web.endpoint/profile.async")
    async def update_async(religion: str) -> str:
        return save({"religion": religion})

    assert update({"religion": "Atheist"}, user="admin") == "saved"
    assert asyncio.run(update_async("Buddhist")) == "saved"
    probes.flush()
    assert list(probes.flows.handlers["profile.update"].matched) == [
        (f"{ENDPOINT}#religion", "sqlite.table/profiles#religion")
    ]
    assert list(probes.flows.handlers["profile.async"].matched) == [
        ("web.endpoint/profile.async#religion", "sqlite.table/profiles#religion")
    ]


def test_a_logger_with_the_probe_handler_is_a_sink_of_its_message_and_extra_fields() -> None:
    probes = Probes(config=ALWAYS)
    logger = logging.getLogger("tests.probes.audit")
    logger.setLevel(logging.INFO)
    logger.addHandler(probes.log_handler("web.logger/audit"))
    try:
        with probes.request("h"):
            probes.source(ENDPOINT, {"religion": "Buddhist", "user_id": 12345})
            logger.info("metadata: religion: %s", "Buddhist", extra={"uid": 12345})
    finally:
        logger.handlers.clear()
    probes.flush()
    assert set(probes.flows.handlers["h"].matched) == {
        (f"{ENDPOINT}#religion", "web.logger/audit#message"),
        (f"{ENDPOINT}#user_id", "web.logger/audit#uid"),
    }


# ---------------------------------------------------------------- a probe never fails a request


class Exploding:
    def model_dump(self) -> dict[str, Any]:
        raise RuntimeError("the secret value Atheist")


def test_a_failing_capture_is_counted_and_logged_without_values(caplog: pytest.LogCaptureFixture) -> None:
    probes = Probes(config=ALWAYS)
    with caplog.at_level(logging.WARNING), probes.request("h"):
        probes.source(ENDPOINT, Exploding())
        probes.sink("web.logger/x", {"religion": "Atheist"})
        result = "the request went on"
    assert result == "the request went on"
    assert probes.stats.errors == 1
    assert "RuntimeError" in caplog.text
    assert "Atheist" not in caplog.text


def test_a_failing_shipper_loses_nothing_the_next_ship_carries_it(tmp_path: Path) -> None:
    class Down:
        def ship(self, batch: LineageBatch) -> None:
            raise ConnectionError("store unreachable")

    probes = Probes(Down(), config=ALWAYS)
    run_seed(probes)
    assert probes.stats.ship_failures == 1

    store = LineageStore(str(tmp_path / "lineage.db"))
    probes.shipper = StoreShipper(store)
    assert probes.flush()
    probes.close()
    assert probes.stats.shipped == 1
    assert len(store.snapshot().edge_source) == len(probes.batch().edges) == 6


# ---------------------------------------------------------------- the store


def stored_text(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        return "\n".join(connection.iterdump())


def test_the_store_holds_fingerprints_not_values(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "lineage.db"))
    probes = Probes(StoreShipper(store), config=ALWAYS)
    run_seed(probes)
    probes.close()
    store.close()

    text = stored_text(tmp_path / "lineage.db")
    assert "web.logger/meta#value" in text  # the flows are there
    assert "source_fingerprint" in text
    for value in ("Atheist", "Buddhist", "Catholic", "Christian"):
        assert value not in text


def test_raw_values_are_stored_only_when_asked(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "lineage.db"))
    probes = Probes(StoreShipper(store), config=ProbeConfig(sample_rate=1.0, keep_raw=True))
    run_seed(probes)
    probes.close()
    store.close()
    assert "Buddhist" in stored_text(tmp_path / "lineage.db")


def test_fingerprints_are_keyed_and_equal_for_an_exact_match() -> None:
    one = Probes(config=ProbeConfig(sample_rate=1.0, key=b"key one"))
    two = Probes(config=ProbeConfig(sample_rate=1.0, key=b"key two"))
    for probes in (one, two):
        run_seed(probes)
    first = one.flows.handlers["profile.update"].matched
    second = two.flows.handlers["profile.update"].matched
    copy = (f"{ENDPOINT}#religion", "web.logger/copy#religion")
    assert first[copy].source_fingerprint == first[copy].sink_fingerprint
    assert first[copy].source_fingerprint != second[copy].source_fingerprint
    assert first[copy].source_fingerprint == one.flows.fingerprint("Atheist")


def test_shipping_the_same_flows_again_keeps_one_version(tmp_path: Path) -> None:
    store = LineageStore(str(tmp_path / "lineage.db"))
    probes = Probes(StoreShipper(store), config=ALWAYS)
    run_seed(probes)
    first = store.ingest(probes.batch())
    again = store.ingest(probes.batch())
    probes.close()
    assert first.versions_unchanged == 1  # the flush already shipped this set
    assert again.versions_added == 0
    assert again.versions_unchanged == 1
