#!/usr/bin/python3
"""GLB-OMD paper comparison (Section 5, Appendix E): figures and tables from the bandit-sim JSON
files written by bench/repro/glb_omd.sh.

Usage: glb_omd_report.py RUNS_DIR IMG_DIR TABLES_MD
  RUNS_DIR/main_<env>_S<S>.json     fast methods at the full horizon
  RUNS_DIR/exact_<env>_S<S>.json    exact-likelihood methods (OFUGLB, OFULog-r), reduced
  RUNS_DIR/theory_<env>_S<S>.json   theory-lambda runs
  RUNS_DIR/region_S<S>.json         d = 2, T = 300 confidence regions (Fig. 3)
  RUNS_DIR/time_poisson_S<S>.json   run time against S (Fig. 4(c))
"""
import glob
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {}
# What lambda each method really used (bandit-sim records only --lambda): (algo, theory run).
LAMBDA = {("ofuglb", False): "none", ("ofuglb", True): "none",
          ("ofulog_r", False): "d log(1+t)", ("glm_ucb_filippi", False): "d log(1+t)",
          ("glm_ucb", False): "d log(1+t)", ("rs_glincb", True): "d log(T/δ)",
          ("glb_omd", True): "Thm 1"}


def color(algo):
    if algo not in COLORS:
        COLORS[algo] = f"C{len(COLORS) % 10}"
    return COLORS[algo]


def load(path):
    with open(path) as f:
        return json.load(f)


def curve_xs(doc, r):
    n = len(r["regret_curve"])
    T = doc["params"]["T"]
    return [(k + 1) * T / n for k in range(n)]


def fmt(x):
    return f"{x:.2e}"


def regret_figure(docs, title, dst):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for tag, doc in docs:
        for r in doc["results"]:
            label = r["algo"] + ("" if tag == "main" else f" ({tag}: T={doc['params']['T']}, "
                                  f"{doc['params']['seeds']} seeds)")
            ys = r["regret_curve"]
            xs = curve_xs(doc, r)
            ls = "-" if tag == "main" else ("--" if tag == "exact" else ":")
            ax.plot(xs, ys, ls, color=color(r["algo"] + tag), label=label)
            sd = r.get("regret_curve_std")
            if sd:
                ax.fill_between(xs, [y - s for y, s in zip(ys, sd)], [y + s for y, s in zip(ys, sd)],
                                alpha=0.12, color=color(r["algo"] + tag))
    ax.set_xlabel("round t")
    ax.set_ylabel("cumulative pseudo-regret")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    plt.close(fig)


def time_figure(rows, title, dst):
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [a for a, _ in rows]
    vals = [v for _, v in rows]
    ax.barh(names, vals, color=[color(n) for n in names])
    ax.set_xscale("log")
    ax.set_xlabel("seconds per round (Select + Update), mean over the run")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    plt.close(fig)


def main(runs, img, tables_path):
    os.makedirs(img, exist_ok=True)
    out = []
    settings = {}
    for path in sorted(glob.glob(os.path.join(runs, "*.json"))):
        m = re.match(r"(main|exact|theory)_(logistic|poisson)_S(\d+)\.json", os.path.basename(path))
        if m:
            settings.setdefault((m.group(2), int(m.group(3))), []).append((m.group(1), load(path)))
    order = {"main": 0, "exact": 1, "theory": 2}
    for (env, S), docs in sorted(settings.items()):
        docs.sort(key=lambda td: order[td[0]])
        name = f"glb_omd_{env}_S{S}"
        regret_figure(docs, f"{env}, S = {S}, d = {docs[0][1]['params']['d']}, "
                            f"{docs[0][1]['params']['arms']} arms", os.path.join(img, name + ".png"))
        rows = []
        out.append(f"#### {env.capitalize()}, S = {S} ([regret](../img/glb_omd/{name}.png), "
                   f"[time per round](../img/glb_omd/{name}_time.png))\n")
        out.append("| run | algo | T | seeds | λ | regret at T (mean ± std) | regret at t = 500 "
                   "| s/round, mean | s/round, last 10 % | state bytes at T |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for tag, doc in docs:
            p = doc["params"]
            for r in doc["results"]:
                xs = curve_xs(doc, r)
                lam = LAMBDA.get((r["algo"], p["lambda"] == "theory"), p["lambda"])
                at500 = next((y for x, y in zip(xs, r["regret_curve"]) if x >= 500), None)
                out.append(f"| {tag} | {r['algo']} | {p['T']} | {p['seeds']} | {lam} | "
                           f"{r['regret_mean']:.1f} ± {r['regret_std']:.1f} | "
                           f"{'' if at500 is None else f'{at500:.1f}'} | "
                           f"{fmt(r['seconds_per_round'])} | {fmt(r['seconds_per_round_last10pct'])} | "
                           f"{int(r['state_bytes'])} |")
                if tag != "theory":
                    rows.append((r["algo"], r["seconds_per_round"]))
        out.append("")
        time_figure(rows, f"time per round, {env} S = {S}", os.path.join(img, name + "_time.png"))

    # Fig. 3: confidence regions after T = 300 rounds in d = 2.
    regions = sorted(glob.glob(os.path.join(runs, "region_S*.json")))
    if regions:
        fig, axes = plt.subplots(1, len(regions), figsize=(4.2 * len(regions), 4.2))
        if len(regions) == 1:
            axes = [axes]
        out.append("#### Confidence regions, d = 2, T = 300 (Fig. 3; [plot](../img/glb_omd/glb_omd_regions.png))\n")
        out.append("| S | algo | area of the region ∩ Θ (fraction of the [−S−½, S+½]² box) | θ* inside |")
        out.append("|---|---|---|---|")
        for ax, path in zip(axes, regions):
            doc = load(path)
            S = doc["params"]["S"]
            star = None
            circle = plt.Circle((0, 0), S, fill=False, color="0.6", ls=":")
            ax.add_patch(circle)
            for algo, reg in doc.get("confidence_regions", {}).items():
                n, lo, hi = reg["grid"], reg["lo"], reg["hi"]
                xs = [lo + (hi - lo) * j / (n - 1) for j in range(n)]
                # Every method's parameter set is Theta = {||theta|| <= S}: draw each region
                # intersected with it (bandit-sim reports GLM-UCB's and GLOC's bare ellipsoids).
                # (half a cell of slack: theta* lies on the sphere ||theta|| = S itself)
                cell = (hi - lo) / (n - 1)
                grid = [[1 if reg["inside"][i * n + j] and xs[i] ** 2 + xs[j] ** 2 <= (S + cell) ** 2 else 0
                         for j in range(n)] for i in range(n)]
                reg["inside"] = [v for row in grid for v in row]
                ax.contour(xs, xs, grid, levels=[0.5], colors=[color(algo)])
                ax.plot([], [], color=color(algo), label=algo)
                ax.plot(*reg["center"][:2], "x", color=color(algo))
                star = reg["theta_star"]
                star_in = reg.get("theta_star_inside")
                frac = sum(reg["inside"]) / (n * n)
                out.append(f"| {S:g} | {algo} | {frac:.4f} | {'?' if star_in is None else ('yes' if star_in else 'no')} |")
            if star:
                ax.plot(*star, "k*", markersize=12, label="θ*")
            ax.set_title(f"S = {S:g}, T = {doc['params']['T']}")
            ax.set_aspect("equal")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(img, "glb_omd_regions.png"), dpi=110)
        plt.close(fig)
        out.append("")

    # Fig. 4(c): time against S on Poisson.
    times = sorted(glob.glob(os.path.join(runs, "time_poisson_S*.json")),
                   key=lambda p: int(re.search(r"S(\d+)", p).group(1)))
    if times:
        series = {}
        T = None
        for path in times:
            doc = load(path)
            T = doc["params"]["T"]
            for r in doc["results"]:
                series.setdefault(r["algo"], []).append((doc["params"]["S"], r["seconds_per_round"] * T,
                                                         r["regret_mean"]))
        fig, ax = plt.subplots(figsize=(6, 4))
        out.append(f"#### Run time against S, Poisson (Fig. 4(c); [plot](../img/glb_omd/glb_omd_time_vs_S.png))\n")
        out.append("| algo | " + " | ".join(f"S = {s:g}: total s for T = {T} (regret)" for s, _, _ in
                                               next(iter(series.values()))) + " |")
        out.append("|---|" + "---|" * len(next(iter(series.values()))))
        for algo, pts in series.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color(algo), label=algo)
            out.append(f"| {algo} | " + " | ".join(f"{t:.3g} ({g:.0f})" for _, t, g in pts) + " |")
        ax.set_yscale("log")
        ax.set_xlabel("S")
        ax.set_ylabel(f"total seconds for T = {T} rounds")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(img, "glb_omd_time_vs_S.png"), dpi=110)
        plt.close(fig)
        out.append("")

    with open(tables_path, "w") as f:
        f.write("<!-- generated by bench/plots/glb_omd_report.py from bench/repro/glb_omd.sh; do not edit -->\n\n")
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
