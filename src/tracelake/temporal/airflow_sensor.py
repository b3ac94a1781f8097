"""`EntityReadySensor`: an Airflow sensor that waits until an entity instance can be produced.

Imported only inside Airflow (it subclasses Airflow's sensor). It pokes `EntityStore.is_ready`
for the instance the run produces — found from the run's logical date the way the entity's
Airflow binding says — and logs what is still missing or tainted while it waits.
"""

from __future__ import annotations

import os
from typing import Any

try:  # Airflow 3
    from airflow.sdk.bases.sensor import BaseSensorOperator
except ImportError:  # Airflow 2
    from airflow.sensors.base import BaseSensorOperator

from tracelake.store import LineageStore
from tracelake.temporal.airflow import instance_of
from tracelake.temporal.entities import AirflowBinding
from tracelake.temporal.instances import EntityStore


class EntityReadySensor(BaseSensorOperator):  # type: ignore[misc]  # Airflow is not typed here: its class is Any
    template_fields = ("entity", "state")

    def __init__(
        self, *, entity: str, state: str = "completed", db: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.entity = entity
        self.state = state
        self.db = db

    def poke(self, context: Any) -> bool:
        store = EntityStore(LineageStore(self.db or os.environ.get("TRACELAKE_DB")))
        graph = store.graph()
        entity = graph.entities[self.entity]
        logical_date = context.get("logical_date") or context["dag_run"].run_after
        binding = entity.airflow or AirflowBinding(context["dag"].dag_id)
        start = instance_of(binding, entity, logical_date)
        readiness = store.is_ready(graph, self.entity, start, self.state)
        for blocker in readiness.blockers:
            upstream = graph.entities[blocker.entity]
            self.log.info(
                "waiting for %s %s: %s %s", blocker.entity, upstream.label(blocker.start), blocker.problem,
                blocker.detail,
            )  # fmt: skip
        return readiness.ready
