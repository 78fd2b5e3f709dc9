#!/usr/bin/python3
"""A sketched covariance (LinUCB's or GLB-OMD's) against its full form: regret and time per round
against the sketch size l, one line per dimension d, from bandit-sim runs of the GLB settings
(bench/sim/glb_sim.cc). The full form and the diagonal form are drawn as markers at the right
edge. LinUCB in the linear (gaussian) setting:

    for d in 20 64 256; do
      build/bin/bandit-sim --env=gaussian --d=$d --arms=30 --T=2000 --seeds=5 --lambda=1 \\
        --algos=linucb,linucb_diag,linucb_sketch4,linucb_sketch8,linucb_sketch16,linucb_sketch32,linucb_sketch64 \\
        --out=build/runs/sketch_d$d.json
    done
    /usr/bin/python3 bench/plots/sketch.py build/runs/sketch_d*.json --out docs/img/linucb_sketch.png

GLB-OMD in the logistic setting (3 seeds: the full form at d = 256 takes ~25 ms a round):

    for d in 20 64 256; do
      build/bin/bandit-sim --env=logistic --d=$d --arms=30 --T=2000 --seeds=3 --lambda=1 \\
        --algos=glb_omd,glb_omd_diag,glb_omd_sketch4,glb_omd_sketch8,glb_omd_sketch16,glb_omd_sketch32,glb_omd_sketch64 \\
        --out=build/runs/glb_sketch_d$d.json
    done
    /usr/bin/python3 bench/plots/sketch.py --family glb_omd build/runs/glb_sketch_d*.json \\
      --out docs/img/glb_omd_sketch.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", default="linucb", choices=["linucb", "glb_omd"])
    a = ap.parse_args()
    fig, (reg, cost) = plt.subplots(1, 2, figsize=(10, 4.2))
    for path in a.runs:
        with open(path) as f:
            doc = json.load(f)
        d = doc["params"]["d"]
        by = {r["algo"]: r for r in doc["results"]}
        prefix = a.family + "_sketch"
        sketches = sorted((int(k[len(prefix):]), r) for k, r in by.items()
                          if k.startswith(prefix))
        ls = [l for l, _ in sketches]
        line, = reg.plot(ls, [r["regret_mean"] for _, r in sketches], "o-", label=f"sketched, d = {d}")
        color = line.get_color()
        cost.plot(ls, [1e6 * r["seconds_per_round"] for _, r in sketches], "o-", color=color,
                  label=f"sketched, d = {d}")
        x_full = ls[-1] * 1.6
        for algo, marker, name in ((a.family, "*", "full"), (a.family + "_diag", "x", "diagonal")):
            if algo in by:
                reg.plot([x_full], [by[algo]["regret_mean"]], marker, color=color, ms=10,
                         label=f"{name}, d = {d}")
                cost.plot([x_full], [1e6 * by[algo]["seconds_per_round"]], marker, color=color,
                          ms=10, label=f"{name}, d = {d}")
        T, seeds = doc["params"]["T"], doc["params"]["seeds"]
    for ax in (reg, cost):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sketch size l (markers at the right: full and diagonal covariance)")
    reg.set_ylabel(f"cumulative regret after {T} rounds (mean of {seeds} seeds)")
    cost.set_ylabel("time per round (µs, Select over 30 arms + Update)")
    cost.set_yscale("log")
    reg.legend(fontsize=7)
    cost.legend(fontsize=7)
    title = {"linucb": "LinUCB (linear setting)", "glb_omd": "GLB-OMD (logistic setting)"}
    fig.suptitle("%s: Frequent Directions sketch of the covariance against the full matrix"
                 % title[a.family], fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
