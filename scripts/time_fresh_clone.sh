#!/usr/bin/env bash
# The quick start's timing, as docs/performance.md ("Build and test times") records it: a fresh
# clone of REPOSITORY into DIR with an empty build directory and an empty compiler cache, then
# `make run` until banditctl answers SERVING (banditd is then stopped), then `make test`.
# Prints the seconds from the start of the clone to SERVING, of `make test`, and in all.
#
#   scripts/time_fresh_clone.sh REPOSITORY [DIR]      (DIR defaults to a new temporary directory)
set -u
repo=${1:?usage: scripts/time_fresh_clone.sh REPOSITORY [DIR]}
dir=${2:-$(mktemp -d)/clone}
now() { date +%s.%N; }
seconds() { echo "$2 - $1" | bc; }

t0=$(now)
git clone -q "$repo" "$dir" && cd "$dir" || exit 1
export CCACHE_DIR=$(mktemp -d)
unset CCACHE_BASEDIR CCACHE_NOHASHDIR
setsid make run > make-run.log 2>&1 &
run=$!
until [ -x build/bin/banditctl ] && build/bin/banditctl health 2>/dev/null | grep -q SERVING; do
  if ! kill -0 "$run" 2>/dev/null; then echo "make run stopped before SERVING (see $dir/make-run.log)"; exit 1; fi
  sleep 0.5
done
t1=$(now)
echo "clone to SERVING: $(seconds "$t0" "$t1") s"
kill -- -"$run"; wait "$run" 2>/dev/null
t2=$(now)
make test > make-test.log 2>&1
rc=$?
t3=$(now)
echo "make test: $(seconds "$t2" "$t3") s (exit $rc; $dir/make-test.log)"
echo "clone to every test green: $(seconds "$t0" "$t3") s"
exit $rc
