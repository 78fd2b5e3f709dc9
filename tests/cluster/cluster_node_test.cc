// ClusterNode against a real PostgreSQL, in-process, for orderings a test of whole processes can
// only hit by chance.
#include "server/cluster/cluster_node.h"

#include <libpq-fe.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "server/storage/postgres/postgres_storage.h"
#include "tests/integration/postgres_process.h"

namespace bandit::server::cluster {
namespace BANDIT_UNITY_ID {

using bandit::testing::PostgresProcess;
using bandit::testing::SharedPostgres;

std::unique_ptr<PostgresStorage> ClusterStorage(const std::string& dsn, const std::string& id) {
  PostgresStorageOptions o;
  o.dsn = dsn;
  o.cluster_node_id = id;
  auto storage = std::make_unique<PostgresStorage>(o);
  RecoverySink sink;
  sink.snapshot = [](const bandit::v1::InstanceSnapshot&) {};
  sink.record = [](const bandit::v1::JournalRecord&) {};
  sink.corrupt = [](const std::string&, const std::string&) {};
  EXPECT_TRUE(storage->Recover(sink).ok());
  return storage;
}

// A node whose membership ran out (paused past its lease) renews it while another node is
// claiming one of its instances. Either the renewal wins and the lease stays, or the claim wins
// and the renewing node then finds the lease gone; never both (the claimer serving the
// instance while the paused node, renewed, still serves reads of its old copy). The renewal is
// held open in a transaction so the claim runs exactly inside it.
TEST(ClusterNode, AClaimRacingTheOwnersRenewalEitherWaitsForItOrWins) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  auto storage = ClusterStorage(dsn, "b");  // migrates the schema
  PostgresProcess::ExecOn(dsn,
                          "INSERT INTO bandit_nodes (node_id, address, incarnation, expires_at) "
                          "VALUES ('a', '127.0.0.1:1', 7, clock_timestamp() - interval '1 s')");
  PostgresProcess::ExecOn(dsn,
                          "INSERT INTO bandit_leases (instance, owner, owner_incarnation, epoch) "
                          "VALUES ('x', 'a', 7, 1)");
  // a's heartbeat, in flight: its renewal is written, not yet committed.
  PGconn* renewal = PQconnectdb(dsn.c_str());
  ASSERT_EQ(PQstatus(renewal), CONNECTION_OK);
  PQclear(PQexec(renewal, "BEGIN"));
  PGresult* r = PQexec(renewal,
                       "UPDATE bandit_nodes SET expires_at = clock_timestamp() + interval '1 hour' "
                       "WHERE node_id = 'a' AND incarnation = 7");
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(renewal);
  PQclear(r);

  // b starts: its first heartbeat sees x's owner expired and claims it (placed on b, the only
  // live member).
  ClusterNode::Hooks hooks;
  hooks.load = [](const std::string&, uint64_t* max_seq, int64_t*) {
    *max_seq = 0;
    return absl::StatusOr<std::shared_ptr<Instance>>(nullptr);
  };
  hooks.add = [](std::shared_ptr<Instance>) { return absl::OkStatus(); };
  hooks.drop = [](const std::string&) {};
  hooks.snapshot = [](const std::string&) { return absl::OkStatus(); };
  ClusterOptions options;
  options.node_id = "b";
  options.advertise = "127.0.0.1:2";
  options.lease = std::chrono::milliseconds(60'000);  // no second heartbeat during the test
  options.dsn = dsn;
  auto started = std::async(std::launch::async, [&] {
    return ClusterNode::Start(options, storage.get(), hooks);
  });
  // The claim either waits on the renewal's row (PostgreSQL shows an ungranted lock) or has
  // already been decided without it (b started).
  bool waiting = false;
  for (int i = 0; i < 1000; ++i) {
    if (started.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) break;
    if (PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM pg_locks WHERE NOT granted") != "0") {
      waiting = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(waiting) << "the claim did not wait for the owner's renewal in flight";
  r = PQexec(renewal, "COMMIT");
  PQclear(r);
  PQfinish(renewal);
  auto node = started.get();
  ASSERT_TRUE(node.ok()) << node.status();
  // The renewal committed first: a is live again and keeps x.
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT owner || ':' || epoch FROM bandit_leases "
                                         "WHERE instance = 'x'"),
            "a:1");
  EXPECT_EQ((*node)->owned(), 0);
}

}  // namespace
}  // namespace bandit::server::cluster
