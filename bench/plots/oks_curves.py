#!/usr/bin/python3
"""Running AMR / AL of a bandit-sim --env=stream JSON: exact kernels (left) and random features
(right), mean over permutations with a +-1 std band.
Usage: oks_curves.py IN.json OUT.png [TITLE]"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst, title=None):
    with open(src) as f:
        doc = json.load(f)
    p = doc["params"]
    metric = "amr" if p["task"] == "classification" else "al"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    colors = {"oks": "tab:blue", "oks_pp": "tab:red", "ioks": "tab:green"}
    styles = {"1": "-", "5": "--", "10": "-.", "25": ":"}
    for r in doc["results"]:
        algo = r["algo"]
        rf = algo.startswith("rf_")
        base = algo[3:] if rf else algo
        kind = base.split("(")[0]
        ls = "-"
        if "lambda_scale" in r:
            ls = styles.get("%g" % r["lambda_scale"], "-")
        ax = axes[1 if rf else 0]
        ys = r["score_curve"]
        n = len(ys)
        xs = [(k + 1) * r["rows"] / n for k in range(n)]
        label = "%s  (%s = %.4f)" % (algo, metric.upper(), r[metric])
        ax.plot(xs, ys, ls, color=colors.get(kind, "k"), label=label)
        sd = r.get("score_curve_std")
        if sd:
            ax.fill_between(xs, [y - s for y, s in zip(ys, sd)], [y + s for y, s in zip(ys, sd)],
                            color=colors.get(kind, "k"), alpha=0.12)
    for ax, name in zip(axes, ("exact kernels", "random features, D = %d" % p["D"])):
        ax.set_title(name)
        ax.set_xlabel("round t")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("running %s" % metric.upper())
    fig.suptitle(title or "%s, %s loss, %d permutations" % (p["data"].split("/")[-1], p["loss"],
                                                            p["permutations"]))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:])
