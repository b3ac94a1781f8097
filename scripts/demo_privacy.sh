#!/usr/bin/env bash
# Privacy requests on the dating lake the PySpark demo wrote (scripts/demo_spark.sh): index the
# raw signups written by plain Spark, declare them a privacy target, see where lineage says
# identities flow, then answer an access request and a delete request for one user.
set -euo pipefail
venv="${VENV:-.venv}"
tl="$venv/bin/tracelake"
export TRACELAKE_DB="${TRACELAKE_DB:-.tracelake/demo.db}"
[ -t 1 ] || export COLUMNS="${COLUMNS:-180}"
signups="$(pwd)/.tracelake/demo-lake/raw/user_signups"
egress=.tracelake/egress
rm -rf "$egress"  # receipts of earlier demo runs
user=42

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Build identity filters for $signups (written by plain Spark, partitioned by ds)"
"$tl" privacy index "$signups" --identity user_id

step "Declare it a privacy target; lineage adds every table user_id flows into"
"$tl" privacy declare "$signups" --identity user_id
"$tl" privacy targets

step "Access request for user $user: the filters pick the files, Spark reads only those"
"$tl" privacy access --user "$user" --dataset "$signups" --egress "$egress" --requester demo
receipt=$(ls -t "$egress"/access-*/receipt.json | head -n 1)
head -n 20 "$receipt"

step "Delete request for user $user: copy-on-write of the files holding the user's rows"
"$tl" privacy delete --user "$user" --dataset "$signups" --requester demo

step "Check the index against the data: every file's filters hold every id in it"
"$tl" privacy verify "$signups"

step "The same access request again finds nothing"
"$tl" privacy access --user "$user" --dataset "$signups" --egress "$egress" --requester demo

step "The audit trail: who asked what, when, what it touched (no ids, no record values)"
"$tl" privacy audit
