// A database that went backwards behind banditd's back (a failover to a standby that lacked the
// last commits, an older backup restored) is noticed at the reconnect and the instances it holds
// less of are refused (DATA_LOSS, with the gap), never served from memory; a restart keeps
// refusing them (bandit_diverged) until an operator accepts what the database holds. And the
// `always` promise check: --postgres_require_sync_standby refuses a PostgreSQL without a
// synchronous standby, at start, after a reconnect, and when it is lost under a live connection.
//
// The journal is cut back deterministically: one transaction locks the journal and snapshot
// tables, deletes the newest rows of one instance and terminates banditd's sessions, then
// commits. banditd's reconnect check reads those tables, so it waits for the lock and sees the
// shortened journal, as after a failover.
#include <signal.h>

#include <libpq-fe.h>

#include <atomic>
#include <mutex>
#include <filesystem>
#include <thread>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/bandit_client.h"
#include "server/storage/postgres/postgres_storage.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/postgres_process.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::client::BanditClient;
using bandit::testing::HttpGet;
using bandit::testing::PostgresProcess;
using bandit::testing::ServerProcess;
using bandit::testing::SharedPostgres;
namespace v1 = bandit::v1;

double MetricValue(const std::string& text, const std::string& name) {
  for (size_t pos = 0; (pos = text.find(name, pos)) != std::string::npos; pos += name.size()) {
    if (pos > 0 && text[pos - 1] != '\n') continue;
    const size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) break;
    if (text.compare(pos, sp - pos, name) != 0) continue;
    return std::atof(text.c_str() + sp + 1);
  }
  return -1;
}

template <typename Pred>
bool WaitFor(Pred pred, int seconds = 30) {
  for (int i = 0; i < seconds * 50; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Create(BanditClient& client, const std::string& name) {
  v1::CreateInstanceRequest create;
  create.set_name(name);
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 }", create.mutable_config()));
  auto s = client.CreateInstance(create);
  ASSERT_TRUE(s.ok()) << s.status();
}

// `rounds` acknowledged Select + Update pairs.
void Rounds(BanditClient& client, const std::string& name, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    v1::SelectRequest sel;
    sel.set_instance(name);
    auto d = client.Select(sel);
    ASSERT_TRUE(d.ok()) << d.status();
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d->event_id());
    up.set_reward(i % 2);
    auto u = client.Update(up);
    ASSERT_TRUE(u.ok()) << u.status();
  }
}

// Deletes the newest `rows` journal rows of `instance` and cuts every banditd session of the
// database, in one transaction holding the journal and snapshot tables (see the top).
void CutJournalBehindTheServersBack(const std::string& dsn, const std::string& instance,
                                    int rows) {
  PostgresProcess::ExecOn(
      dsn, absl::StrCat(
               "BEGIN; LOCK TABLE bandit_journal, bandit_snapshots IN ACCESS EXCLUSIVE MODE; "
               "DELETE FROM bandit_journal WHERE (instance, seq) IN (SELECT instance, seq FROM "
               "bandit_journal WHERE instance = '",
               instance, "' ORDER BY seq DESC LIMIT ", rows,
               "); SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
               "datname = current_database() AND application_name LIKE 'banditd%' AND pid <> "
               "pg_backend_pid(); COMMIT"));
}

std::string MaxSeq(const std::string& dsn, const std::string& instance) {
  return PostgresProcess::ExecOn(
      dsn, absl::StrCat("SELECT max(seq) FROM bandit_journal WHERE instance = '", instance, "'"));
}

class Divergence : public ::testing::TestWithParam<bool> {
 protected:
  std::vector<std::string> Args(const std::string& dsn, const std::string& node) const {
    std::vector<std::string> args = {"--storage=postgres", "--postgres_dsn=" + dsn,
                                     "--durability=always"};
    if (GetParam()) {
      args.push_back("--cluster");
      args.push_back("--node_id=" + node);
      args.push_back("--lease_ms=3000");
    }
    return args;
  }
};

TEST_P(Divergence, AJournalThatWentBackwardsIsRefusedNeverServed) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  const bandit::testing::TempDir temp("banditd-diverge");
  const std::string& dir = temp.path();
  std::string acked_seq, held_seq;
  {
    ServerProcess server(Args(dsn, "n1"), dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    Create(client, "lost");
    Create(client, "kept");
    Rounds(client, "lost", 10);  // create + 10 x (select, update): 21 records
    Rounds(client, "kept", 3);
    auto before = client.GetInstance("lost");
    ASSERT_TRUE(before.ok()) << before.status();
    ASSERT_EQ(before->stats().updates(), 10);
    EXPECT_EQ(MetricValue(HttpGet(server.metrics_port(), "/metrics"),
                          "bandit_storage_diverged_instances_total"),
              0);

    // The database loses the last two rounds of "lost" (4 records), acknowledged long ago.
    acked_seq = MaxSeq(dsn, "lost");
    CutJournalBehindTheServersBack(dsn, "lost", 4);
    held_seq = MaxSeq(dsn, "lost");
    ASSERT_LT(std::stoll(held_seq), std::stoll(acked_seq));

    // banditd notices at its reconnect and stops serving "lost" from memory: DATA_LOSS, with
    // the gap. (Before the check existed it kept answering 10 updates, and acknowledging more.)
    absl::Status got;
    ASSERT_TRUE(WaitFor([&] {
      got = client.GetInstance("lost").status();
      return got.code() == absl::StatusCode::kDataLoss;
    })) << "still served from memory: "
        << got << "\n"
        << server.Log();
    EXPECT_TRUE(absl::StrContains(got.message(), "up to sequence number " + held_seq)) << got;
    EXPECT_TRUE(absl::StrContains(got.message(), "committed up to " + acked_seq)) << got;
    v1::SelectRequest sel;
    sel.set_instance("lost");
    EXPECT_EQ(client.Select(sel).status().code(), absl::StatusCode::kDataLoss);
    // The instance the database still holds in full is served and written as before.
    Rounds(client, "kept", 2);
    auto kept = client.GetInstance("kept");
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(kept->stats().updates(), 5);
    EXPECT_EQ(MetricValue(HttpGet(server.metrics_port(), "/metrics"),
                          "bandit_storage_diverged_instances_total"),
              1);
    EXPECT_TRUE(absl::StrContains(server.Log(), "PostgreSQL went backwards")) << server.Log();
    EXPECT_EQ(PostgresProcess::ExecOn(
                  dsn, "SELECT instance || ' ' || database_seq || ' ' || acknowledged_seq FROM "
                       "bandit_diverged"),
              "lost " + held_seq + " " + acked_seq);
    // Nothing of "lost" was written after the gap.
    EXPECT_EQ(MaxSeq(dsn, "lost"), held_seq);
  }
  {  // A restart (or, in a cluster, any node loading it) keeps refusing it.
    ServerProcess server(Args(dsn, "n1"), dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    auto lost = client.GetInstance("lost");
    EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss) << lost.status();
    auto kept = client.GetInstance("kept");
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(kept->stats().updates(), 5);
  }
  // The operator accepts what the database holds: the instance resumes from it (8 updates).
  PostgresProcess::ExecOn(dsn, "DELETE FROM bandit_diverged WHERE instance = 'lost'");
  {
    ServerProcess server(Args(dsn, "n1"), dir);
    ASSERT_TRUE(server.running()) << server.Log();
    BanditClient client(server.target());
    auto lost = client.GetInstance("lost");
    ASSERT_TRUE(lost.ok()) << lost.status() << "\n" << server.Log();
    EXPECT_EQ(lost->stats().updates(), 8);
    Rounds(client, "lost", 1);
  }
}

INSTANTIATE_TEST_SUITE_P(SingleAndCluster, Divergence, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Cluster" : "SingleWriter";
                         });

v1::JournalRecord Record(const std::string& instance, int64_t now) {
  v1::JournalRecord rec;
  rec.set_instance(instance);
  rec.set_uid(7);
  rec.set_now_ms(now);
  rec.set_reset(true);
  return rec;
}

// The storage alone: the check names the instance and the exact gap, records it, refuses its
// appends, and drops a change of it that was applied while the database was away instead of
// writing it after the gap (a hole in its journal); the other instance goes on.
TEST(PostgresStorageDivergence, TheCheckRefusesTheInstanceAndWritesNothingAfterTheGap) {
  const std::string dsn = SharedPostgres().CreateDatabase();
  server::PostgresStorageOptions o;
  o.dsn = dsn;
  o.reconnect_initial = std::chrono::milliseconds(20);
  o.reconnect_max = std::chrono::milliseconds(200);
  o.writer_lock_wait = std::chrono::milliseconds(300);
  std::mutex mu;
  std::vector<server::PostgresStorageOptions::Divergence> found;
  o.on_diverged = [&](const std::vector<server::PostgresStorageOptions::Divergence>& d) {
    std::lock_guard<std::mutex> lock(mu);
    found.insert(found.end(), d.begin(), d.end());
  };
  std::vector<std::pair<std::string, std::string>> corrupt;
  server::RecoverySink sink;
  sink.snapshot = [](const v1::InstanceSnapshot&) {};
  sink.record = [](const v1::JournalRecord&) {};
  sink.corrupt = [&](const std::string& i, const std::string& why) {
    corrupt.emplace_back(i, why);
  };
  uint64_t x_acked = 0, x_while_down = 0;
  {
    server::PostgresStorage storage(o);
    ASSERT_TRUE(storage.Recover(sink).ok());
    for (int i = 1; i <= 3; ++i) {
      for (const char* name : {"x", "y"}) {
        auto rec = Record(name, i);
        auto seq = storage.Append(&rec);
        ASSERT_TRUE(seq.ok()) << seq.status();
        ASSERT_TRUE(storage.WaitDurable(*seq).ok());
        if (std::string(name) == "x") x_acked = *seq;
      }
    }
    // The newest row of x disappears behind the storage's back; its session is cut. The
    // locking transaction stays open, so the reconnect's check waits for it.
    PGconn* cutter = PQconnectdb(dsn.c_str());
    ASSERT_EQ(PQstatus(cutter), CONNECTION_OK);
    PGresult* res = PQexec(
        cutter,
        "BEGIN; LOCK TABLE bandit_journal, bandit_snapshots IN ACCESS EXCLUSIVE MODE; "
        "DELETE FROM bandit_journal WHERE instance = 'x' AND seq = (SELECT max(seq) FROM "
        "bandit_journal WHERE instance = 'x'); SELECT count(pg_terminate_backend(pid)) FROM "
        "pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
    ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQresultErrorMessage(res);
    PQclear(res);
    res = PQexec(cutter, "SELECT max(seq) FROM bandit_journal WHERE instance = 'x'");
    ASSERT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQresultErrorMessage(res);
    const std::string x_held = PQgetvalue(res, 0, 0);
    PQclear(res);
    ASSERT_TRUE(WaitFor([&] { return !storage.health().ok(); })) << "the cut went unnoticed";
    // A change of x applied while the database is away: not acknowledged, and never written.
    auto rec = Record("x", 4);
    auto seq = storage.Append(&rec);
    ASSERT_TRUE(seq.ok()) << seq.status();
    x_while_down = *seq;
    EXPECT_EQ(storage.WaitDurable(x_while_down).code(), absl::StatusCode::kUnavailable);
    res = PQexec(cutter, "COMMIT");
    ASSERT_EQ(PQresultStatus(res), PGRES_COMMAND_OK) << PQresultErrorMessage(res);
    PQclear(res);
    PQfinish(cutter);

    ASSERT_TRUE(WaitFor([&] { return storage.health().ok(); })) << storage.health();
    {
      std::lock_guard<std::mutex> lock(mu);
      ASSERT_EQ(found.size(), 1u);
      EXPECT_EQ(found[0].instance, "x");
      EXPECT_EQ(found[0].acknowledged_seq, x_acked);
      EXPECT_EQ(std::to_string(found[0].database_seq), x_held);
      EXPECT_TRUE(absl::StrContains(found[0].why, "up to sequence number " + x_held))
          << found[0].why;
    }
    EXPECT_EQ(MaxSeq(dsn, "x"), x_held) << "a change of x was written after the gap";
    EXPECT_EQ(storage.WaitDurable(x_while_down).code(), absl::StatusCode::kDataLoss);
    rec = Record("x", 5);
    EXPECT_EQ(storage.Append(&rec).status().code(), absl::StatusCode::kDataLoss);
    rec = Record("y", 5);
    seq = storage.Append(&rec);
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_TRUE(storage.WaitDurable(*seq).ok());
    EXPECT_EQ(PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_diverged"), "1");
  }
  // A new process reads the record and refuses x before anything of it is replayed.
  server::PostgresStorage again(o);
  ASSERT_TRUE(again.Recover(sink).ok());
  ASSERT_EQ(corrupt.size(), 1u);
  EXPECT_EQ(corrupt[0].first, "x");
  EXPECT_TRUE(absl::StrContains(corrupt[0].second, "PostgreSQL no longer holds every change"))
      << corrupt[0].second;
}

// --postgres_require_sync_standby: a PostgreSQL without a synchronous standby is refused at
// start; one with synchronous_standby_names set is accepted; and when the setting goes away
// (read again every standby_recheck, and at every reconnect), writes are refused (the reason in
// health) until it is back. Its own PostgreSQL:
// synchronous_standby_names is a server-wide setting.
TEST(SynchronousStandby, RequiredIsCheckedAtStartAndAfterEveryReconnect) {
  PostgresProcess pg;
  const std::string dsn = pg.CreateDatabase();
  auto options = [&](bool require) {
    server::PostgresStorageOptions o;
    o.dsn = dsn;
    o.durability = server::Durability::kAlways;
    o.require_synchronous_standby = require;
    o.reconnect_initial = std::chrono::milliseconds(20);
    o.reconnect_max = std::chrono::milliseconds(200);
    o.writer_lock_wait = std::chrono::milliseconds(300);
    o.standby_recheck = std::chrono::milliseconds(100);
    return o;
  };
  server::RecoverySink sink;
  sink.snapshot = [](const v1::InstanceSnapshot&) {};
  sink.record = [](const v1::JournalRecord&) {};
  sink.corrupt = [](const std::string&, const std::string&) {};
  {  // No standby: refused with the reason, or (without the flag) accepted with a warning.
    server::PostgresStorage refused(options(true));
    auto r = refused.Recover(sink);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "synchronous_standby_names is empty"))
        << r.status();
  }
  {
    server::PostgresStorage warned(options(false));
    ASSERT_TRUE(warned.Recover(sink).ok());
  }
  auto set_standby = [&](const std::string& names) {
    pg.Exec(names.empty() ? "ALTER SYSTEM RESET synchronous_standby_names"
                          : "ALTER SYSTEM SET synchronous_standby_names = '" + names + "'");
    pg.Exec("SELECT pg_reload_conf()");
    ASSERT_TRUE(WaitFor([&] {
      return PostgresProcess::ExecOn(dsn, "SHOW synchronous_standby_names") == names;
    }));
  };
  set_standby("standby1");
  server::PostgresStorage storage(options(true));
  ASSERT_TRUE(storage.Recover(sink).ok());
  EXPECT_TRUE(storage.health().ok()) << storage.health();
  // The standby is lost while the primary stays up (Patroni empties the setting): the
  // committer's periodic re-read notices on the same connection.
  set_standby("");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(storage.health().message(), "synchronous_standby_names is empty");
  })) << storage.health();
  set_standby("standby1");
  ASSERT_TRUE(WaitFor([&] { return storage.health().ok(); })) << storage.health();
  // The standby goes away (settings changed, as after a failover) and the session is cut.
  set_standby("");
  PostgresProcess::ExecOn(dsn,
                          "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                          "application_name = 'banditd'");
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(storage.health().message(), "synchronous_standby_names is empty");
  })) << storage.health();
  EXPECT_EQ(storage.health().code(), absl::StatusCode::kUnavailable);
  set_standby("standby1");
  ASSERT_TRUE(WaitFor([&] { return storage.health().ok(); })) << storage.health();
  set_standby("");  // nothing waits on the absent standby when the storage closes
}

}  // namespace
}  // namespace bandit
