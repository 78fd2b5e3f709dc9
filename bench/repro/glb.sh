#!/bin/bash
# GLB reproductions (run from the repo root).
set -e
B=build/bin/bandit-sim
O=build/runs; mkdir -p $O
A=glb_omd,glm_ucb,glm_ucb_dm,linucb,eps_greedy
nice -n 10 $B --env=logistic --algos=$A --d=5 --arms=30 --S=3 --T=3000 --seeds=10 --out=$O/logistic_S3.json --plot=docs/img/glb_logistic_S3.png
nice -n 10 $B --env=logistic --algos=$A --d=5 --arms=30 --S=5 --T=3000 --seeds=10 --out=$O/logistic_S5.json --plot=docs/img/glb_logistic_S5.png
nice -n 10 $B --env=poisson --algos=$A --d=5 --arms=30 --S=3 --T=3000 --seeds=10 --out=$O/poisson_S3.json --plot=docs/img/glb_poisson_S3.png
N=domd_glb,glb_omd,sw_glm_ucb
for env in drift piecewise; do for S in 1 3; do
nice -n 10 $B --env=$env --algos=$N --d=5 --arms=30 --S=$S --T=5000 --seeds=20 --out=$O/${env}_S$S.json --plot=docs/img/glb_${env}_S$S.png
done; done
echo done
