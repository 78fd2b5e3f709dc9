#!/bin/bash
# Throughput of 1 vs 3 banditd --cluster nodes on loopback, one real PostgreSQL (fsync on).
# For each node count N: a fresh database, N nodes, INSTANCES instances (placed by rendezvous
# hashing), then one bandit-loadgen per instance, all at once, each against the instance's owner
# (clients that route on x-bandit-instance, as HAProxy does). Reports total rounds/s and the CPU
# each node and PostgreSQL spent per round (from /proc), so a CPU-bound machine says so.
# usage: bench/cluster/scale_bench.sh [BUILD_DIR=build] [INSTANCES=12] [SECONDS=8] [NODES="1 3"]
# (NODES may repeat, e.g. "1 3 1 3", to alternate runs on a noisy machine.)
# Prints one JSON object per node count. On a 2-core machine every process shares the same two
# cores: the figure is what this machine does, not what three machines would.
set -euo pipefail
B=${1:-build}/bin
INSTANCES=${2:-12}
SECS=${3:-8}
NODE_COUNTS=${4:-1 3}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
TMP=$(mktemp -d /tmp/bandit-scale-bench-XXXXXX)
chmod 755 "$TMP"
RUNAS=()
if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); mkdir "$TMP/pg"; chown postgres "$TMP" "$TMP/pg"; fi
stop_nodes() {
  for f in "$TMP"/n*/pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  for f in "$TMP"/n*/pid; do [ -f "$f" ] && while kill -0 "$(cat "$f")" 2>/dev/null; do sleep 0.1; done; rm -f "$f"; done
}
cleanup() {
  stop_nodes
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"${RUNAS[@]}" "$PGBIN/initdb" -D "$TMP/pg" -U bandit --auth=trust --no-sync >/dev/null
"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -l "$TMP/pg.log" \
  -o "-c listen_addresses='' -k $TMP -c fsync=on -c max_connections=80" -w start >/dev/null
sql() { psql -h "$TMP" -U bandit -d "$1" -tAc "$2"; }
# utime + stime of a process and its threads, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The postmaster and every child of it (backends, walwriter, checkpointer, ...).
postgres_ticks() {
  local pm t; pm=$(head -1 "$TMP/pg/postmaster.pid"); t=$(ticks "$pm")
  for p in $(pgrep -P "$pm" || true); do [ -r "/proc/$p/stat" ] && t=$((t + $(ticks "$p"))); done
  echo "$t"
}

run=0
for N in $NODE_COUNTS; do
  run=$((run + 1))
  DB=scale_${run}_n$N
  sql postgres "CREATE DATABASE $DB" >/dev/null
  DSN="host=$TMP user=bandit dbname=$DB"
  nodes=()
  for i in $(seq "$N"); do
    id=n$i; nodes+=("$id")
    mkdir -p "$TMP/$id"; rm -f "$TMP/$id/ports"
    "$B/banditd" --listen=127.0.0.1:0 --metrics_listen= --storage=postgres \
      --postgres_dsn="$DSN" --durability=always --cluster --node_id="$id" --lease_ms=3000 \
      --port_file="$TMP/$id/ports" 2>>"$TMP/$id-$N.log" &
    echo $! >"$TMP/$id/pid"
    for _ in $(seq 200); do [ -s "$TMP/$id/ports" ] && break; sleep 0.05; done
    [ -s "$TMP/$id/ports" ] || { echo "node $id did not start" >&2; cat "$TMP/$id-$N.log" >&2; exit 1; }
  done
  port() { cut -d' ' -f1 "$TMP/$1/ports"; }
  sleep 1  # every node sees every other's membership row before instances are placed
  for k in $(seq "$INSTANCES"); do
    "$B/bandit-loadgen" --target=127.0.0.1:$(port n1) --instance=scale$k --policy=glb_omd \
      --d=20 --arms=50 --inflight=1 --warmup_s=0 --duration_s=0.2 --out="$TMP/create.json" >/dev/null
  done
  declare -A before
  for id in "${nodes[@]}"; do before[$id]=$(ticks "$(cat "$TMP/$id/pid")"); done
  pg_before=$(postgres_ticks)
  pids=()
  for k in $(seq "$INSTANCES"); do
    owner=$(sql "$DB" "SELECT owner FROM bandit_leases WHERE instance = 'scale$k'")
    "$B/bandit-loadgen" --target=127.0.0.1:$(port "$owner") --instance=scale$k --policy=glb_omd \
      --d=20 --arms=50 --inflight=4 --warmup_s=1 --duration_s="$SECS" --seed=$k \
      --out="$TMP/load$k.json" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  node_cpu=""
  for id in "${nodes[@]}"; do
    node_cpu+="$id=$(( $(ticks "$(cat "$TMP/$id/pid")") - ${before[$id]} )) "
  done
  pg_cpu=$(( $(postgres_ticks) - pg_before ))
  owners=$(sql "$DB" "SELECT string_agg(owner || ':' || n, ',') FROM (SELECT owner, count(*) AS n FROM bandit_leases GROUP BY owner ORDER BY owner) o")
  /usr/bin/python3 - "$N" "$INSTANCES" "$(getconf CLK_TCK)" "$pg_cpu" "$owners" "$node_cpu" "$TMP"/load*.json <<'PY'
import json, sys
n, instances, hz, pg_ticks, owners, node_cpu = sys.argv[1:7]
runs = [json.load(open(p))["result"] for p in sys.argv[7:]]
rounds = sum(r["rounds"] for r in runs)
rps = sum(r["rounds_per_s"] for r in runs)
hz = int(hz)
cpu = {kv.split("=")[0]: int(kv.split("=")[1]) / hz for kv in node_cpu.split()}
p50 = sorted(r["latency_us"]["round"]["p50"] for r in runs)[len(runs) // 2]
print(json.dumps({"nodes": int(n), "instances": int(instances), "rounds_per_s": round(rps, 1),
                  "round_p50_us_median_over_instances": p50,
                  "errors": sum(r["errors"] for r in runs),
                  "instances_per_node": owners,
                  "node_cpu_ms_per_round": {k: round(1000 * v / max(1, rounds), 3)
                                            for k, v in cpu.items()},
                  "postgres_cpu_ms_per_round": round(1000 * int(pg_ticks) / hz / max(1, rounds), 3)}))
PY
  stop_nodes
  rm -f "$TMP"/load*.json
done
