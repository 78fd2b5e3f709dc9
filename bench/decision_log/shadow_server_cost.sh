#!/usr/bin/env bash
# A shadow's cost through the real server: one banditd (file journal, --durability=none, default
# snapshot schedule), two GLB-OMD instances (d = 20, S = 3: the load generator's reward model)
# that differ only in one GLB-OMD shadow (radius_multiplier 0.5, so its choices differ), and the
# load generator (50 candidates per Select, Select + Update = one round, 64 in flight) on each in
# turn, REPS times; banditd's CPU per round from /proc. At the end it checks that the shadow
# scored rounds and counted no error.
#   bench/decision_log/shadow_server_cost.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/server_pair.sh"
: "${1:?usage: shadow_server_cost.sh BUILD_DIR [REPS] [SECONDS]}"
start_banditd "$1"
policy='policy { glb_omd { dimension: 20 s: 3 } }'
"${ctl[@]}" create plain --config="$policy" >/dev/null
"${ctl[@]}" create shadowed --config="$policy" >/dev/null
"${ctl[@]}" shadow add shadowed challenger \
  --config='policy { glb_omd { dimension: 20 s: 3 radius_multiplier: 0.5 } } seed: 2' >/dev/null
measure_pair glb_omd plain shadowed "${2:-3}" "${3:-4}"
"${ctl[@]}" shadow list shadowed | grep -E '^\s*(events|errors|unscored):' || true
