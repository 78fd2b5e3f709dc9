// Durable state on both storage backends: what survives a crash, exact resumption after
// restart/crash/export-import (also from one backend to the other), corruption, failed writes,
// compaction. The file backend runs on the filesystem seam (a crash drops everything not
// fsynced: a power cut); the PostgreSQL backend on a real PostgreSQL started by the test (a crash
// is the process dying: what it committed stays). File-only: torn tails, the everysec/none loss
// windows and segment rotation (PostgreSQL transactions are never torn, and its asynchronous
// commit window is PostgreSQL's own).
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <thread>

#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/postgres/postgres_storage.h"
#include "tests/integration/postgres_process.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

constexpr char kEps[] = "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 77";

using testing::Create;
using testing::Stats;

// A storage that remembers the newest sequence number it assigned, so a single-threaded test
// can acknowledge "everything written so far" the way the gRPC layer acknowledges one call.
class NewestSeqStorage final : public Storage {
 public:
  explicit NewestSeqStorage(std::unique_ptr<Storage> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<RecoveryStats> Recover(const RecoverySink& sink) override {
    return inner_->Recover(sink);
  }
  absl::StatusOr<uint64_t> Append(v1::JournalRecord* rec) override {
    auto seq = inner_->Append(rec);
    if (seq.ok()) newest = *seq;
    return seq;
  }
  absl::StatusOr<uint64_t> AppendAll(absl::Span<v1::JournalRecord* const> recs) override {
    auto seq = inner_->AppendAll(recs);
    if (seq.ok() && *seq != 0) newest = *seq;
    return seq;
  }
  void WhenDurable(uint64_t seq, std::function<void(absl::Status)> done) override {
    inner_->WhenDurable(seq, std::move(done));
  }
  absl::Status Flush() override { return inner_->Flush(); }
  absl::StatusOr<uint64_t> BeginSnapshotRound() override { return inner_->BeginSnapshotRound(); }
  absl::Status WriteSnapshot(const v1::InstanceSnapshot& snap,
                             const EncodedSnapshotFields* extra = nullptr) override {
    return inner_->WriteSnapshot(snap, extra);
  }
  absl::Status RemoveSnapshot(const std::string& instance) override {
    return inner_->RemoveSnapshot(instance);
  }
  absl::Status Compact(uint64_t boundary) override { return inner_->Compact(boundary); }
  absl::Status health() const override { return inner_->health(); }
  Durability mode() const override { return inner_->mode(); }

  uint64_t newest = 0;

 private:
  std::unique_ptr<Storage> inner_;
};

enum class Backend { kFile, kPostgres };

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kFile ? "File" : "Postgres";
}

// What outlives a server process: a fake disk, or a database on the shared test PostgreSQL.
struct Disk {
  explicit Disk(Backend b) : backend(b) {
    if (b == Backend::kPostgres) dsn = bandit::testing::SharedPostgres().CreateDatabase();
  }
  std::unique_ptr<Storage> NewStorage(Durability mode) {
    if (backend == Backend::kFile) {
      FileStorageOptions fo;
      fo.dir = "/data";
      fo.durability = mode;
      fo.fs = &fs;
      return std::make_unique<FileStorage>(std::move(fo));
    }
    PostgresStorageOptions po;
    po.dsn = dsn;
    po.durability = mode;
    po.reconnect_initial = std::chrono::milliseconds(20);
    po.reconnect_max = std::chrono::milliseconds(200);
    return std::make_unique<PostgresStorage>(std::move(po));
  }
  // Rows of the PostgreSQL journal / snapshot tables, or records / snapshot files on disk.
  int64_t JournalRecords() {
    if (backend == Backend::kPostgres)
      return std::stoll(
          bandit::testing::PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_journal"));
    auto read = Journal::ReadAll(
        &fs, "/data/journal", [](const v1::JournalRecord&) {},
        [](const std::string&, const std::string& why) { ADD_FAILURE() << why; });
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->records : -1;
  }
  // Every stored journal record, in sequence order.
  std::vector<v1::JournalRecord> Records() {
    std::vector<v1::JournalRecord> out;
    if (backend == Backend::kFile) {
      auto read = Journal::ReadAll(
          &fs, "/data/journal", [&](const v1::JournalRecord& r) { out.push_back(r); },
          [](const std::string&, const std::string& why) { ADD_FAILURE() << why; });
      EXPECT_TRUE(read.ok()) << read.status();
      return out;
    }
    PGconn* conn = PQconnectdb(dsn.c_str());
    PGresult* res = PQexecParams(conn, "SELECT record FROM bandit_journal ORDER BY seq", 0, nullptr,
                                 nullptr, nullptr, nullptr, 1);
    EXPECT_EQ(PQresultStatus(res), PGRES_TUPLES_OK) << PQerrorMessage(conn);
    for (int i = 0; i < PQntuples(res); ++i) {
      out.emplace_back();
      EXPECT_TRUE(out.back().ParseFromArray(PQgetvalue(res, i, 0), PQgetlength(res, i, 0)));
    }
    PQclear(res);
    PQfinish(conn);
    return out;
  }
  int64_t Snapshots() {
    if (backend == Backend::kPostgres)
      return std::stoll(
          bandit::testing::PostgresProcess::ExecOn(dsn, "SELECT count(*) FROM bandit_snapshots"));
    int64_t n = 0;
    for (const auto& p : fs.Paths())
      n += absl::StrContains(p, "/snapshots/") && absl::EndsWith(p, ".snap");
    return n;
  }
  Backend backend;
  FaultInjectionFs fs;
  std::string dsn;
};

// A server "process": a DecisionService with its Persistence on a Disk.
struct Node {
  Node(Disk* disk, const Clock* clock, Durability mode) : svc(clock) {
    PersistenceOptions o;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    auto owned = std::make_unique<NewestSeqStorage>(disk->NewStorage(mode));
    storage = owned.get();
    auto p = Persistence::Open(std::move(owned), o, &svc, &report);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) std::abort();
    if (p.ok()) persistence = *std::move(p);
  }
  // Compatibility with the file-only tests below.
  Node(FaultInjectionFs* fs, const Clock* clock, Durability mode) : svc(clock) {
    PersistenceOptions o;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    FileStorageOptions fo;
    fo.dir = "/data";
    fo.durability = mode;
    fo.fs = fs;
    fo.clock = clock;  // everysec's timer
    auto owned = std::make_unique<NewestSeqStorage>(std::make_unique<FileStorage>(std::move(fo)));
    storage = owned.get();
    auto p = Persistence::Open(std::move(owned), o, &svc, &report);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) std::abort();
    if (p.ok()) persistence = *std::move(p);
  }
  // What the gRPC layer does before acknowledging a write (DecisionService::WhenDurable):
  // wait for the newest record written.
  absl::Status Ack() { return storage->WaitDurable(storage->newest); }
  // The process dies now. Files: a power cut (whatever was not fsynced is gone). PostgreSQL:
  // the server goes away without a final snapshot round; what was committed stays, and its
  // sessions (and the writer lock) end.
  void Crash(Disk* disk) {
    if (disk->backend == Backend::kFile) {
      disk->fs.Crash();
    } else {
      persistence.reset();
    }
  }
  DecisionService svc;
  RecoveryReport report;
  NewestSeqStorage* storage = nullptr;
  std::unique_ptr<Persistence> persistence;
};

class DurabilityOn : public ::testing::TestWithParam<Backend> {};

// One round of the fixed workload: select, then reward arm-dependent. Returns the arm.
int Round(DecisionService& svc, const std::string& name, int i, absl::Status* status = nullptr) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  v1::Decision d;
  absl::Status s = svc.Select(sel, &d);
  if (!s.ok()) {
    if (status) *status = s;
    return -1;
  }
  v1::UpdateRequest up;
  up.set_instance(name);
  up.set_event_id(d.event_id());
  up.set_reward(0.1 * d.arm_index() + ((i * 7919) % 13) / 13.0);
  v1::UpdateResponse r;
  s = svc.Update(up, &r);
  if (status) *status = s;
  return d.arm_index();
}

TEST_P(DurabilityOn, AlwaysKeepsEveryAcknowledgedOperationAcrossACrash) {
  Disk disk(GetParam());
  ManualClock clock;
  int acknowledged = 0;
  {
    Node a(&disk, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    ASSERT_TRUE(a.Ack().ok());
    for (int i = 0; i < 300; ++i) {
      Round(a.svc, "x", i);
      ASSERT_TRUE(a.Ack().ok());
      ++acknowledged;
    }
    a.Crash(&disk);
  }
  Node b(&disk, &clock, Durability::kAlways);
  const auto s = Stats(b.svc, "x");
  EXPECT_EQ(s.updates(), acknowledged);
  EXPECT_EQ(s.rounds(), acknowledged);
  EXPECT_EQ(s.pending(), 0);
}

TEST(Durability, NoneLosesUnsyncedWorkButRecoversAConsistentPrefix) {
  FaultInjectionFs fs;
  ManualClock clock;
  {
    Node a(&fs, &clock, Durability::kNone);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    ASSERT_TRUE(a.storage->Flush().ok());
    for (int i = 0; i < 100; ++i) Round(a.svc, "x", i);
    ASSERT_TRUE(a.storage->Flush().ok());                  // 100 rounds made durable
    for (int i = 100; i < 200; ++i) Round(a.svc, "x", i);  // never fsynced
    fs.Crash();
  }
  Node b(&fs, &clock, Durability::kNone);
  const auto s = Stats(b.svc, "x");
  EXPECT_GE(s.updates(), 100);
  EXPECT_LT(s.updates(), 200);
  EXPECT_LE(s.updates(), s.rounds());
}

TEST(Durability, EverysecBoundsTheLossWindow) {
  FaultInjectionFs fs;
  ManualClock clock;
  {
    Node a(&fs, &clock, Durability::kEverySec);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 50; ++i) Round(a.svc, "x", i);
    // Not yet a second: nothing was fsynced since the create (the writer only write(2)s).
    clock.Advance(999);
    for (int i = 50; i < 60; ++i) Round(a.svc, "x", i);
    // The second is over: everything appended before this instant must be on disk when the
    // timer's tick returns; what follows is inside the next window.
    clock.Advance(1);
    for (int i = 60; i < 70; ++i) Round(a.svc, "x", i);
    fs.Crash();
  }
  Node b(&fs, &clock, Durability::kEverySec);
  EXPECT_EQ(Stats(b.svc, "x").updates(), 60);
}

// The same inputs fed to a restored instance and to an uninterrupted twin give the same
// decisions (arms and propensities).
std::vector<std::pair<int, double>> Continue(DecisionService& svc, const std::string& name,
                                             int from, int n) {
  return testing::PlayRounds(svc, name, from, n, [](const v1::Decision& d, int i, auto* up) {
    up->set_reward(0.1 * d.arm_index() + ((i * 7919) % 13) / 13.0);
  });
}

enum class Interruption { kGraceful, kCrash, kSnapshotThenCrash };

class ExactResumption : public ::testing::TestWithParam<std::tuple<Backend, Interruption>> {};

TEST_P(ExactResumption, NextThousandDecisionsMatchAnUninterruptedTwin) {
  Disk disk(std::get<0>(GetParam()));
  const Interruption interruption = std::get<1>(GetParam());
  ManualClock clock;
  DecisionService twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("x", kEps), &out).ok());
  {
    Node a(&disk, &clock, Durability::kAlways);
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 250; ++i) {
      EXPECT_EQ(Round(a.svc, "x", i), Round(twin, "x", i));
      if (interruption == Interruption::kSnapshotThenCrash && i == 120) {
        ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      }
    }
    // One decision left pending across the interruption: its reward arrives afterwards.
    v1::SelectRequest sel;
    sel.set_instance("x");
    v1::Decision da, dt;
    ASSERT_TRUE(a.svc.Select(sel, &da).ok());
    ASSERT_TRUE(twin.Select(sel, &dt).ok());
    ASSERT_TRUE(a.Ack().ok());
    if (interruption == Interruption::kGraceful) {
      ASSERT_TRUE(a.persistence->Close().ok());
      a.persistence.reset();  // the process exits (and its database sessions end)
    } else {
      a.Crash(&disk);
    }
    Node b(&disk, &clock, Durability::kAlways);
    v1::UpdateRequest up;
    up.set_instance("x");
    up.set_event_id(da.event_id());
    up.set_reward(0.5);
    v1::UpdateResponse r;
    ASSERT_TRUE(b.svc.Update(up, &r).ok()) << "pending decision lost";
    up.set_event_id(dt.event_id());
    ASSERT_TRUE(twin.Update(up, &r).ok());
    EXPECT_EQ(Continue(b.svc, "x", 1000, 1000), Continue(twin, "x", 1000, 1000));
    if (interruption == Interruption::kSnapshotThenCrash) {
      EXPECT_EQ(b.report.snapshots_loaded, 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ExactResumption,
                         ::testing::Combine(::testing::Values(Backend::kFile, Backend::kPostgres),
                                            ::testing::Values(Interruption::kGraceful,
                                                              Interruption::kCrash,
                                                              Interruption::kSnapshotThenCrash)));

// A contextual round for a GLB-OMD instance: five deterministic candidates in d = 3, a binary
// reward. Returns the decision (arm and diagnostics are compared against a twin).
v1::Decision GlbRound(DecisionService& svc, const std::string& name, int i, bool reward = true) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  for (int k = 0; k < 5; ++k) {
    auto* c = sel.add_candidates();
    for (int j = 0; j < 3; ++j) c->add_values(0.5 * std::sin(1.3 * i + 2.1 * k + 0.7 * j));
  }
  v1::Decision d;
  EXPECT_TRUE(svc.Select(sel, &d).ok());
  if (reward) {
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(d.event_id());
    up.set_reward((i * 7919) % 13 < 6 ? 1.0 : 0.0);
    v1::UpdateResponse r;
    EXPECT_TRUE(svc.Update(up, &r).ok());
  }
  return d;
}

constexpr char kGlb[] = "policy { glb_omd { dimension: 3 s: 2 } } seed: 5";

// GLB-OMD's Select only reads its state, so its selects are journaled by outcome (a
// DecidedSelect, not the request) and replayed without running the policy. After a crash the
// pending decision is still there and the next decisions equal an uninterrupted twin's.
TEST_P(DurabilityOn, ReadOnlySelectsAreJournaledByOutcomeAndResumeExactly) {
  Disk disk(GetParam());
  ManualClock clock;
  DecisionService twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("g", kGlb), &out).ok());
  std::string pending_event, twin_pending_event;
  {
    Node a(&disk, &clock, Durability::kAlways);
    ASSERT_TRUE(a.svc.CreateInstance(Create("g", kGlb), &out).ok());
    for (int i = 0; i < 150; ++i)
      ASSERT_EQ(GlbRound(a.svc, "g", i).arm_index(), GlbRound(twin, "g", i).arm_index());
    pending_event = GlbRound(a.svc, "g", 150, /*reward=*/false).event_id();
    twin_pending_event = GlbRound(twin, "g", 150, false).event_id();
    ASSERT_TRUE(a.Ack().ok());
    a.Crash(&disk);
  }
  int decided = 0, selects = 0;
  for (const auto& r : disk.Records()) {
    decided += r.has_decided();
    selects += r.has_select();
    if (r.has_decided()) {
      EXPECT_EQ(r.decided().decision().features_size(), 3);
      EXPECT_LT(Journal::EncodeFrame(r).size(), 200u);  // the request is ~150 bytes more
    }
  }
  EXPECT_EQ(decided, 151);
  EXPECT_EQ(selects, 0);

  Node b(&disk, &clock, Durability::kAlways);
  EXPECT_TRUE(b.report.refused.empty());
  const auto s = Stats(b.svc, "g");
  EXPECT_EQ(s.rounds(), 151);
  EXPECT_EQ(s.pending(), 1);
  EXPECT_DOUBLE_EQ(s.estimated_regret(), Stats(twin, "g").estimated_regret());
  for (auto [svc, event] : {std::pair{&b.svc, pending_event}, {&twin, twin_pending_event}}) {
    v1::UpdateRequest up;
    up.set_instance("g");
    up.set_event_id(event);
    up.set_reward(1.0);
    v1::UpdateResponse r;
    ASSERT_TRUE(svc->Update(up, &r).ok()) << "pending decision lost";
  }
  for (int i = 151; i < 400; ++i) {
    const v1::Decision got = GlbRound(b.svc, "g", i), want = GlbRound(twin, "g", i);
    ASSERT_EQ(got.arm_index(), want.arm_index()) << "round " << i;
    // Event ids carry a per-instance random prefix; the sequence after it must continue.
    ASSERT_EQ(got.event_id().substr(got.event_id().find('-')),
              want.event_id().substr(want.event_id().find('-')))
        << "round " << i;
    using Diag = std::map<std::string, double>;
    ASSERT_EQ(Diag(got.diagnostics().begin(), got.diagnostics().end()),
              Diag(want.diagnostics().begin(), want.diagnostics().end()));
  }
}

std::vector<v1::LoggedDecision> ExportLog(DecisionService& svc, const std::string& name) {
  v1::ExportDecisionLogRequest req;
  req.set_name(name);
  std::vector<v1::LoggedDecision> out;
  DecisionService::DecisionLogCursor cursor;
  for (bool done = false; !done;) {
    v1::DecisionLogChunk chunk;
    const absl::Status s = svc.ReadDecisionLog(req, &cursor, &chunk, &done);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    for (const auto& d : chunk.decisions()) out.push_back(d);
  }
  return out;
}

v1::SelectRequest FourCandidates(const std::string& name, int i) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  for (int c = 0; c < 4; ++c) {
    auto* v = sel.add_candidates();
    for (int k = 0; k < 3; ++k) v->add_values(0.6 * std::sin(0.9 * i + 1.7 * c + 0.5 * k));
  }
  return sel;
}

// Selects (single and batched) with candidates and rewards for most of them; the decisions.
std::vector<v1::Decision> LoggedRounds(DecisionService& svc, const std::string& name, int from,
                                       int to) {
  std::vector<v1::Decision> out;
  for (int i = from; i < to; ++i) {
    if (i % 5 == 4) {  // a batch of two: its records are built on an arena
      v1::SelectBatchRequest sb;
      *sb.add_requests() = FourCandidates(name, i);
      *sb.add_requests() = FourCandidates(name, i + 1000);
      v1::SelectBatchResponse sr;
      EXPECT_TRUE(svc.SelectBatch(sb, &sr).ok());
      for (int k = 0; k < sr.statuses_size(); ++k) EXPECT_EQ(sr.statuses(k).code(), 0);
      for (const auto& d : sr.decisions()) out.push_back(d);
    } else {
      v1::Decision d;
      v1::SelectRequest sel = FourCandidates(name, i);
      sel.set_return_scores(i % 7 == 3);  // journaled as the request (see below)
      const absl::Status s = svc.Select(sel, &d);
      EXPECT_TRUE(s.ok()) << s;
      out.push_back(d);
    }
    if (i % 3 == 0) continue;  // left pending
    v1::UpdateRequest up;
    up.set_instance(name);
    up.set_event_id(out.back().event_id());
    up.set_reward(0.1 * out.back().arm_index() + 0.01 * i);
    v1::UpdateResponse r;
    EXPECT_TRUE(svc.Update(up, &r).ok());
  }
  return out;
}

// With the decision log on, a Select over candidates is journaled as the log entry it appended
// (JournalRecord.logged_select: the entry's bytes as the log holds them, not the request), unless
// it asked for scores (then its request). After a crash, replay rebuilds the requests from the
// entries: the log is the same, decision for decision, and the next decisions equal an
// uninterrupted twin's. A journal written the old way (the request and the event id) replays to
// the same log.
TEST_P(DurabilityOn, LoggedSelectsAreJournaledAsTheirLogEntryAndReplayExactly) {
  Disk disk(GetParam());
  ManualClock clock;
  DecisionService twin(&clock);
  // LinUCB only reads its state in Select; GLM epsilon-greedy draws from its engine.
  const std::vector<std::pair<std::string, std::string>> instances = {
      {"lin", "policy { linucb { dimension: 3 } } seed: 3 decision_log { enabled: true }"},
      {"eps",
       "policy { glm_epsilon_greedy { dimension: 3 link: GAUSSIAN epsilon: 0.3 } } seed: 11 "
       "decision_log { enabled: true }"}};
  v1::Instance out;
  std::map<std::string, std::vector<v1::LoggedDecision>> before;
  std::map<std::string, std::string> uid_of;
  {
    Node a(&disk, &clock, Durability::kAlways);
    for (const auto& [name, config] : instances) {
      ASSERT_TRUE(a.svc.CreateInstance(Create(name, config), &out).ok());
      ASSERT_TRUE(twin.CreateInstance(Create(name, config), &out).ok());
      const auto got = LoggedRounds(a.svc, name, 0, 40);
      const auto want = LoggedRounds(twin, name, 0, 40);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].arm_index(), want[i].arm_index());
      before[name] = ExportLog(a.svc, name);
      ASSERT_EQ(before[name].size(), got.size());
    }
    ASSERT_TRUE(a.Ack().ok());
    a.Crash(&disk);
  }

  // Every Select's record is its log entry, byte for byte: the exported decision without its
  // outcome (fields 15-17), serialized by protobuf.
  const std::vector<v1::JournalRecord> records = disk.Records();
  std::map<std::string, size_t> logged, requests;
  for (const auto& r : records) {
    if (r.has_select()) {
      EXPECT_TRUE(r.select().return_scores()) << "a request was journaled for " << r.instance();
      ++requests[r.instance()];
    }
    if (!r.has_logged_select()) continue;
    v1::LoggedDecision entry;
    ASSERT_TRUE(entry.ParseFromString(r.logged_select()));
    const size_t k = logged[r.instance()]++ + requests[r.instance()];
    ASSERT_LT(k, before[r.instance()].size());
    v1::LoggedDecision want = before[r.instance()][k];
    EXPECT_EQ(entry.event_seq(), want.event_seq());
    want.clear_outcome();
    want.clear_reward();
    want.clear_outcome_at_ms();
    EXPECT_EQ(r.logged_select(), want.SerializeAsString()) << r.instance() << " entry " << k;
    EXPECT_EQ(entry.num_candidates(), 4);
    EXPECT_EQ(entry.candidate_dim(), 3);
  }
  for (const auto& [name, config] : instances) {
    EXPECT_EQ(requests[name], 5u);  // rounds 3, 10, 17, 31 and 38 asked for scores
    EXPECT_EQ(logged[name] + requests[name], before[name].size());
  }

  auto same_log = [&](DecisionService& svc, const std::string& name) {
    const auto after = ExportLog(svc, name);
    ASSERT_EQ(after.size(), before[name].size());
    for (size_t i = 0; i < after.size(); ++i) {
      std::string diff;
      google::protobuf::util::MessageDifferencer md;
      md.ReportDifferencesToString(&diff);
      EXPECT_TRUE(md.Compare(after[i], before[name][i])) << name << " " << i << ": " << diff;
    }
  };
  {
    Node b(&disk, &clock, Durability::kAlways);
    EXPECT_TRUE(b.report.refused.empty());
    for (const auto& [name, config] : instances) {
      SCOPED_TRACE(name);
      same_log(b.svc, name);
      const auto got = LoggedRounds(b.svc, name, 40, 70);
      const auto want = LoggedRounds(twin, name, 40, 70);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].arm_index(), want[i].arm_index()) << "round " << i;
        ASSERT_EQ(got[i].propensity(), want[i].propensity()) << "round " << i;
      }
    }
  }
  if (GetParam() != Backend::kFile) return;  // the records are the same on both backends

  // The same journal as the server wrote it before logged_select existed: each Select as its
  // request (the candidates rebuilt from the entry) and the event id it produced.
  FaultInjectionFs old_disk;
  {
    auto journal = Journal::Open(&old_disk, "/data/journal", Durability::kAlways, 1);
    ASSERT_TRUE(journal.ok()) << journal.status();
    for (v1::JournalRecord r : records) {
      if (r.has_logged_select()) {
        v1::LoggedDecision entry;
        ASSERT_TRUE(entry.ParseFromString(r.logged_select()));
        v1::SelectRequest* sel = r.mutable_select();  // replaces logged_select (one op)
        sel->set_instance(r.instance());
        for (int c = 0; c < entry.num_candidates(); ++c) {
          auto* v = sel->add_candidates();
          for (int k = 0; k < entry.candidate_dim(); ++k)
            v->add_values(entry.candidates(c * entry.candidate_dim() + k));
        }
        r.set_event_id(entry.event_id());
      }
      ASSERT_TRUE((*journal)->Append(&r).ok());
    }
    ASSERT_TRUE((*journal)->Flush().ok());
  }
  Node c(&old_disk, &clock, Durability::kAlways);
  EXPECT_TRUE(c.report.refused.empty());
  for (const auto& [name, config] : instances) same_log(c.svc, name);
}

// A logged_select record whose entry cannot be a Select's is refused with DATA_LOSS naming what
// it holds (the frame's checksum guards the bytes; this guards what they say).
TEST(Durability, ALoggedSelectEntryThatCannotBeASelectIsDataLoss) {
  InstanceLimits limits;
  InstanceState::SelectInputs in;
  std::string event_id;
  v1::LoggedDecision d;
  d.set_event_id("ab-1");
  d.set_num_candidates(2);
  d.set_candidate_dim(3);
  for (int i = 0; i < 5; ++i) d.add_candidates(0.1 * i);  // 5 values, 2 x 3 expected
  absl::Status s = InstanceState::LoggedSelectInputs(d.SerializeAsString(), limits, &in, &event_id);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "2 candidates of dimension 3 in 5 values")) << s;
  d.add_candidates(0.5);
  ASSERT_TRUE(InstanceState::LoggedSelectInputs(d.SerializeAsString(), limits, &in, &event_id).ok());
  EXPECT_EQ(event_id, "ab-1");
  ASSERT_EQ(in.candidates->size(), 2u);
  EXPECT_EQ((*in.candidates)[1](2), 0.5);
  d.set_candidates(4, std::nan(""));
  s = InstanceState::LoggedSelectInputs(d.SerializeAsString(), limits, &in, &event_id);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "candidates[1].values[1]")) << s;
  EXPECT_EQ(InstanceState::LoggedSelectInputs("\xff\xff", limits, &in, &event_id).code(),
            StatusCode::kDataLoss);
}

// Rotation (snapshot rounds) while appends keep coming: the writer may be writing a batch to
// the current segment outside the journal lock when Rotate() runs; Rotate must wait for it
// rather than close the file under it. Every record must come back, once, in order.
TEST(Durability, RotationUnderConcurrentAppendsLosesAndReordersNothing) {
  FaultInjectionFs fs;
  fs.SetAppendDelay(std::chrono::microseconds(300));  // the writer spends its time in write()
  constexpr int kRecords = 3000;
  {
    auto journal = Journal::Open(&fs, "/j", Durability::kNone, 1);
    ASSERT_TRUE(journal.ok()) << journal.status();
    std::atomic<bool> done{false};
    std::thread appender([&] {
      for (int i = 0; i < kRecords; ++i) {
        v1::JournalRecord r;
        r.set_instance("x");
        r.set_reset(true);
        ASSERT_TRUE((*journal)->Append(&r).ok());
        if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      done = true;
    });
    int rotations = 0;
    while (!done) {
      auto boundary = (*journal)->Rotate();
      ASSERT_TRUE(boundary.ok()) << boundary.status();
      ++rotations;
    }
    appender.join();
    ASSERT_TRUE((*journal)->Flush().ok());
    EXPECT_TRUE((*journal)->health().ok()) << (*journal)->health();
    EXPECT_GT(rotations, 5);
  }
  uint64_t expected = 1;
  auto read = Journal::ReadAll(
      &fs, "/j", [&](const v1::JournalRecord& r) { EXPECT_EQ(r.seq(), expected++); },
      [](const std::string&, const std::string& why) { ADD_FAILURE() << why; });
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->records, kRecords);
}

// A reference replaced by SetMixtureReference is journaled and snapshotted: after a crash the
// instance scores against the new reference and continues exactly like an uninterrupted twin.
TEST_P(DurabilityOn, MixtureReferenceChangeSurvivesCrashAndSnapshot) {
  const std::string config =
      "policy { mixture { objective: FD num_arms: 3 dimension: 2 warm_start: 2 "
      "reference_mean: [0, 0] reference_covariance: [1, 0, 0, 1] } } seed: 3";
  auto rounds = [](DecisionService& svc, int from, int n) {
    return testing::PlayRounds(svc, "m", from, n, [](const v1::Decision& d, int i, auto* up) {
      up->add_embedding(std::sin(0.9 * i) + d.arm_index());
      up->add_embedding(std::cos(0.4 * i) - d.arm_index());
    });
  };
  v1::SetMixtureReferenceRequest set;
  set.set_name("m");
  for (int i = 0; i < 6; ++i) {
    auto* e = set.add_embeddings();
    e->add_values(0.5 * i - 1);
    e->add_values(i % 3 == 0 ? 2.0 : -0.5 * i);
  }
  for (bool snapshot : {false, true}) {
    SCOPED_TRACE(snapshot ? "snapshot, then crash" : "journal only");
    Disk disk(GetParam());
    ManualClock clock;
    DecisionService twin(&clock);
    v1::Instance out;
    ASSERT_TRUE(twin.CreateInstance(Create("m", config), &out).ok());
    {
      Node a(&disk, &clock, Durability::kAlways);
      ASSERT_TRUE(a.svc.CreateInstance(Create("m", config), &out).ok());
      ASSERT_EQ(rounds(a.svc, 0, 40), rounds(twin, 0, 40));
      ASSERT_TRUE(a.svc.SetMixtureReference(set, &out).ok());
      ASSERT_TRUE(twin.SetMixtureReference(set, &out).ok());
      if (snapshot) {
        ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      }
      ASSERT_EQ(rounds(a.svc, 40, 30), rounds(twin, 40, 30));
      ASSERT_TRUE(a.Ack().ok());
      a.Crash(&disk);
    }
    Node b(&disk, &clock, Durability::kAlways);
    EXPECT_TRUE(b.report.refused.empty());
    v1::GetInstanceRequest g;
    g.set_name("m");
    ASSERT_TRUE(b.svc.GetInstance(g, &out).ok());
    EXPECT_EQ(out.config().policy().mixture().reference_samples_size(), 12);
    EXPECT_EQ(out.config().policy().mixture().reference_mean_size(), 0);
    EXPECT_EQ(rounds(b.svc, 70, 200), rounds(twin, 70, 200));
  }
}

// The instance's complete state, minus where it stands in the journal (a twin without storage
// stands nowhere) and the count of refused rewards (a refusal counter: refused items bump it
// without a journal record, so only the live instance has it).
v1::InstanceSnapshot Comparable(DecisionService& svc, const std::string& name) {
  auto inst = svc.registry().Get(name);
  EXPECT_TRUE(inst.ok()) << inst.status();
  if (!inst.ok()) return {};
  v1::InstanceSnapshot snap = (*inst)->Snapshot();
  snap.clear_last_journal_seq();
  snap.mutable_stats()->clear_rejected_rewards();
  return snap;
}

// Continue with rewards in [0, 1] (Thompson's Bernoulli support).
std::vector<std::pair<int, double>> Continue01(DecisionService& svc, const std::string& name,
                                               int from, int n) {
  return testing::PlayRounds(svc, name, from, n, [](const v1::Decision& d, int i, auto* up) {
    up->set_reward(((i * 7919 + d.arm_index()) % 13) / 13.0);
  });
}

std::vector<int> ItemCodes(const google::protobuf::RepeatedPtrField<v1::ItemStatus>& statuses) {
  std::vector<int> codes;
  for (const auto& s : statuses) codes.push_back(s.code());
  return codes;
}

// A batch mixing good and bad items for two instances: each item gets exactly the status it
// would get alone, the state is exactly what applying only the good items one by one gives
// (an uninterrupted twin), each instance's records are appended together (consecutive sequence
// numbers, in request order), and the acknowledged batch is wholly recovered after a crash.
TEST_P(DurabilityOn, BatchAppliesExactlyItsGoodItemsPerInstanceInOrderAndSurvivesACrash) {
  Disk disk(GetParam());
  ManualClock clock;
  DecisionService twin(&clock);
  constexpr char kThompson[] = "policy { thompson { } num_arms: 3 } seed: 11";
  constexpr int kOk = 0;
  const int kInvalid = static_cast<int>(StatusCode::kInvalidArgument);
  const int kNotFound = static_cast<int>(StatusCode::kNotFound);
  const int kPrecondition = static_cast<int>(StatusCode::kFailedPrecondition);
  std::map<std::string, v1::InstanceSnapshot> after_batches;
  {
    Node a(&disk, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("p", kEps), &out).ok());
    ASSERT_TRUE(a.svc.CreateInstance(Create("q", kThompson), &out).ok());
    // The twin starts from the very same state (uid and random stream included).
    for (const std::string name : {"p", "q"}) {
      v1::ExportInstanceRequest ex;
      ex.set_name(name);
      v1::ExportInstanceResponse exported;
      ASSERT_TRUE(a.svc.ExportInstance(ex, &exported).ok());
      v1::ImportInstanceRequest im;
      im.set_snapshot(exported.snapshot());
      ASSERT_TRUE(twin.ImportInstance(im, &out).ok());
    }
    for (const std::string name : {"p", "q"})  // some history, the same on both
      ASSERT_EQ(Continue01(a.svc, name, 0, 5), Continue01(twin, name, 0, 5));
    const uint64_t seq_before_selects = a.storage->newest;

    // Selects: p, q, p with candidates (p's policy takes none), an unknown instance, q, a bad
    // name, p.
    v1::SelectBatchRequest sb;
    const std::vector<std::string> targets = {"p", "q", "p", "nobody", "q", "bad name!", "p"};
    for (const auto& t : targets) sb.add_requests()->set_instance(t);
    sb.mutable_requests(2)->add_candidates()->add_values(1.0);
    v1::SelectBatchResponse sr;
    ASSERT_TRUE(a.svc.SelectBatch(sb, &sr).ok());
    ASSERT_EQ(sr.decisions_size(), 7);
    EXPECT_EQ(ItemCodes(sr.statuses()),
              (std::vector<int>{kOk, kOk, kInvalid, kNotFound, kOk, kInvalid, kOk}));
    for (int i : {2, 3, 5}) {
      EXPECT_FALSE(sr.statuses(i).message().empty());
      EXPECT_EQ(sr.decisions(i).ByteSizeLong(), 0u) << "item " << i << " must be empty";
    }
    for (int i : {0, 1, 4, 6}) {  // the twin gets only the good ones, one by one, in order
      v1::Decision d;
      ASSERT_TRUE(twin.Select(sb.requests(i), &d).ok());
      EXPECT_EQ(d.event_id(), sr.decisions(i).event_id()) << "item " << i;
      EXPECT_EQ(d.arm_index(), sr.decisions(i).arm_index()) << "item " << i;
      EXPECT_EQ(d.propensity(), sr.decisions(i).propensity()) << "item " << i;
    }
    // Appended per instance in one step: p's two records, then q's two, consecutive.
    ASSERT_TRUE(a.Ack().ok());
    std::vector<std::pair<std::string, std::string>> appended;  // (instance, event id)
    for (const auto& r : disk.Records())
      if (r.seq() > seq_before_selects) appended.emplace_back(r.instance(), r.event_id());
    const std::vector<std::pair<std::string, std::string>> expected_order = {
        {"p", sr.decisions(0).event_id()},
        {"p", sr.decisions(6).event_id()},
        {"q", sr.decisions(1).event_id()},
        {"q", sr.decisions(4).event_id()}};
    EXPECT_EQ(appended, expected_order);

    // Updates: good ones interleaved with an unknown event, a second reward for one event,
    // a NaN reward, a reward outside Thompson's [0, 1] support and an unknown instance.
    v1::UpdateBatchRequest ub;
    auto add = [&](const std::string& instance, const std::string& event, double reward) {
      auto* u = ub.add_requests();
      u->set_instance(instance);
      u->set_event_id(event);
      u->set_reward(reward);
    };
    add("q", sr.decisions(1).event_id(), 1.0);
    add("p", sr.decisions(0).event_id(), 0.25);
    add("p", "no-such-event", 1.0);
    add("p", sr.decisions(0).event_id(), 1.0);
    add("q", sr.decisions(4).event_id(), std::nan(""));
    add("q", sr.decisions(4).event_id(), 2.0);
    add("nobody", sr.decisions(6).event_id(), 1.0);
    add("p", sr.decisions(6).event_id(), 0.75);
    add("q", sr.decisions(4).event_id(), 0.0);
    v1::UpdateBatchResponse ur;
    ASSERT_TRUE(a.svc.UpdateBatch(ub, &ur).ok());
    ASSERT_EQ(ur.responses_size(), 9);
    EXPECT_EQ(ItemCodes(ur.statuses()),
              (std::vector<int>{kOk, kOk, kNotFound, kPrecondition, kInvalid, kInvalid, kNotFound,
                                kOk, kOk}));
    for (int i : {0, 1, 7, 8}) {
      v1::UpdateResponse r;
      ASSERT_TRUE(twin.Update(ub.requests(i), &r).ok());
      EXPECT_EQ(r.updates(), ur.responses(i).updates()) << "item " << i;
    }
    EXPECT_EQ(Stats(a.svc, "p").rejected_rewards(), 2);
    EXPECT_EQ(Stats(a.svc, "q").rejected_rewards(), 0);
    for (const std::string name : {"p", "q"}) {
      after_batches[name] = Comparable(a.svc, name);
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(after_batches[name],
                                                                     Comparable(twin, name)))
          << name;
    }
    ASSERT_TRUE(a.Ack().ok());  // acknowledged as the gRPC layer would, then the crash
    a.Crash(&disk);
  }
  Node b(&disk, &clock, Durability::kAlways);
  for (const std::string name : {"p", "q"}) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(after_batches[name],
                                                                   Comparable(b.svc, name)))
        << name << " after recovery";
    // And it goes on exactly as the twin.
    EXPECT_EQ(Continue01(b.svc, name, 5, 50), Continue01(twin, name, 5, 50)) << name;
  }
}

TEST(Durability, ExportImportContinuesIdentically) {
  ManualClock clock;
  DecisionService source(&clock), target(&clock), twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(source.CreateInstance(Create("x", kEps), &out).ok());
  ASSERT_TRUE(twin.CreateInstance(Create("x", kEps), &out).ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Round(source, "x", i), Round(twin, "x", i));
  v1::ExportInstanceRequest ex;
  ex.set_name("x");
  v1::ExportInstanceResponse exported;
  ASSERT_TRUE(source.ExportInstance(ex, &exported).ok());
  v1::ImportInstanceRequest im;
  im.set_name("moved");
  im.set_snapshot(exported.snapshot());
  ASSERT_TRUE(target.ImportInstance(im, &out).ok());
  EXPECT_EQ(out.stats().updates(), 100);
  EXPECT_EQ(target.ImportInstance(im, &out).code(), StatusCode::kAlreadyExists);
  im.set_snapshot(exported.snapshot().substr(0, 20));
  im.set_name("broken");
  EXPECT_EQ(target.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Continue(target, "moved", 100, 1000), Continue(twin, "x", 100, 1000));
}

// Export from a server on one backend, import into a server on the other (file -> PostgreSQL
// and PostgreSQL -> file), crash the target: the instance continues exactly.
TEST_P(DurabilityOn, ExportImportAcrossBackendsContinuesIdentically) {
  const Backend from = GetParam();
  const Backend to = from == Backend::kFile ? Backend::kPostgres : Backend::kFile;
  Disk source_disk(from), target_disk(to);
  ManualClock clock;
  DecisionService twin(&clock);
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("x", kEps), &out).ok());
  v1::ExportInstanceResponse exported;
  {
    Node source(&source_disk, &clock, Durability::kAlways);
    ASSERT_TRUE(source.svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 100; ++i) ASSERT_EQ(Round(source.svc, "x", i), Round(twin, "x", i));
    v1::ExportInstanceRequest ex;
    ex.set_name("x");
    ASSERT_TRUE(source.svc.ExportInstance(ex, &exported).ok());
  }
  {
    Node target(&target_disk, &clock, Durability::kAlways);
    v1::ImportInstanceRequest im;
    im.set_name("moved");
    im.set_snapshot(exported.snapshot());
    ASSERT_TRUE(target.svc.ImportInstance(im, &out).ok());
    EXPECT_EQ(out.stats().updates(), 100);
    EXPECT_EQ(Continue(target.svc, "moved", 100, 50), Continue(twin, "x", 100, 50));
    ASSERT_TRUE(target.Ack().ok());
    target.Crash(&target_disk);
  }
  Node restarted(&target_disk, &clock, Durability::kAlways);
  EXPECT_EQ(Stats(restarted.svc, "moved").updates(), 150);
  EXPECT_EQ(Continue(restarted.svc, "moved", 150, 500), Continue(twin, "x", 150, 500));
}

// A snapshot that cannot be stored (a full snapshot directory) is reported on its own channel:
// the journal is healthy, writes go on being acknowledged, nothing is compacted, and once the
// directory takes files again the next round stores the snapshot and a crash loses nothing.
TEST(Durability, ASnapshotFailureIsNotAJournalFailure) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::vector<absl::Status> journal_errors, snapshot_errors;
  auto open = [&](RecoveryReport* report, DecisionService* svc) {
    PersistenceOptions o;
    o.data_dir = "/data";
    o.fs = &fs;
    o.clock = &clock;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    o.observer.on_error = [&](const absl::Status& e) { journal_errors.push_back(e); };
    o.on_snapshot_error = [&](const absl::Status& e) { snapshot_errors.push_back(e); };
    auto p = Persistence::Open(o, svc, report);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  };
  {
    DecisionService svc(&clock);
    RecoveryReport report;
    auto p = open(&report, &svc);
    ASSERT_NE(p, nullptr);
    v1::Instance out;
    ASSERT_TRUE(svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 10; ++i) Round(svc, "x", i);
    fs.FailNewFilesUnder("/data/snapshots");
    EXPECT_EQ(p->SnapshotAll().status().code(), StatusCode::kResourceExhausted);
    ASSERT_EQ(snapshot_errors.size(), 1u);
    EXPECT_TRUE(journal_errors.empty());
    absl::Status s;
    for (int i = 10; i < 20; ++i) {
      Round(svc, "x", i, &s);
      ASSERT_TRUE(s.ok()) << s;
    }
    EXPECT_TRUE(p->storage()->Flush().ok());  // acknowledged: the journal is healthy
    fs.FailNewFilesUnder("");
    EXPECT_EQ(p->SnapshotAll().value_or(-1), 1);
    for (int i = 20; i < 25; ++i) Round(svc, "x", i);
    EXPECT_TRUE(p->storage()->Flush().ok());
    fs.Crash();
  }
  DecisionService svc(&clock);
  RecoveryReport report;
  auto p = open(&report, &svc);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(report.refused.empty());
  EXPECT_EQ(report.snapshots_loaded, 1);
  EXPECT_EQ(Stats(svc, "x").updates(), 25);
  EXPECT_TRUE(journal_errors.empty());
}

TEST(Durability, TornTailIsCutAndEverythingBeforeItSurvives) {
  FaultInjectionFs fs;
  ManualClock clock;
  {
    Node a(&fs, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 20; ++i) Round(a.svc, "x", i);
    ASSERT_TRUE(a.Ack().ok());
  }
  std::string* last = nullptr;
  for (const auto& p : fs.Paths())
    if (absl::StrContains(p, "/journal/")) last = fs.Data(p);  // paths are sorted: the newest
  ASSERT_NE(last, nullptr);
  // A frame cut off in the middle, as a crash during write() leaves it.
  const std::string frame = Journal::EncodeFrame([] {
    v1::JournalRecord r;
    r.set_seq(999);
    r.set_instance("x");
    r.set_reset(true);
    return r;
  }());
  *last += frame.substr(0, frame.size() / 2);
  Node b(&fs, &clock, Durability::kAlways);
  EXPECT_GT(b.report.truncated_bytes, 0);
  EXPECT_TRUE(b.report.refused.empty());
  EXPECT_EQ(Stats(b.svc, "x").updates(), 20);
}

TEST_P(DurabilityOn, CorruptRecordInTheMiddleRefusesOnlyItsInstance) {
  Disk disk(GetParam());
  ManualClock clock;
  {
    Node a(&disk, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("good", kEps), &out).ok());
    ASSERT_TRUE(a.svc.CreateInstance(Create("bad", kEps), &out).ok());
    for (int i = 0; i < 10; ++i) {
      Round(a.svc, "good", i);
      Round(a.svc, "bad", i);
    }
    ASSERT_TRUE(a.Ack().ok());
    ASSERT_TRUE(a.storage->BeginSnapshotRound().ok());  // the damaged segment is not the last
    for (int i = 10; i < 15; ++i) Round(a.svc, "good", i);
    ASSERT_TRUE(a.Ack().ok());
  }
  if (disk.backend == Backend::kFile) {
    std::string* first = nullptr;
    for (const auto& p : disk.fs.Paths())
      if (absl::StrContains(p, "/journal/") && first == nullptr) first = disk.fs.Data(p);
    ASSERT_NE(first, nullptr);
    // The first segment ends with the reward record of "bad" (the last call before Rotate):
    // flip its last payload byte.
    first->back() ^= 0x5a;
  } else {
    // The last record of "bad": flip its last byte.
    bandit::testing::PostgresProcess::ExecOn(
        disk.dsn,
        "UPDATE bandit_journal SET record = set_byte(record, length(record) - 1, "
        "get_byte(record, length(record) - 1) # 90) WHERE seq = "
        "(SELECT max(seq) FROM bandit_journal WHERE instance = 'bad')");
  }
  Node b(&disk, &clock, Durability::kAlways);
  ASSERT_EQ(b.report.refused.size(), 1u);
  EXPECT_EQ(b.report.refused[0].first, "bad");
  v1::GetInstanceRequest g;
  g.set_name("bad");
  v1::Instance out;
  EXPECT_EQ(b.svc.GetInstance(g, &out).code(), StatusCode::kDataLoss);
  EXPECT_EQ(Stats(b.svc, "good").updates(), 15);
  v1::DeleteInstanceRequest del;
  del.set_name("bad");
  EXPECT_TRUE(b.svc.DeleteInstance(del).ok());  // the operator clears the name
  EXPECT_EQ(b.svc.GetInstance(g, &out).code(), StatusCode::kNotFound);
}

// A storage failure under a write: never acknowledged, later writes refused, reads keep
// working. Files: a failed fsync is final until restart (no silent retry). PostgreSQL: the
// storage reconnects by itself once the database is back, and the database then holds exactly
// what the server had applied (so a restart continues from the same state).
TEST_P(DurabilityOn, FailedWritesAreNeverAcknowledgedAndReadsKeepWorking) {
  Disk disk(GetParam());
  ManualClock clock;
  Node a(&disk, &clock, Durability::kAlways);
  v1::Instance out;
  ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
  ASSERT_TRUE(a.Ack().ok());
  auto& pg = bandit::testing::SharedPostgres();
  if (disk.backend == Backend::kFile)
    disk.fs.FailSyncs(true);
  else
    pg.Stop("immediate");
  Round(a.svc, "x", 0);
  EXPECT_EQ(a.Ack().code(), StatusCode::kUnavailable);  // never acknowledged
  absl::Status s;
  Round(a.svc, "x", 1, &s);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.svc.CreateInstance(Create("y", kEps), &out).code(), StatusCode::kUnavailable);
  v1::GetInstanceRequest g;
  g.set_name("x");
  EXPECT_TRUE(a.svc.GetInstance(g, &out).ok());
  if (disk.backend == Backend::kFile) {
    disk.fs.FailSyncs(false);  // not retried silently: the journal stays failed until restart
    Round(a.svc, "x", 2, &s);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    return;
  }
  pg.Start();
  for (int i = 0; i < 1500 && !a.storage->health().ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(a.storage->health().ok()) << a.storage->health();
  for (int i = 2; i < 12; ++i) {
    Round(a.svc, "x", i, &s);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(a.Ack().ok());
  }
  const auto before = Stats(a.svc, "x");
  a.Crash(&disk);
  Node b(&disk, &clock, Durability::kAlways);
  EXPECT_TRUE(b.report.refused.empty());
  const auto after = Stats(b.svc, "x");
  EXPECT_EQ(after.rounds(), before.rounds());
  EXPECT_EQ(after.updates(), before.updates());
  EXPECT_EQ(after.pending(), before.pending());
}

TEST_P(DurabilityOn, CompactionKeepsStateAndDropsCoveredRecords) {
  Disk disk(GetParam());
  ManualClock clock;
  {
    Node a(&disk, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    ASSERT_TRUE(a.svc.CreateInstance(Create("gone", kEps), &out).ok());
    for (int i = 0; i < 50; ++i) Round(a.svc, "x", i);
    v1::DeleteInstanceRequest del;
    del.set_name("gone");
    ASSERT_TRUE(a.svc.DeleteInstance(del).ok());
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());
    EXPECT_EQ(disk.JournalRecords(), 0);  // every record is below the last round's boundary
    EXPECT_EQ(disk.Snapshots(), 1);       // "gone" has no snapshot
    a.Crash(&disk);
  }
  Node b(&disk, &clock, Durability::kAlways);
  EXPECT_EQ(Stats(b.svc, "x").updates(), 50);
  EXPECT_EQ(b.svc.registry().size(), 1);
}

// An export takes a snapshot for the caller, not for storage: the next snapshot round must still
// store the instance before compaction drops the journal records that hold its recent changes.
TEST_P(DurabilityOn, ExportDoesNotStandInForAStoredSnapshot) {
  Disk disk(GetParam());
  ManualClock clock;
  {
    Node a(&disk, &clock, Durability::kAlways);
    v1::Instance out;
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
    for (int i = 0; i < 10; ++i) Round(a.svc, "x", i);
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());
    for (int i = 10; i < 30; ++i) Round(a.svc, "x", i);
    v1::ExportInstanceRequest ex;
    ex.set_name("x");
    v1::ExportInstanceResponse exported;
    ASSERT_TRUE(a.svc.ExportInstance(ex, &exported).ok());
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());  // compacts below the previous round
    ASSERT_TRUE(a.Ack().ok());
    a.Crash(&disk);
  }
  Node b(&disk, &clock, Durability::kAlways);
  EXPECT_EQ(Stats(b.svc, "x").updates(), 30);
}

// An import that replaces an instance (ImportInstanceRequest.replace, Personalizer's PUT model)
// is one journal record, and a crash after it recovers the new instance, never the old one or
// none, whether the last stored snapshot is the old instance's or the new one's. The model put
// back is the instance's own earlier export, which carries the instance's own uid: recovery
// must know the replacement by its place in the journal, not by its uid. A refused import
// writes nothing and leaves the instance as it was.
TEST_P(DurabilityOn, AReplacingImportIsOneRecordAndACrashRecoversTheNewInstance) {
  for (const bool snapshot_after : {false, true}) {
    SCOPED_TRACE(snapshot_after ? "snapshot after the replace" : "old instance's snapshot only");
    Disk disk(GetParam());
    ManualClock clock;
    DecisionService twin(&clock);
    v1::Instance out;
    {
      Node a(&disk, &clock, Durability::kAlways);
      ASSERT_TRUE(a.svc.CreateInstance(Create("x", kEps), &out).ok());
      for (int i = 0; i < 40; ++i) Round(a.svc, "x", i);
      v1::ExportInstanceRequest ex;
      ex.set_name("x");
      v1::ExportInstanceResponse early;
      ASSERT_TRUE(a.svc.ExportInstance(ex, &early).ok());
      v1::ImportInstanceRequest im;
      im.set_name("x");
      im.set_snapshot(early.snapshot());
      ASSERT_TRUE(twin.ImportInstance(im, &out).ok());
      ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      for (int i = 40; i < 70; ++i) Round(a.svc, "x", i);
      ASSERT_TRUE(a.Ack().ok());

      const size_t records = disk.Records().size();
      v1::ExportInstanceResponse current;
      ASSERT_TRUE(a.svc.ExportInstance(ex, &current).ok());
      im.set_replace(true);
      im.set_snapshot(early.snapshot().substr(0, early.snapshot().size() / 2));
      EXPECT_EQ(a.svc.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(disk.Records().size(), records);
      v1::ExportInstanceResponse unchanged;
      ASSERT_TRUE(a.svc.ExportInstance(ex, &unchanged).ok());
      EXPECT_EQ(unchanged.snapshot(), current.snapshot());

      im.set_snapshot(early.snapshot());
      ASSERT_TRUE(a.svc.ImportInstance(im, &out).ok());
      ASSERT_TRUE(a.Ack().ok());
      const std::vector<v1::JournalRecord> after = disk.Records();
      ASSERT_EQ(after.size(), records + 1);
      EXPECT_TRUE(after.back().has_import());
      EXPECT_TRUE(after.back().replace());
      EXPECT_EQ(after.back().instance(), "x");
      EXPECT_EQ(Stats(a.svc, "x").updates(), 40);
      EXPECT_EQ(Continue(a.svc, "x", 40, 20), Continue(twin, "x", 40, 20));
      if (snapshot_after) {
        ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      }
      ASSERT_TRUE(a.Ack().ok());
      a.Crash(&disk);
    }
    Node b(&disk, &clock, Durability::kAlways);
    EXPECT_TRUE(b.report.refused.empty());
    EXPECT_EQ(Stats(b.svc, "x").updates(), 60);
    EXPECT_EQ(Continue(b.svc, "x", 60, 50), Continue(twin, "x", 60, 50));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DurabilityOn,
                         ::testing::Values(Backend::kFile, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace bandit::server
