"""The seed's DAGs for the live Airflow tests: `articles` (daily) and `reads` (weekly, Mondays).

Cron strings, so Airflow 3 dates each scheduled run at its cron tick (Airflow 2 at the start of
the interval the tick ends). No scheduler runs in the tests: runs are made and marked through the
REST API, so their states and logical dates are exactly what the test sets. The file loads on
Airflow 3 (the task SDK and the standard provider) and on Airflow 2.
"""

from datetime import UTC, datetime

try:  # Airflow 3
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.operators.empty import EmptyOperator

START = datetime(2024, 3, 4, tzinfo=UTC)  # a Monday

with DAG("articles", schedule="0 0 * * *", start_date=START, catchup=False):
    EmptyOperator(task_id="load_articles") >> EmptyOperator(task_id="count_words")

with DAG("reads", schedule="0 0 * * 1", start_date=START, catchup=False):
    EmptyOperator(task_id="exact_reads") >> EmptyOperator(task_id="user_weekly_reads")
