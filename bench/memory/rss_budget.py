#!/usr/bin/env python3
"""banditd's resident memory against what its memory budget charges, with glibc's allocator
(malloc_trim after large frees) and with jemalloc (Debian's libjemalloc2, LD_PRELOAD), side by
side in one run: one diagonal LinUCB instance of dimension 4096 whose pending decisions (32 KiB
each) grow to their share of the budget (snapshot rounds every 500 changes along the way), three
quarters of them rewarded, the instance deleted, a second one grown to its share. Reports per
allocator the peak resident size (VmHWM) and the resident size after the delete, above the idle
size, and the rate of the filling Selects; writes the samples' plot.

  /usr/bin/python3 bench/memory/rss_budget.py build [--budget_mib 128] [--png docs/img/memory_rss.png]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
DIM = 4096


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_bytes(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def accounted(metrics_port):
    page = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    return sum(float(v) for v in re.findall(r'^bandit_memory_accounted_bytes\{kind="[a-z_]+"\} (\S+)$',
                                            page, re.M))


def run(build, allocator, budget, out):
    sys.path.append(os.path.join(build, "python_gen"))
    import grpc
    from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc
    from google.protobuf import text_format
    tmp = tempfile.mkdtemp()
    port, metrics_port = free_port(), free_port()
    env = dict(os.environ)
    if allocator == "jemalloc":
        env["LD_PRELOAD"] = JEMALLOC
    proc = subprocess.Popen([os.path.join(build, "bin/banditd"), f"--listen=127.0.0.1:{port}",
                             f"--metrics_listen=127.0.0.1:{metrics_port}", f"--data_dir={tmp}/data",
                             f"--max_memory_bytes={budget}", "--durability=always",
                             "--snapshot_every_changes=500", "--snapshot_interval_ms=100000000"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/banditd.log", "w"))
    try:
        stub = rpc.BanditServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}",
                                                           options=[("grpc.max_send_message_length", 64 << 20)]))
        for _ in range(100):
            try:
                stub.ListInstances(pb.ListInstancesRequest(), timeout=1)
                break
            except grpc.RpcError:
                time.sleep(0.1)
        idle = status_bytes(proc.pid, "VmRSS:")
        t0 = time.monotonic()
        samples = []

        def sample(phase):
            samples.append((time.monotonic() - t0, status_bytes(proc.pid, "VmRSS:"), accounted(metrics_port), phase))

        def create(name):
            cfg = pb.InstanceConfig()
            text_format.Parse(f"policy {{ linucb {{ dimension: {DIM} covariance: COVARIANCE_DIAGONAL }} }} "
                              "pending { capacity: 1000000 reward_wait_ms: 86400000 }", cfg)
            stub.CreateInstance(pb.CreateInstanceRequest(name=name, config=cfg))

        def fill(name):
            batch = pb.SelectBatchRequest()
            for i in range(50):
                sel = batch.requests.add(instance=name)
                sel.candidates.add().values.extend([1e-4 * ((i * 31 + j) % 97) for j in range(DIM)])
            events, refused, start = [], False, time.monotonic()
            while not refused:
                r = stub.SelectBatch(batch)
                for d, st in zip(r.decisions, r.statuses):
                    if st.code == 0:
                        events.append(d.event_id)
                    else:
                        refused = True
                sample("fill " + name)
            return events, len(events) / (time.monotonic() - start)

        sample("idle")
        create("p")
        events, rate = fill("p")
        for _ in range(20):
            time.sleep(0.1)
            sample("full")
        rewards = pb.UpdateBatchRequest()
        for e in events[: len(events) * 3 // 4]:
            rewards.requests.add(instance="p", event_id=e, reward=1)
            if len(rewards.requests) == 100:
                stub.UpdateBatch(rewards)
                rewards = pb.UpdateBatchRequest()
                sample("rewards")
        if rewards.requests:
            stub.UpdateBatch(rewards)
        for _ in range(20):
            time.sleep(0.1)
            sample("rewarded")
        stub.DeleteInstance(pb.DeleteInstanceRequest(name="p"))
        for _ in range(30):
            time.sleep(0.1)
            sample("deleted")
        after_delete = samples[-1][1]
        create("q")
        _, rate2 = fill("q")
        for _ in range(20):
            time.sleep(0.1)
            sample("full again")
        peak = status_bytes(proc.pid, "VmHWM:")
        print(f"{allocator:9s} idle {idle / 2**20:6.1f} MiB; peak resident idle + budget + "
              f"{(peak - idle - budget) / 2**20:+6.1f} MiB; after the delete idle + "
              f"{(after_delete - idle) / 2**20:5.1f} MiB; filling Selects {rate:5.0f}/s and {rate2:5.0f}/s "
              f"(32 KiB each, durability always)")
        out[allocator] = dict(samples=samples, idle=idle, peak=peak, after_delete=after_delete,
                              rates=(rate, rate2))
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--budget_mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1, help="alternated runs per allocator")
    ap.add_argument("--png", default="")
    a = ap.parse_args()
    budget = a.budget_mib << 20
    results = []
    for _ in range(a.rounds):
        out = {}
        for allocator in ("glibc", "jemalloc"):
            run(a.build, allocator, budget, out)
        results.append(out)
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, allocator in zip(axes, ("glibc", "jemalloc")):
            r = results[-1][allocator]
            t = [s[0] for s in r["samples"]]
            ax.plot(t, [s[1] / 2**20 for s in r["samples"]], label="resident (VmRSS)")
            ax.plot(t, [(s[2] + r["idle"]) / 2**20 for s in r["samples"]], label="idle + charged to the budget")
            ax.axhline((r["idle"] + budget) / 2**20, color="gray", ls="--", label="idle + budget")
            ax.set_title(f"{allocator}" + (" (malloc_trim after large frees)" if allocator == "glibc" else " (LD_PRELOAD)"))
            ax.set_xlabel("seconds")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("MiB")
        axes[0].legend(loc="lower right", fontsize=8)
        fig.suptitle(f"banditd --max_memory_bytes={a.budget_mib}M: grow to the share, reward 3/4, delete, grow again")
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print("wrote", a.png)


if __name__ == "__main__":
    main()
