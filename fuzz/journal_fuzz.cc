// libFuzzer target: journal decoding (Journal::ReadAll) and recovery (Persistence::Open:
// snapshots + journal replay into instances) over an in-memory file system.
//
// Mode byte 0: the rest of the input is split into up to three raw segment files.
// Mode byte 1: the rest is a sequence of length-prefixed JournalRecord payloads, framed with
// Journal::EncodeFrame (valid checksums), then optionally torn or bit-flipped, so replay logic
// sees well-framed but arbitrary records.
// Oracles: no crash / sanitizer report; ReadAll and Open return (any status); after a successful
// Open the recovered service answers List and snapshots every instance.
#include <cstdint>
#include <string>

#include <fuzzer/FuzzedDataProvider.h>

#include "absl/strings/str_format.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/journal.h"
#include "tests/server/fault_injection_fs.h"

namespace {

using namespace bandit::server;
namespace v1 = bandit::v1;

std::string SegmentName(uint64_t first) { return absl::StrFormat("journal-%020d.log", first); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  FaultInjectionFs fs;
  const std::string dir = "/data";
  const std::string jdir = dir + "/journal";
  (void)fs.CreateDirs(dir);
  (void)fs.CreateDirs(jdir);
  const uint8_t mode = in.ConsumeIntegral<uint8_t>() % 2;
  if (mode == 0) {
    const int segments = in.ConsumeIntegralInRange<int>(1, 3);
    uint64_t first = 1;
    for (int i = 0; i < segments; ++i) {
      const std::string body = i + 1 == segments ? in.ConsumeRemainingBytesAsString()
                                                 : in.ConsumeRandomLengthString(4096);
      auto f = fs.NewWritableFile(jdir + "/" + SegmentName(first));
      if (!f.ok()) return 0;
      (void)(*f)->Append(body);
      (void)(*f)->Sync();
      first += in.ConsumeIntegralInRange<uint64_t>(1, 100);
    }
  } else {
    std::string body;
    uint64_t seq = 1;
    while (in.remaining_bytes() > 2) {
      v1::JournalRecord rec;
      if (!rec.ParseFromString(in.ConsumeRandomLengthString(1024))) continue;
      if (in.ConsumeBool()) rec.set_seq(seq++);
      body += Journal::EncodeFrame(rec);
    }
    if (!body.empty() && in.ConsumeBool()) {
      const size_t at = in.ConsumeIntegralInRange<size_t>(0, body.size() - 1);
      if (in.ConsumeBool())
        body.resize(at);  // torn tail
      else
        body[at] ^= 0x20;  // corruption
    }
    auto f = fs.NewWritableFile(jdir + "/" + SegmentName(1));
    if (!f.ok()) return 0;
    (void)(*f)->Append(body);
    (void)(*f)->Sync();
  }

  // Decoding alone.
  int64_t applied = 0;
  (void)Journal::ReadAll(
      &fs, jdir, [&](const v1::JournalRecord&) { ++applied; },
      [](const std::string&, const std::string&) {});

  // Full recovery into a service.
  ManualClock clock(1'700'000'000'000);
  DecisionService svc(&clock);
  PersistenceOptions po;
  po.data_dir = dir;
  po.durability = Durability::kNone;
  po.fs = &fs;
  RecoveryReport report;
  auto p = Persistence::Open(po, &svc, &report);
  if (p.ok()) {
    v1::ListInstancesRequest list;
    v1::ListInstancesResponse resp;
    (void)svc.ListInstances(list, &resp);
    for (const auto& inst : svc.registry().All()) (void)inst->Snapshot();
    (void)(*p)->Close();
  }
  return 0;
}
