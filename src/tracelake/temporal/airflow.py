"""Taint plans applied to Airflow, and drift between the status table and Airflow.

A rebuild step of a plan becomes a clear of the bound task over the logical dates of its
instances, one `clearTaskInstances` call per DAG and date range (tasks of one DAG with the same
range share a call), with `only_failed=false` so tasks that succeeded on bad data run again.
Airflow 3 (`/api/v2`, bearer token from `/auth/token`) and Airflow 2 (`/api/v1`, basic auth)
are both spoken; `AirflowClient` finds which one answers. Each call is recorded in the store.

`reconcile` reads the bound tasks' task instances back and reports where they and the status
table disagree: Airflow's callbacks do not fire for changes made in its UI or CLI, so the table
drifts, and this is how to see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests

from tracelake.store.entity_status import InstanceStatus
from tracelake.temporal.entities import AirflowBinding, Entity
from tracelake.temporal.instances import EntityStore
from tracelake.temporal.planner import EntityGraph, TaintPlan

SUCCESS = "success"


class AirflowError(RuntimeError):
    """Airflow refused or could not be reached; the message says which call and why."""


@dataclass(frozen=True)
class ClearRequest:
    """One `clearTaskInstances` call: these tasks of one DAG, runs with logical dates in [start, end]."""

    dag_id: str
    task_ids: tuple[str, ...]  # empty: every task of the DAG
    start: datetime
    end: datetime
    entities: tuple[str, ...]
    instances: int

    def body(self, *, dry_run: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "dry_run": dry_run,
            "only_failed": False,
            "reset_dag_runs": True,
            "start_date": self.start.isoformat(),
            "end_date": self.end.isoformat(),
        }
        if self.task_ids:
            body["task_ids"] = list(self.task_ids)
        return body


@dataclass(frozen=True)
class TaskInstance:
    dag_id: str
    task_id: str
    logical_date: datetime
    state: str | None


@dataclass
class ClearReport:
    requests: list[ClearRequest] = field(default_factory=list)
    cleared: dict[int, list[TaskInstance]] = field(default_factory=dict)  # by index in `requests`
    unbound: list[str] = field(default_factory=list)  # entities to rebuild with no Airflow task


@dataclass(frozen=True)
class Drift:
    entity: str
    start: int
    airflow_state: str | None  # None: no task instance for it
    status: InstanceStatus | None  # None: nothing in the status table
    problem: str


def logical_date(binding: AirflowBinding, entity: Entity, start: int) -> datetime:
    """The logical date of the run that produces the instance starting at `start`."""
    moment = start if binding.logical_date == "start" else entity.calendar.end(start)
    return datetime.fromtimestamp(moment, UTC)


def instance_of(binding: AirflowBinding, entity: Entity, moment: datetime) -> int:
    """The start of the instance a run with this logical date produces."""
    seconds = int(moment.timestamp())
    return entity.calendar.floor(seconds if binding.logical_date == "start" else seconds - 1)


def clear_requests(plan: TaintPlan, graph: EntityGraph) -> tuple[list[ClearRequest], list[str]]:
    """The clears a plan's rebuild steps need, and the entities to rebuild that no task is bound to."""
    grouped: dict[tuple[str, datetime, datetime], list[tuple[str, str | None, int]]] = {}
    unbound: list[str] = []
    for step in plan.steps:
        entity = graph.entities[step.entity]
        if step.action != "rebuild" or entity.period is None:
            continue
        binding = entity.airflow
        if binding is None:
            unbound.append(step.entity)
            continue
        starts = entity.calendar.starts(step.start_epoch, step.end_epoch)
        first, last = logical_date(binding, entity, starts[0]), logical_date(binding, entity, starts[-1])
        key = (binding.dag_id, first, last)
        grouped.setdefault(key, []).append((entity.name, binding.task_id, len(starts)))
    found = []
    for (dag_id, first, last), members in grouped.items():
        tasks = [task for _, task, _ in members]
        task_ids = () if None in tasks else tuple(dict.fromkeys(tasks))
        found.append(
            ClearRequest(
                dag_id=dag_id,
                task_ids=task_ids,  # type: ignore[arg-type]  # no None left: `None in tasks` took the other branch
                start=first,
                end=last,
                entities=tuple(name for name, _, _ in members),
                instances=sum(count for _, _, count in members),
            )
        )
    return found, list(dict.fromkeys(unbound))


class AirflowClient:
    """Airflow's stable REST API: `/api/v2` (Airflow 3) or `/api/v1` (Airflow 2)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self._username, self._password, self._token = username, password, token
        self._api: str | None = None

    @property
    def api(self) -> str:
        """`v2` or `v1`, whichever this Airflow answers."""
        if self._api is None:
            for version in ("v2", "v1"):
                try:
                    response = self.session.get(f"{self.url}/api/{version}/version", timeout=self.timeout)
                except requests.RequestException as error:
                    raise AirflowError(f"cannot reach Airflow at {self.url}: {error}") from None
                if response.status_code != 404:
                    self._api = version
                    break
            else:
                raise AirflowError(f"{self.url} answers neither /api/v2 nor /api/v1: is it Airflow?")
            self._authenticate()
        return self._api

    def _authenticate(self) -> None:
        if self._token:
            self.session.headers["Authorization"] = f"Bearer {self._token}"
        elif self._username is not None and self._api == "v2":
            response = self.session.post(
                f"{self.url}/auth/token",
                json={"username": self._username, "password": self._password or ""},
                timeout=self.timeout,
            )
            if response.status_code >= 300:
                raise AirflowError(f"Airflow refused the login of {self._username!r}: {_excerpt(response)}")
            self._token = response.json()["access_token"]
            self.session.headers["Authorization"] = f"Bearer {self._token}"
        elif self._username is not None:
            self.session.auth = (self._username, self._password or "")

    def clear(self, request: ClearRequest, *, dry_run: bool = False) -> list[TaskInstance]:
        body = request.body(dry_run=dry_run)
        data = self._call("POST", f"dags/{request.dag_id}/clearTaskInstances", json=body)
        return [_task_instance(item, request.dag_id) for item in data.get("task_instances", [])]

    def task_instances(self, dag_id: str, task_id: str, start: datetime, end: datetime) -> list[TaskInstance]:
        """The task's instances with logical dates in [start, end]."""
        date_key = "logical_date" if self.api == "v2" else "execution_date"
        found: list[TaskInstance] = []
        offset = 0
        while True:
            params: dict[str, Any] = {
                f"{date_key}_gte": start.isoformat(),
                f"{date_key}_lte": end.isoformat(),
                "limit": 100,
                "offset": offset,
            }
            if self.api == "v2":
                params["task_id"] = task_id
            data = self._call("GET", f"dags/{dag_id}/dagRuns/~/taskInstances", params=params)
            page = [_task_instance(item, dag_id) for item in data.get("task_instances", [])]
            found.extend(ti for ti in page if ti.task_id == task_id)
            offset += len(page)
            if not page or offset >= int(data.get("total_entries", 0)):
                return found

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = f"{self.url}/api/{self.api}/{path}"
        try:
            response = self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.RequestException as error:
            raise AirflowError(f"{method} {url}: {error}") from None
        if response.status_code >= 300:
            raise AirflowError(f"{method} {url}: HTTP {response.status_code}: {_excerpt(response)}")
        return response.json()  # type: ignore[no-any-return]  # Airflow's JSON, read by key where used


def apply_to_airflow(
    plan: TaintPlan,
    graph: EntityGraph,
    client: AirflowClient,
    entities: EntityStore,
    *,
    reason: str,
    actor: str,
    dry_run: bool = False,
) -> ClearReport:
    """Clear the task instances of the plan's rebuild steps, recording each call in the store."""
    wanted, unbound = clear_requests(plan, graph)
    report = ClearReport(requests=wanted, unbound=unbound)
    for index, request in enumerate(wanted):
        cleared = client.clear(request, dry_run=dry_run)
        report.cleared[index] = cleared
        _record_clear(entities, request, cleared, plan=plan, reason=reason, actor=actor, dry_run=dry_run)
    return report


def _record_clear(
    entities: EntityStore,
    request: ClearRequest,
    cleared: Sequence[TaskInstance],
    *,
    plan: TaintPlan,
    reason: str,
    actor: str,
    dry_run: bool,
) -> None:
    entities.tables.record_clear(
        actor=actor,
        reason=reason,
        tainted=f"{plan.entity} [{plan.start}, {plan.end})",
        dag_id=request.dag_id,
        task_ids=list(request.task_ids),
        start_date=request.start.isoformat(),
        end_date=request.end.isoformat(),
        dry_run=dry_run,
        cleared=[f"{ti.task_id}@{ti.logical_date.isoformat()}" for ti in cleared],
    )


def recorded_clears(entities: EntityStore) -> list[dict[str, Any]]:
    return entities.tables.clears()


def reconcile(
    graph: EntityGraph, client: AirflowClient, entities: EntityStore, *, lo: int, hi: int
) -> list[Drift]:
    """Where Airflow's task instances and the status table disagree, for instances in [lo, hi)."""
    drifts: list[Drift] = []
    for name in graph.order:
        entity = graph.entities[name]
        binding = entity.airflow
        if binding is None or binding.task_id is None or entity.period is None:
            continue
        starts = entity.calendar.starts(lo, hi)
        if not starts:
            continue
        runs = client.task_instances(
            binding.dag_id,
            binding.task_id,
            logical_date(binding, entity, starts[0]),
            logical_date(binding, entity, starts[-1]),
        )
        airflow = {instance_of(binding, entity, ti.logical_date): ti.state for ti in runs}
        status = {row.start: row for row in entities.status(name, lo=starts[0], hi=starts[-1] + 1)}
        drifts.extend(_compare(entity, binding, starts, airflow, status))
    return drifts


def _compare(
    entity: Entity,
    binding: AirflowBinding,
    starts: Iterable[int],
    airflow: dict[int, str | None],
    status: dict[int, InstanceStatus],
) -> Iterable[Drift]:
    produced = binding.state or entity.state_names[-1]
    for start in starts:
        row = status.get(start)
        holds = row is not None and row.valid and produced in row.states
        ran = start in airflow
        state = airflow.get(start)
        if state == SUCCESS and not holds:
            why = "not in the status table" if row is None else f"the status table has {_describe(row)}"
            yield Drift(entity.name, start, state, row, f"Airflow succeeded but {why}")
        elif holds and state != SUCCESS:
            seen = f"Airflow's task is {state or 'cleared'}" if ran else "Airflow has no run for it"
            yield Drift(entity.name, start, state, row, f"the status table says {produced}, but {seen}")


def _describe(row: InstanceStatus) -> str:
    if not row.valid:
        return f"it tainted ({row.reason or 'no reason'})"
    return f"it holding {', '.join(row.states) or 'no state'}"


def _task_instance(item: dict[str, Any], dag_id: str) -> TaskInstance:
    raw = item.get("logical_date") or item.get("execution_date") or "1970-01-01T00:00:00+00:00"
    moment = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    return TaskInstance(str(item.get("dag_id", dag_id)), str(item["task_id"]), moment, item.get("state"))


def _excerpt(response: requests.Response) -> str:
    return response.text[:300].strip() or response.reason
