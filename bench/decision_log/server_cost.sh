#!/usr/bin/env bash
# The decision log's cost through the real server: one banditd (file journal, --durability=none,
# default snapshot schedule), two LinUCB instances (d = 20) that differ only in
# decision_log.enabled, and the load generator (50 candidates per Select, Select + Update = one
# round, 64 in flight) on each in turn, REPS times; banditd's CPU per round from /proc.
#   bench/decision_log/server_cost.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/server_pair.sh"
: "${1:?usage: server_cost.sh BUILD_DIR [REPS] [SECONDS]}"
start_banditd "$1"
"${ctl[@]}" create off --config='policy { linucb { dimension: 20 } }' >/dev/null
"${ctl[@]}" create on \
  --config='policy { linucb { dimension: 20 } } decision_log { enabled: true }' >/dev/null
measure_pair linucb off on "${2:-3}" "${3:-4}"
"${ctl[@]}" get on | grep -E "decision_log_(events|bytes|evicted)" || true
