#!/usr/bin/env bash
# Side-by-side A/B of server binaries: every target is started once, then measured in turn
# (same load, same minute, order fixed within a repetition), so builds can be compared on a
# noisy machine. Prints one line per run: rounds/s, round p50/p99, server and client CPU per round.
#
#   bench/ab.sh [-r REPS] [-d SECONDS] [-i INFLIGHT] [-l LOADGEN] LABEL=KIND:BINARY[:DURABILITY[:BATCH]] ...
#
#   KIND is echo or banditd; DURABILITY (banditd only) is none, everysec or always. BATCH > 1
#   measures the batch form (SelectBatch of BATCH items, then UpdateBatch of their rewards); a
#   round is then one item's Select + Update, so rounds/s of single and batch runs compare
#   directly. A batch run of the echo leaves DURABILITY empty: b10=echo:build/bin/bandit-echo::10
#   Example (previous commit's build in /tmp/old/build):
#     bench/ab.sh -r 3 -d 6 echo_old=echo:/tmp/old/build/bin/bandit-echo \
#        none_old=banditd:/tmp/old/build/bin/banditd:none \
#        echo=echo:build/bin/bandit-echo none=banditd:build/bin/banditd:none
set -euo pipefail

REPS=3 DUR=4 INFLIGHT=64 LOADGEN=build/bin/bandit-loadgen
while getopts "r:d:i:l:" opt; do
  case $opt in
    r) REPS=$OPTARG ;; d) DUR=$OPTARG ;; i) INFLIGHT=$OPTARG ;; l) LOADGEN=$OPTARG ;;
    *) sed -n 2,15p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { sed -n 2,15p "$0"; exit 2; }
[ -x "$LOADGEN" ] || { echo "no load generator at $LOADGEN (build it, or pass -l)"; exit 1; }

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

declare -A PORT PID SVC BATCH
LABELS=()
for spec in "$@"; do
  label=${spec%%=*}
  IFS=: read -r kind bin mode batch <<<"${spec#*=}"
  BATCH[$label]=${batch:-1}
  [ -x "$bin" ] || { echo "$label: no executable $bin"; exit 1; }
  mkdir -p "$WORK/$label"
  case $kind in
    echo)
      "$bin" --listen=127.0.0.1:0 --port_file="$WORK/$label/ports" 2>"$WORK/$label/log" &
      SVC[$label]=echo ;;
    banditd)
      "$bin" --listen=127.0.0.1:0 --metrics_listen= --data_dir="$WORK/$label/data" \
        --durability="${mode:-none}" --port_file="$WORK/$label/ports" 2>"$WORK/$label/log" &
      SVC[$label]=bandit ;;
    *) echo "$label: kind must be echo or banditd"; exit 1 ;;
  esac
  PID[$label]=$!
  PIDS+=($!)
  LABELS+=("$label")
  for _ in $(seq 200); do [ -s "$WORK/$label/ports" ] && break; sleep 0.05; done
  PORT[$label]=$(cut -d' ' -f1 "$WORK/$label/ports")
done

for r in $(seq 1 "$REPS"); do
  for label in "${LABELS[@]}"; do
    out="$WORK/$label/rep$r.json"
    "$LOADGEN" --service="${SVC[$label]}" --target="127.0.0.1:${PORT[$label]}" \
      --server_pid="${PID[$label]}" --instance=bench --policy=glb_omd --d=20 --arms=50 \
      --label="$label" --out="$out" --channels=1 --inflight="$INFLIGHT" --duration_s="$DUR" \
      --batch="${BATCH[$label]}" --warmup_s=1 >/dev/null 2>&1 || { echo "$label rep $r: load generator failed"; continue; }
    /usr/bin/python3 - "$out" "$label" "$r" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
n = max(r["rounds"], 1)
lat = r["latency_us"]["round"]
print(f"rep {sys.argv[3]} {sys.argv[2]:14s} rounds/s {r['rounds_per_s']:8.0f}  p50 {lat['p50']:7.0f} us"
      f"  p99 {lat['p99']:7.0f} us  server CPU/round {1e6 * r['server_cpu_s'] / n:6.1f} us"
      f"  client CPU/round {1e6 * r['client_cpu_s'] / n:6.1f} us  RPC/s {r['rpcs_per_s']:7.0f}"
      f"  errors {r['errors']}")
PY
  done
done
