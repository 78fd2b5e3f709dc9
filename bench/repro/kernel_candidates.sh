#!/bin/bash
# BKB against exact GP-UCB on fresh candidates every round (bandit-sim --env=gp_candidates);
# run from the repo root after a build. Writes build/runs/kcand_*.json, docs/img/kernel_cand_*.png
# and prints the table of docs/reproductions/bkb.md.
#   bench/repro/kernel_candidates.sh               # the full run: T = 5000, d = 3 and 8, 5 seeds
#   T=2000 SEEDS=1 bench/repro/kernel_candidates.sh  # a shorter run
#   ALGOS=bkb_lazy DIMS=3 TAG=lazy bench/repro/kernel_candidates.sh  # one algo, one d (files are
#     merged by (d, algo) by the plot script, so algos can run as separate invocations)
# Each (d, seed) is its own process, two at a time (2 cores). Exact GP-UCB costs O(n t^2) per
# round: at T = 5000 one GP-UCB seed is several CPU minutes.
set -e
B=${B:-build/bin/bandit-sim}
O=build/runs; mkdir -p $O
T=${T:-5000}
SEEDS=${SEEDS:-5}
ALGOS=${ALGOS:-gp_ucb,bkb,bkb_lazy}
COMMON="--env=gp_candidates --algos=$ALGOS --T=$T --seeds=1 --candidates=50 --centers=20 \
  --bandwidth=0.5 --noise=0.1 --f_bound=1 --q_bar=5 --epsilon=0.5 --delta=0.1 \
  --radius_multiplier=0.1 --lazy_every=50 --deff=true"
jobs=()
DIMS=${DIMS:-3 8}
TAG=${TAG:-kcand}
for d in $DIMS; do for ((s = 0; s < SEEDS; s++)); do
  jobs+=("nice -n ${NICE:-10} $B $COMMON --d=$d --first_seed=$s --out=$O/${TAG}_d${d}_s${s}.json")
done; done
printf '%s\n' "${jobs[@]}" | xargs -P 2 -I{} sh -c '{} > /dev/null'
files=()
for d in $DIMS; do for ((s = 0; s < SEEDS; s++)); do files+=("$O/${TAG}_d${d}_s${s}.json"); done; done
/usr/bin/python3 bench/plots/kernel_candidates_plots.py docs/img "${files[@]}"
