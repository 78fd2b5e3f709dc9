#!/usr/bin/python3
"""Exact Gram-matrix log-Vendi vs its random-feature form (bandit-sim --env=vendi_exact JSON):
value error and optimizer error against R (left), CPU time per evaluation (right).
Usage: vendi_exact.py IN.json OUT.png [--table]"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    with open(argv[1]) as f:
        doc = json.load(f)
    rows, ex, p = doc["rff"], doc["exact"], doc["params"]
    R = [r["R"] for r in rows]
    if "--table" in argv:
        print("| R | abs. error of L at uniform | at α* | exact excess loss of the RFF minimizer | ‖α*_R − α*‖₁ | CPU ms / eval |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print("| %d | %.2e | %.2e | %.2e | %.3f | %.2f |" % (
                r["R"], r["abs_err_uniform"], r["abs_err_at_alpha_star"],
                r["exact_excess_of_rff_minimizer"], r["alpha_l1_distance"], 1e3 * r["cpu_seconds_per_eval"]))
        print("| exact (N = %d) | 0 | 0 | 0 | 0 | %.2f |" % (p["N"], 1e3 * ex["cpu_seconds_per_eval"]))
        print("\nexact: Vendi(uniform) = %.3f, Vendi(α*) = %.3f, α* = (%s)" % (
            ex["vendi_uniform"], ex["vendi_alpha_star"], ", ".join("%.3f" % a for a in ex["alpha_star"])))
    if len(argv) > 2 and not argv[2].startswith("--"):
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
        a1.loglog(R, [r["abs_err_uniform"] for r in rows], "o-", label="|L_R − L| at uniform α")
        a1.loglog(R, [r["abs_err_at_alpha_star"] for r in rows], "s-", label="|L_R − L| at exact α*")
        a1.loglog(R, [max(r["exact_excess_of_rff_minimizer"], 1e-12) for r in rows], "^-",
                  label="L(α*_R) − L(α*) (exact loss)")
        a1.loglog(R, [r["abs_err_uniform"] * 0 + rows[0]["abs_err_uniform"] * (R[0] / x) ** 0.5 for r, x in zip(rows, R)],
                  "k:", label="∝ R^-1/2")
        a1.set_xlabel("random features R")
        a1.set_title("log-Vendi: random-feature form vs exact (N = %d samples)" % p["N"], fontsize=9)
        a1.grid(alpha=0.3, which="both")
        a1.legend(fontsize=8)
        a2.loglog(R, [1e3 * r["cpu_seconds_per_eval"] for r in rows], "o-", label="random features, O(R³)")
        a2.axhline(1e3 * ex["cpu_seconds_per_eval"], color="tab:red", ls="--", label="exact Gram form, N = %d, O(N³)" % p["N"])
        a2.set_xlabel("random features R")
        a2.set_ylabel("CPU ms per value + gradient")
        a2.grid(alpha=0.3, which="both")
        a2.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(argv[2], dpi=110)


if __name__ == "__main__":
    main(sys.argv)
