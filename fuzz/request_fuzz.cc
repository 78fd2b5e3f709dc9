// libFuzzer target: request validation and policy Select/Update with arbitrary inputs.
//
// The input picks one of the seed configs (fuzz/seed_configs.h: every served policy), then is a
// sequence of operations, each a protobuf message decoded from fuzzer bytes: CreateInstance,
// Select, Update (or, with bit 0x40 of its op byte, Activate), SelectBatch, UpdateBatch, AddArms,
// RemoveArms, Import, Reset, List, Get.
// Oracles besides "no crash, no sanitizer report":
//   * a refused call leaves the instance's policy state and pending decisions unchanged
//     (the policy contract: validate first, then mutate);
//   * every status code is one the API documents for that call;
//   * after every operation the instance's snapshot encodes, decodes and rebuilds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <google/protobuf/text_format.h>

#include "fuzz/seed_configs.h"
#include "server/service/decision_service.h"
#include "server/storage/snapshot_store.h"

namespace {

using namespace bandit::server;
namespace v1 = bandit::v1;

ServiceLimits FuzzLimits() {
  ServiceLimits l;
  l.max_instances = 8;
  l.max_batch_items = 16;
  l.max_page_size = 16;
  l.instance.max_candidates = 32;
  l.instance.max_vector_size = 64;
  l.instance.max_feature_dim = 64;
  l.instance.max_arms = 64;
  l.instance.max_arms_per_request = 16;
  l.instance.max_pending_capacity = 64;
  return l;
}

// The seed configs (fuzz/seed_configs.h: every served policy's registered examples), parsed once.
std::vector<v1::CreateInstanceRequest>& Configs() {
  static auto* configs = [] {
    auto* out = new std::vector<v1::CreateInstanceRequest>();
    const std::vector<std::string> texts = bandit::fuzz::SeedConfigs();
    for (size_t i = 0; i < texts.size(); ++i) {
      v1::CreateInstanceRequest req;
      req.set_name("f");
      if (!google::protobuf::TextFormat::ParseFromString(texts[i], req.mutable_config())) {
        std::fprintf(stderr, "fuzz config %zu does not parse: %s\n", i, texts[i].c_str());
        std::abort();
      }
      out->push_back(req);
    }
    return out;
  }();
  return *configs;
}

// The instance's decision-relevant state: policy state + pending decisions (not counters).
std::string StateOf(DecisionService& svc, const std::string& name) {
  auto inst = svc.registry().Get(name);
  if (!inst.ok()) return "<none>";
  v1::InstanceSnapshot snap = (*inst)->Snapshot();
  std::string out;
  snap.policy().SerializeToString(&out);
  for (const auto& p : snap.pending()) out += p.SerializeAsString();
  out += snap.config().SerializeAsString();
  out += std::to_string(snap.next_event_seq());
  return out;
}

void Check(bool ok, const char* what, const absl::Status& s) {
  if (ok) return;
  std::fprintf(stderr, "oracle failed: %s (status %s)\n", what, s.ToString().c_str());
  std::abort();
}

bool Documented(absl::StatusCode c) {
  switch (c) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
      return true;
    default:
      return false;
  }
}

template <typename Msg>
bool Decode(FuzzedDataProvider& in, Msg* msg) {
  const std::string bytes = in.ConsumeRandomLengthString(2048);
  return msg->ParseFromString(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ManualClock clock(1'700'000'000'000);
  DecisionService svc(&clock, FuzzLimits());
  const int which = in.ConsumeIntegralInRange<int>(0, static_cast<int>(Configs().size()) - 1);
  v1::Instance described;
  {
    absl::Status s = svc.CreateInstance(Configs()[which], &described);
    Check(s.ok(), "a seed config is refused", s);
  }
  std::vector<std::string> events;
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    const uint8_t op = in.ConsumeIntegral<uint8_t>();
    const bool aim = (op & 0x80) == 0;  // most requests target the live instance and events
    const std::string before = StateOf(svc, "f");
    absl::Status s;
    bool mutating_refusal_checked = true;
    switch (op % 12) {
      case 0: {
        v1::CreateInstanceRequest req;
        if (!Decode(in, &req)) continue;
        s = svc.CreateInstance(req, &described);
        break;
      }
      case 1: {
        v1::SelectRequest req;
        if (!Decode(in, &req)) continue;
        if (aim) req.set_instance("f");
        v1::Decision d;
        s = svc.Select(req, &d);
        if (s.ok()) events.push_back(d.event_id());
        break;
      }
      case 2: {
        if (op & 0x40) {
          v1::ActivateRequest req;
          if (!Decode(in, &req)) continue;
          if (aim) req.set_instance("f");
          if (aim && !events.empty())
            req.set_event_id(events[in.ConsumeIntegralInRange<size_t>(0, events.size() - 1)]);
          v1::ActivateResponse resp;
          s = svc.Activate(req, &resp);
          break;
        }
        v1::UpdateRequest req;
        if (!Decode(in, &req)) continue;
        if (aim) req.set_instance("f");
        if (aim && !events.empty() && req.target_case() != v1::UpdateRequest::kDirect)
          req.set_event_id(events[in.ConsumeIntegralInRange<size_t>(0, events.size() - 1)]);
        v1::UpdateResponse resp;
        s = svc.Update(req, &resp);
        break;
      }
      case 3: {
        v1::SelectBatchRequest req;
        if (!Decode(in, &req)) continue;
        if (aim)
          for (auto& r : *req.mutable_requests()) r.set_instance("f");
        v1::SelectBatchResponse resp;
        s = svc.SelectBatch(req, &resp);
        if (s.ok()) {
          Check(resp.decisions_size() == req.requests_size() &&
                    resp.statuses_size() == req.requests_size(),
                "batch response not aligned with the request", s);
          for (const auto& d : resp.decisions())
            if (!d.event_id().empty()) events.push_back(d.event_id());
        }
        mutating_refusal_checked = false;  // items succeed independently
        break;
      }
      case 4: {
        v1::UpdateBatchRequest req;
        if (!Decode(in, &req)) continue;
        if (aim)
          for (auto& r : *req.mutable_requests()) {
            r.set_instance("f");
            if (!events.empty() && r.target_case() != v1::UpdateRequest::kDirect)
              r.set_event_id(events[in.ConsumeIntegralInRange<size_t>(0, events.size() - 1)]);
          }
        v1::UpdateBatchResponse resp;
        s = svc.UpdateBatch(req, &resp);
        if (s.ok())
          Check(resp.statuses_size() == req.requests_size(), "batch statuses not aligned", s);
        mutating_refusal_checked = false;
        break;
      }
      case 5: {
        v1::AddArmsRequest req;
        if (!Decode(in, &req)) continue;
        if (aim) req.set_name("f");
        s = svc.AddArms(req, &described);
        break;
      }
      case 6: {
        v1::RemoveArmsRequest req;
        if (!Decode(in, &req)) continue;
        if (aim) req.set_name("f");
        s = svc.RemoveArms(req, &described);
        break;
      }
      case 7: {
        v1::ImportInstanceRequest req;
        if (!Decode(in, &req)) continue;
        s = svc.ImportInstance(req, &described);
        break;
      }
      case 8: {
        // Export then re-import under another name: must always work for a live instance.
        v1::ExportInstanceRequest ex;
        ex.set_name("f");
        v1::ExportInstanceResponse snap;
        s = svc.ExportInstance(ex, &snap);
        if (s.ok()) {
          v1::ImportInstanceRequest im;
          im.set_name("copy");
          im.set_snapshot(snap.snapshot());
          absl::Status si = svc.ImportInstance(im, &described);
          Check(si.ok() || si.code() == absl::StatusCode::kAlreadyExists ||
                    si.code() == absl::StatusCode::kResourceExhausted,
                "an exported instance does not import", si);
        }
        break;
      }
      case 9: {
        clock.Advance(in.ConsumeIntegralInRange<int64_t>(0, 1'000'000));
        svc.ExpireAll();
        mutating_refusal_checked = false;
        break;
      }
      case 10: {
        v1::ListInstancesRequest req;
        if (!Decode(in, &req)) continue;
        v1::ListInstancesResponse resp;
        s = svc.ListInstances(req, &resp);
        break;
      }
      case 11: {
        v1::GetInstanceRequest req;
        if (!Decode(in, &req)) continue;
        s = svc.GetInstance(req, &described);
        break;
      }
    }
    Check(Documented(s.code()), "undocumented status code", s);
    if (!s.ok() && mutating_refusal_checked)
      Check(StateOf(svc, "f") == before, "a refused call changed the instance", s);
    // The live instance always snapshots, encodes, decodes and rebuilds.
    if (auto inst = svc.registry().Get("f"); inst.ok()) {
      auto decoded = SnapshotStore::Decode(SnapshotStore::Encode((*inst)->Snapshot()));
      Check(decoded.ok(), "snapshot does not decode", decoded.status());
      auto rebuilt = Instance::FromSnapshot(*decoded, &clock, InstanceLimits{});
      Check(rebuilt.ok(), "snapshot does not rebuild", rebuilt.status());
    }
  }
  return 0;
}
