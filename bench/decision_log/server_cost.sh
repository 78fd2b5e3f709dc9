#!/usr/bin/env bash
# The decision log's cost through the real server: one banditd (file journal, --durability=none,
# default snapshot schedule), two instances of the same policy that differ only in
# decision_log.enabled, and the load generator (Select + Update = one round, 64 in flight) on
# each in turn, REPS times; banditd's CPU per round from /proc.
#   bench/decision_log/server_cost.sh BUILD_DIR [REPS] [SECONDS] [POLICY] [D] [ARMS]
# POLICY: linucb (default; D-dimensional candidates, ARMS of them per Select), epsilon_greedy
# (epsilon 0.1) or thompson (arm sets of ARMS arms; D unused). Defaults: linucb, D = 20, 50
# candidates. bench/decision_log/server_shapes.sh runs the shapes users send, one after another.
# LOG_OPTIONS (environment) is added to the "on" instance's decision_log config, e.g.
# LOG_OPTIONS="max_bytes: 1048576"; BANDITD_FLAGS (environment) to banditd's command line.
set -euo pipefail
source "$(dirname "$0")/server_pair.sh"
: "${1:?usage: server_cost.sh BUILD_DIR [REPS] [SECONDS] [POLICY] [D] [ARMS]}"
policy=${4:-linucb}
load_d=${5:-20}
load_arms=${6:-50}
policy_config server_cost.sh "$policy"
start_banditd "$1"
"${ctl[@]}" create off --config="$config" >/dev/null
"${ctl[@]}" create on --config="$config decision_log { enabled: true ${LOG_OPTIONS:-} }" >/dev/null
echo "shape: $policy, d = $load_d, $load_arms candidates/arms per Select${LOG_OPTIONS:+, log: $LOG_OPTIONS}${BANDITD_FLAGS:+, banditd $BANDITD_FLAGS}"
measure_pair "$policy" off on "${2:-3}" "${3:-4}"
"${ctl[@]}" get on | grep -E "decision_log_(events|bytes|evicted)" || true
