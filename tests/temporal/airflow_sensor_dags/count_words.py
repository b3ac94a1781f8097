"""A DAG that Airflow's scheduler really runs in the live test: wait until words_count's instance
is ready (its day of articles recorded), then count, and record the instance on success.

No schedule: the test triggers runs for the days it wants. Tracelake is importable in the task
processes through PYTHONPATH and finds its store through TRACELAKE_DB, both set by the test.
"""

from datetime import UTC, datetime

from airflow.sdk import DAG, task

from tracelake.temporal.airflow_hooks import record_success
from tracelake.temporal.airflow_sensor import EntityReadySensor

with DAG("articles", schedule=None, start_date=datetime(2024, 3, 1, tzinfo=UTC), catchup=False):
    wait = EntityReadySensor(
        task_id="wait_for_articles", entity="words_count", poke_interval=1, timeout=120, mode="poke"
    )

    @task(task_id="count_words", on_success_callback=record_success)
    def count_words() -> None:
        """The real job would count words here."""

    wait >> count_words()
