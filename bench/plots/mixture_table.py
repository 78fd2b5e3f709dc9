#!/usr/bin/python3
"""Markdown table of a bandit-sim --env=generators JSON: per algorithm the score of the collected
samples at a few rounds (mean +- std over seeds), the population gap F(p_t) - F(alpha*) at the
end, the mean final alpha and seconds per round. Usage: mixture_table.py IN.json"""
import json
import sys


def main(src):
    with open(src) as f:
        doc = json.load(f)
    p, pop = doc["params"], doc["population"]
    rounds = [int(x) + 1 for x in doc["curve_rounds"]]
    picks = [k for k, t in enumerate(rounds) if t in (150, 300, 600, 1500, 3000) or k == len(rounds) - 1]
    picks = sorted(set(picks))
    arrow = "higher is better" if p["higher_is_better"] else "lower is better"
    print(f"Objective **{p['objective']}** ({arrow}); population score of each generator alone: "
          + ", ".join(f"arm {i}: {v:.4g}" for i, v in enumerate(pop["arm_scores"]))
          + f"; best single arm = arm {pop['best_arm']} ({pop['best_arm_score']:.4g}); "
          f"oracle mixture alpha* = ({', '.join(f'{a:.3f}' for a in pop['oracle_alpha'])}), "
          f"population score {pop['oracle_score']:.4g}.\n")
    head = "| algorithm | " + " | ".join(f"score @ t={rounds[k]}" for k in picks) + \
        " | F(p_T) − F(α*) | mean final α | µs / round |"
    print(head)
    print("|" + "---|" * (len(picks) + 4))
    for r in doc["results"]:
        cells = [f"{r['score_curve'][k]:.4g} ± {r['score_curve_std'][k]:.2g}" for k in picks]
        alpha = "(" + ", ".join(f"{a:.2f}" for a in r["final_alpha_mean"]) + ")"
        print(f"| {r['algo']} | " + " | ".join(cells) +
              f" | {r['population_gap_curve'][-1]:.3g} | {alpha} | {1e6 * r['seconds_per_round']:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
