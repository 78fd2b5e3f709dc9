// Requests whose payload is not a valid protobuf, sent over a raw (generic) channel to every
// unary method of bandit.v1.BanditService (enumerated from the proto descriptor, not from the
// server's own list): each is answered INVALID_ARGUMENT with a message naming the expected
// message type, counted in bandit_rpc_unparseable_requests_total, and the server keeps serving.
#include <condition_variable>
#include <mutex>

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "bandit/v1/service.grpc.pb.h"
#include "client/cpp/bandit_client.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::testing::HttpGet;
using bandit::testing::ServerProcess;

// Field 1 with wire type 7, which does not exist: no protobuf parser accepts this byte.
const std::string kInvalidWireType("\x0f", 1);
// A varint that never ends (ten continuation bytes), then a truncated length-delimited field.
const std::string kRunawayVarint(
    "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x12\x05"
    "ab",
    15);

grpc::Status CallRaw(grpc::GenericStub& stub, const std::string& method, const std::string& payload,
                     grpc::ByteBuffer* reply) {
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status status;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

// The counter's value for `method` in a /metrics text, or -1 when the series is missing.
double UnparseableCount(const std::string& metrics, const std::string& method) {
  const std::string series =
      absl::StrCat("bandit_rpc_unparseable_requests_total{method=\"", method, "\"} ");
  const size_t at = metrics.find(series);
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + series.size()));
}

TEST(MalformedRequest, EveryMethodAnswersInvalidArgumentAndTheServerKeepsServing) {
  ServerProcess server;
  ASSERT_TRUE(server.running()) << server.Log();
  grpc::GenericStub stub(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));

  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          bandit::v1::BanditService::service_full_name());
  ASSERT_NE(service, nullptr);
  ASSERT_GE(service->method_count(), 15);
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = service->method(i);
    const std::string path = absl::StrCat("/", service->full_name(), "/", m->name());
    for (const std::string& payload : {kInvalidWireType, kRunawayVarint}) {
      grpc::ByteBuffer reply;
      grpc::Status s = CallRaw(stub, path, payload, &reply);
      if (m->client_streaming()) {
        // Rounds: the stream goes on (here it ends OK, the client's side being closed); the
        // message's own answer carries the refusal.
        EXPECT_TRUE(s.ok()) << path << ": " << s.error_message();
        std::vector<grpc::Slice> slices;
        ASSERT_TRUE(reply.Dump(&slices).ok()) << path;
        std::string bytes;
        for (const auto& slice : slices)
          bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        bandit::v1::RoundResponse answer;
        ASSERT_TRUE(answer.ParseFromString(bytes)) << path;
        s = grpc::Status(static_cast<grpc::StatusCode>(answer.status().code()),
                         answer.status().message());
      }
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << path << ": " << s.error_message();
      EXPECT_NE(s.error_message().find(m->input_type()->full_name()), std::string::npos)
          << path << ": " << s.error_message();
      EXPECT_NE(s.error_message().find(absl::StrCat("(", payload.size(), " bytes)")),
                std::string::npos)
          << s.error_message();
    }
    // A method that does not exist is still UNIMPLEMENTED: the two stay distinguishable.
  }
  grpc::ByteBuffer reply;
  EXPECT_EQ(
      CallRaw(stub, "/bandit.v1.BanditService/NoSuchMethod", kInvalidWireType, &reply).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);

  // Counted per method, two per method.
  const std::string metrics = HttpGet(server.metrics_port(), "/metrics");
  for (int i = 0; i < service->method_count(); ++i)
    EXPECT_EQ(UnparseableCount(metrics, service->method(i)->name()), 2.0)
        << service->method(i)->name();

  // Still serving, and a well-formed request over the same raw channel works.
  client::BanditClient client(server.target());
  bandit::v1::CreateInstanceRequest create;
  create.set_name("after-garbage");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 3 }", create.mutable_config()));
  ASSERT_TRUE(client.CreateInstance(create).ok());
  bandit::v1::SelectRequest select;
  select.set_instance("after-garbage");
  std::string bytes;
  ASSERT_TRUE(select.SerializeToString(&bytes));
  const grpc::Status ok = CallRaw(stub, "/bandit.v1.BanditService/Select", bytes, &reply);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string reply_bytes;
  for (const auto& s : slices)
    reply_bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  bandit::v1::Decision decision;
  ASSERT_TRUE(decision.ParseFromString(reply_bytes));
  EXPECT_FALSE(decision.event_id().empty());
  EXPECT_GE(decision.arm_index(), 0);
  EXPECT_LT(decision.arm_index(), 3);
}

}  // namespace
}  // namespace bandit
