// libFuzzer target: the Rounds stream's messages (RoundRequest), served as the stream serves them
// and checked against the unary calls.
//
// The input picks one of the seed configs (fuzz/seed_configs.h), then is a sequence of steps, each
// an op byte (from the input's end) and, for most ops, a message's bytes (from its front, in
// FuzzedDataProvider's layout). Two services start with the same instance "f", the same clock and
// deterministic ids (SequentialUids). One serves each message as server/api/grpc_round_stream.cc
// does: parse a RoundRequest, call DecisionService's Select,
// Update or Activate with the written-sequence out-parameter the stream passes, and put a refusal
// into the answer's ItemStatus (ToItemStatus) with no result. The other serves the same request
// the way its unary call receives it: the inner message encoded and parsed on its own. (A
// message that does not parse, or sets none of select / update / activate, is answered
// INVALID_ARGUMENT by the stream before any service call: nothing to serve, the step is skipped.)
//
// Op byte: bits 0-2 == 7 moves both clocks forward (expiring what falls due); otherwise a
// message follows. Bit 7 clear "aims" the request: its instance becomes "f" and an Update (not
// direct) or Activate names the event of a Select made earlier in the input, the newest but
// bits 3-5 (0 = newest, k = the k-th before it), which is how a pipelined client names the
// event of the Select it sent just before.
//
// Oracles besides "no crash, no sanitizer report":
//   * the answer has the unary call's status code and (capped) message; on success, exactly the
//     result of the request's kind, equal (deterministic bytes) to the unary call's response;
//     on a refusal, no result and a non-zero code;
//   * both instances have the same snapshot after every step (the stream changes exactly what
//     the unary calls change);
//   * a refused request leaves the instance unchanged; every code is one the API documents;
//   * at the end the instance's snapshot encodes, decodes and rebuilds.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include "fuzz/seed_configs.h"
#include "server/service/decision_service.h"
#include "server/service/status_util.h"
#include "server/storage/snapshot_store.h"

namespace {

using namespace bandit::server;
namespace v1 = bandit::v1;

ServiceLimits FuzzLimits() {
  ServiceLimits l;
  l.max_instances = 4;
  l.instance.max_candidates = 32;
  l.instance.max_vector_size = 64;
  l.instance.max_feature_dim = 64;
  l.instance.max_arms = 64;
  l.instance.max_arms_per_request = 16;
  l.instance.max_pending_capacity = 64;
  return l;
}

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

void Check(bool ok, const char* what, const absl::Status& s) {
  if (ok) return;
  std::fprintf(stderr, "oracle failed: %s (status %s)\n", what, s.ToString().c_str());
  std::abort();
}

// The codes docs/api.md lists for Select, Update and Activate.
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

// Map fields (Decision.diagnostics, policy state) serialize in an unspecified order unless asked:
// two equal messages must give equal bytes here.
std::string Bytes(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

// The instance's whole exported state (policy, pending decisions, counters, log), or "<none>".
std::string SnapshotOf(DecisionService& svc) {
  auto inst = svc.registry().Get("f");
  if (!inst.ok()) return "<none>";
  return Bytes((*inst)->Snapshot());
}

// What decides and learns (policy state, pending decisions, config; not the counters, which may
// count a refusal): what a refused request must leave as it was, as in request_fuzz.
std::string DecisionStateOf(DecisionService& svc) {
  auto inst = svc.registry().Get("f");
  if (!inst.ok()) return "<none>";
  v1::InstanceSnapshot snap = (*inst)->Snapshot();
  std::string out = Bytes(snap.policy());
  for (const auto& p : snap.pending()) out += Bytes(p);
  out += Bytes(snap.config());
  out += std::to_string(snap.next_event_seq());
  return out;
}

// A message parsed as gRPC hands it to a handler: from its own bytes.
template <typename Msg>
Msg AsReceived(const Msg& sent) {
  Msg received;
  if (!received.ParseFromString(sent.SerializeAsString())) std::abort();  // it was just encoded
  return received;
}

// One message through the stream's path (`wire` parses as a RoundRequest that sets a call): the
// answer as the stream writes it.
v1::RoundResponse ServeRound(DecisionService& svc, const std::string& wire,
                             absl::Status* status) {
  v1::RoundResponse answer;
  v1::RoundRequest request;
  uint64_t written_seq = 0;
  if (!request.ParseFromString(wire)) std::abort();  // the caller parsed it
  switch (request.call_case()) {
    case v1::RoundRequest::kSelect:
      *status = svc.Select(request.select(), answer.mutable_decision(), &written_seq);
      break;
    case v1::RoundRequest::kUpdate:
      *status = svc.Update(request.update(), answer.mutable_update(), &written_seq);
      break;
    case v1::RoundRequest::kActivate:
      *status = svc.Activate(request.activate(), answer.mutable_activate(), &written_seq);
      break;
    case v1::RoundRequest::CALL_NOT_SET:
      std::abort();  // the caller checked
  }
  if (!status->ok()) {
    answer.clear_result();
    ToItemStatus(*status, answer.mutable_status());
  }
  return answer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ManualClock stream_clock(1'700'000'000'000), unary_clock(1'700'000'000'000);
  SequentialUids stream_uids, unary_uids;
  DecisionService stream_svc(&stream_clock, FuzzLimits(), &stream_uids);
  DecisionService unary_svc(&unary_clock, FuzzLimits(), &unary_uids);
  const int which = in.ConsumeIntegralInRange<int>(0, static_cast<int>(Configs().size()) - 1);
  {
    v1::Instance described;
    absl::Status s = stream_svc.CreateInstance(Configs()[which], &described);
    Check(s.ok(), "a seed config is refused", s);
    s = unary_svc.CreateInstance(Configs()[which], &described);
    Check(s.ok(), "a seed config is refused", s);
  }
  std::vector<std::string> events;  // the event ids of the Selects served, oldest first
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    const uint8_t op = in.ConsumeIntegral<uint8_t>();
    if ((op & 7) == 7) {
      const int64_t ms = in.ConsumeIntegralInRange<int64_t>(0, 10'000'000);
      stream_clock.Advance(ms);
      unary_clock.Advance(ms);
      Check(stream_svc.ExpireAll() == unary_svc.ExpireAll(), "expiry differs", absl::OkStatus());
      Check(SnapshotOf(stream_svc) == SnapshotOf(unary_svc), "states differ after expiry",
            absl::OkStatus());
      continue;
    }
    std::string wire = in.ConsumeRandomLengthString(2048);
    v1::RoundRequest request;
    if (!request.ParseFromString(wire) || request.call_case() == v1::RoundRequest::CALL_NOT_SET)
      continue;
    if ((op & 0x80) == 0) {
      const size_t back = (op >> 3) & 7;
      const std::string* event =
          events.empty() ? nullptr : &events[events.size() - 1 - std::min(back, events.size() - 1)];
      switch (request.call_case()) {
        case v1::RoundRequest::kSelect:
          request.mutable_select()->set_instance("f");
          break;
        case v1::RoundRequest::kUpdate:
          request.mutable_update()->set_instance("f");
          if (event != nullptr && request.update().target_case() != v1::UpdateRequest::kDirect)
            request.mutable_update()->set_event_id(*event);
          break;
        case v1::RoundRequest::kActivate:
          request.mutable_activate()->set_instance("f");
          if (event != nullptr) request.mutable_activate()->set_event_id(*event);
          break;
        case v1::RoundRequest::CALL_NOT_SET:
          break;
      }
      wire = request.SerializeAsString();
    }
    const std::string before = DecisionStateOf(stream_svc);

    absl::Status streamed;
    const v1::RoundResponse answer = ServeRound(stream_svc, wire, &streamed);

    // The same request as its unary call: the reference the answer must match.
    absl::Status unary;
    std::string unary_result;
    switch (request.call_case()) {
      case v1::RoundRequest::kSelect: {
        v1::Decision d;
        unary = unary_svc.Select(AsReceived(request.select()), &d);
        if (unary.ok()) unary_result = Bytes(d);
        break;
      }
      case v1::RoundRequest::kUpdate: {
        v1::UpdateResponse u;
        unary = unary_svc.Update(AsReceived(request.update()), &u);
        if (unary.ok()) unary_result = Bytes(u);
        break;
      }
      case v1::RoundRequest::kActivate: {
        v1::ActivateResponse a;
        unary = unary_svc.Activate(AsReceived(request.activate()), &a);
        if (unary.ok()) unary_result = Bytes(a);
        break;
      }
      case v1::RoundRequest::CALL_NOT_SET:
        break;
    }

    Check(Documented(streamed.code()), "undocumented status code", streamed);
    Check(streamed.code() == unary.code(), "the stream's code differs from the unary call's",
          streamed);
    if (streamed.ok()) {
      Check(!answer.has_status(), "an answered request carries a status", streamed);
      const bool kind_matches =
          (request.call_case() == v1::RoundRequest::kSelect && answer.has_decision()) ||
          (request.call_case() == v1::RoundRequest::kUpdate && answer.has_update()) ||
          (request.call_case() == v1::RoundRequest::kActivate && answer.has_activate());
      Check(kind_matches, "the answer's result is not of the request's kind", streamed);
      const std::string result = answer.has_decision() ? Bytes(answer.decision())
                                 : answer.has_update() ? Bytes(answer.update())
                                                       : Bytes(answer.activate());
      Check(result == unary_result, "the answer differs from the unary call's response", streamed);
      if (answer.has_decision()) events.push_back(answer.decision().event_id());
    } else {
      Check(answer.result_case() == v1::RoundResponse::RESULT_NOT_SET,
            "a refused request's answer has a result", streamed);
      Check(answer.status().code() == static_cast<int>(streamed.code()) &&
                answer.status().code() != 0,
            "the answer's code is not the refusal's", streamed);
      Check(answer.status().message() == CappedMessage(unary),
            "the answer's message differs from the unary call's", streamed);
      Check(DecisionStateOf(stream_svc) == before, "a refused request changed the instance",
            streamed);
    }
    Check(SnapshotOf(stream_svc) == SnapshotOf(unary_svc),
          "the stream and the unary calls left the instance in different states", streamed);
  }
  if (auto inst = stream_svc.registry().Get("f"); inst.ok()) {
    auto decoded = SnapshotStore::Decode(SnapshotStore::Encode((*inst)->Snapshot()));
    Check(decoded.ok(), "snapshot does not decode", decoded.status());
    auto rebuilt = Instance::FromSnapshot(*decoded, &stream_clock, InstanceLimits{});
    Check(rebuilt.ok(), "snapshot does not rebuild", rebuilt.status());
  }
  return 0;
}
