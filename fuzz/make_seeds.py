#!/usr/bin/python3
"""Writes the seed corpora under fuzz/corpus/ from a live banditd (already committed; rerun
after a policy is registered, an example changes, or the API changes):
    fuzz/make_seeds.py BANDITD PYTHON_GEN_DIR FUZZ_SEED_CONFIGS [TARGET...]
e.g. fuzz/make_seeds.py build/bin/banditd build/python_gen build/bin/fuzz_seed_configs
With TARGETs (e.g. round_stream_fuzz), only their corpora are written (the others' seeds from a
live server differ at every run: snapshots carry random ids).

For each seed config (printed by FUZZ_SEED_CONFIGS from fuzz/seed_configs.h: every served
policy's registered examples, in the order request_fuzz.cc reads them): request sequences in
FuzzedDataProvider layout (request_fuzz), exported snapshots of instances after a few rounds
(snapshot_fuzz, both framed and payload-only), and the journal segments those rounds produced
(journal_fuzz, raw mode and structured mode), and Rounds stream sequences (round_stream_fuzz).
tests/fuzz/seed_corpus_test.cc checks the result against the seed configs."""
import faulthandler, glob, os, signal, struct, subprocess, sys, tempfile, time
faulthandler.dump_traceback_later(120, exit=True)

banditd, gen, seed_configs = sys.argv[1], sys.argv[2], sys.argv[3]
only = set(sys.argv[4:])


def wanted(*targets):
    return not only or bool(only & set(targets))
import grpc  # noqa: E402  (before the generated tree, which has its own grpc/ package)
sys.path.append(gen)
from google.protobuf import text_format  # noqa: E402
from bandit_pb.bandit.v1 import service_pb2 as pb, service_pb2_grpc as rpc  # noqa: E402

root = os.path.dirname(os.path.abspath(__file__))
CONFIGS = subprocess.run([seed_configs], check=True, capture_output=True,
                         text=True).stdout.splitlines()


def esc(b):  # FuzzedDataProvider::ConsumeRandomLengthString: '\\' doubles, '\\' + other ends
    return b.replace(b"\\", b"\\\\") + b"\\\n"


def select_for(i, r):
    s = pb.SelectRequest(instance="f")
    kind = ["none", "cand3", "x2", "cand2"][r % 4]
    if kind == "cand3":
        for k in range(3):
            # Norms below 1: the GLB policies' default feature bound.
            s.candidates.add().values.extend([0.05 * k, 0.25, 0.5 - 0.1 * k])
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
for i in range(len(CONFIGS)) if wanted("request_fuzz") else ():
    for variant in range(4):
        front, back = b"", [i]
        for r in range(3):
            front += esc(select_for(i, variant).SerializeToString())
            back.append(1)  # Select
            u = pb.UpdateRequest(instance="f", event_id="e", reward=1.0 if r % 2 else 0.0)
            front += esc(u.SerializeToString())
            back += [2, r]  # Update, then which event
        write("request_fuzz", f"cfg{i:02d}_v{variant}", front + bytes(reversed(back)))

# ---- round_stream_fuzz: [config] + steps (op byte from the end, RoundRequest from the front) ----
# Op: 7 = clock step (3 more bytes from the end); else a RoundRequest, aimed at instance "f" and,
# for an Update or Activate, at the event of the (op >> 3 & 7)-th newest Select, unless bit 0x80.
def rounds_for(i, variant):
    s = select_for(i, variant)
    deferred = pb.SelectRequest()
    deferred.CopyFrom(s)
    deferred.event_id, deferred.defer_activation = "later", True
    upd = lambda reward: pb.RoundRequest(update=pb.UpdateRequest(instance="f", event_id="e", reward=reward))
    act = pb.RoundRequest(activate=pb.ActivateRequest(instance="f", event_id="e"))
    sel = pb.RoundRequest(select=s)
    steps = [
        (sel, 0), (upd(1.0), 0),                          # a round
        (sel, 0), (sel, 0), (upd(0.0), 8), (upd(1.0), 0),  # pipelined: the older Select first
        (pb.RoundRequest(select=deferred), 0), (upd(1.0), 0), (act, 0), (act, 0),  # deferred, twice
        (upd(1.0), 0),                                    # rewarded already: refused
        (upd(float("nan")), 0),                           # refused: not a number
        (pb.RoundRequest(select=pb.SelectRequest(instance="nope")), 0x80),  # unknown instance
        (sel, 0), ("clock", 200_000), (upd(1.0), 0),      # within the reward wait: learned
        (sel, 0), ("clock", 3_600_000), (upd(1.0), 0),    # beyond the default wait: expired
    ]
    front, back = b"", [i]
    for msg, op in steps:
        if msg == "clock":  # FuzzedDataProvider reads the 3 bytes of the step big-endian from the end
            back += [7, *op.to_bytes(3, "big")]
            continue
        front += esc(msg.SerializeToString())
        back.append(op)
    return front + bytes(reversed(back))


for i in range(len(CONFIGS)) if wanted("round_stream_fuzz") else ():
    for variant in range(4):
        write("round_stream_fuzz", f"cfg{i:02d}_v{variant}", rounds_for(i, variant))

if not wanted("snapshot_fuzz", "journal_fuzz", "request_fuzz"):
    sys.exit(0)

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
takes_cand3 = []  # configs whose policy took a Select over 3 candidates of dimension 3
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
            if variant == 1 and i not in takes_cand3:
                takes_cand3.append(i)
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

# Multi-slot, deferred decisions with caller-chosen ids, per-slot rewards and an activation
# over two configs of different policies that decide among candidates of dimension 3 (found live).
def policy_of(text):  # "policy { linucb { ... } }" -> "linucb"
    return text.split("{")[1].strip()


multi_slot = []
for i in takes_cand3:
    if policy_of(CONFIGS[i]) not in (policy_of(CONFIGS[j]) for j in multi_slot):
        multi_slot.append(i)
for i in multi_slot[:2]:
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
text_format.Parse(CONFIGS[takes_cand3[0]], cr.config)
write("request_fuzz", "create", esc(cr.SerializeToString()) + bytes([0, 0]))

# ---- journals: the segments the live rounds above wrote ----
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
