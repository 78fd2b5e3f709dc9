#!/usr/bin/python3
"""Soybean as a contextual bandit run by Vowpal Wabbit 9.11.2 itself, on the protocol of
bench/named/soybean.py (the same permutations, the same JSON: attributes as strings in namespace
"C", one action per class {"A": {"class": NAME}}, reward 1 for the right class), so the served
`vw` policy's accuracy there can be set beside VW's own. Each row: VW's daemon predicts the pmf
of the unlabeled example, this script draws the action from it (its own seeded generator: VW
never samples), and sends the example again labeled `chosen : -reward : probability` (what the
service teaches on an Update).

    bench/vw/soybean_vw.py [--vw PATH] [--seeds 10] [--args '--cb_explore_adf --squarecb -q CA -b 18']
"""
import argparse, csv, json, os, random, socket, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def pmf(line, n):
    p = [0.0] * n
    for pair in line.split(","):
        a, v = pair.split(":")
        p[int(a)] = float(v)
    return p


def run(port, rows, classes, attributes, order, rng):
    s = socket.create_connection(("127.0.0.1", port))
    buf = b""

    def ask(example):
        nonlocal buf
        s.sendall((json.dumps(example) + "\n").encode())
        while b"\n\n" not in buf:
            buf += s.recv(65536)
        line, buf = buf.split(b"\n\n", 1)
        return line.decode().strip()

    correct = 0
    for i in order:
        r = rows[i]
        context = {"C": {a: r[a] for a in attributes if r[a]}}
        multi = [{"A": {"class": c}} for c in classes]
        p = pmf(ask(dict(context, _multi=multi)), len(classes))
        u, acc, chosen = rng.random(), 0.0, len(classes) - 1
        for a, pa in enumerate(p):
            acc += pa
            if u < acc:
                chosen = a
                break
        reward = 1.0 if classes[chosen] == r["Class"] else 0.0
        correct += reward
        multi[chosen] = dict(multi[chosen], _label=f"0:{-reward}:{p[chosen]}")
        ask(dict(context, _multi=multi))
    s.close()
    return correct / len(order)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vw", default=os.environ.get("VW", os.path.join(HERE, "../../../shared/tools/vw/vw")))
    ap.add_argument("--data", default=os.path.join(HERE, "../../../shared/data/soybean.csv"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--args", default="--cb_explore_adf --squarecb -q CA -b 18")
    a = ap.parse_args()
    import numpy as np
    with open(a.data) as f:
        rows = list(csv.DictReader(f))
    classes = sorted({r["Class"] for r in rows})
    attributes = [k for k in rows[0] if k != "Class"]
    results = []
    for seed in range(a.seeds):
        port = 27000 + (os.getpid() + seed) % 1000
        vw = subprocess.Popen([a.vw, *a.args.split(), "--json", "--daemon", "--foreground",
                               "--port", str(port), "--num_children", "1", "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            order = np.random.default_rng(seed).permutation(len(rows))
            results.append(run(port, rows, classes, attributes, order, random.Random(seed)))
            print(f"VW {a.args} seed {seed}: accuracy {results[-1]:.3f}", flush=True)
        finally:
            vw.terminate()
            vw.wait()
    mean = sum(results) / len(results)
    sd = (sum((x - mean) ** 2 for x in results) / (len(results) - 1)) ** 0.5 if len(results) > 1 else 0
    print(f"VW {a.args}: {mean:.3f} +- {sd:.3f} over {len(results)} permutations")


if __name__ == "__main__":
    main()
