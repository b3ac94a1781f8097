"""The dating app's front end: a profile-update endpoint instrumented with Tracelake's privacy probes.

A profile update arrives at `POST /profile` (`web.endpoint/profile.update`). The handler, as the
seed's web endpoint does, writes it to three loggers and a database:
- the event logger (`web.logger/dating_profile_log`) records each changed field as
  `{user_id, field, value, ts}`; its records land in the warehouse table `raw.web_profile_events`
  under the struct column `event`, where the query log's SQL picks them up;
- the audit log (`web.logger/dating_audit_log`) writes a line `metadata: religion: <value>`;
- the preference stats log (`web.logger/dating_preference_stats`) writes only how many religions
  a person wants in a partner (`count: 2`);
- the profile row is stored in the service's own database (`sqlite.table/dating_web.profiles`).
So "Atheist" reaches the event log as itself (EXACT_MATCH), "Buddhist" reaches the audit line
inside a longer string (CONTAINS), and `["Catholic", "Christian"]` reaches the stats log only as
a count (NO_MATCH: a LOW flow for a reviewer).

`python examples/dating/web.py [--db URL] [--sample-rate R]` serves it on loopback, sends the
seed's requests through real HTTP, ships the probes' flows into the store and prints them.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import threading
from datetime import UTC, datetime
from typing import Any

import requests
from fastapi import FastAPI
from pydantic import BaseModel

from tracelake.api.server import serve_in_thread
from tracelake.collect.probe_flows import Landing
from tracelake.collect.probes import ProbeConfig, Probes, StoreShipper

ENDPOINT = "web.endpoint/profile.update"
EVENT_LOG = "web.logger/dating_profile_log"
AUDIT_LOG = "web.logger/dating_audit_log"
STATS_LOG = "web.logger/dating_preference_stats"
PROFILES = "sqlite.table/dating_web.profiles"
LANDINGS = {EVENT_LOG: Landing("hive.table/raw.web_profile_events", column="event")}

# The seed's three examples, as profile updates.
SEED_REQUESTS: list[dict[str, Any]] = [
    {"user_id": 1001, "religion": "Atheist", "city": "Lyon"},
    {"user_id": 1002, "religion": "Buddhist", "city": "Paris"},
    {"user_id": 1003, "religion": "Jewish", "partner_religions": ["Catholic", "Christian"]},
]


class ProfileUpdate(BaseModel):
    user_id: int
    religion: str | None = None
    city: str | None = None
    partner_religions: list[str] = []


def make_app(probes: Probes) -> FastAPI:
    """The service, its loggers and database wired to `probes`."""
    audit = _logger("dating.audit", probes.log_handler(AUDIT_LOG))
    stats = _logger("dating.preference_stats", probes.log_handler(STATS_LOG))
    database = sqlite3.connect(":memory:", check_same_thread=False)
    database.execute("CREATE TABLE profiles (user_id INTEGER PRIMARY KEY, religion TEXT, city TEXT)")
    lock = threading.Lock()
    events: list[dict[str, Any]] = []  # what the logging pipeline would ship to the warehouse

    @probes.sink_call(EVENT_LOG, arg="record")
    def log_event(record: dict[str, Any]) -> None:
        events.append(record)

    @probes.sink_call(PROFILES, arg="row")
    def save_profile(row: dict[str, Any]) -> None:
        with lock:
            database.execute(
                "INSERT INTO profiles VALUES (:user_id, :religion, :city) ON CONFLICT(user_id) DO UPDATE "
                "SET religion = coalesce(excluded.religion, religion), city = coalesce(excluded.city, city)",
                row,
            )

    app = FastAPI(title="dating web (example)")
    app.state.events = events

    @app.post("/profile")
    @probes.endpoint(ENDPOINT, body="update")
    def update_profile(update: ProfileUpdate) -> dict[str, str]:
        now = datetime.now(UTC).isoformat()
        for name in ("religion", "city"):
            value = getattr(update, name)
            if value is not None:
                log_event({"user_id": update.user_id, "field": name, "value": value, "ts": now})
        if update.religion is not None:
            audit.info("metadata: religion: %s", update.religion)
        if update.partner_religions:
            stats.info("partner preferences updated", extra={"count": len(update.partner_religions)})
        save_profile({"user_id": update.user_id, "religion": update.religion, "city": update.city})
        return {"status": "ok"}

    return app


def _logger(name: str, handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers[:] = [handler]  # loggers are process-wide: the newest app's probes take them over
    return logger


def main() -> None:
    from tracelake.app.service import Tracelake
    from tracelake.store import LineageStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="store URL or SQLite path (default: $TRACELAKE_DB)")
    parser.add_argument("--sample-rate", type=float, default=1.0)
    args = parser.parse_args()
    service = Tracelake(LineageStore(args.db))
    probes = Probes(StoreShipper(service.store), ProbeConfig(sample_rate=args.sample_rate), landings=LANDINGS)
    with serve_in_thread(make_app(probes)) as url, requests.Session() as http:
        for body in SEED_REQUESTS:
            http.post(f"{url}/profile", json=body, timeout=10).raise_for_status()
    probes.flush()
    print(f"{probes.stats.requests} requests, {probes.stats.sampled} sampled; flows in the store:")
    for edge in probes.batch().edges:
        if "#" in edge.source and edge.process.startswith("web.handler/"):
            print(f"  {edge.source} → {edge.target}  {edge.description} {edge.confidence}")
    probes.close()
    service.close()


if __name__ == "__main__":
    main()
