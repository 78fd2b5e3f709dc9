#!/usr/bin/env bash
# The decision log's cost through banditd at the context sizes users send (server_cost.sh once
# per shape, each with a fresh banditd and its log on/off alternated REPS times):
#   ε-greedy with 10 arms (an arm set: the log entry is the arm set's probabilities),
#   Thompson sampling with 10 arms,
#   LinUCB d = 5 with 10 candidates, d = 20 with 10 candidates, d = 20 with 50 candidates.
#   bench/decision_log/server_shapes.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
here=$(dirname "$0")
: "${1:?usage: server_shapes.sh BUILD_DIR [REPS] [SECONDS]}"
for shape in "epsilon_greedy 0 10" "thompson 0 10" "linucb 5 10" "linucb 20 10" "linucb 20 50"; do
  read -r policy d arms <<<"$shape"
  "$here/server_cost.sh" "$1" "${2:-3}" "${3:-4}" "$policy" "$d" "$arms"
done
