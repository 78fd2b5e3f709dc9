#!/usr/bin/env bash
# make bench: every figure of docs/performance.md in one run (about 8 minutes on 2 cores).
# Nothing here asserts a speed; the figures go to summary.md and docs/parts/results_perf.md.
#
#   ./bench/run_all.sh BUILD_DIR
#
# Writes into BUILD_DIR/bench/:
#   machine.json           nproc, CPU model, kernel, memory, git sha, load average
#   micro.json             Google Benchmark (bandit-microbench), every benchmark once, JSON
#   micro_glb.json         the GLB-OMD grid again, 5 repetitions -> median (the in-process target)
#   inprocess.json         per-round time and state size against t for every policy (flatness)
#   e2e/rep*_*.json        side by side, alternating: echo (ceiling), banditd --durability=none,
#                          =everysec, =always; paired Select+Update at 64 in-flight RPCs
#   sweep/*.json           echo vs banditd (none) at 1..256 in-flight, and batched
#   scale.json             10 000 GLB-OMD instances: create, list, serve, RSS per instance
#   summary.md, perf_*.png tables (medians, ratios to echo) and charts
#
# Knobs (environment): BENCH_REPS (5), BENCH_DURATION_S (8), BENCH_INFLIGHT (64),
# BENCH_INSTANCES (10000), BENCH_SKIP_MICRO=1, BENCH_QUICK=1 (short runs, for trying it out).
set -euo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
BIN=$BUILD/bin
OUT=$BUILD/bench
PY=/usr/bin/python3
REPS=${BENCH_REPS:-5}
DUR=${BENCH_DURATION_S:-8}
INFLIGHT=${BENCH_INFLIGHT:-64}
SCALE_N=${BENCH_INSTANCES:-10000}
SWEEP_DUR=4
MICRO_MIN_TIME=0.05
INPROC_BUDGET=5
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  REPS=1 DUR=2 SWEEP_DUR=1 SCALE_N=${BENCH_INSTANCES:-1000} MICRO_MIN_TIME=0.01 INPROC_BUDGET=1
fi

for b in banditd bandit-loadgen bandit-echo; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b (build first: make build)"; exit 1; }
done
mkdir -p "$OUT/e2e" "$OUT/sweep"
rm -f "$OUT"/e2e/*.json "$OUT"/sweep/*.json
WORK=$(mktemp -d "$OUT/run.XXXXXX")  # on the build disk: fsync costs are real
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
T0=$(date +%s)
log() { echo "[bench +$(( $(date +%s) - T0 ))s] $*"; }

# ---- the machine ----
"$PY" - "$OUT/machine.json" "$ROOT" <<'EOF'
import json, os, platform, subprocess, sys
def cpu_model():
    for line in open('/proc/cpuinfo'):
        if line.startswith('model name'):
            return line.split(':', 1)[1].strip()
    return platform.processor()
mem = next((l.split()[1] for l in open('/proc/meminfo') if l.startswith('MemTotal')), '0')
try:
    sha = subprocess.check_output(['git', '-C', sys.argv[2], 'rev-parse', '--short', 'HEAD'],
                                  text=True, stderr=subprocess.DEVNULL).strip()
except Exception:
    sha = 'unknown'
json.dump({'nproc': os.cpu_count(), 'cpu_model': cpu_model(), 'kernel': platform.release(),
           'mem_total_kib': int(mem), 'git_sha': sha, 'loadavg_at_start': os.getloadavg(),
           'date': subprocess.check_output(['date', '-Iseconds'], text=True).strip()},
          open(sys.argv[1], 'w'), indent=2)
EOF
log "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

# ---- servers: started once, idle while another is measured ----
wait_port() {  # FILE -> prints the first field once the file exists
  local i=0
  while [ ! -s "$1" ]; do
    i=$((i + 1)); [ $i -gt 200 ] && { echo "server did not write $1" >&2; exit 1; }
    sleep 0.05
  done
  cut -d' ' -f1 "$1"
}
declare -A PORT SPID
start_banditd() {  # NAME DURABILITY
  mkdir -p "$WORK/$1"
  "$BIN/banditd" --listen=127.0.0.1:0 --metrics_listen= --data_dir="$WORK/$1/data" \
    --durability="$2" --port_file="$WORK/$1/ports" 2>"$WORK/$1/log" &
  SPID[$1]=$!; PIDS+=($!)
  PORT[$1]=$(wait_port "$WORK/$1/ports")
}
start_echo() {
  mkdir -p "$WORK/echo"
  "$BIN/bandit-echo" --listen=127.0.0.1:0 --port_file="$WORK/echo/ports" 2>"$WORK/echo/log" &
  SPID[echo]=$!; PIDS+=($!)
  PORT[echo]=$(wait_port "$WORK/echo/ports")
}

loadgen() {  # TARGET_NAME OUTFILE extra flags...
  local name=$1 out=$2; shift 2
  local svc=bandit
  [ "$name" = echo ] && svc=echo
  "$BIN/bandit-loadgen" --service=$svc --target=127.0.0.1:${PORT[$name]} \
    --server_pid=${SPID[$name]} --instance=bench --policy=glb_omd --d=20 --arms=50 \
    --label="$name" --out="$out" "$@" || log "loadgen against $name failed (see $out)"
}

# ---- 1. micro benchmarks (in-process, Google Benchmark) ----
# Every benchmark once (the whole suite with 3 repetitions takes ~6 minutes here: several have
# long warm-ups), then the GLB-OMD grid (the in-process target) with 5 repetitions -> median.
if [ "${BENCH_SKIP_MICRO:-0}" != 1 ] && [ -x "$BIN/bandit-microbench" ]; then
  log "micro benchmarks (min_time ${MICRO_MIN_TIME}s, once each)"
  "$BIN/bandit-microbench" --benchmark_min_time=$MICRO_MIN_TIME --benchmark_format=console \
    --benchmark_out="$OUT/micro.json" --benchmark_out_format=json >"$OUT/micro.txt" 2>&1 ||
    log "bandit-microbench failed (see $OUT/micro.txt)"
  log "micro benchmarks: GLB-OMD grid, 5 repetitions"
  "$BIN/bandit-microbench" --benchmark_filter='BM_GlbOmd/' --benchmark_min_time=0.2 \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/micro_glb.json" --benchmark_out_format=json >"$OUT/micro_glb.txt" 2>&1 ||
    log "bandit-microbench (GLB-OMD) failed (see $OUT/micro_glb.txt)"
fi

# ---- 2. per-round time against t for every policy (in-process) ----
log "in-process per-round time against t (budget ${INPROC_BUDGET}s per policy)"
"$BIN/bandit-loadgen" --inprocess --d=20 --arms=50 --inprocess_rounds=100000 \
  --inprocess_budget_s=$INPROC_BUDGET --out="$OUT/inprocess.json"

# ---- 3. echo vs banditd side by side, alternating ----
start_echo
start_banditd none none
start_banditd everysec everysec
start_banditd always always
log "servers: echo ${PORT[echo]}, none ${PORT[none]}, everysec ${PORT[everysec]}, always ${PORT[always]}"
TARGETS=(echo none everysec always)
for r in $(seq 1 "$REPS"); do
  for k in 0 1 2 3; do  # rotate the order every repetition
    name=${TARGETS[$(( (k + r - 1) % 4 ))]}
    log "e2e rep $r/$REPS: $name (${INFLIGHT} in flight, ${DUR}s)"
    loadgen "$name" "$OUT/e2e/rep${r}_${name}.json" --channels=1 --inflight="$INFLIGHT" \
      --duration_s="$DUR" --warmup_s=1
  done
done

# ---- 4. concurrency sweep and batching: echo vs banditd (none) ----
for inf in 1 8 64 256; do
  for name in echo none; do
    log "sweep: $name at $inf in flight"
    loadgen "$name" "$OUT/sweep/inflight${inf}_${name}.json" --channels=1 --inflight="$inf" \
      --duration_s=$SWEEP_DUR --warmup_s=0.5
  done
done
for name in echo none; do
  log "sweep: $name batched (10 items per RPC, 8 in flight)"
  loadgen "$name" "$OUT/sweep/batch10_${name}.json" --channels=1 --inflight=8 --batch=10 \
    --duration_s=$SWEEP_DUR --warmup_s=0.5
done
for p in "${SPID[echo]}" "${SPID[none]}" "${SPID[everysec]}" "${SPID[always]}"; do
  kill "$p" 2>/dev/null || true
done
wait 2>/dev/null || true
PIDS=()

# ---- 5. many instances on a fresh server ----
start_banditd scale none
log "scale: $SCALE_N GLB-OMD instances (d = 20) on a fresh banditd (durability none)"
"$BIN/bandit-loadgen" --target=127.0.0.1:${PORT[scale]} --server_pid=${SPID[scale]} \
  --instances="$SCALE_N" --policy=glb_omd --d=20 --arms=50 --inflight=64 \
  --label=scale --out="$OUT/scale.json"
kill "${SPID[scale]}" 2>/dev/null || true
wait 2>/dev/null || true
PIDS=()

# ---- 6. tables and charts ----
log "report"
"$PY" "$ROOT/bench/plots/perf_report.py" "$OUT"
log "done: $OUT/summary.md and $OUT/perf_*.png"
