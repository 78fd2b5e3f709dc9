#!/usr/bin/env bash
# Does the decision log's cost per round depend on how much of it is held? One banditd (as
# server_cost.sh: file journal, --durability=none, default snapshot schedule unless
# BANDITD_FLAGS says otherwise), one LinUCB instance without the log and one with it per
# retention (decision_log.max_bytes in MiB), the load generator (50 candidates x 20 doubles,
# Select + Update = one round, 64 in flight) on each in turn, REPS times, the order rotated each
# repetition; banditd's CPU per round from /proc, per repetition and as medians.
#   bench/decision_log/server_retention.sh BUILD_DIR [REPS] [SECONDS] [MIB ...]   (default 64 1)
set -euo pipefail
source "$(dirname "$0")/server_pair.sh"
: "${1:?usage: server_retention.sh BUILD_DIR [REPS] [SECONDS] [MIB ...]}"
build_arg=$1
reps=${2:-5}
dur=${3:-4}
shift $(($# < 3 ? $# : 3))
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(64 1)
config="policy { linucb { dimension: 20 } }"
start_banditd "$build_arg"
names=(off)
"${ctl[@]}" create off --config="$config" >/dev/null
for mib in "${sizes[@]}"; do
  "${ctl[@]}" create "on$mib" \
    --config="$config decision_log { enabled: true max_bytes: $((mib << 20)) }" >/dev/null
  names+=("on$mib")
done
echo "retentions (MiB): ${sizes[*]}${BANDITD_FLAGS:+, banditd $BANDITD_FLAGS}"
n=${#names[@]}
for r in $(seq 1 "$reps"); do
  for k in $(seq 0 $((n - 1))); do
    inst=${names[$(((k + r - 1) % n))]}
    "$build/bin/bandit-loadgen" --target="127.0.0.1:$port" --instance="$inst" --policy=linucb \
      --d=20 --arms=50 --server_pid="$pid" --channels=1 --inflight="${LOADGEN_INFLIGHT:-64}" --duration_s="$dur" \
      --warmup_s=1 --out="$dir/$inst.$r.json" >/dev/null 2>&1
  done
done
/usr/bin/python3 - "$dir" "$reps" "${names[@]}" <<'PY'
import json, statistics, sys
d, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cpu = {name: [] for name in names}
for r in range(1, reps + 1):
    for inst in names:
        res = json.load(open(f"{d}/{inst}.{r}.json"))["result"]
        cpu[inst].append(1e6 * res["server_cpu_s"] / max(res["rounds"], 1))
    print(f"rep {r}: " + ", ".join(f"{inst} {cpu[inst][-1]:6.1f}" for inst in names) + " us/round")
base = statistics.median(cpu["off"])
print(f"median banditd CPU per round: off {base:.1f} us")
for inst in names[1:]:
    m = statistics.median(cpu[inst])
    diffs = [y - x for x, y in zip(cpu["off"], cpu[inst])]
    print(f"  {inst:>6}: {m:.1f} us, {m - base:+.1f} us (per-rep differences "
          f"{min(diffs):.1f}..{max(diffs):.1f}, median {statistics.median(diffs):+.1f}), "
          f"{100 * (m / base - 1):+.1f}%")
PY
for mib in "${sizes[@]}"; do
  echo "on$mib: $("${ctl[@]}" get "on$mib" | grep -E "decision_log_(events|bytes)" | tr -s ' \n' ' ')"
done
