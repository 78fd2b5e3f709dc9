#!/usr/bin/env bash
# Two builds of bandit-shadow-bench side by side in one run: A and B alternate, one repetition
# (a run without shadows, then one with) each time, PAIRS times, so the machine's load changes
# hit both alike. Prints every repetition, the medians, and whether both builds computed the
# same numbers (the bench's fingerprint, exact hexadecimal floats), and if not, which figures
# differ.
#   bench/decision_log/shadow_ab.sh A_BIN B_BIN [PAIRS] [bench flags...]
# e.g. shadow_ab.sh /tmp/bench-main build/bin/bandit-shadow-bench 9 --rounds=5000 --storage=none
set -euo pipefail
a=${1:?usage: shadow_ab.sh A_BIN B_BIN [PAIRS] [bench flags...]}
b=${2:?usage: shadow_ab.sh A_BIN B_BIN [PAIRS] [bench flags...]}
pairs=${3:-9}
shift $(($# < 3 ? $# : 3))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for p in $(seq 1 "$pairs"); do
  for side in a b; do
    bin=$a
    [[ $side == b ]] && bin=$b
    "$bin" --reps=1 --data_dir="$dir/data" "$@" >"$dir/$side.$p.out"
  done
done
/usr/bin/python3 - "$dir" "$pairs" <<'PY'
import re, statistics, sys
d, pairs = sys.argv[1], int(sys.argv[2])
runs = {"a": [], "b": []}
prints = {"a": set(), "b": set()}
for p in range(1, pairs + 1):
    line = []
    for side in ("a", "b"):
        out = open(f"{d}/{side}.{p}.out").read()
        m = re.search(r"rep 0: without ([\d.]+) us/round, with \d+ shadow\(s\) ([\d.]+) us/round", out)
        without, with_ = float(m.group(1)), float(m.group(2))
        runs[side].append((without, with_, with_ - without))
        prints[side].update(re.findall(r"fingerprint: (.*)", out))
        line.append(f"{side.upper()} without {without:5.2f} with {with_:5.2f} overhead {with_ - without:5.2f}")
    print(f"pair {p}: " + " | ".join(line) + " (us CPU/round)")
med = {s: [statistics.median(x[i] for x in runs[s]) for i in range(3)] for s in runs}
for s in ("a", "b"):
    w, x, o = med[s]
    lo, hi = min(r[2] for r in runs[s]), max(r[2] for r in runs[s])
    print(f"{s.upper()}: median without {w:.2f}, with {x:.2f}, overhead {o:.2f} us/round "
          f"(overhead range {lo:.2f}..{hi:.2f})")
ratios = sorted(rb[2] / ra[2] for ra, rb in zip(runs["a"], runs["b"]))
print(f"B/A overhead: {med['b'][2] / med['a'][2]:.3f} (ratio of medians), "
      f"{statistics.median(ratios):.3f} (median of per-pair ratios)")
same = len(prints["a"]) == 1 and prints["a"] == prints["b"]
print("fingerprints: " + ("identical" if same else "DIFFERENT"))
if not same:
    for s in ("a", "b"):
        for f in sorted(prints[s]):
            print(f"  {s.upper()}: {f}")
    # Which figures differ: each value is named by the last word before it.
    if len(prints["a"]) == 1 and len(prints["b"]) == 1:
        ta, tb = next(iter(prints["a"])).split(), next(iter(prints["b"])).split()
        if len(ta) == len(tb):
            named, name = [], "?"
            for x, y in zip(ta, tb):
                if not re.fullmatch(r"-?(0x[0-9a-f.]+p[+-]\d+|\d+|0x0p\+0)", x):
                    name = x
                elif x != y and name not in named:
                    named.append(name)
            print("  differing figures: " + ", ".join(named))
PY
