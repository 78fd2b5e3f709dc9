#!/usr/bin/env bash
# Side-by-side A/B of two banditd builds on Personalizer's Rank (HTTP) and gRPC's Select: both
# servers run at once, and bandit-personalizer-bench measures each in turn (one HTTP phase and
# one gRPC phase of SECONDS each), REPS times, so both meet the same neighbours in the same
# minutes. Prints the bench's CSV lines per repetition (requests/s, latency, server CPU per
# request).
#
#   bench/http/ab.sh BEFORE_BANDITD AFTER_BANDITD PERSONALIZER_BENCH [REPS] [SECONDS]
#
# Example (the previous commit's build in /tmp/old/build):
#   bench/http/ab.sh /tmp/old/build/bin/banditd build/bin/banditd \
#       build/bin/bandit-personalizer-bench 8 6
set -euo pipefail
BEFORE=$1 AFTER=$2 BENCH=$3 REPS=${4:-3} SECS=${5:-6}
W=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null; rm -rf $W' EXIT
for l in before after; do
  bin=$BEFORE; [ $l = after ] && bin=$AFTER
  mkdir -p $W/$l
  $bin --listen=127.0.0.1:0 --metrics_listen= --http_listen=127.0.0.1:0 --data_dir=$W/$l/data \
    --durability=none --port_file=$W/$l/ports 2>$W/$l/log &
  PIDS+=($!); echo $! > $W/$l/pid
  for _ in $(seq 200); do [ -s $W/$l/ports ] && break; sleep 0.05; done
done
for r in $(seq $REPS); do
  for l in before after; do
    read g m h < $W/$l/ports
    echo "== rep $r $l load $(cut -d' ' -f1 /proc/loadavg)"
    $BENCH --grpc=127.0.0.1:$g --http_port=$h --actions=50 --inflight=64 --seconds=$SECS --rounds=1 \
      --server_pid=$(cat $W/$l/pid) \
      --config='policy { linucb {} } feature_space { bits: 8 interactions: "UI" }' 2>/dev/null
  done
done
