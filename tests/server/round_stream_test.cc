// The Rounds stream against the unary calls: two identical services (the same clock, uids and
// seeds), each behind its own gRPC server on port 0, one played with unary Select / Update /
// Activate and the other with the same requests on a stream. The answers and the learned state
// must be equal; a refused request is answered with its status code in its place, changes
// nothing, and the stream goes on.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/bandit_client.h"
#include "server/api/auth.h"
#include "server/api/grpc_service.h"
#include "server/env/clock.h"
#include "server/service/decision_service.h"
#include "tests/server/server_test_util.h"
#include "tests/server/vw_rounds.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::client::RoundStream;
using bandit::client::StatusOf;
using google::protobuf::util::MessageDifferencer;
using testing::Create;
using testing::Exported;
using testing::VwRound;
namespace v1 = bandit::v1;

// A DecisionService behind a gRPC server of its own, deterministic: a manual clock and
// sequential uids, so two nodes fed the same requests make the same event ids.
struct Node {
  explicit Node(const Authorizer* auth = nullptr) : grpc_service(&service, nullptr, auth) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&grpc_service);
    server = builder.BuildAndStart();
    client = std::make_unique<BanditClient>(absl::StrCat("127.0.0.1:", port));
  }
  ~Node() {
    // A stream a failed test left open must not hold the shutdown.
    grpc_service.EndStreams(absl::UnavailableError("the test is over"));
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    // Shutdown returns once gRPC has called every reactor's OnDone, but that hand-off happens
    // inside libgrpc; the service's own count of live calls (released as a reactor is deleted,
    // after OnDone unregistered it) is what orders the service's destruction after them, as
    // banditd's drain does.
    for (int i = 0; i < 500 && grpc_service.ActiveCalls() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(grpc_service.ActiveCalls(), 0) << "a reactor outlived the server's shutdown";
  }

  ManualClock clock;
  SequentialUids uids;
  DecisionService service{&clock, ServiceLimits(), &uids};
  GrpcBanditService grpc_service;  // no metrics
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<BanditClient> client;
};

constexpr char kVwConfig[] = R"(
  policy { vw { arguments: "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 -q :: -b 18" } }
  seed: 7
  pending { reward_wait_ms: 600000 })";

double RewardOf(const v1::Decision& d) { return d.arm_index() % 2 == 0 ? 1.0 : 0.0; }

v1::RoundRequest Round(const v1::SelectRequest& select) {
  v1::RoundRequest r;
  *r.mutable_select() = select;
  return r;
}
v1::RoundRequest Round(const v1::UpdateRequest& update) {
  v1::RoundRequest r;
  *r.mutable_update() = update;
  return r;
}
v1::RoundRequest Round(const v1::ActivateRequest& activate) {
  v1::RoundRequest r;
  *r.mutable_activate() = activate;
  return r;
}

v1::UpdateRequest UpdateOf(const v1::Decision& d) {
  v1::UpdateRequest up;
  up.set_instance("v");
  up.set_event_id(d.event_id());
  up.set_reward(RewardOf(d));
  return up;
}

std::unique_ptr<RoundStream> Open(Node& node) {
  auto stream = node.client->OpenRoundStream();
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? std::move(*stream) : nullptr;
}

TEST(RoundStream, DecidesAndLearnsAsTheUnaryCalls) {
  Node unary, streamed;
  ASSERT_TRUE(unary.client->CreateInstance(Create("v", kVwConfig)).ok());
  ASSERT_TRUE(streamed.client->CreateInstance(Create("v", kVwConfig)).ok());
  std::unique_ptr<RoundStream> stream = Open(streamed);
  ASSERT_NE(stream, nullptr);

  // Pipelined as a client would: each round's Update leaves with the next round's Select, and
  // every 10th decision is deferred and activated before its reward.
  constexpr int kRounds = 200;
  for (int i = 0; i < kRounds; ++i) {
    v1::SelectRequest select = VwRound(i);
    select.set_defer_activation(i % 10 == 3);
    auto want = unary.client->Select(select);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(stream->Send(Round(select)).ok());
    if (stream->unanswered() == 2) {  // the previous round's Update
      auto u = stream->Receive();
      ASSERT_TRUE(u.ok()) << u.status();
      ASSERT_TRUE(StatusOf(*u).ok()) << StatusOf(*u);
      EXPECT_TRUE(u->has_update());
    }
    auto got = stream->Receive();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(StatusOf(*got).ok()) << StatusOf(*got);
    ASSERT_TRUE(got->has_decision());
    EXPECT_TRUE(MessageDifferencer::Equals(got->decision(), *want))
        << "round " << i << "\nstream: " << got->decision().ShortDebugString()
        << "\nunary: " << want->ShortDebugString();
    if (select.defer_activation()) {
      v1::ActivateRequest activate;
      activate.set_instance("v");
      activate.set_event_id(want->event_id());
      ASSERT_TRUE(unary.client->Activate(activate).ok());
      auto activated = stream->Activate(Round(activate).activate());
      ASSERT_TRUE(activated.ok()) << activated.status();
    }
    auto learned = unary.client->Update(UpdateOf(*want));
    ASSERT_TRUE(learned.ok()) << learned.status();
    ASSERT_TRUE(stream->Send(Round(UpdateOf(got->decision())), /*more_follow=*/true).ok());
  }
  ASSERT_TRUE(stream->Close().ok());
  EXPECT_EQ(Exported(streamed.service, "v"), Exported(unary.service, "v"));
  EXPECT_EQ(testing::InstanceOf(streamed.service, "v").stats().updates(), kRounds);
}

// The stream's answers to requests sent all before any answer is read (more than the server
// holds unanswered, so it stops reading and resumes as answers leave) come in the order sent.
TEST(RoundStream, AnswersComeInTheOrderSentWhenManyAreSentBeforeAnyIsRead) {
  Node unary, streamed;
  constexpr char kUcb[] = "policy { ucb1 {} num_arms: 3 } seed: 3";
  ASSERT_TRUE(unary.client->CreateInstance(Create("u", kUcb)).ok());
  ASSERT_TRUE(streamed.client->CreateInstance(Create("u", kUcb)).ok());
  std::unique_ptr<RoundStream> stream = Open(streamed);
  ASSERT_NE(stream, nullptr);
  v1::SelectRequest select;
  select.set_instance("u");
  constexpr int kSelects = 150;
  for (int i = 0; i < kSelects; ++i) ASSERT_TRUE(stream->Send(Round(select)).ok());
  for (int i = 0; i < kSelects; ++i) {
    auto want = unary.client->Select(select);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = stream->Receive();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MessageDifferencer::Equals(got->decision(), *want)) << "request " << i;
  }
  EXPECT_TRUE(stream->Close().ok());
}

// The bytes of a RoundRequest message, sent as they are (a stub that can send what no client
// would: bytes that do not parse).
class RawRoundStream {
 public:
  explicit RawRoundStream(int port)
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials())),
        method_("/bandit.v1.BanditService/Rounds", grpc::internal::RpcMethod::BIDI_STREAMING),
        stream_(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::
                    Create(channel_.get(), method_, &ctx_)) {}

  bool Write(const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    return stream_->Write(buffer);
  }
  bool Write(const v1::RoundRequest& req) { return Write(req.SerializeAsString()); }
  absl::StatusOr<v1::RoundResponse> Read() {
    grpc::ByteBuffer buffer;
    if (!stream_->Read(&buffer)) return absl::UnavailableError("the stream ended");
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(buffer.Dump(&slices).ok());
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    v1::RoundResponse answer;
    EXPECT_TRUE(answer.ParseFromString(bytes));
    return answer;
  }
  grpc::Status Close() {
    stream_->WritesDone();
    return stream_->Finish();
  }

 private:
  grpc::ClientContext ctx_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::internal::RpcMethod method_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
};

TEST(RoundStream, EachRefusalIsAnsweredInItsPlaceChangesNothingAndTheStreamGoesOn) {
  Node twin, streamed;
  ASSERT_TRUE(twin.client->CreateInstance(Create("v", kVwConfig)).ok());
  ASSERT_TRUE(streamed.client->CreateInstance(Create("v", kVwConfig)).ok());
  RawRoundStream raw(streamed.port);

  // The twin gets the same requests as unary calls (a refused call changes nothing there but
  // the count of rejected rewards); the stream's answers must be theirs.
  auto want_first = twin.client->Select(VwRound(0));
  ASSERT_TRUE(want_first.ok()) << want_first.status();

  ASSERT_TRUE(raw.Write(Round(VwRound(0))));
  auto first = raw.Read();
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->has_status()) << first->status().message();
  ASSERT_TRUE(MessageDifferencer::Equals(first->decision(), *want_first));

  struct Refused {
    std::string what;
    std::string bytes;
    absl::StatusCode code;
  };
  // The unary call of a RoundRequest's bytes, on the twin (none for what is no call).
  auto unary_status = [&](const std::string& bytes) -> std::optional<absl::Status> {
    v1::RoundRequest req;
    if (!req.ParseFromString(bytes)) return std::nullopt;
    switch (req.call_case()) {
      case v1::RoundRequest::kSelect:
        return twin.client->Select(req.select()).status();
      case v1::RoundRequest::kUpdate:
        return twin.client->Update(req.update()).status();
      case v1::RoundRequest::kActivate:
        return twin.client->Activate(req.activate()).status();
      case v1::RoundRequest::CALL_NOT_SET:
        break;
    }
    return std::nullopt;
  };
  std::vector<Refused> refused;
  {
    v1::SelectRequest unknown = VwRound(1);
    unknown.set_instance("nobody");
    refused.push_back({"unknown instance", Round(unknown).SerializeAsString(),
                       absl::StatusCode::kNotFound});
    v1::SelectRequest bad_json = VwRound(1);
    bad_json.set_context("{\"User\": ");
    refused.push_back({"malformed context", Round(bad_json).SerializeAsString(),
                       absl::StatusCode::kInvalidArgument});
    v1::UpdateRequest unknown_event = UpdateOf(*want_first);
    unknown_event.set_event_id("no-such-event");
    refused.push_back({"unknown event", Round(unknown_event).SerializeAsString(),
                       absl::StatusCode::kNotFound});
    refused.push_back({"the first reward", Round(UpdateOf(first->decision())).SerializeAsString(),
                       absl::StatusCode::kOk});
    refused.push_back({"its reward again", Round(UpdateOf(first->decision())).SerializeAsString(),
                       absl::StatusCode::kFailedPrecondition});
    v1::UpdateRequest nan = UpdateOf(first->decision());
    nan.set_reward(std::nan(""));
    refused.push_back({"a NaN reward", Round(nan).SerializeAsString(),
                       absl::StatusCode::kInvalidArgument});
    v1::ActivateRequest not_deferred;
    not_deferred.set_instance("v");
    not_deferred.set_event_id(first->decision().event_id());
    refused.push_back({"activating a rewarded decision", Round(not_deferred).SerializeAsString(),
                       absl::StatusCode::kFailedPrecondition});
    refused.push_back({"no call set", v1::RoundRequest().SerializeAsString(),
                       absl::StatusCode::kInvalidArgument});
    refused.push_back({"bytes that are no protobuf", std::string("\xff\xff\xff\xff", 4),
                       absl::StatusCode::kInvalidArgument});
  }
  // All sent before any answer is read: each answer is in its request's place.
  for (const auto& r : refused) ASSERT_TRUE(raw.Write(r.bytes)) << r.what;
  for (const auto& r : refused) {
    SCOPED_TRACE(r.what);
    auto answer = raw.Read();
    ASSERT_TRUE(answer.ok());
    if (std::optional<absl::Status> unary = unary_status(r.bytes)) {
      EXPECT_EQ(unary->code(), r.code) << *unary;
      EXPECT_EQ(bandit::client::StatusOf(*answer), *unary);
    }
    if (r.code == absl::StatusCode::kOk) {
      EXPECT_FALSE(answer->has_status()) << answer->status().message();
      EXPECT_TRUE(answer->has_update());
      continue;
    }
    ASSERT_TRUE(answer->has_status());
    EXPECT_EQ(answer->status().code(), static_cast<int>(r.code)) << answer->status().message();
    EXPECT_FALSE(answer->status().message().empty());
    EXPECT_EQ(answer->result_case(), v1::RoundResponse::RESULT_NOT_SET);
  }
  // The stream goes on, from the state the twin is in.
  auto want_last = twin.client->Select(VwRound(1));
  ASSERT_TRUE(want_last.ok()) << want_last.status();
  ASSERT_TRUE(raw.Write(Round(VwRound(1))));
  auto last = raw.Read();
  ASSERT_TRUE(last.ok());
  ASSERT_FALSE(last->has_status()) << last->status().message();
  EXPECT_TRUE(MessageDifferencer::Equals(last->decision(), *want_last));
  EXPECT_TRUE(raw.Close().ok());
  EXPECT_EQ(Exported(streamed.service, "v"), Exported(twin.service, "v"));
}

// The unary calls' refusals for the same requests have the same codes and messages.
TEST(RoundStream, RefusalsAreTheUnaryCallsOwn) {
  Node node;
  ASSERT_TRUE(node.client->CreateInstance(Create("v", kVwConfig)).ok());
  std::unique_ptr<RoundStream> stream = Open(node);
  ASSERT_NE(stream, nullptr);
  v1::SelectRequest unknown = VwRound(0);
  unknown.set_instance("nobody");
  v1::SelectRequest bad_json = VwRound(0);
  bad_json.set_context("[1, 2");
  for (const v1::SelectRequest& req : {unknown, bad_json}) {
    absl::Status unary = node.client->Select(req).status();
    absl::Status streamed = stream->Select(req).status();
    EXPECT_EQ(streamed.code(), unary.code());
    EXPECT_EQ(streamed.message(), unary.message());
    EXPECT_NE(streamed.code(), absl::StatusCode::kOk);
  }
  v1::UpdateRequest no_target;
  no_target.set_instance("v");
  absl::Status unary = node.client->Update(no_target).status();
  absl::Status streamed = stream->Update(no_target).status();
  EXPECT_EQ(streamed.code(), unary.code());
  EXPECT_EQ(streamed.message(), unary.message());
  EXPECT_TRUE(stream->Close().ok());
}

// Each request is authorized as its unary call: by its own role and instance, the refusal in
// its answer, the stream going on.
TEST(RoundStream, EachRequestIsAuthorizedAsItsUnaryCall) {
  auto auth = Authorizer::Parse(
      "admin adm-0123456789abcdef0123 ops\n"
      "writer shp-0123456789abcdef0123 shop-app instance=v\n"
      "reader rea-0123456789abcdef0123 dashboards\n",
      "tokens");
  ASSERT_TRUE(auth.ok()) << auth.status();
  Node node(auth->get());
  auto as = [&](const std::string& token) {
    bandit::client::ClientOptions options;
    options.token = token;
    return std::make_unique<BanditClient>(absl::StrCat("127.0.0.1:", node.port), options);
  };
  ASSERT_TRUE(as("adm-0123456789abcdef0123")->CreateInstance(Create("v", kVwConfig)).ok());
  ASSERT_TRUE(as("adm-0123456789abcdef0123")->CreateInstance(Create("w", kVwConfig)).ok());
  v1::SelectRequest other = VwRound(0);
  other.set_instance("w");
  struct Case {
    std::string token;
    v1::SelectRequest select;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"shp-0123456789abcdef0123", VwRound(0), absl::StatusCode::kOk},
      {"shp-0123456789abcdef0123", other, absl::StatusCode::kPermissionDenied},
      {"rea-0123456789abcdef0123", VwRound(0), absl::StatusCode::kPermissionDenied},
      {"", VwRound(0), absl::StatusCode::kUnauthenticated},
      {"unknown-0123456789abcdef", VwRound(0), absl::StatusCode::kUnauthenticated}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.token + " on " + c.select.instance());
    std::unique_ptr<BanditClient> client = as(c.token);
    const absl::Status unary = client->Select(c.select).status();
    EXPECT_EQ(unary.code(), c.code) << unary;
    auto stream = client->OpenRoundStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    for (int twice = 0; twice < 2; ++twice) {  // the stream goes on after a refusal
      const absl::Status streamed = (*stream)->Select(c.select).status();
      EXPECT_EQ(streamed.code(), unary.code()) << streamed;
      EXPECT_EQ(streamed.message(), unary.message());
    }
    EXPECT_TRUE((*stream)->Close().ok());
  }
}

// A client's Select helper refuses while pipelined answers are due (it would read theirs).
TEST(RoundStream, TheOneCallHelpersRefuseWhileAnswersAreDue) {
  Node node;
  ASSERT_TRUE(node.client->CreateInstance(Create("v", kVwConfig)).ok());
  std::unique_ptr<RoundStream> stream = Open(node);
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(stream->Send(Round(VwRound(0))).ok());
  EXPECT_EQ(stream->Select(VwRound(1)).status().code(), absl::StatusCode::kFailedPrecondition);
  auto got = stream->Receive();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_decision());
  EXPECT_TRUE(stream->Select(VwRound(1)).ok());
  EXPECT_TRUE(stream->Close().ok());
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit::server
