#!/usr/bin/python3
"""Plots bandit-sim --env=generators output.
Usage: mixture_plot.py IN.json OUT_PREFIX
Writes OUT_PREFIX_convergence.png (score of the collected samples per algorithm, mean +- std over
seeds, with the population scores of the oracle mixture and of the best single arm),
OUT_PREFIX_gap.png (population F(p_t) - F(alpha*), log scale) and OUT_PREFIX_arms.png (population
score of each generator alone vs the oracle mixture and each algorithm's final score: the
analogue of the paper's Figure 3)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {"fd": "FD (lower is better)", "kd": "KD (lower is better)",
         "vendi": "Vendi (higher is better)", "rke": "RKE mode count (higher is better)"}


def main(src, prefix):
    with open(src) as f:
        doc = json.load(f)
    p = doc["params"]
    obj = p["objective"]
    xs = [x + 1 for x in doc["curve_rounds"]]
    pop = doc["population"]
    title = f"generators: {obj}, arms={p['arms']}, d={p['d']}, M={p['M']}, S={p['S']}, seeds={p['seeds']}"

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in doc["results"]:
        ys, sd = r["score_curve"], r["score_curve_std"]
        ax.plot(xs, ys, label=r["algo"])
        ax.fill_between(xs, [a - b for a, b in zip(ys, sd)], [a + b for a, b in zip(ys, sd)], alpha=0.15)
    ax.axhline(pop["oracle_score"], color="k", ls="--", lw=1, label="population: oracle mixture")
    ax.axhline(pop["best_arm_score"], color="gray", ls=":", lw=1.5,
               label=f"population: best single arm ({pop['best_arm']})")
    ax.set_xscale("log")
    if not p.get("higher_is_better", False):
        ax.set_yscale("log")  # FD / KD: the mixtures sit orders of magnitude below single arms
    ax.set_xlabel("round")
    ax.set_ylabel(NAMES.get(obj, obj) + " of collected samples")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(prefix + "_convergence.png", dpi=110)

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for r in doc["results"]:
        if r["algo"] == "oracle":
            continue  # 0 by construction after the warm start
        ys = [max(y, 1e-12) for y in r["population_gap_curve"]]
        ax.plot(xs, ys, label=r["algo"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("round")
    ax.set_ylabel("F(p_t) - F(alpha*)  (population loss; oracle = 0)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(prefix + "_gap.png", dpi=110)

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    labels = [f"arm {i}" for i in range(len(pop["arm_scores"]))] + ["oracle mix"]
    vals = list(pop["arm_scores"]) + [pop["oracle_score"]]
    colors = ["tab:gray"] * len(pop["arm_scores"]) + ["k"]
    for r in doc["results"]:
        labels.append(r["algo"])
        vals.append(r["final_score"])
        colors.append("tab:blue")
    ax.bar(range(len(vals)), vals, color=colors)
    if not p.get("higher_is_better", False):
        ax.set_yscale("log")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(vals)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(NAMES.get(obj, obj))
    ax.set_title("grey: each generator alone (population); black: oracle mixture; blue: final score "
                 f"after T={p['T']}", fontsize=8)
    fig.tight_layout()
    fig.savefig(prefix + "_arms.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
