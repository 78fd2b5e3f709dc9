#!/bin/bash
# Cluster bench on loopback: a real PostgreSQL (fsync on) and three banditd --cluster nodes.
#  1. cost of a forwarded call: bandit-loadgen against the instance's owner (direct) and against
#     another node (every call forwarded), same instance, one after the other;
#  2. takeover time: KILLS times, kill -9 the owner, then time until a GetInstance through
#     another node succeeds (lease expiry + claim + load), then restart the killed node.
# usage: bench/cluster/cluster_bench.sh [BUILD_DIR=build] [KILLS=10] [LEASE_MS=1500] [SECONDS=5]
#                                       [REPEAT=3]
# The direct and forwarded runs alternate REPEAT times (the machine is noisy: compare medians).
# Prints one JSON object per measurement. Run under nice on a shared machine.
set -euo pipefail
B=${1:-build}/bin
KILLS=${2:-10}
LEASE=${3:-1500}
SECS=${4:-5}
REPEAT=${5:-3}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
TMP=$(mktemp -d /tmp/bandit-cluster-bench-XXXXXX)
chmod 755 "$TMP"
RUNAS=()
if [ "$(id -u)" = 0 ]; then RUNAS=(runuser -u postgres --); mkdir "$TMP/pg"; chown postgres "$TMP" "$TMP/pg"; fi
cleanup() {
  for f in "$TMP"/n*/pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 1
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"${RUNAS[@]}" "$PGBIN/initdb" -D "$TMP/pg" -U bandit --auth=trust --no-sync >/dev/null
"${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -l "$TMP/pg.log" \
  -o "-c listen_addresses='' -k $TMP -c fsync=on -c max_connections=50" -w start >/dev/null
DSN="host=$TMP user=bandit dbname=postgres"
sql() { psql -h "$TMP" -U bandit -d postgres -tAc "$1"; }

start_node() {
  local id=$1
  mkdir -p "$TMP/$id"
  rm -f "$TMP/$id/ports"
  "$B/banditd" --listen=127.0.0.1:0 --metrics_listen= --storage=postgres --postgres_dsn="$DSN" \
    --cluster --node_id="$id" --lease_ms="$LEASE" --port_file="$TMP/$id/ports" \
    2>>"$TMP/$id.log" &
  echo $! >"$TMP/$id/pid"
  for _ in $(seq 200); do [ -s "$TMP/$id/ports" ] && return 0; sleep 0.05; done
  echo "node $id did not start" >&2; cat "$TMP/$id.log" >&2; exit 1
}
port() { cut -d' ' -f1 "$TMP/$1/ports"; }
for id in n1 n2 n3; do start_node "$id"; done

# The instance, created through n1 (placed on its rendezvous owner).
"$B/bandit-loadgen" --target=127.0.0.1:$(port n1) --instance=bench --policy=glb_omd --d=20 \
  --arms=50 --inflight=1 --warmup_s=0 --duration_s=0.3 --out="$TMP/create.json" >/dev/null
OWNER=$(sql "SELECT owner FROM bandit_leases WHERE instance = 'bench'")
OTHER=n1; [ "$OWNER" = n1 ] && OTHER=n2
for target in $(for _ in $(seq "$REPEAT"); do echo "$OWNER $OTHER"; done); do
  kind=direct; [ "$target" = "$OWNER" ] || kind=forwarded
  "$B/bandit-loadgen" --target=127.0.0.1:$(port "$target") --instance=bench --policy=glb_omd \
    --d=20 --arms=50 --inflight=16 --warmup_s=1 --duration_s="$SECS" \
    --server_pid="$(cat "$TMP/$OWNER/pid")" --out="$TMP/$kind.json" >/dev/null
  /usr/bin/python3 - "$TMP/$kind.json" "$kind" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["result"]
print(json.dumps({"measure": sys.argv[2], "rounds_per_s": round(j["rounds_per_s"], 1),
                  "round_p50_us": j["latency_us"]["round"]["p50"],
                  "round_p99_us": j["latency_us"]["round"]["p99"],
                  "owner_cpu_s_per_round": j.get("server_cpu_s", 0) / max(1, j["rounds"]),
                  "errors": j["errors"]}))
PY
done

# Takeover times.
times=()
for _ in $(seq "$KILLS"); do
  OWNER=$(sql "SELECT owner FROM bandit_leases WHERE instance = 'bench'")
  VIA=n1; [ "$OWNER" = n1 ] && VIA=n2
  kill -9 "$(cat "$TMP/$OWNER/pid")"
  t0=$(date +%s%N)
  until "$B/banditctl" --target=127.0.0.1:$(port "$VIA") --deadline_ms=2000 get bench >/dev/null 2>&1; do
    sleep 0.02
  done
  t1=$(date +%s%N)
  times+=("$(( (t1 - t0) / 1000000 ))")
  start_node "$OWNER"  # waits for its old membership to expire, then rejoins
  sleep $(( LEASE / 1000 + 1 ))
done
[ "$KILLS" -gt 0 ] || exit 0
/usr/bin/python3 - "$LEASE" "${times[@]}" <<'PY'
import json, statistics, sys
lease = int(sys.argv[1]); t = sorted(int(x) / 1000 for x in sys.argv[2:])
print(json.dumps({"measure": "takeover_after_kill9", "lease_ms": lease, "kills": len(t),
                  "median_s": round(statistics.median(t), 3), "max_s": round(max(t), 3),
                  "min_s": round(min(t), 3), "all_s": [round(x, 3) for x in t]}))
PY
