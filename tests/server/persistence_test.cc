// Persistence over the file backend on the in-memory filesystem seam (FaultInjectionFs): what a
// restart recovers (the newest snapshot of each instance plus the journal records after it)
// equals the live state byte for byte, the report counts exactly what was loaded and replayed, a
// deletion after the snapshot stays a deletion, and a crash (everything not fsynced dropped)
// loses nothing that was acknowledged.
#include "server/service/persistence.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/env/clock.h"
#include "server/instance/memory_budget.h"
#include "server/service/decision_service.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;
using testing::Create;
using testing::Exported;
using testing::PlayRounds;

constexpr char kEps[] = "policy { epsilon_greedy { epsilon: 0.2 } num_arms: 3 } seed: 21";
constexpr char kTs[] = "policy { thompson { } num_arms: 4 } seed: 8";

// One server "process": a service and its persistence over `fs`, with snapshot triggers far
// away (the test takes its snapshots itself).
struct Node {
  Node(FaultInjectionFs* fs, ManualClock* clock, ServiceLimits limits = {})
      : svc(clock, limits, &uids) {
    PersistenceOptions o;
    o.data_dir = "/data";
    o.fs = fs;
    o.clock = clock;
    o.durability = Durability::kAlways;
    o.snapshot_every_changes = 1'000'000;
    o.snapshot_interval_ms = 1'000'000'000;
    auto p = Persistence::Open(o, &svc, &report);
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) persistence = *std::move(p);
  }
  ~Node() {
    // Everything appended reaches the files before the "process" ends, without the final
    // snapshot round of a graceful Close: the next node recovers snapshot + journal tail.
    if (persistence) {
      EXPECT_TRUE(persistence->storage()->Flush().ok());
    }
  }
  SequentialUids uids;
  DecisionService svc;
  RecoveryReport report;
  std::unique_ptr<Persistence> persistence;
};

auto RewardArmTwo() {
  return [](const v1::Decision& d, int, v1::UpdateRequest* up) {
    up->set_reward(d.arm_index() == 2 ? 1.0 : 0.0);
  };
}

TEST(Persistence, SnapshotPlusJournalTailRestoresTheLiveState) {
  FaultInjectionFs fs;
  ManualClock clock;
  std::string live_a, live_b;
  std::vector<std::pair<int, double>> next_live;
  {
    Node node(&fs, &clock);
    v1::Instance out;
    ASSERT_TRUE(node.svc.CreateInstance(Create("a", kEps), &out).ok());
    ASSERT_TRUE(node.svc.CreateInstance(Create("b", kTs), &out).ok());
    PlayRounds(node.svc, "a", 0, 20, RewardArmTwo());
    PlayRounds(node.svc, "b", 0, 20, RewardArmTwo());
    auto written = node.persistence->SnapshotAll();
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*written, 2);
    // The tail: 15 rounds of "a" (a Select and an Update record each) after its snapshot.
    clock.Advance(5);
    PlayRounds(node.svc, "a", 20, 15, RewardArmTwo());
    live_a = Exported(node.svc, "a");
    live_b = Exported(node.svc, "b");
  }
  Node restarted(&fs, &clock);
  EXPECT_EQ(restarted.report.snapshots_loaded, 2);
  EXPECT_EQ(restarted.report.records_replayed, 30);
  EXPECT_TRUE(restarted.report.refused.empty());
  EXPECT_EQ(Exported(restarted.svc, "a"), live_a);
  EXPECT_EQ(Exported(restarted.svc, "b"), live_b);
}

TEST(Persistence, ARestoredInstanceDecidesAsTheOneThatWasNeverRestarted) {
  FaultInjectionFs fs;
  ManualClock clock;
  // The twin: the same instance and the same rounds, never stored (a DecisionService alone).
  SequentialUids twin_uids;
  DecisionService twin(&clock, ServiceLimits{}, &twin_uids);
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("a", kEps), &out).ok());
  PlayRounds(twin, "a", 0, 30, RewardArmTwo());
  {
    Node node(&fs, &clock);
    ASSERT_TRUE(node.svc.CreateInstance(Create("a", kEps), &out).ok());
    PlayRounds(node.svc, "a", 0, 10, RewardArmTwo());
    ASSERT_TRUE(node.persistence->SnapshotAll().ok());
    PlayRounds(node.svc, "a", 10, 20, RewardArmTwo());
  }
  Node restarted(&fs, &clock);
  EXPECT_EQ(PlayRounds(restarted.svc, "a", 30, 25, RewardArmTwo()),
            PlayRounds(twin, "a", 30, 25, RewardArmTwo()));
}

TEST(Persistence, ADeletionAfterTheSnapshotStaysADeletion) {
  FaultInjectionFs fs;
  ManualClock clock;
  {
    Node node(&fs, &clock);
    v1::Instance out;
    ASSERT_TRUE(node.svc.CreateInstance(Create("gone", kEps), &out).ok());
    ASSERT_TRUE(node.svc.CreateInstance(Create("kept", kTs), &out).ok());
    ASSERT_TRUE(node.persistence->SnapshotAll().ok());
    v1::DeleteInstanceRequest del;
    del.set_name("gone");
    ASSERT_TRUE(node.svc.DeleteInstance(del).ok());
  }
  Node restarted(&fs, &clock);
  v1::GetInstanceRequest get;
  get.set_name("gone");
  v1::Instance out;
  EXPECT_EQ(restarted.svc.GetInstance(get, &out).code(), StatusCode::kNotFound);
  get.set_name("kept");
  EXPECT_TRUE(restarted.svc.GetInstance(get, &out).ok());
  // The name is free again, for a new instance.
  EXPECT_TRUE(restarted.svc.CreateInstance(Create("gone", kTs), &out).ok());
}

TEST(Persistence, ACrashLosesNothingAcknowledged) {
  // Durability::kAlways: a call returns after its record is appended; WhenDurable (what a front
  // door waits for before answering) reports once it is fsynced. Flush stands for that wait
  // here, then the crash drops whatever was not fsynced.
  FaultInjectionFs fs;
  ManualClock clock;
  std::string acknowledged;
  {
    Node node(&fs, &clock);
    v1::Instance out;
    ASSERT_TRUE(node.svc.CreateInstance(Create("a", kEps), &out).ok());
    PlayRounds(node.svc, "a", 0, 12, RewardArmTwo());
    ASSERT_TRUE(node.persistence->SnapshotAll().ok());
    PlayRounds(node.svc, "a", 12, 7, RewardArmTwo());
    ASSERT_TRUE(node.persistence->storage()->Flush().ok());
    acknowledged = Exported(node.svc, "a");
    fs.Crash();
  }
  Node restarted(&fs, &clock);
  EXPECT_EQ(Exported(restarted.svc, "a"), acknowledged);
}

// A snapshot's transient memory (here: the pending decisions encoded) is charged to the
// node's budget before it is taken. An instance whose pending decisions fill their share (half
// the budget) cannot be snapshotted beside them: the round is postponed (counted as a refusal of
// operation "snapshot"), writes nothing and compacts nothing, so a restart replays every record;
// once rewards free memory, the next round writes the snapshot, and the charge is given back.
TEST(Persistence, ASnapshotThatDoesNotFitTheBudgetIsPostponedAndItsRecordsKept) {
  FaultInjectionFs fs;
  ManualClock clock;
  ServiceLimits limits;
  limits.max_memory_bytes = int64_t{8} << 20;
  constexpr char kDiagonal[] =
      "policy { linucb { dimension: 256 covariance: COVARIANCE_DIAGONAL } } "
      "pending { capacity: 1000000 reward_wait_ms: 86400000 }";
  v1::SelectRequest sel;
  sel.set_instance("p");
  auto* c = sel.add_candidates();
  for (int j = 0; j < 256; ++j) c->add_values(0.01 * (j % 17));
  std::vector<std::string> events;
  std::string live;
  {
    Node node(&fs, &clock, limits);
    v1::Instance out;
    ASSERT_TRUE(node.svc.CreateInstance(Create("p", kDiagonal), &out).ok());
    for (;;) {
      v1::Decision d;
      const absl::Status s = node.svc.Select(sel, &d);
      if (!s.ok()) {
        ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
        break;
      }
      events.push_back(d.event_id());
      ASSERT_LT(events.size(), 100'000u) << "the budget never refused a Select";
    }
    MemoryBudget& budget = *node.svc.memory();
    ASSERT_GT(budget.used(MemoryKind::kPending), budget.limit() * 2 / 5);
    auto round = node.persistence->SnapshotAll();
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(*round, 0);
    EXPECT_EQ(budget.refusals(MemoryOp::kSnapshot), 1);
    EXPECT_EQ(budget.used(MemoryKind::kSnapshot), 0);
    EXPECT_EQ(fs.Data("/data/snapshots/p.snap"), nullptr);
    live = Exported(node.svc, "p");
  }
  // Nothing was compacted: the journal alone rebuilds the instance.
  Node restarted(&fs, &clock, limits);
  EXPECT_EQ(restarted.report.snapshots_loaded, 0);
  ASSERT_EQ(Exported(restarted.svc, "p"), live);
  // Rewards free three quarters of the decisions: the next round fits, is written and compacts.
  for (size_t i = 0; i < events.size() * 3 / 4; ++i) {
    v1::UpdateRequest up;
    up.set_instance("p");
    up.set_event_id(events[i]);
    up.set_reward(1);
    v1::UpdateResponse r;
    ASSERT_TRUE(restarted.svc.Update(up, &r).ok());
  }
  MemoryBudget& budget = *restarted.svc.memory();
  auto round = restarted.persistence->SnapshotAll();
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(*round, 1);
  EXPECT_EQ(budget.refusals(MemoryOp::kSnapshot), 0);
  EXPECT_EQ(budget.used(MemoryKind::kSnapshot), 0);
  EXPECT_NE(fs.Data("/data/snapshots/p.snap"), nullptr);
  live = Exported(restarted.svc, "p");
  Node again(&fs, &clock, limits);
  EXPECT_EQ(again.report.snapshots_loaded, 1);
  EXPECT_EQ(again.report.records_replayed, 0);
  EXPECT_EQ(Exported(again.svc, "p"), live);
}

TEST(Persistence, TheFileBackendLoadsNoSingleInstance) {
  // Taking one instance over is for a backend several servers share (PostgreSQL); the file
  // backend recovers everything at start and says so.
  FaultInjectionFs fs;
  ManualClock clock;
  Node node(&fs, &clock);
  uint64_t max_seq = 0;
  auto loaded = node.persistence->LoadInstance("a", &max_seq);
  EXPECT_EQ(loaded.status(),
            absl::UnimplementedError("this storage backend recovers all instances at start"));
}

}  // namespace
}  // namespace bandit::server
