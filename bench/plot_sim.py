#!/usr/bin/python3
"""Plots a bandit-sim JSON file: one line per algorithm (regret_curve, or score_curve), shaded
by the std over seeds where present. Usage: plot_sim.py IN.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        doc = json.load(f)
    params = doc.get("params", {})
    horizon = params.get("T")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ylabel = None
    for r in doc["results"]:
        for key, label in (("regret_curve", "cumulative regret"), ("score_curve", "score")):
            if key in r:
                ys = r[key]
                n = len(ys)
                xs = [(k + 1) * (horizon or n) / n for k in range(n)]
                ax.plot(xs, ys, label=r["algo"])
                sd = r.get(key.replace("curve", "curve_std"))
                if sd:
                    lo = [y - s for y, s in zip(ys, sd)]
                    hi = [y + s for y, s in zip(ys, sd)]
                    ax.fill_between(xs, lo, hi, alpha=0.15)
                ylabel = label
                break
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel or "value")
    title = doc.get("env", "")
    short = {k: v for k, v in params.items() if k in ("d", "arms", "S", "T", "seeds", "objective", "link")}
    ax.set_title(f"{title} {short}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
