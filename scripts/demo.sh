#!/usr/bin/env bash
# The dating-app walkthrough: ingest three days of a Spark query log, then ask where the
# religion column of the safety training table comes from and where it goes.
set -euo pipefail
tl="${VENV:-.venv}/bin/tracelake"
export TRACELAKE_DB="${TRACELAKE_DB:-.tracelake/demo.db}"
rm -f "$TRACELAKE_DB" "$TRACELAKE_DB-wal" "$TRACELAKE_DB-shm"
example=examples/dating

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Ingest the Spark SQL query log (3 days, one statement has a typo)"
# exit 3: stored, with the typo recorded as a problem (`tracelake problems` lists it)
"$tl" ingest sql "$example/query_log.jsonl" --schema "$example/schema.yaml" || [ $? -eq 3 ]

step "Add the ML configs: the religion-score feature, the ranking model's training, its service"
"$tl" ingest configs "$example/configs"

step "The web front end: a profile-update endpoint with privacy probes, three requests over real HTTP"
"${VENV:-.venv}/bin/python" examples/dating/web.py --db "$TRACELAKE_DB"

step "Where does safety_training_tbl.target_religion come from? (values only)"
"$tl" lineage dating.safety_training_tbl#target_religion --up --direct-only

step "Where does it go?"
"$tl" lineage dating.safety_training_tbl#target_religion --down

step "What does user_profile.religion reach, as JSON other tools can read (first lines)"
"$tl" lineage dating.user_profile#religion --down --format json | head -n 30

step "Impact of changing dating.user_profile"
"$tl" impact dating.user_profile

step "How did the lineage change on 2024-03-12?"
"$tl" diff --from 2024-03-11 --to 2024-03-12

step "Why might safety_training_tbl look different on 2024-03-12? What changed upstream, ranked"
"$tl" why dating.safety_training_tbl --since 2024-03-12 --until 2024-03-13

step "Which upstream runs decided when ads.user_segments was ready on 2024-03-12; its deadline"
"$tl" critical-path ads.user_segments --date 2024-03-12
"$tl" deadlines load "$example/deadlines.yml"
"$tl" deadlines check --date 2024-03-12 || echo "(tracelake deadlines check exited $?: a deadline was missed)"

step "How much of the lake does lineage see, and the lineage of user_profile by kind of asset"
"$tl" coverage
"$tl" lineage dating.user_profile --down --group-by kind

step "The safety training table as it was on 2024-03-10 vs now"
"$tl" lineage dating.safety_training_tbl --up --depth 1 --as-of 2024-03-10 --format mermaid
"$tl" lineage dating.safety_training_tbl --up --depth 1 --format mermaid

step "Declare religion on the endpoint's field and spread it to every logger and table that copies or encodes it"
"$tl" label add web.endpoint/profile.update#religion religion
"$tl" propagate
"$tl" label list --label religion

step "A discovery session from religion: HIGH flows are followed; the stats logger's LOW guesses and the ML configs (whole tables) wait as candidates"
started=$("$tl" discover start --label religion)
echo "$started"
session=$(grep -o 'discovery-[0-9a-f]*' <<<"$started" | head -n 1)
"$tl" discover decide "$session" web.logger/dating_preference_stats#count --exclude --reason "a count of partner preferences"
"$tl" discover decide "$session" web.logger/dating_preference_stats#message --exclude --reason "a fixed message"
"$tl" discover decide "$session" ai.feature/DATING_USER_RELIGION_SCORE --include --reason "computed from religion"
"$tl" discover decide "$session" ai.model/dating_ranking_model --include --reason "trained on same_religion"
"$tl" discover next "$session"
"$tl" discover export "$session" --confirm | head -n 20

step "Policies: religion must stay out of ads (exit 1: the ads segment job encodes it)"
"$tl" check "$example/policies.yml" || echo "(tracelake check exited $?: a CI gate would fail here)"

step "The HTTP API: an OpenLineage producer configured for Marquez, a subscription, Marquez-shaped lineage"
"${VENV:-.venv}/bin/python" examples/dating/api_tour.py --db "$TRACELAKE_DB"

step "The most relied-upon tables"
"$tl" hot --limit 5

step "The same ranking from a Spark job over the graph as lake tables (for graphs past one machine)"
"$tl" export "${TRACELAKE_DB%.db}.lake"
"$tl" hot --limit 5 --engine spark --lake "${TRACELAKE_DB%.db}.lake"

echo
echo "Store: $TRACELAKE_DB  (try: $tl show dating.safety_log_tbl --db $TRACELAKE_DB)"
