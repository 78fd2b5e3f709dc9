#!/usr/bin/python3
"""Several bandit-sim --env=generators runs side by side (one panel per run): the score of the
collected samples against the round for every algorithm, with the population score of the best
single generator and of the oracle mixture as horizontal lines. Used for the paper's Fig. 2
(One-Arm Oracle), Fig. 6 (Delta_L sweep), Fig. 9 (R and cosine kernel), Fig. 10 (bandwidth) and
the fidelity-term experiment.
Usage: mixture_panels.py OUT.png [--cols=N] [--table] LABEL=RUN.json ..."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"mixture_greedy": ("tab:red", "-"), "mixture_ucb": ("tab:blue", "-"),
         "one_arm_greedy": ("tab:green", "-"), "eps_greedy": ("tab:olive", "-"),
         "oracle": ("k", "--"), "one_arm_oracle": ("tab:gray", "--")}
UCB_SHADES = ["#08306b", "#2171b5", "#6baed6", "#9ecae1", "#c6dbef"]


def style(algo, k):
    if algo.startswith("mixture_ucb:"):
        return UCB_SHADES[k % len(UCB_SHADES)], "-"
    return STYLE.get(algo, ("tab:purple", "-"))


def main(argv):
    out = argv[1]
    cols = 0
    want_table = False
    runs = []
    for a in argv[2:]:
        if a.startswith("--cols="):
            cols = int(a[7:])
        elif a == "--table":
            want_table = True
        else:
            label, path = a.rsplit("=", 1)  # labels may hold "=" (sigma=1.89), paths do not
            with open(path) as f:
                runs.append((label, json.load(f)))
    cols = cols or len(runs)
    rows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    for n, (label, doc) in enumerate(runs):
        ax = axes[n // cols][n % cols]
        p, pop = doc["params"], doc["population"]
        xs = [c + 1 for c in doc["curve_rounds"]]
        k = 0
        for r in doc["results"]:
            color, ls = style(r["algo"], k)
            if r["algo"].startswith("mixture_ucb:"):
                k += 1
            ys = r["score_curve"]
            ax.plot(xs, ys, ls, color=color, lw=1.3, label="%s (%.4g)" % (r["algo"], r["final_score"]))
        ax.axhline(pop["best_arm_score"], color="tab:gray", ls=":", lw=1,
                   label="best arm alone, population (%.4g)" % pop["best_arm_score"])
        ax.axhline(pop["oracle_score"], color="k", ls=":", lw=1,
                   label="oracle mixture, population (%.4g)" % pop["oracle_score"])
        ax.set_xscale("log")
        if p["objective"] in ("fd", "kd"):
            ax.set_yscale("log")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("%s of collected samples" % p["objective"].upper())
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6)
        if want_table:
            print("\n**%s** (%s, T = %d, %d seeds; best arm alone %.4g, oracle mixture %.4g, α* = (%s))" % (
                label, p["objective"], p["T"], p["seeds"], pop["best_arm_score"], pop["oracle_score"],
                ", ".join("%.3f" % a for a in pop["oracle_alpha"])))
            fid = "arm_fidelity" in pop
            if fid:
                print("population mean fidelity per arm: (%s)" % ", ".join("%.3f" % a for a in pop["arm_fidelity"]))
            print("\n| algorithm | final score | F(p_T) − F(α*) | mean final α |%s" % (" collected fidelity |" if fid else ""))
            print("|---|---|---|---|%s" % ("---|" if fid else ""))
            for r in doc["results"]:
                print("| %s | %.4g ± %.2g | %.3g | (%s) |%s" % (
                    r["algo"], r["final_score"], r["final_score_std"], r["population_gap_curve"][-1],
                    ", ".join("%.2f" % a for a in r["final_alpha_mean"]),
                    (" %.3f |" % r["collected_fidelity"]) if fid else ""))
    for n in range(len(runs), rows * cols):
        axes[n // cols][n % cols].axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv)
