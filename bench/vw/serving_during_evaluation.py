#!/usr/bin/python3
"""Serving rounds/s while an offline evaluation runs, against the same server idle, in one run.

    bench/vw/serving_during_evaluation.py BUILD_DIR [--decisions 100000] [--seconds 10]
        [--rounds 2] [--inflight 8] [--optimize]

One banditd (its defaults: one evaluation thread, SCHED_IDLE) serves the workload of
daemon_compare.py (a context of 20 features in 2 namespaces, 50 actions x 10 features, VW's JSON,
Personalizer's learning settings) on a `vw` instance whose decision log keeps `--decisions`
decisions. The log is filled first by bandit-vw-daemon-load, then phases alternate `--rounds`
times: idle (serving alone) and during (serving while an evaluation of the whole log runs: a
custom policy of the same arguments and the online settings' copy; with `--optimize`, offline
experimentation too). A during phase starts its evaluation, waits until the job is reading the
log, serves for `--seconds`, then deletes the evaluation (cancelling the job) if it is still
running. Reported per phase: rounds/s and banditd's cores used; then the medians and their ratio.
"""
import argparse, json, os, subprocess, sys, tempfile, time

ARGS = "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def load(loader, target, inflight, seconds):
    out = subprocess.run([loader, "--mode=banditd", f"--target={target}", "--instance=vw",
                          f"--inflight={inflight}", f"--seconds={seconds}"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["rounds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--decisions", type=int, default=100000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--optimize", action="store_true")
    a = ap.parse_args()
    loader = os.path.join(a.build, "bin/bandit-vw-daemon-load")
    if not os.path.exists(loader):
        sys.exit(f"no {loader}: build the benchmarks (cmake --build build --target benchmarks)")
    tmp = tempfile.mkdtemp()
    port = 51000 + os.getpid() % 50
    target = f"127.0.0.1:{port}"
    banditd = subprocess.Popen([os.path.join(a.build, "bin/banditd"), f"--listen={target}",
                                f"--data_dir={tmp}/data", "--metrics_listen=", "--durability=none"],
                               stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/banditd.log", "w"))
    try:
        time.sleep(2)
        sys.path.append(os.path.join(a.build, "python_gen"))
        import grpc
        from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc
        from bandit_pb.bandit.v1 import evaluation_pb2 as ev
        stub = rpc.BanditServiceStub(grpc.insecure_channel(target))
        cfg = pb.InstanceConfig()
        cfg.policy.vw.arguments = ARGS
        cfg.pending.reward_wait_ms = 600000
        cfg.decision_log.enabled = True
        cfg.decision_log.max_events = a.decisions
        cfg.decision_log.max_bytes = 4 << 30
        stub.CreateInstance(pb.CreateInstanceRequest(name="vw", config=cfg))
        t0 = time.time()
        while stub.GetInstance(pb.GetInstanceRequest(name="vw")).stats.decision_log_events < a.decisions:
            load(loader, target, a.inflight, 5)
        held = stub.GetInstance(pb.GetInstanceRequest(name="vw")).stats.decision_log_events
        print(f"log filled: {held} decisions in {time.time() - t0:.0f} s; workload: 20 context "
              f"features, 50 actions x 10, {ARGS}; {a.inflight} in flight, {a.seconds:g} s phases, "
              f"{os.cpu_count()} cores", flush=True)
        results = {"idle": [], "during": []}
        for r in range(a.rounds):
            for label in ("idle", "during"):
                created = None
                if label == "during":
                    req = ev.CreateEvaluationRequest(instance="vw", name=f"bench {r}", start_ms=0,
                                                     end_ms=int(time.time() * 1000) + 1,
                                                     offline_experimentation=a.optimize)
                    req.policies.add(name="same", arguments=ARGS)
                    created = stub.CreateEvaluation(req)
                    time.sleep(0.5)  # the job has started reading
                cpu0, w0 = cpu_seconds(banditd.pid), time.time()
                rounds = load(loader, target, a.inflight, a.seconds)
                wall, cpu = time.time() - w0, cpu_seconds(banditd.pid) - cpu0
                note = ""
                if created is not None:
                    got = stub.GetEvaluation(ev.GetEvaluationRequest(instance="vw", id=created.id))
                    if got.status == ev.EVALUATION_PENDING:
                        note = "  (evaluation still running)"
                    else:
                        note = (f"  (evaluation ended within the phase: "
                                f"{ev.EvaluationStatus.Name(got.status)}, {got.events} events, "
                                f"{got.skipped} skipped{', ' + got.error if got.error else ''})")
                    stub.DeleteEvaluation(ev.DeleteEvaluationRequest(instance="vw", id=created.id))
                print(f"{label:7s} {rounds / wall:8.0f} rounds/s  {cpu / wall:4.2f} cores{note}",
                      flush=True)
                results[label].append(rounds / wall)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        idle, during = med(results["idle"]), med(results["during"])
        print(f"median: idle {idle:.0f} rounds/s, during an evaluation {during:.0f} rounds/s: "
              f"{during / idle:.2f}x")
    finally:
        banditd.terminate()
        banditd.wait()


if __name__ == "__main__":
    main()
