"""The seed's DAGs for the live Airflow test: `articles` (daily) and `reads` (weekly, Mondays).

Cron strings, so Airflow 3 dates each run at its cron tick. No scheduler runs in the test: runs
are made and marked through the REST API, so their states are exactly what the test sets.
"""

from datetime import UTC, datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

START = datetime(2024, 3, 4, tzinfo=UTC)  # a Monday

with DAG("articles", schedule="0 0 * * *", start_date=START, catchup=False):
    EmptyOperator(task_id="load_articles") >> EmptyOperator(task_id="count_words")

with DAG("reads", schedule="0 0 * * 1", start_date=START, catchup=False):
    EmptyOperator(task_id="exact_reads") >> EmptyOperator(task_id="user_weekly_reads")
