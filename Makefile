# The two commands of the README: `make demo` runs the dating-app example end to end (the SQL
# query log, then the PySpark pipeline with runtime tracking, into one store),
# then privacy requests on its lake; `make test` runs the whole suite. Both set up .venv themselves.
VENV ?= .venv
BIN := $(VENV)/bin
export VENV

.PHONY: demo test lint bench clean

demo:
	@scripts/bootstrap.sh ai
	@scripts/demo.sh
	@scripts/demo_spark.sh
	@scripts/demo_privacy.sh
	@scripts/demo_entities.sh

test:
	@scripts/bootstrap.sh dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest

lint:
	@scripts/bootstrap.sh dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

bench:
	@scripts/bootstrap.sh dev,bench
	$(BIN)/python bench/sql_lineage.py
	$(BIN)/python bench/store.py
	$(BIN)/python bench/cli.py
	$(BIN)/python bench/spark_overhead.py
	$(BIN)/python bench/privacy_search.py
	$(BIN)/python bench/taint_plan.py
	$(BIN)/python bench/discovery.py
	$(BIN)/python bench/probes.py
	$(BIN)/python bench/answers.py
	$(BIN)/python bench/graph_spark.py
	$(BIN)/python bench/ai_tracking.py

clean:
	rm -rf .tracelake .pytest_cache .ruff_cache .hypothesis
