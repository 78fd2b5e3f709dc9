#!/usr/bin/python3
"""Plots for the BKB reproduction (docs/reproductions/bkb.md).

  kernel_plots.py dict   MAIN.json OUT.png      dictionary size vs d_eff vs pulled arms over t
  kernel_plots.py ratio  MAIN.json OUT.png      min/max over arms of sigma~^2/sigma^2 vs [1/alpha, alpha]
  kernel_plots.py time   OUT.png A1.json A2.json ...   seconds per round vs A (and vs t for the largest A)
  kernel_plots.py bench  BENCH.json OUT.png     Select latency vs A (Google Benchmark JSON)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(p):
    with open(p) as f:
        return json.load(f)


def xs_for(doc, n):
    T = doc["params"]["T"]
    return [(k + 1) * T / n for k in range(n)]


def plot_dict(src, dst):
    doc = load(src)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in doc["results"]:
        if r["algo"] == "bkb":
            x = xs_for(doc, len(r["dict_size_curve"]))
            ax.plot(x, r["dict_size_curve"], label="BKB |S_t| (distinct arms)")
            if "deff_curve" in r:
                ax.plot(x, r["deff_curve"], "--", label="d_eff(lambda, X_t) (exact)")
            ax.plot(x, r["pulled_arms_curve"], ":", label="BKB distinct pulled arms")
        else:
            x = xs_for(doc, len(r["pulled_arms_curve"]))
            ax.plot(x, r["pulled_arms_curve"], ":", label=f"{r['algo']} distinct pulled arms (its p)")
    ax.set_xlabel("round t")
    ax.set_ylabel("count")
    ax.set_title(f"gp env {short(doc)}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


def plot_ratio(src, dst):
    doc = load(src)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in doc["results"]:
        if "variance_ratio_min_curve" not in r:
            continue
        x = xs_for(doc, len(r["variance_ratio_min_curve"]))
        ax.plot(x, r["variance_ratio_max_curve"], label="max over arms and seeds")
        ax.plot(x, r["variance_ratio_min_curve"], label="min over arms and seeds")
        a = r["alpha"]
        ax.axhline(a, color="k", ls="--", lw=0.8, label=f"alpha = {a:g}")
        ax.axhline(1 / a, color="k", ls=":", lw=0.8, label=f"1/alpha")
    ax.set_yscale("log")
    ax.set_xlabel("round t")
    ax.set_ylabel("sigma~_t^2(x) / sigma_t^2(x)")
    ax.set_title(f"Theorem 3.1 check, {short(doc)}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


def plot_time(dst, srcs):
    docs = [load(s) for s in srcs]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    per = {}
    for d in docs:
        for r in d["results"]:
            per.setdefault(r["algo"], []).append((d["params"]["arms"], r["seconds_per_round"]))
    for algo, pts in per.items():
        pts.sort()
        a1.plot([p[0] for p in pts], [1e3 * p[1] for p in pts], "o-", label=algo)
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("arms A")
    a1.set_ylabel("ms per round (Select + Update)")
    a1.grid(alpha=0.3)
    a1.legend()
    big = max(docs, key=lambda d: d["params"]["arms"])
    for r in big["results"]:
        c = r["seconds_per_round_curve"]
        a2.plot(xs_for(big, len(c)), [1e3 * v for v in c], label=r["algo"])
    a2.set_xlabel("round t")
    a2.set_ylabel("ms per round")
    a2.set_title(f"A = {big['params']['arms']}")
    a2.grid(alpha=0.3)
    a2.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


def plot_bench(src, dst):
    doc = load(src)
    series = {}
    for b in doc["benchmarks"]:
        name = b["name"].split("/")
        key = f"{name[0].replace('BM_', '')} {'m' if 'Bkb' in name[0] else 'P'}={name[2]}"
        series.setdefault(key, []).append((int(name[1]), b["real_time"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=k)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arms A")
    ax.set_ylabel("Select latency (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


def short(doc):
    p = doc["params"]
    return {k: p[k] for k in ("arms", "d", "T", "seeds", "q_bar") if k in p}


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "dict":
        plot_dict(sys.argv[2], sys.argv[3])
    elif cmd == "ratio":
        plot_ratio(sys.argv[2], sys.argv[3])
    elif cmd == "time":
        plot_time(sys.argv[2], sys.argv[3:])
    elif cmd == "bench":
        plot_bench(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
