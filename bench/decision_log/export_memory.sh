#!/usr/bin/env bash
# Memory of a million-event decision log export through the real server and client:
#   bench/decision_log/export_memory.sh BUILD_DIR [EVENTS]
# Prepares a data dir whose instance holds EVENTS logged decisions (in-process, then a
# snapshot), starts banditd on it, streams the log with `banditctl log --format=dsjson` to
# /dev/null, and reports banditd's resident memory before the export, its highest value sampled
# every 20 ms during the export (the part the export adds), its lifetime peak (VmHWM, which
# includes loading the log at start), and banditctl's peak (GNU time's maximum resident set
# size).
set -euo pipefail
build=${1:?usage: export_memory.sh BUILD_DIR [EVENTS]}
events=${2:-1000000}
dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$build/bin/bandit-decision-log-bench" --prepare_data_dir="$dir/data" --events="$events"
"$build/bin/banditd" --listen=127.0.0.1:0 --port_file="$dir/port" --metrics_listen=127.0.0.1:0 \
  --data_dir="$dir/data" --durability=none >"$dir/banditd.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.1; done
port=$(awk '{print $1}' "$dir/port")
"$build/bin/banditctl" --target="127.0.0.1:$port" get big >/dev/null
rss() { awk "/^$1:/ {print \$2}" "/proc/$pid/status"; }
before=$(rss VmRSS); hwm_before=$(rss VmHWM)
# Samples banditd's RSS until the export ends (the flag file appears).
(peak=0; while [[ ! -e "$dir/done" ]]; do
   r=$(rss VmRSS); (( r > peak )) && peak=$r; sleep 0.02
 done; echo "$peak" >"$dir/peak_kb") &
sampler=$!
start=$(date +%s.%N)
/usr/bin/time -f "%M" -o "$dir/ctl_kb" "$build/bin/banditctl" --target="127.0.0.1:$port" \
  log big --format=dsjson 2>"$dir/ctl.err" | wc -lc >"$dir/count"
end=$(date +%s.%N)
touch "$dir/done"
wait "$sampler"
after=$(rss VmRSS); hwm=$(rss VmHWM); peak=$(cat "$dir/peak_kb")
read -r lines bytes <"$dir/count"
echo "events exported: $lines ($((bytes / 1048576)) MiB of DSJSON) in $(echo "$end - $start" | bc) s"
echo "banditd VmRSS before export: $((before / 1024)) MiB, highest during: $((peak / 1024)) MiB" \
     "(+$(((peak - before) / 1024)) MiB), after: $((after / 1024)) MiB;" \
     "VmHWM (lifetime, includes loading) before: $((hwm_before / 1024)) MiB, after: $((hwm / 1024)) MiB"
echo "banditctl max RSS: $(( $(cat "$dir/ctl_kb") / 1024 )) MiB"
