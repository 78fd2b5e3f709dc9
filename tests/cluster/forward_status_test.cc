// A call forwarded to an instance's owner that the owner cuts (CANCELLED: a leaving node's
// server shutting down cancels the calls it has not finished) reaches the caller as UNAVAILABLE,
// which clients retry, never as CANCELLED, which they do not. Deterministic: the "owner" is a
// stand-in gRPC server in this process that answers every call CANCELLED, registered in the
// membership and lease tables of a real banditd node's database.
#include <atomic>
#include <thread>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bandit/v1/service.grpc.pb.h"
#include "client/cpp/bandit_client.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

// Answers as a leaving owner's server does for a call it cuts.
class CuttingOwner final : public v1::BanditService::Service {
 public:
  grpc::Status GetInstance(grpc::ServerContext*, const v1::GetInstanceRequest*,
                           v1::Instance*) override {
    ++calls;
    return grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled");
  }
  grpc::Status Select(grpc::ServerContext*, const v1::SelectRequest*, v1::Decision*) override {
    ++calls;
    return grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled");
  }
  std::atomic<int> calls{0};
};

TEST(ClusterForwarding, AnOwnerCuttingAForwardedCallIsAnsweredUnavailableNeverCancelled) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  CuttingOwner owner;
  int owner_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &owner_port);
  builder.RegisterService(&owner);
  std::unique_ptr<grpc::Server> owner_server = builder.BuildAndStart();
  ASSERT_NE(owner_port, 0);

  ServerProcess node({"--storage=postgres", "--postgres_dsn=" + dsn, "--cluster", "--node_id=n1",
                      "--lease_ms=600"});
  ASSERT_TRUE(node.running()) << node.Log();
  // "owner" is a live member (for an hour) holding the lease of "elsewhere".
  PostgresProcess::ExecOn(
      dsn, absl::StrCat("INSERT INTO bandit_nodes (node_id, address, incarnation, expires_at) "
                        "VALUES ('owner', '127.0.0.1:",
                        owner_port,
                        "', 1, clock_timestamp() + interval '1 hour'); "
                        "INSERT INTO bandit_leases (instance, owner, owner_incarnation, epoch) "
                        "VALUES ('elsewhere', 'owner', 1, 1)"));

  BanditClient client(node.target());
  // Until n1's heartbeat has seen the new member it answers UNAVAILABLE itself ("moving");
  // every answer, before and after the owner is reached, must be retryable.
  absl::Status got;
  for (int i = 0; i < 500 && owner.calls.load() < 2; ++i) {
    got = client.GetInstance("elsewhere").status();
    EXPECT_NE(got.code(), absl::StatusCode::kCancelled) << got;
    v1::SelectRequest sel;
    sel.set_instance("elsewhere");
    got = client.Select(sel).status();
    EXPECT_NE(got.code(), absl::StatusCode::kCancelled) << got;
    if (owner.calls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(owner.calls.load(), 2) << "n1 never forwarded to the owner\n" << node.Log();
  // The last call was forwarded and cut by the owner.
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable) << got;
  EXPECT_TRUE(absl::StrContains(got.message(), "'owner'")) << got;
  owner_server->Shutdown();
}

}  // namespace
}  // namespace bandit
