#!/usr/bin/env bash
# The dating-app pipeline in PySpark, run with Tracelake attached, into the same store as the SQL
# demo (scripts/demo.sh): the DataFrame jobs that no query log sees, next to what the log showed.
set -euo pipefail
venv="${VENV:-.venv}"
tl="$venv/bin/tracelake"
export TRACELAKE_DB="${TRACELAKE_DB:-.tracelake/demo.db}"
# Rich wraps tables at 80 columns when not writing to a terminal; the edge tables need more.
[ -t 1 ] || export COLUMNS="${COLUMNS:-180}"
column=dating.safety_training_tbl#target_religion

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Run the PySpark pipeline (4 jobs, DataFrame API) with tracelake.spark.track() attached"
"$venv/bin/python" examples/dating/pipeline.py --db "$TRACELAKE_DB"

step "Where does $column come from, as Spark ran it? (values only)"
"$tl" lineage "$column" --up --signal spark_runtime --direct-only --format table

step "The same question, both signals: each edge seen by Spark at runtime beside the one read from the query log"
"$tl" lineage "$column" --up --signal spark_runtime --signal sql_static --direct-only --format table

step "What only the runtime signal sees: the ranking feature DATING_USER_RELIGION_SCORE (a Python UDF)"
"$tl" lineage dating.dating_training_tbl#dating_user_religion_score --up --signal spark_runtime \
  --direct-only --format table

step "Train the ranking model with pandas and scikit-learn on the pipeline's output, tracked by tracelake.python.track() inside a tracked Spark run; the ranking service loads it for a request"
"$venv/bin/python" -m examples.dating.train --db "$TRACELAKE_DB"

step "Religion reaching the model through the training code itself (signal ai_runtime), column by column"
"$tl" lineage dating.dating_training_tbl#same_religion --down --signal ai_runtime --format table

step "The model, the endpoint that serves it, and the run that linked them"
"$tl" lineage ai.model/dating_ranking_model --down --signal ai_runtime --format table

step "A discovery session from religion: the model's features are reached through code by HIGH flows; the endpoint serving it waits as a candidate"
"$tl" discover start --label religion | grep -E "discovery-|dating_ranking_model|ranking\.recommend|candidate\(s\)"

echo
echo "Store: $TRACELAKE_DB  (try: $tl lineage $column --up --signal spark_runtime --db $TRACELAKE_DB)"
