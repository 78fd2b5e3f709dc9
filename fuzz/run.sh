#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 120), starting from the committed corpus,
# then merges new coverage back into fuzz/corpus/<target> (minimized). Prints executions and
# findings per target; exits non-zero if any target found a crash (reproducer in BIN_DIR/../artifacts/).
# FUZZ_MERGE=0 leaves fuzz/corpus/ untouched (CI: `make fuzz-check`).
#   [FUZZ_MERGE=0] fuzz/run.sh BIN_DIR [SECONDS] [TARGET...]
set -uo pipefail
bin=${1:?usage: fuzz/run.sh BIN_DIR [SECONDS] [TARGET...]}
secs=${2:-120}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(request_fuzz round_stream_fuzz snapshot_fuzz journal_fuzz features_fuzz personalizer_fuzz)
root=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/bandit-fuzz-XXXXXX)
artifacts=$(cd "$bin/.." && pwd)/artifacts
mkdir -p "$artifacts"
status=0
for t in "${targets[@]}"; do
  corpus="$root/corpus/$t"
  mkdir -p "$corpus" "$work/$t"
  echo "== $t: ${secs}s"
  "$bin/$t" "$work/$t" "$corpus" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
    > "$work/$t.log" 2>&1
  rc=$?
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE|ERROR|SUMMARY" "$work/$t.log" | tail -6
  if [ $rc -ne 0 ]; then
    echo "!! $t exited $rc; log: $work/$t.log"
    status=1
    continue
  fi
  [ "${FUZZ_MERGE:-1}" = 0 ] && continue
  before=$(ls "$corpus" | wc -l)
  "$bin/$t" -merge=1 "$corpus" "$work/$t" -close_fd_mask=2 > "$work/$t.merge.log" 2>&1
  echo "   corpus: $before -> $(ls "$corpus" | wc -l) files"
done
exit $status
