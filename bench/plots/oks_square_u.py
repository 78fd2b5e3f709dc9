#!/usr/bin/python3
"""Square loss on diamonds: RF-OKS++ / RF-IOKS at several norm bounds U against RF-OKS at 10x
Remark 1's lambda (bandit-sim --env=stream JSONs, one per U). Prints a markdown table.
Usage: oks_square_u.py OUT.png RF_OKS.json U1.json [U2.json ...]"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    out = argv[1]
    docs = []
    for path in argv[2:]:
        with open(path) as f:
            docs.append(json.load(f))
    fig, ax = plt.subplots(figsize=(8, 4.6))
    print("| algorithm | U | AL | final p_T (σ = 0.25 … 8) |")
    print("|---|---|---|---|")
    shades = {"rf_oks_pp": ["#fcae91", "#fb6a4a", "#a50f15"], "rf_ioks": ["#bae4b3", "#74c476", "#006d2c"]}
    seen = {}
    for doc in docs:
        u = doc["params"]["u"]
        for r in doc["results"]:
            name = r["algo"]
            k = seen.get(name, 0)
            seen[name] = k + 1
            color = shades.get(name, ["tab:blue"] * 3)[min(k, 2)]
            ys = r["score_curve"]
            xs = [(i + 1) * r["rows"] / len(ys) for i in range(len(ys))]
            lab = "%s U=%g (%.4f)" % (name, u, r["al"]) if name != "rf_oks(lambda x10)" and "rf_oks" != name else "%s λ×10, no projection (%.4f)" % (name, r["al"])
            ax.plot(xs, ys, color=color, label=lab)
            print("| %s | %g | %.4f ± %.4f | %s |" % (name, u, r["al"], r["al_std"], " ".join("%.2f" % p for p in r["final_p"])))
    ax.axhline(0.0463, color="k", ls=":", label="predict the global mean (0.0463)")
    ax.set_ylim(0.03, 0.12)
    ax.set_xlabel("round t")
    ax.set_ylabel("running square-loss AL")
    ax.set_title("diamonds, square loss, D = 400: the norm bound U limits OKS++ / IOKS", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv)
