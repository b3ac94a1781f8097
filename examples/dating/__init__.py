"""The dating-app warehouse: its query log, schema and PySpark pipeline."""
