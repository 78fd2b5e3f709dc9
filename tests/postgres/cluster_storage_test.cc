// PostgresStorage in cluster mode against a real PostgreSQL: two storages (two nodes) on one
// database, lease rows written the way a takeover writes them (an UPDATE that bumps the epoch),
// and the fencing check inside every commit: a node that lost an instance's lease has its
// commit refused, never acknowledged, and the rows it wanted to write are not in the database.
#include <libpq-fe.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "absl/synchronization/notification.h"
#include "server/storage/postgres/postgres_storage.h"
#include "tests/integration/postgres_process.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using bandit::testing::PostgresProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

struct Node {
  explicit Node(const std::string& dsn, const std::string& id) {
    PostgresStorageOptions o;
    o.dsn = dsn;
    o.cluster_node_id = id;
    o.reconnect_initial = std::chrono::milliseconds(20);
    o.reconnect_max = std::chrono::milliseconds(200);
    o.on_fenced = [this](const std::vector<std::string>& lost) {
      std::lock_guard<std::mutex> l(mu);
      fenced.insert(fenced.end(), lost.begin(), lost.end());
    };
    storage = std::make_unique<PostgresStorage>(o);
    RecoverySink sink;
    sink.snapshot = [](const v1::InstanceSnapshot&) {
      ADD_FAILURE() << "cluster mode reads nothing";
    };
    sink.record = [](const v1::JournalRecord&) { ADD_FAILURE() << "cluster mode reads nothing"; };
    sink.corrupt = [](const std::string&, const std::string&) {};
    auto r = storage->Recover(sink);
    EXPECT_TRUE(r.ok()) << r.status();
    storage->SetLeaseDeadline(std::chrono::steady_clock::now() + std::chrono::hours(1));
  }
  std::vector<std::string> Fenced() {
    std::lock_guard<std::mutex> l(mu);
    return fenced;
  }
  std::mutex mu;
  std::vector<std::string> fenced;
  std::unique_ptr<PostgresStorage> storage;
};

v1::JournalRecord Record(const std::string& instance, int64_t now) {
  v1::JournalRecord rec;
  rec.set_instance(instance);
  rec.set_uid(7);
  rec.set_now_ms(now);
  rec.set_reset(true);
  return rec;
}

// What a node's lease acquisition does (server/cluster): a new row at epoch 1, or the epoch
// bumped on a change of owner.
void GiveLease(const std::string& dsn, const std::string& instance, const std::string& owner) {
  PostgresProcess::ExecOn(
      dsn, "INSERT INTO bandit_leases (instance, owner, owner_incarnation, epoch) VALUES ('" +
               instance + "', '" + owner +
               "', 1, 1) ON CONFLICT (instance) DO UPDATE SET owner = excluded.owner, "
               "epoch = bandit_leases.epoch + 1");
}
uint64_t Epoch(const std::string& dsn, const std::string& instance) {
  return std::stoull(PostgresProcess::ExecOn(
      dsn, "SELECT epoch FROM bandit_leases WHERE instance = '" + instance + "'"));
}
int64_t RowCount(const std::string& dsn, const std::string& instance) {
  return std::stoll(PostgresProcess::ExecOn(
      dsn, "SELECT count(*) FROM bandit_journal WHERE instance = '" + instance + "'"));
}

std::vector<v1::JournalRecord> Load(PostgresStorage& s, const std::string& instance,
                                    uint64_t* max_seq = nullptr) {
  std::vector<v1::JournalRecord> out;
  RecoverySink sink;
  sink.snapshot = [](const v1::InstanceSnapshot&) {};
  sink.record = [&](const v1::JournalRecord& r) { out.push_back(r); };
  sink.corrupt = [](const std::string& i, const std::string& why) {
    ADD_FAILURE() << i << ": " << why;
  };
  auto m = s.RecoverInstance(instance, sink);
  EXPECT_TRUE(m.ok()) << m.status();
  if (max_seq && m.ok()) *max_seq = *m;
  return out;
}

TEST(ClusterStorage, NeedsDurabilityAlwaysAndAValidNodeId) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  RecoverySink sink;
  sink.snapshot = [](const v1::InstanceSnapshot&) {};
  sink.record = [](const v1::JournalRecord&) {};
  sink.corrupt = [](const std::string&, const std::string&) {};
  PostgresStorageOptions o;
  o.dsn = dsn;
  o.cluster_node_id = "a";
  o.durability = Durability::kEverySec;
  auto r = PostgresStorage(o).Recover(sink);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  o.durability = Durability::kAlways;
  o.cluster_node_id = "a'; DROP TABLE bandit_journal; --";
  r = PostgresStorage(o).Recover(sink);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

TEST(ClusterStorage, AWriteOfAnInstanceNotOwnedIsRefusedBeforeAnythingChanges) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  Node a(dsn, "a");
  EXPECT_EQ(a.storage->WritableFor("x").code(), absl::StatusCode::kUnavailable);
  auto rec = Record("x", 1);
  EXPECT_EQ(a.storage->Append(&rec).status().code(), absl::StatusCode::kUnavailable);
  GiveLease(dsn, "x", "a");
  a.storage->Own("x", Epoch(dsn, "x"), 0);
  EXPECT_TRUE(a.storage->WritableFor("x").ok());
  // A node whose membership lease ran out (paused, cut off) stops writing on its own.
  a.storage->SetLeaseDeadline(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(a.storage->WritableFor("x").code(), absl::StatusCode::kUnavailable);
}

TEST(ClusterStorage, FencingRefusesTheCommitOfANodeThatLostTheLease) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  Node a(dsn, "a"), b(dsn, "b");
  GiveLease(dsn, "x", "a");
  a.storage->Own("x", Epoch(dsn, "x"), 0);
  for (int i = 0; i < 3; ++i) {
    auto rec = Record("x", i);
    auto seq = a.storage->Append(&rec);
    ASSERT_TRUE(seq.ok());
    ASSERT_TRUE(a.storage->WaitDurable(*seq).ok());
  }
  // b takes x over (a paused past its lease, say): the epoch grows; a still thinks it owns x.
  GiveLease(dsn, "x", "b");
  ASSERT_EQ(Epoch(dsn, "x"), 2u);
  auto stale = Record("x", 99);
  auto seq = a.storage->Append(&stale);
  ASSERT_TRUE(seq.ok()) << "a does not know yet";
  // Wait only after the COMMIT that refused the row is over: a caller's wait may come after
  // the decision (Append and the wait are two calls) and must still hear the refusal.
  for (int i = 0; i < 1000 && a.Fenced().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(a.Fenced(), std::vector<std::string>{"x"});
  const absl::Status s = a.storage->WaitDurable(*seq);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("fencing"), std::string::npos) << s;
  EXPECT_EQ(RowCount(dsn, "x"), 3) << "the refused row must not be in the database";
  EXPECT_EQ(a.Fenced(), std::vector<std::string>{"x"});
  EXPECT_EQ(a.storage->OwnedEpoch("x"), 0u);
  EXPECT_EQ(a.storage->Append(&stale).status().code(), absl::StatusCode::kUnavailable);
  // a's committer is healthy: fencing is not a storage failure.
  EXPECT_TRUE(a.storage->health().ok());

  // b continues x from exactly the three committed records, numbering above them even though
  // its own counter starts at 1.
  uint64_t max_seq = 0;
  auto records = Load(*b.storage, "x", &max_seq);
  ASSERT_EQ(records.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(records[i].now_ms(), i);
  b.storage->Own("x", 2, max_seq);
  auto next = Record("x", 3);
  auto bseq = b.storage->Append(&next);
  ASSERT_TRUE(bseq.ok());
  EXPECT_GT(*bseq, max_seq);
  ASSERT_TRUE(b.storage->WaitDurable(*bseq).ok());
  records = Load(*b.storage, "x");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[3].now_ms(), 3);
  EXPECT_TRUE(b.Fenced().empty());
}

TEST(ClusterStorage, RowsOfInstancesStillHeldCommitWhenAnotherInTheBatchIsFenced) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  Node a(dsn, "a");
  GiveLease(dsn, "x", "a");
  GiveLease(dsn, "y", "a");
  a.storage->Own("x", 1, 0);
  a.storage->Own("y", 1, 0);
  GiveLease(dsn, "x", "b");  // x moved on; a does not know

  // Hold y's lease row so a's first commit (y only) waits inside its fencing check while the
  // next rows (y, then the stale x) accumulate into one batch behind it.
  PGconn* holder = PQconnectdb(dsn.c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK);
  PQclear(PQexec(holder, "BEGIN"));
  PQclear(PQexec(holder, "SELECT * FROM bandit_leases WHERE instance = 'y' FOR UPDATE"));
  auto y1 = Record("y", 1);
  auto s1 = a.storage->Append(&y1);
  ASSERT_TRUE(s1.ok());
  // The committer is now blocked on the lock (PostgreSQL shows it waiting).
  for (int i = 0; i < 500; ++i) {
    if (PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM pg_locks WHERE NOT granted") != "0")
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto y2 = Record("y", 2);
  auto s2 = a.storage->Append(&y2);
  auto x1 = Record("x", 1);
  auto s3 = a.storage->Append(&x1);
  ASSERT_TRUE(s2.ok() && s3.ok());
  absl::Status st1, st2, st3;
  absl::Notification n1, n2, n3;
  a.storage->WhenDurable(*s1, [&](absl::Status s) {
    st1 = s;
    n1.Notify();
  });
  a.storage->WhenDurable(*s2, [&](absl::Status s) {
    st2 = s;
    n2.Notify();
  });
  a.storage->WhenDurable(*s3, [&](absl::Status s) {
    st3 = s;
    n3.Notify();
  });
  PQclear(PQexec(holder, "COMMIT"));
  PQfinish(holder);
  n1.WaitForNotification();
  n2.WaitForNotification();
  n3.WaitForNotification();
  EXPECT_TRUE(st1.ok()) << st1;
  EXPECT_TRUE(st2.ok()) << st2;
  EXPECT_EQ(st3.code(), absl::StatusCode::kUnavailable) << st3;
  EXPECT_EQ(RowCount(dsn, "y"), 2);
  EXPECT_EQ(RowCount(dsn, "x"), 0);
  EXPECT_EQ(a.Fenced(), std::vector<std::string>{"x"});
  EXPECT_EQ(a.storage->OwnedEpoch("y"), 1u);
}

TEST(ClusterStorage, SnapshotsAreFencedAndCompactionKeepsWhatNoSnapshotCovers) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  Node a(dsn, "a"), b(dsn, "b");
  GiveLease(dsn, "x", "a");
  GiveLease(dsn, "z", "b");
  a.storage->Own("x", 1, 0);
  b.storage->Own("z", 1, 0);
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto rx = Record("x", i), rz = Record("z", i);
    auto sx = a.storage->Append(&rx);
    auto sz = b.storage->Append(&rz);
    ASSERT_TRUE(sx.ok() && sz.ok());
    ASSERT_TRUE(a.storage->WaitDurable(*sx).ok());
    ASSERT_TRUE(b.storage->WaitDurable(*sz).ok());
    if (i == 2) last = *sx;
  }
  // Both nodes numbered their rows 1..5: the key is (instance, seq).
  EXPECT_EQ(RowCount(dsn, "x"), 5);
  EXPECT_EQ(RowCount(dsn, "z"), 5);
  v1::InstanceSnapshot snap;
  snap.set_name("x");
  snap.set_last_journal_seq(last);
  ASSERT_TRUE(a.storage->WriteSnapshot(snap).ok());
  auto boundary = a.storage->BeginSnapshotRound();
  ASSERT_TRUE(boundary.ok());
  ASSERT_TRUE(a.storage->Compact(*boundary).ok());
  EXPECT_EQ(RowCount(dsn, "x"), 2) << "rows after the snapshot stay";
  EXPECT_EQ(RowCount(dsn, "z"), 5) << "another node's rows are not a's to compact";

  GiveLease(dsn, "x", "b");
  snap.set_last_journal_seq(last + 2);
  const absl::Status s = a.storage->WriteSnapshot(snap);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(PostgresProcess::ExecOn(dsn,
                                    "SELECT last_seq FROM bandit_snapshots WHERE instance "
                                    "= 'x'"),
            std::to_string(last))
      << "a stale node's snapshot must not replace the stored one";
  EXPECT_EQ(a.Fenced(), std::vector<std::string>{"x"});
  // Nor may a stale node delete the instance.
  EXPECT_FALSE(a.storage->RemoveSnapshot("x").ok());
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_snapshots"), "1");
}

}  // namespace
}  // namespace bandit::server
