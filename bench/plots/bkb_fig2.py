#!/usr/bin/python3
"""BKB paper Fig. 2 (variance starvation): f with BKB's mu~ +- 3 sigma~ (top) and exact GP-UCB's
mu +- 3 sigma (bottom) after each number of evaluations in [lo, hi].
Usage: bkb_fig2.py IN.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        doc = json.load(f)
    grid, fv, panels, p = doc["grid"], doc["f"], doc["panels"], doc["params"]
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 6.5), sharex=True, sharey=True)
    for col, pan in enumerate(panels):
        for row, (key, name, color) in enumerate((("bkb", "BKB", "tab:red"), ("gp", "exact GP-UCB", "tab:blue"))):
            ax = axes[row][col]
            mu, sd = pan[key + "_mean"], pan[key + "_std"]
            ax.plot(grid, fv, "k", lw=1.2, label="f")
            ax.plot(grid, mu, color=color, lw=1.2, label=name + " mean")
            ax.fill_between(grid, [m - 3 * s for m, s in zip(mu, sd)], [m + 3 * s for m, s in zip(mu, sd)],
                            color=color, alpha=0.2, label="± 3σ")
            ax.plot(pan["x"], pan["y"], ".", color="0.3", ms=3, label="evaluations")
            if key == "bkb":
                ax.plot(pan["dictionary"], [min(fv) - 0.5] * len(pan["dictionary"]), "|", color="tab:red",
                        ms=8, label="dictionary (%d)" % len(pan["dictionary"]))
            ax.axvspan(p["lo"], p["hi"], color="0.9", zorder=0)
            ax.set_title("%s, t = %d" % (name, pan["t"]), fontsize=10)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.legend(fontsize=7, loc="lower left")
    for ax in axes[-1]:
        ax.set_xlabel("x")
    fig.suptitle("Variance starvation check (BKB paper Fig. 2): GP f, Gaussian kernel h = %g, "
                 "xi = %g, q̄ = %g; shaded x-range = where evaluations fall" % (p["bandwidth"], p["noise"], p["q_bar"]),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:])
