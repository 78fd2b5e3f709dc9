#!/usr/bin/env bash
# CPU of exporting a decision log through the real server, per exported decision: one banditd
# (file journal, --durability=none), an arm-set instance of POLICY with the log on, filled by the
# load generator for SECONDS (64 in flight), then `banditctl log --format=jsonl` to /dev/null,
# REPS times; banditd's CPU during each export from /proc. Thompson sampling's log holds its
# posteriors and the export computes each decision's probability vector from them, so its export
# costs what the Select no longer does; epsilon_greedy's log holds the vector itself.
#   bench/decision_log/export_cost.sh BUILD_DIR [POLICY] [ARMS] [SECONDS] [REPS]
# POLICY: thompson (default) or epsilon_greedy (epsilon 0.1). Defaults: 10 arms, 10 s, 3 reps.
set -euo pipefail
source "$(dirname "$0")/server_pair.sh"
: "${1:?usage: export_cost.sh BUILD_DIR [POLICY] [ARMS] [SECONDS] [REPS]}"
policy=${2:-thompson}
arms=${3:-10}
fill_s=${4:-10}
reps=${5:-3}
[[ "$policy" == linucb ]] && { echo "export_cost.sh: policy must hold an arm set (thompson, epsilon_greedy)" >&2; exit 2; }
load_arms=$arms
policy_config export_cost.sh "$policy"
start_banditd "$1"
"${ctl[@]}" create logged --config="$config decision_log { enabled: true }" >/dev/null
"$build/bin/bandit-loadgen" --target="127.0.0.1:$port" --instance=logged --policy="$policy" \
  --arms="$arms" --server_pid="$pid" --channels=1 --inflight=64 --duration_s="$fill_s" \
  --warmup_s=1 --out="$dir/fill.json" >/dev/null 2>&1
# utime + stime of banditd, in clock ticks (fields 14 and 15 of /proc/PID/stat).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
echo "shape: $policy, $arms arms; log filled for $fill_s s"
for r in $(seq 1 "$reps"); do
  before=$(cpu_ticks)
  start=$(date +%s.%N)
  events=$("${ctl[@]}" log logged --format=jsonl | wc -l)
  end=$(date +%s.%N)
  after=$(cpu_ticks)
  /usr/bin/python3 -c "
import sys
events, ticks, hz, wall = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print(f'rep $r: {events} decisions exported in {wall:.2f} s wall, banditd CPU {ticks / hz:.2f} s, '
      f'{1e6 * ticks / hz / max(events, 1):.1f} us CPU per decision, {events / wall:.0f} decisions/s')
" "$events" "$((after - before))" "$hz" "$(echo "$end - $start" | bc)"
done
