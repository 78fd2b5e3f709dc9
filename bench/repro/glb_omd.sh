#!/bin/bash
# GLB-OMD paper (Zhang, Xu, Zhao, Sugiyama), Section 5 and Appendix E: GLB-OMD against its
# paper's baselines, at its settings. Run from the repo root after building bandit-sim:
#   bench/repro/glb_omd.sh [BUILD_DIR]       (or: make repro-glb)
# Writes JSON to BUILD_DIR/runs/glb_omd/, figures to docs/img/glb_omd/, tables to
# docs/reproductions/glb-omd-tables.md, and the wall time of the whole script to the end of that file.
# CPU budget (2 shared cores): the one-pass methods (GLB-OMD, GLOC, ECOLog) and RS-GLinCB at
# T = 3000 with the paper's 10 seeds; the methods that touch every past round each round
# (OFUGLB, OFULog-r: one constrained problem per arm; Filippi's GLM-UCB: an MLE refit) at
# T = EXACT_T with EXACT_SEEDS (defaults 500 and 2; the d = 2 region runs use REGION_SEEDS = 3), with GLB-OMD beside them on the same seeds.
set -euo pipefail
BUILD=${1:-build}
B=$BUILD/bin/bandit-sim
O=$BUILD/runs/glb_omd
IMG=docs/img/glb_omd
mkdir -p "$O" "$IMG"
T=${T:-3000}
SEEDS=${SEEDS:-10}
EXACT_T=${EXACT_T:-500}
EXACT_SEEDS=${EXACT_SEEDS:-2}
REGION_SEEDS=${REGION_SEEDS:-3}
start=$(date +%s)
# REUSE=1 keeps JSON files already written (resume an interrupted run).
run() {
  local out
  for a in "$@"; do case $a in --out=*) out=${a#--out=};; esac; done
  if [[ "${REUSE:-0}" == 1 && -s "$out" ]]; then return 0; fi
  "$B" "$@" > /dev/null
}
COMMON="--d=5 --arms=30 --delta=0.05"

# Three independent groups run side by side (the machine has 2 cores).
logistic() {  # Fig. 1 / Fig. 4(a,b): logistic, S in {3, 5, 7}
  local FAST=glb_omd,gloc,ecolog,rs_glincb
  for S in 3 5 7; do
    run --env=logistic --algos=$FAST $COMMON --S=$S --T=$T --seeds=$SEEDS --out=$O/main_logistic_S$S.json
    # theory lambda (GLB-OMD Theorem 1; RS-GLinCB d log(T/delta)) next to lambda = d
    run --env=logistic --algos=glb_omd,rs_glincb $COMMON --S=$S --T=$T --seeds=$SEEDS --lambda=theory --out=$O/theory_logistic_S$S.json
    run --env=logistic --algos=glb_omd,glm_ucb_filippi,ofuglb,ofulog_r $COMMON --S=$S --T=$EXACT_T --seeds=$EXACT_SEEDS --out=$O/exact_logistic_S$S.json
  done
}
poisson() {  # Fig. 2: Poisson, S in {3, 5, 7}; reward bound 100 for GLM-UCB and RS-GLinCB (paper)
  local FAST=glb_omd,gloc,rs_glincb
  for S in 3 5 7; do
    run --env=poisson --algos=$FAST $COMMON --S=$S --T=$T --seeds=$SEEDS --reward_bound=100 --out=$O/main_poisson_S$S.json
    run --env=poisson --algos=glb_omd,rs_glincb $COMMON --S=$S --T=$T --seeds=$SEEDS --lambda=theory --reward_bound=100 --out=$O/theory_poisson_S$S.json
    run --env=poisson --algos=glb_omd,glm_ucb_filippi,ofuglb $COMMON --S=$S --T=$EXACT_T --seeds=$EXACT_SEEDS --reward_bound=100 --out=$O/exact_poisson_S$S.json
  done
}
regions_and_time() {
  # Fig. 3: confidence regions, d = 2, T = 300 (regions drawn for seed 1).
  for S in 3 5 7; do
    run --env=logistic --algos=glb_omd,ofuglb,glm_ucb,glm_ucb_filippi,gloc,ecolog --d=2 --arms=30 --S=$S --T=300 --seeds=$REGION_SEEDS --region_grid=201 --out=$O/region_S$S.json
  done
  # Fig. 4(c): run time against S on Poisson (GLB-OMD vs the exact OFUGLB), one seed.
  for S in 3 5 7 9; do
    run --env=poisson --algos=glb_omd,ofuglb $COMMON --S=$S --T=$EXACT_T --seeds=1 --out=$O/time_poisson_S$S.json
  done
}
logistic & p1=$!
poisson & p2=$!
regions_and_time & p3=$!
wait $p1 && wait $p2 && wait $p3
/usr/bin/python3 bench/plots/glb_omd_report.py "$O" "$IMG" docs/reproductions/glb-omd-tables.md
echo "Wall time of bench/repro/glb_omd.sh (T=$T, SEEDS=$SEEDS, EXACT_T=$EXACT_T, EXACT_SEEDS=$EXACT_SEEDS): $(( $(date +%s) - start )) s on $(nproc) cores" | tee -a docs/reproductions/glb-omd-tables.md
