"""Tracelake inside Airflow: a callback that records a produced instance, and a readiness sensor.

Put `record_success` in a task's (or a DAG's `default_args`) `on_success_callback`: when the
task succeeds, every entity bound to it (`airflow: {dag, task}`) records the instance its run
produced, in the binding's state. `EntityReadySensor` (in `airflow_sensor`, which imports
Airflow) waits until an instance's dependencies are ready. Both find the store through
`TRACELAKE_DB`. A failure to record never fails the task: it is logged, and `tracelake
reconcile` will show the instance as drift.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tracelake.store import LineageStore
from tracelake.temporal.airflow import instance_of
from tracelake.temporal.entities import Entity
from tracelake.temporal.instances import EntityStore

log = logging.getLogger(__name__)


def bound_entities(entities: Mapping[str, Entity], dag_id: str, task_id: str) -> list[Entity]:
    """The entities a task produces: bound to its DAG and to it (or to every task of the DAG)."""
    return [
        entity
        for entity in entities.values()
        if entity.airflow is not None
        and entity.airflow.dag_id == dag_id
        and entity.airflow.task_id in (None, task_id)
        and entity.period is not None
    ]


def record_run(
    store: EntityStore, dag_id: str, task_id: str, logical_date: datetime, run_id: str | None
) -> list[tuple[str, int]]:
    """Record what the task's run produced; returns (entity, instance start) for each."""
    recorded = []
    for entity in bound_entities(store.definitions(), dag_id, task_id):
        binding = entity.airflow
        assert binding is not None
        start = instance_of(binding, entity, logical_date)
        state = binding.state or entity.state_names[-1]
        store.record(entity, start, state, actor=f"airflow:{dag_id}.{task_id}", run_id=run_id)
        recorded.append((entity.name, start))
    return recorded


def record_success(context: Mapping[str, Any]) -> None:
    """An Airflow `on_success_callback`."""
    try:
        task_instance = context["ti"]
        logical_date = context.get("logical_date") or context["dag_run"].run_after
        store = EntityStore(LineageStore(os.environ.get("TRACELAKE_DB")))
        recorded = record_run(
            store, task_instance.dag_id, task_instance.task_id, logical_date, context.get("run_id")
        )
        what = ", ".join(f"{name}@{start}" for name, start in recorded) or "nothing"
        log.info("tracelake recorded %s", what)
    except Exception:  # a bookkeeping failure must not fail the task
        log.exception("tracelake could not record this run; `tracelake reconcile` will show it")
