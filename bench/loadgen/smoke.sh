#!/bin/sh
# bench_loadgen_smoke: bandit-loadgen runs 1 s against a banditd and a bandit-echo on port 0 and
# reports some completed rounds. Nothing about speed is asserted.
#   smoke.sh BANDITD LOADGEN ECHO
set -eu
BANDITD=$1 LOADGEN=$2 ECHO=$3
TMP=$(mktemp -d)
cleanup() {
  [ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null || true
  [ -n "${EPID:-}" ] && kill "$EPID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
"$BANDITD" --listen=127.0.0.1:0 --metrics_listen= --data_dir="$TMP/data" --durability=none \
  --port_file="$TMP/ports" 2>"$TMP/banditd.log" &
SPID=$!
"$ECHO" --listen=127.0.0.1:0 --port_file="$TMP/echo" 2>"$TMP/echo.log" &
EPID=$!
i=0
while [ ! -s "$TMP/ports" ] || [ ! -s "$TMP/echo" ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "servers did not start"; cat "$TMP"/*.log; exit 1; }
  sleep 0.1
done
PORT=$(cut -d' ' -f1 "$TMP/ports")
EPORT=$(cut -d' ' -f1 "$TMP/echo")
"$LOADGEN" --target=127.0.0.1:$PORT --instance=smoke --policy=glb_omd --d=5 --arms=10 \
  --inflight=4 --warmup_s=0.2 --duration_s=1 --out="$TMP/bandit.json"
"$LOADGEN" --service=echo --target=127.0.0.1:$EPORT --d=5 --arms=10 \
  --inflight=4 --warmup_s=0.2 --duration_s=1 --out="$TMP/echo.json"
for f in bandit echo; do
  grep -q '"rounds": [1-9]' "$TMP/$f.json" || { echo "no rounds in $f run"; cat "$TMP/$f.json"; exit 1; }
  grep -q '"errors": 0' "$TMP/$f.json" || { echo "errors in $f run"; cat "$TMP/$f.json"; exit 1; }
done
echo "bench_loadgen_smoke: ok"
