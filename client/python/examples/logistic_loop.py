#!/usr/bin/env python3
"""A remote select/reward loop against a simulated logistic environment.

Each round the "product" shows K candidate items, each described by a d-dimensional feature
vector; the user clicks with probability sigmoid(x . theta*), theta* unknown to the service.
The loop asks banditd which item to show (Select), draws the click, and reports it (Update,
joined on the event id). It prints the cumulative (pseudo-)regret
  sum_t  max_k sigmoid(x_k . theta*) - sigmoid(x_chosen . theta*)
next to a uniform-random baseline. Copy this to start.

    build/bin/banditd &                       # listens on 127.0.0.1:50051
    PYTHONPATH=client/python:build/python_gen \\
      /usr/bin/python3 client/python/examples/logistic_loop.py --rounds 2000

Policies: glb_omd (default, logistic GLB with online mirror descent), linucb, or any other
contextual policy given as text format with --config.
"""
import argparse
import math
import random

from bandit_client import BanditClient, NotFoundError


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z))


def unit_ball_point(rng, d):
    v = [rng.gauss(0, 1) for _ in range(d)]
    n = math.sqrt(sum(a * a for a in v))
    r = rng.random() ** (1.0 / d)
    return [r * a / n for a in v]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="127.0.0.1:50051")
    ap.add_argument("--instance", default="example-logistic")
    ap.add_argument("--policy", default="glb_omd", choices=["glb_omd", "linucb"])
    ap.add_argument("--config", default=None, help="InstanceConfig in text format (overrides --policy)")
    ap.add_argument("--dim", type=int, default=5)
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--norm", type=float, default=3.0, help="||theta*||")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report_every", type=int, default=200)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    theta = unit_ball_point(rng, args.dim)
    scale = args.norm / math.sqrt(sum(t * t for t in theta))
    theta = [t * scale for t in theta]
    config = args.config or {
        "glb_omd": "policy { glb_omd { dimension: %d link: LOGISTIC s: %g } } seed: %d"
                   % (args.dim, args.norm, args.seed),
        "linucb": "policy { linucb { dimension: %d } } seed: %d" % (args.dim, args.seed),
    }[args.policy]

    with BanditClient(args.target, timeout=5.0) as client:
        try:
            client.delete_instance(args.instance)  # start from scratch on every run
        except NotFoundError:
            pass
        client.create_instance(args.instance, config)
        regret = baseline = 0.0
        print("%8s %16s %16s %16s" % ("round", "regret", "random_regret", "server_regret"))
        for t in range(1, args.rounds + 1):
            candidates = [unit_ball_point(rng, args.dim) for _ in range(args.arms)]
            means = [sigmoid(sum(a * b for a, b in zip(x, theta))) for x in candidates]
            best = max(means)
            decision = client.select(args.instance, candidates)
            mean = means[decision.arm_index]
            click = 1.0 if rng.random() < mean else 0.0
            client.update(args.instance, decision.event_id, reward=click,
                          best_expected_reward=best, expected_reward=mean)
            regret += best - mean
            baseline += best - means[rng.randrange(args.arms)]
            if t % args.report_every == 0 or t == args.rounds:
                stats = client.get_instance(args.instance).stats
                print("%8d %16.2f %16.2f %16.2f" % (t, regret, baseline, stats.pseudo_regret))
        client.delete_instance(args.instance)


if __name__ == "__main__":
    main()
