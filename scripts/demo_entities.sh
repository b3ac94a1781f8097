#!/usr/bin/env bash
# Time-partitioned entities: load the definitions, taint 10 hours of the hourly events and see
# every downstream instance to rebuild (with period conversion), then apply it to the status
# table and check readiness. No Airflow here: with TRACELAKE_AIRFLOW_URL set, --apply also
# clears the matching task instances.
set -euo pipefail
tl="${VENV:-.venv}/bin/tracelake"
export TRACELAKE_DB="${TRACELAKE_DB:-.tracelake/entities.db}"
rm -f "$TRACELAKE_DB" "$TRACELAKE_DB-wal" "$TRACELAKE_DB-shm"
export COLUMNS="${COLUMNS:-160}"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Load the entity definitions (the seed's word count and the on-call example)"
"$tl" entities load examples/entities
"$tl" entities list

step "Taint 10 hours of events (Wednesday 2024-03-13, 05:00-15:00 UTC): the plan, a dry run"
"$tl" taint events --from 2024-03-13T05:00 --to 2024-03-13T15:00 --until 2024-06-01 \
    --reason "duplicated events from the collector"

step "The exact weekly reads were wrong: user_weekly_reads is only downgraded to estimated"
"$tl" taint nb_read_exact --from 2024-03-11 --to 2024-03-12 --until 2024-06-01 --reason "double count" \
    --format json

step "A run records words_count for 2024-03-13; is the week ready to be estimated?"
"$tl" record words_count --at 2024-03-13 --run-id demo-run
"$tl" ready user_weekly_reads --at 2024-03-13 --state estimated || true

step "Apply the events taint to the status table, then look at daily_sessions"
for day in 12 13 14; do "$tl" record daily_sessions --at "2024-03-$day" --run-id "sessions-$day" >/dev/null; done
"$tl" taint events --from 2024-03-13T05:00 --to 2024-03-13T15:00 --until 2024-06-01 \
    --reason "duplicated events from the collector" --apply --format json >/dev/null
"$tl" status daily_sessions

echo
echo "Store: $TRACELAKE_DB  (try: $tl status daily_sessions --at <a moment before the taint>)"
