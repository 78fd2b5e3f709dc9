// PostgresStorage against a real PostgreSQL started by the test (tests/integration/
// postgres_process.h): migrations, the commit path, recovery order, snapshots and compaction,
// corruption, the writer lock, and losing the database under a waiting write.
#include "server/storage/postgres/postgres_storage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "server/storage/snapshot_store.h"
#include "tests/integration/postgres_process.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using bandit::testing::PostgresProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

struct Recovered {
  std::vector<v1::InstanceSnapshot> snapshots;
  std::vector<v1::JournalRecord> records;
  std::vector<std::pair<std::string, std::string>> corrupt;
  RecoveryStats stats;
};

PostgresStorageOptions Options(const std::string& dsn, Durability mode = Durability::kAlways) {
  PostgresStorageOptions o;
  o.dsn = dsn;
  o.durability = mode;
  o.reconnect_initial = std::chrono::milliseconds(20);
  o.reconnect_max = std::chrono::milliseconds(200);
  o.writer_lock_wait = std::chrono::milliseconds(300);
  return o;
}

absl::StatusOr<Recovered> Recover(PostgresStorage& storage) {
  Recovered r;
  RecoverySink sink;
  sink.snapshot = [&](const v1::InstanceSnapshot& s) { r.snapshots.push_back(s); };
  sink.record = [&](const v1::JournalRecord& rec) { r.records.push_back(rec); };
  sink.corrupt = [&](const std::string& i, const std::string& why) {
    r.corrupt.emplace_back(i, why);
  };
  auto stats = storage.Recover(sink);
  if (!stats.ok()) return stats.status();
  r.stats = *stats;
  return r;
}

v1::JournalRecord Record(const std::string& instance, int64_t now) {
  v1::JournalRecord rec;
  rec.set_instance(instance);
  rec.set_uid(7);
  rec.set_now_ms(now);
  rec.set_reset(true);
  return rec;
}

TEST(PostgresStorage, MigratesAFreshDatabaseAndRefusesANewerSchema) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  {
    PostgresStorage storage(Options(dsn));
    {
      auto rr = Recover(storage);
      ASSERT_TRUE(rr.ok()) << rr.status();
    }
  }
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT max(version) FROM bandit_schema_version"),
            std::to_string(PostgresStorage::LatestSchemaVersion()));
  {  // A second start finds the schema current and migrates nothing.
    PostgresStorage storage(Options(dsn));
    {
      auto rr = Recover(storage);
      ASSERT_TRUE(rr.ok()) << rr.status();
    }
  }
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_schema_version"),
            std::to_string(PostgresStorage::LatestSchemaVersion()));
  PostgresProcess::ExecOn(dsn,
                          "INSERT INTO bandit_schema_version (version, applied_by) "
                          "VALUES (999, 'a future banditd')");
  PostgresStorage storage(Options(dsn));
  auto r = Recover(storage);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "schema version 999")) << r.status();
}

TEST(PostgresStorage, RecoversSnapshotsThenRecordsInSequenceOrder) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  std::vector<uint64_t> seqs;
  {
    PostgresStorage storage(Options(dsn));
    {
      auto rr = Recover(storage);
      ASSERT_TRUE(rr.ok()) << rr.status();
    }
    // Concurrent appenders, each waiting for its own record: the group commit answers them all.
    std::vector<std::thread> threads;
    std::mutex mu;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          auto rec = Record("inst" + std::to_string(t), i);
          auto seq = storage.Append(&rec);
          ASSERT_TRUE(seq.ok());
          ASSERT_TRUE(storage.WaitDurable(*seq).ok());
          std::lock_guard<std::mutex> l(mu);
          seqs.push_back(*seq);
        }
      });
    }
    for (auto& th : threads) th.join();
    v1::InstanceSnapshot snap;
    snap.set_name("inst0");
    snap.set_last_journal_seq(10);
    ASSERT_TRUE(storage.WriteSnapshot(snap).ok());
    snap.set_last_journal_seq(20);  // replaces the first
    ASSERT_TRUE(storage.WriteSnapshot(snap).ok());
    EXPECT_LT(storage.commit_stats().commits, 200) << "no group commit at all?";
  }
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_journal"), "200");
  PostgresStorage storage(Options(dsn));
  auto r = Recover(storage);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->snapshots.size(), 1u);
  EXPECT_EQ(r->snapshots[0].last_journal_seq(), 20u);
  ASSERT_EQ(r->records.size(), 200u);
  EXPECT_EQ(r->stats.records, 200);
  for (size_t i = 0; i < r->records.size(); ++i) EXPECT_EQ(r->records[i].seq(), i + 1);
  // Sequence numbers continue above everything found.
  auto rec = Record("inst0", 1);
  auto seq = storage.Append(&rec);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 201u);
  EXPECT_TRUE(r->corrupt.empty());
}

// A snapshot is streamed into its row (a binary COPY fed from the pieces where they lie): its
// row holds exactly SnapshotStore::Encode's bytes, replacing the instance's earlier row, and it
// is recovered as the whole message, pending decisions and all (several MiB: many pieces).
TEST(PostgresStorage, ASnapshotStreamedIntoItsRowIsTheEncodedSnapshot) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  v1::InstanceSnapshot whole;
  whole.set_name("big");
  whole.set_last_journal_seq(0x123456789a);
  whole.mutable_policy()->add_tensors()->mutable_data()->Resize(100'000, 0.5);
  v1::InstanceSnapshot fields = whole;
  EncodedFields pending;
  for (int i = 0; i < 300; ++i) {
    v1::PendingDecisionRecord r;
    r.set_event_id("e" + std::to_string(i));
    for (int j = 0; j < 2'000; ++j) r.add_features(i - j * 1e-3);
    pending.Add(v1::InstanceSnapshot::kPendingFieldNumber, r);
    *whole.add_pending() = r;
  }
  {
    PostgresStorage storage(Options(dsn));
    ASSERT_TRUE(Recover(storage).ok());
    v1::InstanceSnapshot earlier;
    earlier.set_name("big");
    ASSERT_TRUE(storage.WriteSnapshot(earlier).ok());
    ASSERT_TRUE(storage.WriteSnapshot(fields, &pending).ok());
  }
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_snapshots"), "1");
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT last_seq FROM bandit_snapshots"),
            std::to_string(whole.last_journal_seq()));
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT md5(snapshot) FROM bandit_snapshots"),
            PostgresProcess::ExecOn(
                dsn, "SELECT md5(decode('" +
                         absl::BytesToHexString(SnapshotStore::Encode(fields, &pending)) +
                         "', 'hex'))"));
  PostgresStorage storage(Options(dsn));
  auto r = Recover(storage);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->snapshots.size(), 1u);
  EXPECT_EQ(r->snapshots[0].SerializeAsString(), whole.SerializeAsString());
}

TEST(PostgresStorage, SnapshotRoundCompactsCoveredRowsAndRemovesSnapshots) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  PostgresStorage storage(Options(dsn, Durability::kEverySec));
  {
    auto rr = Recover(storage);
    ASSERT_TRUE(rr.ok()) << rr.status();
  }
  for (int i = 0; i < 30; ++i) {
    auto rec = Record("a", i);
    ASSERT_TRUE(storage.Append(&rec).ok());
  }
  auto boundary = storage.BeginSnapshotRound();  // flushes: every row below is committed
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, 31u);
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_journal"), "30");
  for (int i = 0; i < 5; ++i) {
    auto rec = Record("a", i);
    ASSERT_TRUE(storage.Append(&rec).ok());
  }
  ASSERT_TRUE(storage.Flush().ok());
  ASSERT_TRUE(storage.Compact(*boundary).ok());
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT min(seq) || '-' || max(seq) FROM bandit_journal"),
            "31-35");
  v1::InstanceSnapshot snap;
  snap.set_name("a");
  ASSERT_TRUE(storage.WriteSnapshot(snap).ok());
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_snapshots"), "1");
  ASSERT_TRUE(storage.RemoveSnapshot("a").ok());
  EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_snapshots"), "0");
}

TEST(PostgresStorage, DamagedRowsAreBlamedOnTheirInstance) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  {
    PostgresStorage storage(Options(dsn));
    {
      auto rr = Recover(storage);
      ASSERT_TRUE(rr.ok()) << rr.status();
    }
    for (const char* name : {"good", "bad", "good"}) {
      auto rec = Record(name, 1);
      auto seq = storage.Append(&rec);
      ASSERT_TRUE(seq.ok());
      ASSERT_TRUE(storage.WaitDurable(*seq).ok());
    }
    v1::InstanceSnapshot snap;
    snap.set_name("badsnap");
    ASSERT_TRUE(storage.WriteSnapshot(snap).ok());
  }
  PostgresProcess::ExecOn(dsn,
                          "UPDATE bandit_journal SET record = set_byte(record, 0, "
                          "get_byte(record, 0) # 255) WHERE instance = 'bad'");
  PostgresProcess::ExecOn(dsn,
                          "UPDATE bandit_snapshots SET snapshot = overlay(snapshot placing "
                          "'\\x00'::bytea from 9 for 1)");
  PostgresStorage storage(Options(dsn));
  auto r = Recover(storage);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records.size(), 2u);
  ASSERT_EQ(r->corrupt.size(), 2u);
  EXPECT_EQ(r->corrupt[0].first, "badsnap");
  EXPECT_EQ(r->corrupt[1].first, "bad");
  EXPECT_TRUE(absl::StrContains(r->corrupt[1].second, "checksum")) << r->corrupt[1].second;
}

TEST(PostgresStorage, OneWriterPerDatabase) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  PostgresStorage first(Options(dsn));
  {
    auto rr = Recover(first);
    ASSERT_TRUE(rr.ok()) << rr.status();
  }
  PostgresStorage second(Options(dsn));
  auto r = Recover(second);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "writer lock")) << r.status();
}

TEST(PostgresStorage, PasswordIsNeverInTheRedactedDsn) {
  const std::string kv = PostgresStorage::RedactedDsn("host=/tmp dbname=x password=s3cret");
  EXPECT_FALSE(absl::StrContains(kv, "s3cret")) << kv;
  EXPECT_TRUE(absl::StrContains(kv, "host=/tmp")) << kv;
  EXPECT_TRUE(absl::StrContains(kv, "password=(hidden)")) << kv;
  const std::string uri = PostgresStorage::RedactedDsn("postgresql://u:s3cret@db:5433/prod");
  EXPECT_FALSE(absl::StrContains(uri, "s3cret")) << uri;
  EXPECT_TRUE(absl::StrContains(uri, "dbname=prod")) << uri;
}

TEST(PostgresStorage, UnreachableAtStartIsAClearError) {
  PostgresStorage storage(Options("host=/nonexistent-dir port=1 dbname=x password=s3cret"));
  auto r = Recover(storage);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "cannot connect to PostgreSQL"));
  EXPECT_FALSE(absl::StrContains(r.status().message(), "s3cret")) << r.status();
}

// PostgreSQL taken away while writes wait: they hear UNAVAILABLE (never OK), health says why,
// appends keep their order, and once it is back the storage reconnects by itself and every
// record appended is stored exactly once.
TEST(PostgresStorage, LosingTheDatabaseFailsWaitersAndReconnects) {
  PostgresProcess& pg = SharedPostgres();
  const std::string dsn = pg.CreateDatabase();
  std::atomic<int> errors{0}, recovered{0};
  auto o = Options(dsn);
  o.on_error = [&](const absl::Status&) { ++errors; };
  o.on_recovered = [&] { ++recovered; };
  PostgresStorage storage(o);
  {
    auto rr = Recover(storage);
    ASSERT_TRUE(rr.ok()) << rr.status();
  }
  auto rec = Record("x", 1);
  auto seq = storage.Append(&rec);
  ASSERT_TRUE(seq.ok());
  ASSERT_TRUE(storage.WaitDurable(*seq).ok());

  pg.Stop("immediate");
  // The next commit finds the connection gone.
  rec = Record("x", 2);
  seq = storage.Append(&rec);
  ASSERT_TRUE(seq.ok());
  const absl::Status lost = storage.WaitDurable(*seq);
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_EQ(storage.health().code(), absl::StatusCode::kUnavailable);
  EXPECT_GE(errors.load(), 1);
  EXPECT_EQ(storage.Flush().code(), absl::StatusCode::kUnavailable);
  v1::InstanceSnapshot snap;
  snap.set_name("x");
  EXPECT_EQ(storage.WriteSnapshot(snap).code(), absl::StatusCode::kUnavailable);

  pg.Start();
  for (int i = 0; i < 1000 && !storage.health().ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(storage.health().ok()) << storage.health();
  EXPECT_EQ(recovered.load(), 1);
  rec = Record("x", 3);
  seq = storage.Append(&rec);
  ASSERT_TRUE(seq.ok());
  ASSERT_TRUE(storage.WaitDurable(*seq).ok());
  EXPECT_EQ(PostgresProcess::ExecOn(dsn,
                                    "SELECT string_agg(seq::text, ',' ORDER BY seq) "
                                    "FROM bandit_journal"),
            "1,2,3");
}

}  // namespace
}  // namespace bandit::server
