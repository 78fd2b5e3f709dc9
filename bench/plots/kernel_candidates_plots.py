#!/usr/bin/python3
"""Plots and table of the fresh-candidates BKB vs exact GP-UCB run (bandit-sim --env=gp_candidates).

    kernel_candidates_plots.py OUT_DIR FILE.json [FILE.json ...]

Merges every run of every file by (d, algo) -- seeds may come from separate processes -- and
writes OUT_DIR/kernel_cand_time.png (seconds per round against t), kernel_cand_regret.png
(cumulative pseudo-regret, mean +- sd over seeds), kernel_cand_dict.png (BKB dictionary size
against d_eff), and prints a markdown table of the figures quoted in docs/reproductions/bkb.md.
"""
import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABEL = {"bkb": "BKB", "bkb_lazy": "BKB, redraw every {lazy}", "gp_ucb": "exact GP-UCB"}
COLOR = {"bkb": "tab:blue", "bkb_lazy": "tab:green", "gp_ucb": "tab:red"}


def load(paths):
    runs = defaultdict(list)  # (d, algo) -> [run]
    params = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        d = doc["params"]["d"]
        params[d] = doc["params"]
        for r in doc["results"]:
            seen = {run["seed"] for run in runs[(d, r["algo"])]}
            for run in r["runs"]:
                if run["seed"] not in seen:
                    runs[(d, r["algo"])].append(run)
    return runs, params


def mean_curve(runs, key):
    curves = [r[key] for r in runs if key in r]
    n = min(len(c) for c in curves)
    mean = [statistics.fmean(c[i] for c in curves) for i in range(n)]
    sd = [statistics.pstdev([c[i] for c in curves]) for i in range(n)]
    return mean, sd


def ts(params):
    T = params["T"]
    return [round((k + 1) * T / 100) for k in range(100)]


def label(algo, params):
    return LABEL.get(algo, algo).format(lazy=params.get("lazy_every", "?"))


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    runs, params = load(paths)
    dims = sorted(params)
    algos = ["gp_ucb", "bkb", "bkb_lazy"]

    fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        for a in algos:
            if (d, a) not in runs:
                continue
            m, _ = mean_curve(runs[(d, a)], "seconds_per_round_curve")
            ax.plot(ts(params[d])[: len(m)], [x * 1e3 for x in m], color=COLOR[a],
                    label=f"{label(a, params[d])} ({len(runs[(d, a)])} seeds)")
        for a in ("bkb", "bkb_lazy"):
            rs = [r for r in runs.get((d, a), []) if "exact_gp_round_seconds_curve" in r]
            if not rs:
                continue
            m, _ = mean_curve(rs, "exact_gp_round_seconds_curve")
            ax.plot(ts(params[d])[: len(m)], [x * 1e3 for x in m], color=COLOR["gp_ucb"],
                    linestyle="--", marker=".", markersize=3,
                    label=f"exact GP-UCB timed on BKB's pulls\n(one round per checkpoint, "
                          f"{len(rs)} seeds)")
            break
        ax.set_yscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel("CPU ms per round (Select + Update), window mean")
        ax.set_title(f"d = {d}, {params[d]['candidates']} fresh candidates per round")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out_dir}/kernel_cand_time.png", dpi=110)

    fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        for a in algos:
            if (d, a) not in runs:
                continue
            m, sd = mean_curve(runs[(d, a)], "regret_curve")
            t = ts(params[d])[: len(m)]
            ax.plot(t, m, color=COLOR[a], label=label(a, params[d]))
            ax.fill_between(t, [x - s for x, s in zip(m, sd)], [x + s for x, s in zip(m, sd)],
                            color=COLOR[a], alpha=0.15)
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative pseudo-regret")
        ax.set_title(f"d = {d} (mean ± sd over seeds)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out_dir}/kernel_cand_regret.png", dpi=110)

    fig, axes = plt.subplots(1, len(dims), figsize=(6 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        for a in ("bkb", "bkb_lazy"):
            if (d, a) not in runs or "deff_curve" not in runs[(d, a)][0]:
                continue
            dm, _ = mean_curve(runs[(d, a)], "dict_size_curve")
            em, _ = mean_curve(runs[(d, a)], "deff_curve")
            t = ts(params[d])[: len(dm)]
            ax.plot(t, dm, color=COLOR[a], label=f"{label(a, params[d])}: |S_t|")
            ax.plot(t, em, color=COLOR[a], linestyle="--",
                    label=f"{label(a, params[d])}: d_eff of its pulls")
        if (d, "gp_ucb") in runs:
            em, _ = mean_curve(runs[(d, "gp_ucb")], "deff_curve")
            ax.plot(ts(params[d])[: len(em)], em, color=COLOR["gp_ucb"], linestyle=":",
                    label="GP-UCB: d_eff of its pulls")
        ax.set_xlabel("round t")
        ax.set_ylabel("size")
        ax.set_title(f"d = {d}: dictionary size against d_eff = Σ_s σ²_t(x_s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out_dir}/kernel_cand_dict.png", dpi=110)

    # Table: final regret, ms/round in the last window (t near T), ratios.
    print("| d | algo | seeds | final regret (mean ± sd) | ms/round at t ≈ T (median over seeds) "
          "| ms/round, whole run | |S_T| | d_eff(T) | rebuilds | state bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    shadow = {}
    last = {}
    for d in dims:
        for a in algos:
            if (d, a) not in runs:
                continue
            rs = runs[(d, a)]
            finals = [r["final_regret"] for r in rs]
            end_ms = statistics.median(r["seconds_per_round_curve"][-1] * 1e3 for r in rs)
            whole = statistics.median(statistics.fmean(r["seconds_per_round_curve"]) * 1e3 for r in rs)
            dict_t = (f"{statistics.fmean(r['dict_size_curve'][-1] for r in rs):.0f}"
                      if "dict_size_curve" in rs[0] else "–")
            deff_t = (f"{statistics.fmean(r['deff_curve'][-1] for r in rs):.0f}"
                      if "deff_curve" in rs[0] else "–")
            state = statistics.fmean(r["state_bytes"] for r in rs)
            reb = (f"{statistics.fmean(r['rebuilds_curve'][-1] for r in rs):.0f}"
                   if "rebuilds_curve" in rs[0] else "–")
            last[(d, a)] = (statistics.fmean(finals), end_ms)
            print(f"| {d} | {label(a, params[d])} | {len(rs)} | {statistics.fmean(finals):.1f} ± "
                  f"{statistics.pstdev(finals):.1f} | {end_ms:.2f} | {whole:.2f} | {dict_t} | "
                  f"{deff_t} | {reb} | {state:,.0f} |")
            sh = [r for r in rs if "exact_gp_round_seconds_curve" in r]
            if sh:
                # Same seeds only: BKB's last window against exact GP-UCB's round at t = T.
                g_ms = statistics.median(r["exact_gp_round_seconds_curve"][-1] * 1e3 for r in sh)
                b_ms = statistics.median(r["seconds_per_round_curve"][-1] * 1e3 for r in sh)
                shadow[(d, a)] = (g_ms, b_ms, len(sh))
    print()
    for (d, a), (g_ms, b_ms, n) in sorted(shadow.items()):
        print(f"d = {d}, {label(a, params[d])}: at t = T, exact GP-UCB round on the same pulls "
              f"{g_ms:.2f} ms against BKB {b_ms:.2f} ms: GP-UCB / BKB = {g_ms / b_ms:.3g}x "
              f"(medians over {n} seeds, same runs)")
    for d in dims:
        if (d, "gp_ucb") not in last:
            continue
        for a in ("bkb", "bkb_lazy"):
            if (d, a) in last:
                g, b = last[(d, "gp_ucb")], last[(d, a)]
                print(f"d = {d}, {label(a, params[d])}: time per round at t ≈ T GP-UCB / BKB = "
                      f"{g[1] / b[1]:.3g}x; final regret BKB / GP-UCB = {b[0] / g[0]:.2f}")


if __name__ == "__main__":
    main()
