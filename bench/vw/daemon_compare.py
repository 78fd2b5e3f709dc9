#!/usr/bin/python3
"""Vowpal Wabbit's learner served by banditd against VW's own daemon, side by side in one run.

    bench/vw/daemon_compare.py BUILD_DIR [--vw PATH] [--seconds 10] [--inflight 8] [--rounds 2]
        [--client cpp|python] [--doors unary,stream,stream-unpipelined,batch,http] [--batch 8]
        [--arguments 'VW ARGUMENTS'] [--against OTHER_BUILD_DIR]
        [--policy 'linucb { covariance: COVARIANCE_SKETCHED sketch_size: 16 }' ...]

The workload: a context of 20 features in 2 namespaces, 50 actions of 10 features each, VW's
JSON, Personalizer's learning settings `--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001
--cb_type mtr -q :: -b 18`. A round is a decision and its reward:
  - banditd (gRPC): Select with the context and the 50 actions (scores returned), then Update
    with the reward, on one `vw` instance with those arguments, through each of `--doors`
    (C++ clients only; the default: unary and stream):
      unary: the two unary calls, each waiting for its answer;
      stream: one Rounds stream per connection, a round's Update sent with the next round's
        Select (one round trip per round);
      stream-unpipelined: the same stream, each request waiting for its answer;
      batch: `--batch` rounds per SelectBatch, then their Updates in one UpdateBatch;
  - banditd (HTTP, door `http`): Personalizer's rank (the same context and actions in its JSON,
    `contextFeatures` and `actions[{id, features}]`, with a client-chosen `eventId`) then its
    reward, `POST /instances/vw/personalizer/v1.0/rank` and `.../events/{eventId}/reward`, on
    the same `vw` instance through banditd's Personalizer API (`--http_listen`), one HTTP/1.1
    keep-alive connection per client; before it is measured, the audit of one round's 50 actions
    from the HTTP client's JSON and from the gRPC clients' must be the same VW features;
  - VW's daemon (`vw --daemon --json`, children as cores): one labeled example (VW predicts,
    then learns it), the label on the action a client-side draw picked.
`--policy` (repeatable; text-format PolicyConfig) serves other policies on the same workload
beside the `vw` instance, each on a feature space of 2^18 with `-q ::` (the same features), in
its own phase. `--inflight` clients (one connection each: threads of bandit-vw-daemon-load, the
C++ client, by default; `--client python`: Python processes) run for `--seconds` per phase, phases
alternating banditd / VW `--rounds` times. Reported per phase: rounds/s, the server's CPU per
round (user + system time of banditd, or of VW's daemon and its children, from /proc), the
cores it used (CPU seconds per second) and, with the C++ clients, the clients' CPU per round
(they run on the same cores, so that server and clients together bound the rounds/s). `--arguments` serves other VW arguments on both sides
(default: Personalizer's above); without `-q ::` (about 30 terms per action instead of 465) the
learner's share of a round is small, so that what remains is what each server's way in costs.
`--against OTHER_BUILD_DIR` runs a second banditd, that build's, beside this one (its own `vw`
instance, the same doors, this build's clients), each of its phases next to this build's (first
and second in turn), and adds
per door the median ratio of this build's CPU per round and rounds/s to the other's: the way to
measure a change on this noisy machine (two builds side by side, not two runs).
Needs VW's runtime libraries (libfmt9, zlib).
"""
import argparse, json, multiprocessing as mp, os, random, resource, signal, socket, subprocess, sys, tempfile, time

ARGS = "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q :: -b 18"
TICKS = os.sysconf("SC_CLK_TCK")
# gRPC's channels do not survive a fork: the clients start fresh interpreters.
SPAWN = mp.get_context("spawn")


def context(i):
    u = {f"u{f}": f"v{(i * 7 + f * 3) % 13}" for f in range(10)}
    c = {f"c{f}": 0.1 * ((i + f) % 9) for f in range(10)}
    return {"User": u, "Context": c}


def actions():
    return [{"Action": {f"a{f}": f"x{(a * 11 + f) % 97}" for f in range(10)}} for a in range(50)]


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except FileNotFoundError:
            pass
    return total / TICKS


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def vw_client(port, seconds, seed, counter):
    rng = random.Random(seed)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # The 50 actions' JSON is built once, with the label on each possible action: per round the
    # client only writes the context (as banditd's client only sets it), so that the clients'
    # own CPU (Python, on the same 2 cores) bounds neither server.
    acts = actions()
    multis = []
    for chosen in range(50):
        multi = [dict(a) for a in acts]
        multi[chosen] = dict(multi[chosen], _label=f"0:{-1.0 if chosen % 5 == 0 else 0.0}:0.2")
        multis.append(json.dumps(multi))
    done, end, i = 0, time.time() + seconds, seed * 1000
    buf = b""
    while time.time() < end:
        ctx = json.dumps(context(i))
        line = ctx[:-1] + ', "_multi": ' + multis[rng.randrange(50)] + "}\n"
        s.sendall(line.encode())
        while b"\n\n" not in buf:
            buf += s.recv(65536)
        buf = buf.split(b"\n\n", 1)[1]
        done += 1
        i += 1
    counter.put(done)


def bandit_client(gen, target, instance, seconds, seed, counter):
    sys.path.append(gen)
    import grpc
    from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc
    stub = rpc.BanditServiceStub(grpc.insecure_channel(target))
    # The request with its 50 actions is built once; per round only its context changes.
    req = pb.SelectRequest(instance=instance, return_scores=True)
    for k, a in enumerate(actions()):
        req.actions.add(id=f"a{k}", features=json.dumps(a))
    done, end, i = 0, time.time() + seconds, seed * 1000
    while time.time() < end:
        req.context = json.dumps(context(i))
        d = stub.Select(req)
        stub.Update(pb.UpdateRequest(instance=instance, event_id=d.event_id,
                                     reward=1.0 if d.arm_index % 5 == 0 else 0.0))
        done += 1
        i += 1
    counter.put(done)


def cpp_phase(name, pids_of, loader, mode_args, inflight, seconds):
    """One phase driven by bandit-vw-daemon-load (C++ threads, one connection each)."""
    cpu0, t0 = cpu_seconds(pids_of()), time.time()
    client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([loader, *mode_args, f"--inflight={inflight}", f"--seconds={seconds}"],
                         stdout=subprocess.PIPE, text=True)
    client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:  # the loader said why on stderr (HTTP: the failed requests)
        sys.exit(f"{name}: bandit-vw-daemon-load {' '.join(mode_args)} failed (exit status "
                 f"{run.returncode}): {run.stdout.strip()}")
    rounds = json.loads(run.stdout.strip().splitlines()[-1])["rounds"]
    wall, cpu = time.time() - t0, cpu_seconds(pids_of()) - cpu0
    client = (client1.ru_utime + client1.ru_stime) - (client0.ru_utime + client0.ru_stime)
    # The clients share the two cores with the server: their CPU bounds the rounds/s as well.
    print(f"{name:22s} {rounds / wall:9.0f} rounds/s  {1000 * cpu / max(rounds, 1):6.3f} ms CPU/round"
          f"  {cpu / wall:4.2f} cores  (clients {1000 * client / max(rounds, 1):5.3f} ms CPU/round)",
          flush=True)
    return rounds / wall, cpu / max(rounds, 1)


def phase(name, pids_of, client, args, inflight, seconds):
    counter = SPAWN.Queue()
    procs = [SPAWN.Process(target=client, args=(*args, seconds, s + 1, counter)) for s in range(inflight)]
    cpu0, t0 = cpu_seconds(pids_of()), time.time()
    for p in procs:
        p.start()
    rounds = sum(counter.get() for _ in procs)
    for p in procs:
        p.join()
    wall, cpu = time.time() - t0, cpu_seconds(pids_of()) - cpu0
    print(f"{name:22s} {rounds / wall:9.0f} rounds/s  {1000 * cpu / max(rounds, 1):6.3f} ms CPU/round"
          f"  {cpu / wall:4.2f} cores", flush=True)
    return rounds / wall, cpu / max(rounds, 1)


def check_http_features(stub, pb, loader, cfg):
    """The HTTP client's rank body carries the gRPC clients' VW features: for one round, every
    action's audit (Select with explain: the action's terms with the context's, interactions
    included, each as name, index, value) from the HTTP body's `contextFeatures` and `features`
    (as the HTTP door passes them on: the JSON texts, re-serialized) equals the one from the gRPC
    clients' context and action texts. On an instance of its own, deleted afterwards."""
    out = subprocess.run([loader, "--print_round=1000"], capture_output=True, text=True,
                         check=True).stdout
    texts = json.loads(out)
    rank = json.loads(texts["rank"])
    http_context = json.dumps(rank["contextFeatures"])
    stub.CreateInstance(pb.CreateInstanceRequest(name="http-features-check", config=cfg))
    terms = set()
    try:
        for k, (grpc_features, action) in enumerate(zip(texts["actions"], rank["actions"])):
            assert action["id"] == f"a{k}", action["id"]
            audits = []
            for context, features in ((texts["context"], grpc_features),
                                      (http_context, json.dumps(action["features"]))):
                d = stub.Select(pb.SelectRequest(
                    instance="http-features-check", context=context, explain=True,
                    actions=[pb.NamedAction(id=action["id"], features=features)]))
                audits.append([(f.name, f.index, f.value) for f in d.explanation])
            if not audits[0] or audits[0] != audits[1]:
                sys.exit(f"door http: action a{k}'s features differ between the gRPC clients' "
                         f"JSON ({len(audits[0])} terms) and the HTTP client's "
                         f"({len(audits[1])} terms)")
            terms.add(len(audits[0]))
    finally:
        stub.DeleteInstance(pb.DeleteInstanceRequest(name="http-features-check"))
    print(f"door http: the rank body's features are the gRPC requests' (50 actions, "
          f"{'/'.join(map(str, sorted(terms)))} terms each with the context's, same names, "
          f"indices and values)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--vw", default=os.environ.get("VW", os.path.join(
        os.path.dirname(__file__), "../../../shared/tools/vw/vw")))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--policy", action="append", default=[],
                    help="another banditd policy (text-format PolicyConfig) to measure")
    ap.add_argument("--doors", default="unary,stream",
                    help="banditd's ways in, comma-separated: unary, stream, stream-unpipelined, "
                         "batch, http, http-handlers (--client cpp); http-handlers is the HTTP "
                         "door of a second banditd with --http_rounds_on_io_threads=false")
    ap.add_argument("--batch", type=int, default=8, help="rounds per batch (door batch)")
    ap.add_argument("--arguments", default=ARGS,
                    help="VW's arguments, for VW's daemon and banditd's vw instance alike")
    ap.add_argument("--against", help="another build directory: its banditd serves the same "
                    "doors beside this build's, in alternate phases")
    ap.add_argument("--client", choices=["cpp", "python"], default="cpp",
                    help="cpp: bandit-vw-daemon-load's threads (the clients' CPU small beside the "
                         "servers'); python: one Python process per connection")
    a = ap.parse_args()
    door_args = {"unary": ["--mode=banditd"], "stream": ["--mode=banditd-stream"],
                 "stream-unpipelined": ["--mode=banditd-stream", "--pipeline=false"],
                 "batch": ["--mode=banditd-batch", f"--batch={a.batch}"],
                 "http": ["--mode=banditd-http"],  # and the HTTP port, once banditd runs
                 "http-handlers": ["--mode=banditd-http"]}
    doors = a.doors.split(",")
    for door in doors:
        if door not in door_args:
            sys.exit(f"--doors: unknown door {door!r}, expected some of {', '.join(door_args)}")
    if a.against and a.client != "cpp":
        sys.exit("--against: with --client cpp only")
    if a.client == "python" and doors != ["unary"]:
        doors = ["unary"]
        print("--client python: the unary door only")
    loader = os.path.join(a.build, "bin/bandit-vw-daemon-load")
    if a.client == "cpp" and not os.path.exists(loader):
        sys.exit(f"no {loader}: build the benchmarks (cmake --build build --target benchmarks) "
                 "or pass --client python")
    tmp = tempfile.mkdtemp()
    grpc_port, vw_port = 50900 + os.getpid() % 50, 26900 + os.getpid() % 50
    def start_banditd(name, port, http, *flags, build=a.build):
        """`build`'s banditd on gRPC `port` (and, with `http`, the HTTP door on a port its port
        file names), data and log under tmp/`name`."""
        if http:
            flags = ("--http_listen=127.0.0.1:0", f"--port_file={tmp}/{name}.ports", *flags)
        return subprocess.Popen([os.path.join(build, "bin/banditd"),
                                 f"--listen=127.0.0.1:{port}", f"--data_dir={tmp}/{name}",
                                 "--metrics_listen=", "--durability=none", *flags],
                                stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/{name}.log", "w"))

    def http_port(name):
        """The HTTP port banditd `name` wrote to its port file ("GRPC METRICS HTTP")."""
        path = f"{tmp}/{name}.ports"
        for _ in range(200):
            if os.path.exists(path) and os.path.getsize(path) > 0:
                break
            time.sleep(0.05)
        return open(path).read().split()[2]

    # The HTTP door (Personalizer's API) only when it is measured.
    banditd = start_banditd("banditd", grpc_port, "http" in doors)
    # The HTTP door with every request on a handler thread, beside the default, in the same run.
    handlers = (start_banditd("handlers", grpc_port + 50, True, "--http_rounds_on_io_threads=false")
                if "http-handlers" in doors else None)
    # The other build's banditd: the doors of this one but http-handlers, on ports of its own.
    against_port = grpc_port + 25
    against = (start_banditd("against", against_port, "http" in doors, build=a.against)
               if a.against else None)
    vw = subprocess.Popen([a.vw, *a.arguments.split(), "--json", "--daemon", "--foreground", "--port", str(vw_port),
                           "--num_children", str(os.cpu_count()), "--quiet"],
                          stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/vw.log", "w"))
    try:
        time.sleep(2)
        if "http" in doors:
            door_args["http"].append(f"--http_port={http_port('banditd')}")
        if handlers is not None:
            door_args["http-handlers"].append(f"--http_port={http_port('handlers')}")
        against_http = ([f"--http_port={http_port('against')}"]
                        if against is not None and "http" in doors else [])
        sys.path.append(os.path.join(a.build, "python_gen"))
        import grpc
        from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc
        stub = rpc.BanditServiceStub(grpc.insecure_channel(f"127.0.0.1:{grpc_port}"))
        cfg = pb.InstanceConfig()
        cfg.policy.vw.arguments = a.arguments
        cfg.pending.reward_wait_ms = 600000
        stub.CreateInstance(pb.CreateInstanceRequest(name="vw", config=cfg))
        if handlers is not None:
            handlers_stub = rpc.BanditServiceStub(
                grpc.insecure_channel(f"127.0.0.1:{grpc_port + 50}"))
            handlers_stub.CreateInstance(pb.CreateInstanceRequest(name="vw", config=cfg))
        if against is not None:
            rpc.BanditServiceStub(grpc.insecure_channel(f"127.0.0.1:{against_port}")).CreateInstance(
                pb.CreateInstanceRequest(name="vw", config=cfg))
        if "http" in doors:
            # The same instance: Personalizer's routes address it by name (/instances/vw/...).
            check_http_features(stub, pb, loader, cfg)
        from google.protobuf import text_format
        # label -> (instance, door)
        names = {("banditd" if door == "unary" else f"bd {door}"): ("vw", door) for door in doors}
        for k, text in enumerate(a.policy):
            cfg = pb.InstanceConfig()
            text_format.Parse(text, cfg.policy)
            cfg.feature_space.bits = 18
            cfg.feature_space.interactions.append("::")
            cfg.pending.reward_wait_ms = 600000
            stub.CreateInstance(pb.CreateInstanceRequest(name=f"p{k}", config=cfg))
            for door in doors:
                names[f"policy {k}" if door == "unary" else f"p{k} {door}"] = (f"p{k}", door)
            print(f"policy {k}: {text}")
        print(f"workload: 20 context features, 50 actions x 10, {a.arguments}; {a.inflight} in flight, "
              f"{a.seconds:g} s phases, {os.cpu_count()} cores, {a.client} clients; "
              f"banditd doors: {', '.join(doors)}")
        gen = os.path.join(a.build, "python_gen")
        results = {"vw": [], **{label: [] for label in names}}
        against_results = {}  # label -> the other build's phases
        for round_number in range(a.rounds):
            for label, (instance, door) in names.items():
                server = handlers if door == "http-handlers" else banditd
                paired = against is not None and instance == "vw" and door != "http-handlers"
                # The pair's order alternates between rounds, so that neither build always
                # runs right after the other's phase.
                other_first = paired and round_number % 2 == 1
                def other_phase():
                    args = [x for x in door_args[door] if not x.startswith("--http_port=")]
                    against_results.setdefault(label, []).append(cpp_phase(
                        f"against {label}", lambda: [against.pid], loader,
                        [*args, *(against_http if door == "http" else []),
                         f"--target=127.0.0.1:{against_port}", "--instance=vw"],
                        a.inflight, a.seconds))
                if other_first:
                    other_phase()
                if a.client == "cpp":
                    results[label].append(cpp_phase(
                        label, lambda: [server.pid], loader,
                        [*door_args[door], f"--target=127.0.0.1:{grpc_port}",
                         f"--instance={instance}"],
                        a.inflight, a.seconds))
                else:
                    results[label].append(phase(label, lambda: [banditd.pid], bandit_client,
                                                (gen, f"127.0.0.1:{grpc_port}", instance),
                                                a.inflight, a.seconds))
                if paired and not other_first:
                    other_phase()
            if a.client == "cpp":
                results["vw"].append(cpp_phase("vw", lambda: [vw.pid, *children(vw.pid)], loader,
                                               ["--mode=vw", f"--vw_port={vw_port}"], a.inflight,
                                               a.seconds))
            else:
                results["vw"].append(phase("vw", lambda: [vw.pid, *children(vw.pid)], vw_client,
                                           (vw_port,), a.inflight, a.seconds))
        med = lambda xs: sorted(xs)[len(xs) // 2]
        v_rps, v_cpu = med([r for r, _ in results["vw"]]), med([c for _, c in results["vw"]])
        for label in names:
            b_rps, b_cpu = med([r for r, _ in results[label]]), med([c for _, c in results[label]])
            print(f"median: {label} {b_rps:.0f} rounds/s, {1000 * b_cpu:.3f} ms CPU/round; "
                  f"VW {v_rps:.0f} rounds/s, {1000 * v_cpu:.3f} ms CPU/round; "
                  f"ratio {b_rps / v_rps:.2f}x rounds/s, {b_cpu / v_cpu:.2f}x CPU/round")
        for label, phases in against_results.items():
            # Per round of phases, this build's figure over the other's (their phases adjacent).
            rps = med([r / o for (r, _), (o, _) in zip(results[label], phases)])
            cpu = med([c / o for (_, c), (_, o) in zip(results[label], phases)])
            print(f"against {a.against}: {label} {rps:.2f}x its rounds/s, {cpu:.2f}x its CPU/round "
                  f"(medians of {len(phases)} paired phases)")
    finally:
        banditd.send_signal(signal.SIGTERM)
        vw.send_signal(signal.SIGTERM)
        for other in (handlers, against):
            if other is not None:
                other.send_signal(signal.SIGTERM)
                other.wait(timeout=30)
        banditd.wait(timeout=30)
        vw.wait(timeout=30)


if __name__ == "__main__":
    main()
