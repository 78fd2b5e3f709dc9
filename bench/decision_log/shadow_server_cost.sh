#!/usr/bin/env bash
# A shadow's cost through the real server: one banditd (file journal, --durability=none, default
# snapshot schedule), two GLB-OMD instances (d = 20, S = 3: the load generator's reward model)
# that differ only in one GLB-OMD shadow (radius_multiplier 0.5, so its choices differ), and the
# load generator (50 candidates per Select, Select + Update = one round, 64 in flight) on each in
# turn, REPS times; banditd's CPU per round from /proc. At the end it checks that the shadow
# scored rounds and counted no error.
#   bench/decision_log/shadow_server_cost.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
build=${1:?usage: shadow_server_cost.sh BUILD_DIR [REPS] [SECONDS]}
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
policy='policy { glb_omd { dimension: 20 s: 3 } }'
"${ctl[@]}" create plain --config="$policy" >/dev/null
"${ctl[@]}" create shadowed --config="$policy" >/dev/null
"${ctl[@]}" shadow add shadowed challenger \
  --config='policy { glb_omd { dimension: 20 s: 3 radius_multiplier: 0.5 } } seed: 2' >/dev/null
for r in $(seq 1 "$reps"); do
  for inst in plain shadowed; do
    "$build/bin/bandit-loadgen" --target="127.0.0.1:$port" --instance="$inst" --policy=glb_omd \
      --d=20 --arms=50 --server_pid="$pid" --channels=1 --inflight=64 --duration_s="$dur" \
      --warmup_s=1 --out="$dir/$inst.$r.json" >/dev/null 2>&1
  done
done
/usr/bin/python3 - "$dir" "$reps" <<'PY'
import json, statistics, sys
d, reps = sys.argv[1], int(sys.argv[2])
cpu = {"plain": [], "shadowed": []}
for r in range(1, reps + 1):
    line = []
    for inst in ("plain", "shadowed"):
        res = json.load(open(f"{d}/{inst}.{r}.json"))["result"]
        us = 1e6 * res["server_cpu_s"] / max(res["rounds"], 1)
        cpu[inst].append(us)
        line.append(f"{inst} {us:6.1f} us/round ({res['rounds_per_s']:6.0f} rounds/s, errors {res['errors']})")
    print(f"rep {r}: " + ", ".join(line))
a, b = statistics.median(cpu["plain"]), statistics.median(cpu["shadowed"])
diffs = [y - x for x, y in zip(cpu["plain"], cpu["shadowed"])]
print(f"median banditd CPU per round: no shadow {a:.1f} us, 1 shadow {b:.1f} us, "
      f"shadow +{b - a:.1f} us (per-rep differences {min(diffs):.1f}..{max(diffs):.1f}), "
      f"ratio {b / a:.3f}")
PY
"${ctl[@]}" shadow list shadowed | grep -E '^\s*(events|errors|unscored):' || true
