#!/usr/bin/python3
"""Equal-time OKS comparison (bandit-sim --env=stream_budget JSON): running AMR / AL of every
method at its tuned size, and a markdown table (size, score, CPU time per round vs t_p).
Usage: oks_budget.py IN.json OUT.png [--table]"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"rf_oks": "tab:blue", "rf_oks_pp": "tab:red", "rf_ioks": "tab:green",
          "raker": "tab:purple", "lkmbooks": "tab:orange"}


def metric_of(doc):
    return "amr" if doc["params"]["task"] == "classification" else "al"


def table(doc):
    p = doc["params"]
    m = metric_of(doc)
    scale = 100.0 if m == "amr" else 1.0
    unit = "AMR (%)" if m == "amr" else "AL"
    print("| algorithm | size | %s | CPU µs / round | time / t_p |" % unit)
    print("|---|---|---|---|---|")
    for r in doc["results"]:
        print("| %s | %s = %d | %.4g ± %.2g | %.1f | %.2f |" % (
            r["algo"], r["size_kind"], r["size"], scale * r[m], scale * r[m + "_std"],
            1e6 * r["cpu_seconds_per_round"], r["cpu_seconds_per_round"] / p["t_p"]))
    print("\nt_p (%s, D = %d) = %.1f µs / round (median of %s)" % (
        p["baseline"], p["D"], 1e6 * p["t_p"], ", ".join("%.1f" % (1e6 * t) for t in p["t_p_runs"])))


def plot(doc, dst):
    p = doc["params"]
    m = metric_of(doc)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for r in doc["results"]:
        ys = r["score_curve"]
        n = len(ys)
        xs = [(k + 1) * p["T"] / n for k in range(n)]
        ls = "-" if r["scale"] in (1, 1.0) or r["method"] not in ("rf_oks", "raker") else ":"
        ax.plot(xs, ys, ls, color=COLORS.get(r["method"], "k"),
                label="%s %s=%d (%.4g, %.0f µs)" % (r["algo"], r["size_kind"], r["size"], r[m],
                                                    1e6 * r["cpu_seconds_per_round"]))
    ax.set_xlabel("round t")
    ax.set_ylabel("running " + m.upper())
    ax.set_title("%s, %s loss, equal time (t_p = %.1f µs, %s at D = %d), %d permutations" % (
        p["data"].split("/")[-1], p["loss"], 1e6 * p["t_p"], p["baseline"], p["D"],
        p["permutations"]), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        d = json.load(f)
    if "--table" in sys.argv:
        table(d)
    if len(sys.argv) > 2 and not sys.argv[2].startswith("--"):
        plot(d, sys.argv[2])
