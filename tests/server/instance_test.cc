// Instance, the served instance: every change it acknowledges went through its commit path (a
// recording Storage sees one record per change, in apply order), replaying those records into a
// fresh instance rebuilds the live one byte for byte (single decisions, decision-log entries,
// batches, expiry and changes alike), refused calls journal nothing and change nothing, and a
// failed append is the call's answer. Time is a ManualClock, uids fixed.
#include "server/instance/instance.h"

#include <cmath>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "server/env/clock.h"
#include "server/instance/instance_operations.h"
#include "server/storage/snapshot_store.h"
#include "server/storage/storage.h"
#include "tests/common/deterministic_bytes.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

// Keeps every appended record (a copy: records borrow their request) and numbers them; or,
// with `fail` set, refuses every append with it.
class RecordingStorage final : public Storage {
 public:
  absl::StatusOr<RecoveryStats> Recover(const RecoverySink&) override { return RecoveryStats{}; }
  absl::StatusOr<uint64_t> Append(v1::JournalRecord* rec) override {
    if (!fail.ok()) return fail;
    rec->set_seq(++seq_);
    records.push_back(*rec);
    return seq_;
  }
  absl::StatusOr<uint64_t> AppendAll(absl::Span<v1::JournalRecord* const> recs) override {
    if (!fail.ok()) return fail;
    for (v1::JournalRecord* r : recs) {
      r->set_seq(++seq_);
      records.push_back(*r);
    }
    return seq_;
  }
  void WhenDurable(uint64_t, std::function<void(absl::Status)> done) override {
    done(absl::OkStatus());
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> BeginSnapshotRound() override { return seq_; }
  absl::Status WriteSnapshot(const v1::InstanceSnapshot&, const EncodedSnapshotFields*) override {
    return absl::OkStatus();
  }
  absl::Status RemoveSnapshot(const std::string&) override { return absl::OkStatus(); }
  absl::Status Compact(uint64_t) override { return absl::OkStatus(); }
  absl::Status health() const override { return absl::OkStatus(); }
  Durability mode() const override { return Durability::kAlways; }

  std::vector<v1::JournalRecord> records;
  absl::Status fail = absl::OkStatus();

 private:
  uint64_t seq_ = 0;
};

constexpr uint64_t kUid = 42;

// The snapshot, serialized deterministically, without where it stands in the journal (and,
// with `without_rejected`, without the count of rejected rewards, which a refused reward raises
// by design).
std::string Bytes(Instance& inst, bool without_rejected = false) {
  v1::InstanceSnapshot snap = inst.Snapshot();
  snap.clear_last_journal_seq();
  if (without_rejected) snap.mutable_stats()->clear_rejected_rewards();
  return bandit::testing::DeterministicBytes(snap);
}

struct Live {
  explicit Live(const std::string& config) {
    req = testing::Create("inst", config);
    auto made = Instance::Create(req, &clock, InstanceLimits{}, kUid);
    EXPECT_TRUE(made.ok()) << made.status();
    inst = *made;
    v1::JournalRecord creation;
    *creation.mutable_create() = req;
    EXPECT_TRUE(inst->AttachNew(&storage, creation, nullptr).ok());
  }
  // A fresh instance with every journaled record after the creation replayed into it.
  std::shared_ptr<Instance> Replayed() {
    // Replay runs at each record's time, never its clock's: the twin's clock stays at its start.
    auto twin = Instance::Create(req, &replay_clock, InstanceLimits{}, kUid);
    EXPECT_TRUE(twin.ok()) << twin.status();
    for (size_t i = 1; i < storage.records.size(); ++i) {
      absl::Status s = (*twin)->Apply(storage.records[i]);
      EXPECT_TRUE(s.ok()) << "record " << i << ": " << s;
    }
    return *twin;
  }
  v1::Decision Select(const v1::SelectRequest& req = v1::SelectRequest()) {
    v1::Decision d;
    absl::Status s = inst->Select(req, &d);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }
  absl::Status Update(const std::string& event_id, double reward) {
    v1::UpdateRequest up;
    up.set_instance("inst");
    up.set_event_id(event_id);
    up.set_reward(reward);
    v1::UpdateResponse out;
    return inst->Update(up, &out);
  }

  ManualClock clock;
  ManualClock replay_clock;
  RecordingStorage storage;
  v1::CreateInstanceRequest req;
  std::shared_ptr<Instance> inst;
};

v1::JournalRecord Change(const std::string& text) {
  v1::JournalRecord rec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &rec)) << text;
  return rec;
}

TEST(Instance, ReplayOfItsJournalRebuildsTheLiveInstance) {
  Live live(
      "policy { epsilon_greedy { epsilon: 0.3 } arms { id: \"a\" } arms { id: \"b\" } } "
      "pending { reward_wait_ms: 1000 } seed: 9");
  std::vector<std::string> unrewarded;
  for (int i = 0; i < 12; ++i) {
    v1::Decision d = live.Select();
    if (i % 4 == 0)
      unrewarded.push_back(d.event_id());
    else
      ASSERT_TRUE(live.Update(d.event_id(), d.arm_id() == "b").ok());
    live.clock.Advance(10);
  }
  ASSERT_TRUE(live.inst->Change(Change("add_arms { arms { id: \"c\" } }"), Admission()).ok());
  // Batches: two decisions under one lock, their records appended in one step.
  v1::SelectRequest one;
  const v1::SelectRequest* reqs[] = {&one, &one};
  v1::Decision d1, d2;
  v1::Decision* outs[] = {&d1, &d2};
  absl::Status statuses[2];
  live.inst->SelectBatch(reqs, outs, statuses);
  ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  EXPECT_NE(d1.event_id(), d2.event_id());
  live.clock.Advance(2000);
  EXPECT_EQ(live.inst->ExpireDue(), 5);  // 3 unrewarded singles + the batch's two: journaled
  ASSERT_TRUE(live.inst->Change(Change("remove_arms { arm_ids: \"a\" }"), Admission()).ok());
  for (int i = 0; i < 5; ++i) {
    v1::Decision d = live.Select();
    ASSERT_TRUE(live.Update(d.event_id(), 0.5).ok());
  }

  // One record per acknowledged change: creation, 12 selects, 9 updates, add_arms, 2 batch
  // selects, the expiry, remove_arms, 5 selects and 5 updates.
  EXPECT_EQ(live.storage.records.size(), 1u + 12 + 9 + 1 + 2 + 1 + 1 + 5 + 5);
  for (size_t i = 0; i < live.storage.records.size(); ++i) {
    EXPECT_EQ(live.storage.records[i].seq(), i + 1);
    EXPECT_EQ(live.storage.records[i].instance(), "inst");
    EXPECT_EQ(live.storage.records[i].uid(), kUid);
  }
  auto twin = live.Replayed();
  EXPECT_EQ(Bytes(*twin), Bytes(*live.inst));
  // And it goes on as the live one does.
  for (int i = 0; i < 10; ++i) {
    v1::Decision a = live.Select(), b;
    ASSERT_TRUE(twin->Select(v1::SelectRequest(), &b).ok());
    EXPECT_EQ(a.event_id(), b.event_id());
    EXPECT_EQ(a.arm_id(), b.arm_id());
  }
}

TEST(Instance, ReplayOfDecisionLogEntriesRebuildsTheLog) {
  // A contextual policy with the decision log on: its Selects are journaled as their log
  // entries (JournalRecord.logged_select), which replay checks byte for byte.
  Live live("policy { linucb { dimension: 2 } } decision_log { enabled: true } seed: 4");
  for (int i = 0; i < 8; ++i) {
    v1::SelectRequest req;
    for (int k = 0; k < 3; ++k) {
      auto* c = req.add_candidates();
      c->add_values(std::cos(i + k));
      c->add_values(std::sin(i * k));
    }
    v1::Decision d = live.Select(req);
    ASSERT_TRUE(live.Update(d.event_id(), d.arm_index() == 1 ? 1.0 : 0.0).ok());
  }
  int logged = 0;
  for (const auto& r : live.storage.records)
    logged += r.op_case() == v1::JournalRecord::kLoggedSelect;
  EXPECT_EQ(logged, 8);
  auto twin = live.Replayed();
  EXPECT_EQ(Bytes(*twin), Bytes(*live.inst));

  // A journal that says otherwise than the replay does is refused, not silently accepted.
  v1::JournalRecord bad = live.storage.records[1];
  ASSERT_EQ(bad.op_case(), v1::JournalRecord::kLoggedSelect);
  std::string entry = bad.logged_select();
  v1::LoggedDecision ld;
  ASSERT_TRUE(ld.ParseFromString(entry));
  ld.set_propensity(ld.propensity() / 2);
  bad.set_logged_select(ld.SerializeAsString());
  ManualClock other;
  auto fresh = Instance::Create(live.req, &other, InstanceLimits{}, kUid);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->Apply(bad).code(), StatusCode::kDataLoss);
}

// The stored form (SnapshotForStorage: pending decisions encoded, the log frozen) decodes to the
// complete snapshot, and an instance restored by consuming it (recovery) equals one restored
// from a copy, while the consumed message no longer holds its records.
TEST(Instance, TheStoredSnapshotRestoresByConsumingItsRecords) {
  Live live(
      "policy { linucb { dimension: 3 } } pending { reward_wait_ms: 100000 } "
      "decision_log { enabled: true } seed: 4");
  v1::SelectRequest sel;
  for (int k = 0; k < 3; ++k) {
    auto* c = sel.add_candidates();
    for (int j = 0; j < 3; ++j) c->add_values(0.1 * (k + 1) + 0.01 * j);
  }
  for (int i = 0; i < 30; ++i) {
    const v1::Decision d = live.Select(sel);
    if (i % 3 == 0) ASSERT_TRUE(live.Update(d.event_id(), 0.5).ok());
  }
  const v1::InstanceSnapshot whole = live.inst->Snapshot();
  ASSERT_EQ(whole.pending_size(), 20);
  ASSERT_EQ(whole.decision_log_size(), 30);
  const Instance::StorableSnapshot stored = live.inst->SnapshotForStorage();
  EXPECT_EQ(stored.state.pending_size(), 0);
  auto decoded = SnapshotStore::Decode(SnapshotStore::Encode(stored.state, stored.encoded()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(bandit::testing::DeterministicBytes(*decoded),
            bandit::testing::DeterministicBytes(whole));

  auto copied = Instance::FromSnapshot(*decoded, &live.clock, InstanceLimits{});
  ASSERT_TRUE(copied.ok()) << copied.status();
  auto consumed = Instance::FromSnapshot(std::move(*decoded), &live.clock, InstanceLimits{});
  ASSERT_TRUE(consumed.ok()) << consumed.status();
  EXPECT_EQ(decoded->pending_size(), 0);  // NOLINT(bugprone-use-after-move): consumed on purpose
  EXPECT_EQ(decoded->decision_log_size(), 0);
  EXPECT_EQ(Bytes(**consumed), Bytes(**copied));
  EXPECT_EQ(Bytes(**consumed), Bytes(*live.inst));
}

TEST(Instance, RefusedCallsJournalNothingAndChangeNothing) {
  Live live("policy { thompson { } num_arms: 3 } seed: 2");
  v1::Decision d = live.Select();
  const size_t records = live.storage.records.size();
  const std::string before = Bytes(*live.inst, /*without_rejected=*/true);
  ASSERT_EQ(live.inst->Snapshot().stats().rejected_rewards(), 0);
  EXPECT_EQ(live.Update("nope", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(live.Update(d.event_id(), NAN).code(), StatusCode::kInvalidArgument);
  v1::SelectRequest with_candidates;  // a finite-arm policy takes no candidates
  with_candidates.add_candidates()->add_values(1);
  v1::Decision unused;
  EXPECT_EQ(live.inst->Select(with_candidates, &unused).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(live.inst->Change(Change("remove_arms { arm_ids: \"9\" }"), Admission()).ok());
  EXPECT_EQ(live.inst->Change(Change("update { }"), Admission()).code(), StatusCode::kInternal);
  EXPECT_EQ(live.storage.records.size(), records);
  EXPECT_EQ(Bytes(*live.inst, /*without_rejected=*/true), before);
  // The reward for an event the instance never made is counted, though not journaled (InstanceStats
  // says rejected_rewards counts late, duplicate and unknown event ids); the NaN is not.
  EXPECT_EQ(live.inst->Snapshot().stats().rejected_rewards(), 1);
}

TEST(Instance, AFailedAppendIsTheAnswerAndADeletedInstanceRefusesEverything) {
  Live live("policy { thompson { } num_arms: 2 } seed: 3");
  v1::Decision d = live.Select();
  live.storage.fail = absl::UnavailableError("disk gone");
  v1::Decision unused;
  EXPECT_EQ(live.inst->Select(v1::SelectRequest(), &unused), absl::UnavailableError("disk gone"));
  EXPECT_EQ(live.Update(d.event_id(), 1), absl::UnavailableError("disk gone"));
  live.storage.fail = absl::OkStatus();

  const size_t records = live.storage.records.size();
  ASSERT_TRUE(live.inst->MarkDeleted().ok());
  ASSERT_EQ(live.storage.records.size(), records + 1);
  EXPECT_TRUE(live.storage.records.back().has_delete_());
  EXPECT_EQ(live.inst->Select(v1::SelectRequest(), &unused).code(), StatusCode::kNotFound);
  EXPECT_EQ(live.Update(d.event_id(), 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(live.storage.records.size(), records + 1);
}

}  // namespace
}  // namespace bandit::server
