#!/usr/bin/env bash
# Files vs PostgreSQL, side by side on this machine:
#  1. durable rounds/s in `always`: bandit-loadgen (64 in flight, GLB-OMD d=20, 50 candidates)
#     against banditd --storage=file and banditd --storage=postgres, alternated REPS times
#     (file, postgres, file, postgres, ...) so both see the same machine noise;
#  2. bandit-durability-bench --postgres_dsn: in-process throughput per mode and backend
#     (pipelined vs statement-per-round-trip group commit) and recovery of INSTANCES instances
#     from each backend.
# PostgreSQL is the Debian package's, started here with its default settings (fsync on) in a
# temporary directory, on a unix socket, as the `postgres` user when run as root.
#
#   bench/postgres/compare.sh [BUILD_DIR] [OUT_DIR]
#   env: REPS=3 SECONDS_PER_RUN=8 INFLIGHT=64 INSTANCES=10000
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$BUILD/bench/postgres}
REPS=${REPS:-3}
SECS=${SECONDS_PER_RUN:-8}
INFLIGHT=${INFLIGHT:-64}
INSTANCES=${INSTANCES:-10000}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/bandit-pgbench-XXXXXX)
AS=()
if [ "$(id -u)" -eq 0 ]; then
  chown postgres: "$TMP"
  AS=(runuser -u postgres --)
fi
cleanup() {
  [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null || true
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"${AS[@]}" "$PGBIN/initdb" -D "$TMP/pg" -U bandit --auth=trust -E UTF8 >/dev/null
"${AS[@]}" "$PGBIN/pg_ctl" -D "$TMP/pg" -l "$TMP/pg.log" -w \
  -o "-c listen_addresses='' -k $TMP -p 5432" start >/dev/null
DSN="host=$TMP port=5432 user=bandit dbname=postgres"
psql_exec() { "$PGBIN/psql" -q -X "$DSN" -c "$1" >/dev/null; }

serve() {  # serve STORAGE -> starts banditd, sets PORT and SPID
  local storage=$1
  rm -rf "$TMP/data" "$TMP/ports"
  psql_exec "SET client_min_messages TO warning; DROP TABLE IF EXISTS bandit_journal, bandit_snapshots, bandit_schema_version"
  "$BUILD/bin/banditd" --listen=127.0.0.1:0 --metrics_listen= --durability=always \
    --storage="$storage" --postgres_dsn="$DSN" --data_dir="$TMP/data" \
    --port_file="$TMP/ports" 2>"$TMP/banditd-$storage.log" &
  SPID=$!
  for _ in $(seq 100); do [ -s "$TMP/ports" ] && break; sleep 0.1; done
  PORT=$(cut -d' ' -f1 "$TMP/ports")
}

echo "loadgen: $REPS x (file, postgres), ${SECS} s each, $INFLIGHT in flight, durability=always"
for rep in $(seq "$REPS"); do
  for storage in file postgres; do
    serve "$storage"
    "$BUILD/bin/bandit-loadgen" --target=127.0.0.1:$PORT --instance=bench --policy=glb_omd \
      --d=20 --arms=50 --inflight="$INFLIGHT" --warmup_s=1 --duration_s="$SECS" \
      --server_pid="$SPID" --label="$storage always rep $rep" \
      --out="$OUT/loadgen-$storage-$rep.json" 2>/dev/null
    kill "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=
    printf '%s rep %s: %s rounds/s\n' "$storage" "$rep" \
      "$(grep -o '"rounds_per_s": [0-9.]*' "$OUT/loadgen-$storage-$rep.json" | head -1 | cut -d' ' -f2)"
  done
done

echo "durability bench (in-process, both backends)"
"$BUILD/bin/bandit-durability-bench" --dir="$TMP/dbench" --instances="$INSTANCES" \
  --updates_per_instance=20 --threads=1,8,64 --seconds=3 --postgres_dsn="$DSN" \
  --out="$OUT/durability.json"
echo "results in $OUT"
