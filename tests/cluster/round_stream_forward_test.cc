// A Rounds stream's requests in a cluster: each is routed as its unary call, so a request for an
// instance another node owns is answered by the owner, in its place among the stream's answers.
// Deterministic: the "owner" is a stand-in gRPC server in this process that answers every Select
// with a decision of its own, registered in the membership and lease tables of a real banditd
// node's database.
#include <atomic>
#include <thread>

#include <google/protobuf/text_format.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "bandit/v1/service.grpc.pb.h"
#include "client/cpp/bandit_client.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::client::StatusOf;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

// Answers every Select on "elsewhere" with a decision naming the owner.
class DecidingOwner final : public v1::BanditService::Service {
 public:
  grpc::Status Select(grpc::ServerContext*, const v1::SelectRequest* req,
                      v1::Decision* out) override {
    ++calls;
    out->set_event_id(absl::StrCat("owner-", req->instance()));
    out->set_arm_index(2);
    out->set_propensity(0.25);
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

TEST(ClusterRoundStream, ARequestForAnotherNodesInstanceIsAnsweredByItsOwnerInItsPlace) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  DecidingOwner owner;
  int owner_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &owner_port);
  builder.RegisterService(&owner);
  std::unique_ptr<grpc::Server> owner_server = builder.BuildAndStart();
  ASSERT_NE(owner_port, 0);

  ServerProcess node({"--storage=postgres", "--postgres_dsn=" + dsn, "--cluster", "--node_id=n1",
                      "--lease_ms=600"});
  ASSERT_TRUE(node.running()) << node.Log();
  BanditClient client(node.target());
  v1::CreateInstanceRequest create;
  create.set_name("here");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy {} num_arms: 2 }", create.mutable_config()));
  // The node answers UNAVAILABLE until it has joined.
  absl::Status created;
  for (int i = 0; i < 500; ++i) {
    created = client.CreateInstance(create).status();
    if (created.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(created.ok()) << created << "\n" << node.Log();
  PostgresProcess::ExecOn(
      dsn, absl::StrCat("INSERT INTO bandit_nodes (node_id, address, incarnation, expires_at) "
                        "VALUES ('owner', '127.0.0.1:",
                        owner_port,
                        "', 1, clock_timestamp() + interval '1 hour'); "
                        "INSERT INTO bandit_leases (instance, owner, owner_incarnation, epoch) "
                        "VALUES ('elsewhere', 'owner', 1, 1)"));

  auto stream = client.OpenRoundStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  v1::RoundRequest here, elsewhere;
  here.mutable_select()->set_instance("here");
  elsewhere.mutable_select()->set_instance("elsewhere");
  // Until n1's heartbeat has seen the new member it refuses "elsewhere" itself (UNAVAILABLE,
  // "moving"); the stream goes on, and once the owner is known its answer comes back.
  bool forwarded = false;
  for (int i = 0; i < 500 && !forwarded; ++i) {
    ASSERT_TRUE((*stream)->Send(here).ok());
    ASSERT_TRUE((*stream)->Send(elsewhere).ok());
    ASSERT_TRUE((*stream)->Send(here).ok());
    auto first = (*stream)->Receive();
    auto middle = (*stream)->Receive();
    auto last = (*stream)->Receive();
    ASSERT_TRUE(first.ok() && middle.ok() && last.ok());
    ASSERT_TRUE(StatusOf(*first).ok()) << StatusOf(*first);
    ASSERT_TRUE(StatusOf(*last).ok()) << StatusOf(*last);
    EXPECT_NE(first->decision().event_id(), last->decision().event_id());
    if (!StatusOf(*middle).ok()) {
      EXPECT_EQ(StatusOf(*middle).code(), absl::StatusCode::kUnavailable) << StatusOf(*middle);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    forwarded = true;
    EXPECT_EQ(middle->decision().event_id(), "owner-elsewhere");
    EXPECT_EQ(middle->decision().arm_index(), 2);
    EXPECT_EQ(middle->decision().propensity(), 0.25);
  }
  ASSERT_TRUE(forwarded) << "n1 never forwarded to the owner\n" << node.Log();
  EXPECT_GE(owner.calls.load(), 1);
  EXPECT_TRUE((*stream)->Close().ok());
  owner_server->Shutdown();
}

}  // namespace BANDIT_UNITY_ID
}  // namespace bandit
