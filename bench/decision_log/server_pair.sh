# Shared by server_cost.sh and shadow_server_cost.sh (sourced, not run): one banditd (file
# journal, --durability=none, default snapshot schedule) and the load generator (50 candidates per
# Select, Select + Update = one round, 64 in flight) on two instances in turn, REPS times;
# banditd's CPU per round from /proc, as medians, their difference and ratio.

# policy_config SCRIPT POLICY: sets config, the InstanceConfig of the policy the load generator
# drives (linucb over load_d-dimensional candidates; epsilon_greedy, epsilon 0.1, or thompson
# over load_arms arms); exits naming SCRIPT for any other.
policy_config() {
  case "$2" in
    linucb) config="policy { linucb { dimension: ${load_d:-20} } }" ;;
    epsilon_greedy) config="policy { num_arms: ${load_arms:-50} epsilon_greedy { epsilon: 0.1 } }" ;;
    thompson) config="policy { num_arms: ${load_arms:-50} thompson { } }" ;;
    *) echo "$1: policy '$2' is not linucb, epsilon_greedy or thompson" >&2; exit 2 ;;
  esac
}

# start_banditd BUILD_DIR: sets dir, pid, port and ctl (banditctl with its target). Extra banditd
# flags come from BANDITD_FLAGS (environment), e.g. a snapshot schedule.
start_banditd() {
  build=$1
  dir=$(mktemp -d)
  trap 'kill "${pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
  "$build/bin/banditd" --listen=127.0.0.1:0 --port_file="$dir/port" --metrics_listen= \
    --data_dir="$dir/data" --durability=none ${BANDITD_FLAGS:-} >"$dir/banditd.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
  port=$(awk '{print $1}' "$dir/port")
  ctl=("$build/bin/banditctl" --target="127.0.0.1:$port")
}

# measure_pair LOADGEN_POLICY BASE OTHER REPS SECONDS: alternates the two instances, prints each
# repetition and the medians (OTHER against BASE). The request shape comes from load_d (feature
# dimension, default 20) and load_arms (candidates per Select, or arms of an arm set; default 50);
# the calls in flight from LOADGEN_INFLIGHT (environment, default 64).
measure_pair() {
  local policy=$1 base=$2 other=$3 reps=$4 dur=$5 r inst
  for r in $(seq 1 "$reps"); do
    for inst in "$base" "$other"; do
      "$build/bin/bandit-loadgen" --target="127.0.0.1:$port" --instance="$inst" --policy="$policy" \
        --d="${load_d:-20}" --arms="${load_arms:-50}" --server_pid="$pid" --channels=1 --inflight="${LOADGEN_INFLIGHT:-64}" --duration_s="$dur" \
        --warmup_s=1 --out="$dir/$inst.$r.json" >/dev/null 2>&1
    done
  done
  /usr/bin/python3 - "$dir" "$reps" "$base" "$other" <<'PY'
import json, statistics, sys
d, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:5]
cpu = {name: [] for name in names}
for r in range(1, reps + 1):
    line = []
    for inst in names:
        res = json.load(open(f"{d}/{inst}.{r}.json"))["result"]
        us = 1e6 * res["server_cpu_s"] / max(res["rounds"], 1)
        cpu[inst].append(us)
        line.append(f"{inst} {us:6.1f} us/round ({res['rounds_per_s']:6.0f} rounds/s, errors {res['errors']})")
    print(f"rep {r}: " + ", ".join(line))
a, b = (statistics.median(cpu[n]) for n in names)
diffs = [y - x for x, y in zip(cpu[names[0]], cpu[names[1]])]
print(f"median banditd CPU per round: {names[0]} {a:.1f} us, {names[1]} {b:.1f} us, "
      f"{names[1]} {b - a:+.1f} us (per-rep differences {min(diffs):.1f}..{max(diffs):.1f}), "
      f"{names[1]}/{names[0]} {b / a:.3f} ({100 * (b / a - 1):+.1f}%)")
PY
}
