#!/usr/bin/env bash
# The decision log's cost through the real server: one banditd (file journal, --durability=none,
# default snapshot schedule), two LinUCB instances (d = 20) that differ only in
# decision_log.enabled, and the load generator (50 candidates per Select, Select + Update = one
# round, 64 in flight) on each in turn, REPS times; banditd's CPU per round from /proc.
#   bench/decision_log/server_cost.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
build=${1:?usage: server_cost.sh BUILD_DIR [REPS] [SECONDS]}
reps=${2:-3}
dur=${3:-4}
dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
"$build/bin/banditd" --listen=127.0.0.1:0 --port_file="$dir/port" --metrics_listen= \
  --data_dir="$dir/data" --durability=none >"$dir/banditd.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
port=$(awk '{print $1}' "$dir/port")
ctl=("$build/bin/banditctl" --target="127.0.0.1:$port")
"${ctl[@]}" create off --config='policy { linucb { dimension: 20 } }' >/dev/null
"${ctl[@]}" create on \
  --config='policy { linucb { dimension: 20 } } decision_log { enabled: true }' >/dev/null
for r in $(seq 1 "$reps"); do
  for inst in off on; do
    "$build/bin/bandit-loadgen" --target="127.0.0.1:$port" --instance="$inst" --policy=linucb \
      --d=20 --arms=50 --server_pid="$pid" --channels=1 --inflight=64 --duration_s="$dur" \
      --warmup_s=1 --out="$dir/$inst.$r.json" >/dev/null 2>&1
  done
done
/usr/bin/python3 - "$dir" "$reps" <<'PY'
import json, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
cpu = {"off": [], "on": []}
for r in range(1, reps + 1):
    line = []
    for inst in ("off", "on"):
        res = json.load(open(f"{d}/{inst}.{r}.json"))["result"]
        us = 1e6 * res["server_cpu_s"] / max(res["rounds"], 1)
        cpu[inst].append(us)
        line.append(f"{inst} {us:6.1f} us/round ({res['rounds_per_s']:6.0f} rounds/s, errors {res['errors']})")
    print(f"rep {r}: " + ", ".join(line))
off, on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
print(f"median banditd CPU per round: off {off:.1f} us, on {on:.1f} us, on/off {on / off:.3f} "
      f"(log {100 * (on / off - 1):+.1f}%)")
PY
"${ctl[@]}" get on | grep -E "decision_log_(events|bytes|evicted)" || true
