#!/usr/bin/python3
"""Writes the seed corpora under fuzz/corpus/ from a live banditd (already committed; rerun only
to refresh them after an API change):  fuzz/make_seeds.py BANDITD PYTHON_GEN_DIR

For each seed config of request_fuzz.cc: request sequences in FuzzedDataProvider layout
(request_fuzz), exported snapshots of instances after a few rounds (snapshot_fuzz, both framed
and payload-only), and the journal segments those rounds produced (journal_fuzz, raw mode and
structured mode)."""
import faulthandler, glob, os, signal, struct, subprocess, sys, tempfile, time
faulthandler.dump_traceback_later(60, exit=True)

banditd, gen = sys.argv[1], sys.argv[2]
import grpc  # noqa: E402  (before the generated tree, which has its own grpc/ package)
sys.path.append(gen)
from google.protobuf import text_format  # noqa: E402
from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc  # noqa: E402

root = os.path.dirname(os.path.abspath(__file__))
# Same order as kConfigs in request_fuzz.cc.
CONFIGS = [
    "policy { ucb1 {} num_arms: 3 }",
    "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 }",
    "policy { thompson {} num_arms: 3 }",
    "policy { linucb { dimension: 3 } }",
    "policy { glb_omd { dimension: 3 } }",
    "policy { domd_glb { dimension: 3 gamma: 0.9 } }",
    "policy { glm_ucb { dimension: 3 } }",
    "policy { glm_epsilon_greedy { dimension: 3 } }",
    "policy { bkb {} arms { id: 'a' features: [0, 1] } arms { id: 'b' features: [1, 0] } "
    "arms { id: 'c' features: [1, 1] } }",
    "policy { gp_ucb {} arms { id: 'a' features: [0, 1] } arms { id: 'b' features: [1, 0] } }",
    "policy { oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } "
    "kernels { kind: LAPLACIAN bandwidth: 2 } support_budget: 16 } }",
    "policy { oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } random_features: 8 } }",
    "policy { mixture { num_arms: 3 dimension: 2 reference_mean: [0, 0] "
    "reference_covariance: [1, 0, 0, 1] } }",
    "policy { ucb1 {} num_arms: 2 } pending { capacity: 2 on_expiry: DROP }",
]


def esc(b):  # FuzzedDataProvider::ConsumeRandomLengthString: '\\' doubles, '\\' + other ends
    return b.replace(b"\\", b"\\\\") + b"\\\n"


def select_for(i, r):
    s = pb.SelectRequest(instance="f")
    kind = ["none", "cand3", "x2", "cand2"][r % 4]
    if kind == "cand3":
        for k in range(3):
            s.candidates.add().values.extend([0.1 * k, 0.5, 1.0 - 0.2 * k])
    elif kind == "cand2":
        for k in range(3):
            s.candidates.add().values.extend([0.3 * k, 1.0])
    elif kind == "x2":
        s.x.extend([0.25 * r, -0.5])
    return s


def write(dirname, name, data):
    d = os.path.join(root, "corpus", dirname)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- request_fuzz: [config] + ops (op byte from the end, message from the front) ----
for i in range(len(CONFIGS)):
    for variant in range(4):
        front, back = b"", [i]
        for r in range(3):
            front += esc(select_for(i, variant).SerializeToString())
            back.append(1)  # Select
            u = pb.UpdateRequest(instance="f", event_id="e", reward=1.0 if r % 2 else 0.0)
            front += esc(u.SerializeToString())
            back += [2, r]  # Update, then which event
        write("request_fuzz", f"cfg{i:02d}_v{variant}", front + bytes(reversed(back)))
# Multi-slot, deferred decisions with caller-chosen ids, per-slot rewards and an activation
# (configs 3 and 7: candidate policies of dimension 3).
for i in (3, 7):
    s = select_for(i, 1)
    s.event_id = "page-1"
    s.defer_activation = True
    for k, slot_id in enumerate(("hero", "tile")):
        slot = s.slots.add(id=slot_id)
        if k == 1:
            slot.excluded_actions.append("0")
            slot.baseline_action = "2"
    front, back = esc(s.SerializeToString()), [i, 1]
    for slot_id in ("hero", "tile"):
        front += esc(pb.UpdateRequest(instance="f", reward=1.0, slot_id=slot_id).SerializeToString())
        back += [2, 0]
    front += esc(pb.ActivateRequest(instance="f").SerializeToString())
    back += [74, 0]  # 74 % 12 == 2 (Update's case) with bit 0x40: Activate
    write("request_fuzz", f"cfg{i:02d}_slots", front + bytes(reversed(back)))
cr = pb.CreateInstanceRequest(name="g")
text_format.Parse(CONFIGS[3], cr.config)
write("request_fuzz", "create", esc(cr.SerializeToString()) + bytes([0, 0]))

# ---- snapshots and journals from a live server ----
tmp = tempfile.mkdtemp(prefix="bandit-seeds-")
port_file = os.path.join(tmp, "ports")
proc = subprocess.Popen([banditd, "--listen=127.0.0.1:0", "--metrics_listen=", f"--data_dir={tmp}/data",
                         f"--port_file={port_file}", "--snapshot_interval_ms=3600000"],
                        stderr=subprocess.DEVNULL)
for _ in range(500):
    if os.path.exists(port_file):
        break
    time.sleep(0.02)
port = open(port_file).read().split()[0]
stub = rpc.BanditServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]))
for i, text in enumerate(CONFIGS):
    name = f"s{i:02d}"
    cr = pb.CreateInstanceRequest(name=name)
    text_format.Parse(text, cr.config)
    try:
        stub.CreateInstance(cr, timeout=10)
    except grpc.RpcError as e:
        sys.exit(f"config {i} ({text}) refused: {e.details()}")
    for r in range(6):
        for variant in range(4):
            s = select_for(i, variant)
            s.instance = name
            try:
                d = stub.Select(s, timeout=10)
            except grpc.RpcError:
                continue
            if r % 3 != 2:
                for reward in (r % 2, 1 if r % 2 else -1):  # classification wants labels +-1
                    try:
                        stub.Update(pb.UpdateRequest(instance=name, event_id=d.event_id,
                                                     reward=reward), timeout=10)
                        break
                    except grpc.RpcError:
                        pass
            break
    snap = stub.ExportInstance(pb.ExportInstanceRequest(name=name)).snapshot
    write("snapshot_fuzz", f"{name}.snap", snap)
    write("snapshot_fuzz", f"{name}.payload", snap[12:])
proc.send_signal(signal.SIGKILL)  # keep the journal as written (no final snapshot/compaction)
proc.wait()

for n, seg in enumerate(sorted(glob.glob(f"{tmp}/data/journal/journal-*.log"))):
    data = open(seg, "rb").read()
    write("journal_fuzz", f"raw{n}", data + bytes([0, 0]))  # segments=1, mode=0 (from the end)
    # Structured mode: split the frames, keep the payloads.
    pos, payloads = 0, []
    while pos + 6 <= len(data):
        length, name_len = struct.unpack_from("<IH", data, pos)
        start = pos + 6 + name_len + 8
        payloads.append(data[start:start + length])
        pos = start + length
    for k in range(0, len(payloads), 8):
        chunk = payloads[k:k + 8]
        front = b"".join(esc(p) for p in chunk)
        back = [1] + [1] * len(chunk) + [0]  # mode=1, set_seq per record, no damage
        write("journal_fuzz", f"records{n}_{k // 8}", front + bytes(reversed(back)))
print("seeds:", {d: len(os.listdir(os.path.join(root, "corpus", d)))
                 for d in ("request_fuzz", "snapshot_fuzz", "journal_fuzz")})
