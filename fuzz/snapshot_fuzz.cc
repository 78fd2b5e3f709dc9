// libFuzzer target: snapshot decoding (SnapshotStore::Decode, the file and Export/Import format)
// and rebuilding an instance from whatever decodes (Instance::FromSnapshot).
//
// The input is used twice: as a raw snapshot file (magic, version, CRC, payload), and as the
// payload itself wrapped by Encode (so the fuzzer reaches FromSnapshot without solving CRCs).
// Oracles: no crash / sanitizer report; a rebuilt instance answers Select without crashing and
// its own snapshot round-trips to an identical instance state.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/instance/instance.h"
#include "server/storage/snapshot_store.h"

namespace {

using namespace bandit::server;
namespace v1 = bandit::v1;

InstanceLimits FuzzLimits() {
  InstanceLimits l;
  l.max_candidates = 32;
  l.max_vector_size = 64;
  l.max_feature_dim = 64;
  l.max_arms = 64;
  l.max_pending_capacity = 64;
  return l;
}

void Rebuild(const v1::InstanceSnapshot& snap) {
  static ManualClock clock(1'700'000'000'000);
  auto inst = Instance::FromSnapshot(snap, &clock, FuzzLimits());
  if (!inst.ok()) return;
  v1::SelectRequest req;
  req.set_instance(snap.name());
  v1::Decision d;
  (void)(*inst)->Select(req, &d);
  const v1::InstanceSnapshot again = (*inst)->Snapshot();
  auto decoded = SnapshotStore::Decode(SnapshotStore::Encode(again));
  if (!decoded.ok()) {
    std::fprintf(stderr, "re-encoded snapshot does not decode: %s\n",
                 decoded.status().ToString().c_str());
    std::abort();
  }
  auto twice = Instance::FromSnapshot(*decoded, &clock, FuzzLimits());
  if (!twice.ok()) {
    std::fprintf(stderr, "a snapshot of a rebuilt instance does not rebuild: %s\n",
                 twice.status().ToString().c_str());
    std::abort();
  }
  if ((*twice)->Snapshot().policy().SerializeAsString() != again.policy().SerializeAsString()) {
    std::fprintf(stderr, "snapshot round trip changed the policy state\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto snap = SnapshotStore::Decode(bytes); snap.ok()) Rebuild(*snap);
  v1::InstanceSnapshot payload;
  if (payload.ParseFromArray(data, static_cast<int>(size))) {
    auto snap = SnapshotStore::Decode(SnapshotStore::Encode(payload));
    if (snap.ok()) Rebuild(*snap);
  }
  return 0;
}
