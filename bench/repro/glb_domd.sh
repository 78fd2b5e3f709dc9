#!/bin/bash
# DOMD-GLB paper (Lee & Oh), Section 5 / Fig. 1 with the paper's own baselines, then our practical
# defaults. Run from the repo root after building bandit-sim:  bench/repro/glb_domd.sh [build-dir]
# Writes build/runs/domd_fig1/*.json, docs/img/domd_fig1_*.png and docs/reproductions/domd-glb-tables.md, and
# prints its wall time. SEEDS (default 20) and BASELINE_SEEDS (default SEEDS) set the seed counts.
#
# Paper setting: T = 5000, d = 5, N = 30, S in {1, 3}, drift (one turn of the S-circle) and
# piecewise (sign flip at T/2), radii x 1/5, DOMD-GLB / GLB-OMD with the theorems' lambda,
# gamma tuned from P_T / Gamma_T (Theorem 2 / 3 and each baseline's own tuning), RestartGLB's
# period H from P_T, MASTER with block order n = 12.
# Practical run: the same with lambda = d for DOMD-GLB and GLB-OMD, and our sliding-window
# GLM-UCB (window T^(2/3)). The MLE baselines take lambda = d in both runs (see docs/algorithms.md),
# so they are run once.
set -euo pipefail
BUILD=${1:-build}
B=$BUILD/bin/bandit-sim
O=$BUILD/runs/domd_fig1
SEEDS=${SEEDS:-20}
BASELINE_SEEDS=${BASELINE_SEEDS:-$SEEDS}
mkdir -p "$O" docs/img
start=$(date +%s)
COMMON="--d=5 --arms=30 --T=5000 --radius=0.2"
run() {  # env S algos seeds lambda(theory|d) tag
  local lam=""
  [ "$5" = theory ] && lam="--lambda=theory"  # otherwise bandit-sim's default, lambda = d
  nice -n 10 "$B" --env="$1" --S="$2" --algos="$3" --seeds="$4" $lam $COMMON --out="$O/$6.json"
}
# All runs at once (each is one process, niced): the MLE baselines dominate the CPU time.
for S in 1 3; do
  run drift "$S" domd_glb,glb_omd "$SEEDS" theory "drift_S${S}_theory_ours" &
  run drift "$S" restart_glb,master_glm_ucb,bvd_glm_ucb,scb_weight_ucb "$BASELINE_SEEDS" theory "drift_S${S}_theory_baselines" &
  run piecewise "$S" domd_glb,glb_omd "$SEEDS" theory "piecewise_S${S}_theory_ours" &
  run piecewise "$S" d_glucb,master_glm_ucb,sc_d_glucb,scb_pw_weight_ucb "$BASELINE_SEEDS" theory "piecewise_S${S}_theory_baselines" &
  run drift "$S" domd_glb,glb_omd,sw_glm_ucb "$SEEDS" d "drift_S${S}_practical" &
  run piecewise "$S" domd_glb,glb_omd,sw_glm_ucb "$SEEDS" d "piecewise_S${S}_practical" &
done
wait
/usr/bin/python3 bench/plots/domd_fig1.py "$O" docs/img docs/reproductions/domd-glb-tables.md
echo "bench/repro/glb_domd.sh: wall time $(( $(date +%s) - start )) s (SEEDS=$SEEDS, BASELINE_SEEDS=$BASELINE_SEEDS)"
