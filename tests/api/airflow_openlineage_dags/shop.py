"""A DAG of SQL tasks on PostgreSQL, run with `airflow dags test` while Airflow's OpenLineage
provider sends what it sees to Tracelake (tests/api/test_airflow_openlineage_live.py).

Two tasks create and fill a table each (they only write), one joins them into a third with derived
columns (`INSERT … SELECT`), one makes a fourth from the third (`CREATE TABLE … AS SELECT`). The
connection `shop_db` comes from the environment (`AIRFLOW_CONN_SHOP_DB`). Loads on Airflow 3 (the
task SDK) and on Airflow 2.
"""

from datetime import UTC, datetime

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

try:  # Airflow 3
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

with DAG("shop", schedule=None, start_date=datetime(2024, 3, 1, tzinfo=UTC), catchup=False):
    customers = SQLExecuteQueryOperator(
        task_id="load_customers",
        conn_id="shop_db",
        sql="""
            CREATE TABLE IF NOT EXISTS customers (id INT PRIMARY KEY, name TEXT, country TEXT);
            INSERT INTO customers VALUES (1, 'Ada', 'FR'), (2, 'Linus', 'FI') ON CONFLICT DO NOTHING;
        """,
    )
    orders = SQLExecuteQueryOperator(
        task_id="load_orders",
        conn_id="shop_db",
        sql="""
            CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, customer_id INT, amount NUMERIC);
            INSERT INTO orders VALUES (10, 1, 12.5), (11, 2, 30), (12, 1, 7) ON CONFLICT DO NOTHING;
        """,
    )
    facts = SQLExecuteQueryOperator(
        task_id="build_order_facts",
        conn_id="shop_db",
        sql="""
            CREATE TABLE IF NOT EXISTS order_facts (order_id INT, customer_name TEXT, amount_cents NUMERIC);
            INSERT INTO order_facts (order_id, customer_name, amount_cents)
            SELECT o.id, upper(c.name), o.amount * 100 FROM orders o JOIN customers c ON c.id = o.customer_id;
        """,
    )
    totals = SQLExecuteQueryOperator(
        task_id="build_customer_totals",
        conn_id="shop_db",
        sql="""
            DROP TABLE IF EXISTS customer_totals;
            CREATE TABLE customer_totals AS
            SELECT customer_name, sum(amount_cents) AS total_cents FROM order_facts GROUP BY customer_name;
        """,
    )
    [customers, orders] >> facts >> totals
