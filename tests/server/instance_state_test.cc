// InstanceState, the pure state of one instance: a refused operation leaves its saved bytes
// equal (and the next decision the same as a twin's that was never asked); a change applied live
// and its record replayed into a twin leave the two byte-identical; a snapshot restores an
// instance that decides exactly as the original.
#include "server/instance/instance_state.h"

#include <cmath>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/registry.h"
#include "server/instance/instance_operations.h"
#include "tests/common/deterministic_bytes.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

constexpr char kArms[] =
    "policy { epsilon_greedy { epsilon: 0.3 } arms { id: \"a\" } arms { id: \"b\" } "
    "arms { id: \"c\" } } pending { reward_wait_ms: 1000 } seed: 11";
constexpr int64_t kT0 = 1'700'000'000'000;

std::unique_ptr<InstanceState> Make(const char* config = kArms, uint64_t uid = 3) {
  const v1::CreateInstanceRequest req = testing::Create("inst", config);
  auto s = InstanceState::Create(req.name(), &req.config(), InstanceLimits{}, uid);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// The saved state, serialized deterministically: equal bytes, equal states.
std::string Bytes(const InstanceState& s) {
  v1::InstanceSnapshot snap;
  s.Save(&snap);
  return bandit::testing::DeterministicBytes(snap);
}

// A Select's record names its event and, journaled as its decision log entry, borrows a
// per-thread copy of it; the holder hands it back before the record is destroyed, as
// Instance::Commit does.
struct Borrowed {
  v1::JournalRecord rec;
  ~Borrowed() {
    if (rec.has_logged_select()) (void)rec.release_logged_select();
  }
};

// A Select as Instance runs it: the request translated, the context checked, then the
// decision. With `replay_event_id`, as recovery replays a journaled Select.
absl::Status Select(InstanceState& s, const v1::SelectRequest& req, int64_t now, v1::Decision* out,
                    const std::string* replay_event_id = nullptr) {
  SelectCall call;
  if (auto st = ParseSelect(req, InstanceLimits{}, s.feature_space().get(), s.TakesSparseInputs(),
                            Policy::SlotIndex::kPerDecision, &call);
      !st.ok())
    return st;
  auto ctx = s.SelectContextFor(call);
  if (!ctx.ok()) return ctx.status();
  Borrowed b;
  return s.Select(*ctx, call, now, out, &b.rec, replay_event_id);
}

absl::Status Update(InstanceState& s, const v1::UpdateRequest& req, int64_t now) {
  UpdateCall call;
  if (auto st = ParseUpdate(req, InstanceLimits{}, &call); !st.ok()) return st;
  if (auto st = s.CheckTarget(call); !st.ok()) return st;
  v1::UpdateResponse out;
  return s.Update(call, now, &out);
}

v1::UpdateRequest Reward(const std::string& event_id, double reward) {
  v1::UpdateRequest up;
  up.set_instance("inst");
  up.set_event_id(event_id);
  up.set_reward(reward);
  return up;
}

v1::JournalRecord Record(const std::string& text) {
  v1::JournalRecord rec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &rec)) << text;
  return rec;
}

TEST(InstanceState, RefusedOperationsLeaveTheSavedBytesEqual) {
  auto s = Make();
  auto twin = Make();
  v1::Decision d;
  ASSERT_TRUE(Select(*s, v1::SelectRequest(), kT0, &d).ok());
  v1::Decision td;
  ASSERT_TRUE(Select(*twin, v1::SelectRequest(), kT0, &td).ok());
  const std::string before = Bytes(*s);
  ASSERT_EQ(before, Bytes(*twin));

  const Admission admission;
  struct Refusal {
    std::string record;
    StatusCode code;
  };
  for (const Refusal& r : std::vector<Refusal>{
           {"add_arms { arms { id: \"b\" } }", StatusCode::kInvalidArgument},
           // All or nothing: the valid "d" is not added either.
           {"add_arms { arms { id: \"d\" } arms { id: \"d\" } }", StatusCode::kInvalidArgument},
           {"add_arms { arms { id: \"no spaces\" } }", StatusCode::kInvalidArgument},
           {"remove_arms { arm_ids: \"zz\" }", StatusCode::kNotFound},
           {"configure { reward_wait_ms: -5 }", StatusCode::kInvalidArgument},
           {"configure { epsilon: 1.5 }", StatusCode::kInvalidArgument},
           {"activate { event_id: \"never-made\" }", StatusCode::kNotFound},
       }) {
    v1::JournalRecord rec = Record(r.record);
    absl::Status st = ApplyChange(*s, &admission, kT0 + 1, &rec);
    EXPECT_EQ(st.code(), r.code) << r.record << ": " << st;
    EXPECT_EQ(Bytes(*s), before) << r.record << " changed the state";
  }

  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Update(*s, Reward(d.event_id(), nan), kT0 + 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Update(*s, Reward(d.event_id(), INFINITY), kT0 + 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Update(*s, Reward("not-an-event", 1), kT0 + 1).code(), StatusCode::kNotFound);
  v1::SelectRequest dense;  // candidates for a policy over its own arm set
  dense.add_candidates()->add_values(1.0);
  EXPECT_EQ(Select(*s, dense, kT0 + 1, &d).code(), StatusCode::kInvalidArgument);
  v1::SelectRequest all_excluded;
  for (const char* id : {"a", "b", "c"}) all_excluded.add_excluded_actions(id);
  EXPECT_FALSE(Select(*s, all_excluded, kT0 + 1, &d).ok());
  EXPECT_EQ(Bytes(*s), before);

  // And the refusals drew nothing from the random engine: the next decisions equal the twin's.
  for (int i = 0; i < 20; ++i) {
    v1::Decision a, b;
    ASSERT_TRUE(Select(*s, v1::SelectRequest(), kT0 + 2 + i, &a).ok());
    ASSERT_TRUE(Select(*twin, v1::SelectRequest(), kT0 + 2 + i, &b).ok());
    EXPECT_EQ(a.arm_id(), b.arm_id());
    EXPECT_EQ(a.propensity(), b.propensity());
    EXPECT_EQ(a.event_id(), b.event_id());
  }
}

TEST(InstanceState, AChangeAppliedLiveAndItsRecordReplayedLeaveEqualStates) {
  auto live = Make();
  auto replayed = Make();
  const Admission admission;
  int64_t now = kT0;
  auto play = [&](int rounds) {
    for (int i = 0; i < rounds; ++i, ++now) {
      v1::Decision d, r;
      ASSERT_TRUE(Select(*live, v1::SelectRequest(), now, &d).ok());
      // Replay reproduces the journaled event id, or fails.
      ASSERT_TRUE(Select(*replayed, v1::SelectRequest(), now, &r, &d.event_id()).ok());
      ASSERT_EQ(d.arm_id(), r.arm_id());
      const v1::UpdateRequest up = Reward(d.event_id(), d.arm_id() == "b" ? 1.0 : 0.25);
      ASSERT_TRUE(Update(*live, up, now).ok());
      ASSERT_TRUE(Update(*replayed, up, now).ok());
    }
  };
  play(10);
  for (const char* text : {
           "add_arms { arms { id: \"d\" } arms { id: \"e\" } }",
           "remove_arms { arm_ids: \"a\" }",
           "configure { epsilon: 0.05 reward_wait_ms: 500 }",
           "reset: true",
       }) {
    v1::JournalRecord rec = Record(text);
    ASSERT_TRUE(ApplyChange(*live, &admission, now, &rec).ok()) << text;
    // Replay: the same apply, of the record as the live apply left it, without the server's
    // admission limits, at the recorded time.
    v1::JournalRecord journaled = rec;
    ASSERT_TRUE(ApplyChange(*replayed, /*admission=*/nullptr, now, &journaled).ok()) << text;
    EXPECT_EQ(Bytes(*live), Bytes(*replayed)) << text;
    play(5);
  }
  EXPECT_EQ(Bytes(*live), Bytes(*replayed));
  v1::InstanceSnapshot snap;
  live->Save(&snap);
  // The arm set after the changes: {b, c, d, e}, in slot order.
  ASSERT_EQ(snap.config().policy().arms_size(), 4);
  EXPECT_EQ(snap.config().policy().arms(0).id(), "b");
  EXPECT_EQ(snap.config().policy().arms(3).id(), "e");
}

TEST(InstanceState, ASnapshotRestoresAnInstanceThatDecidesAsTheOriginal) {
  auto s = Make();
  int64_t now = kT0;
  std::vector<std::string> open;  // decisions left pending across the snapshot
  for (int i = 0; i < 30; ++i, ++now) {
    v1::Decision d;
    ASSERT_TRUE(Select(*s, v1::SelectRequest(), now, &d).ok());
    if (i % 3 == 0) {
      open.push_back(d.event_id());
    } else {
      ASSERT_TRUE(Update(*s, Reward(d.event_id(), i % 2), now).ok());
    }
  }
  v1::InstanceSnapshot snap;
  s->Save(&snap);
  auto restored = InstanceState::FromSnapshot(snap, InstanceLimits{});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(Bytes(**restored), Bytes(*s));
  // The pending decisions survived: each takes its reward once, on both.
  for (const auto& id : open) {
    ASSERT_TRUE(Update(*s, Reward(id, 1), now).ok());
    ASSERT_TRUE(Update(**restored, Reward(id, 1), now).ok());
    EXPECT_EQ(Update(**restored, Reward(id, 1), now).code(), StatusCode::kFailedPrecondition);
  }
  for (int i = 0; i < 20; ++i, ++now) {
    v1::Decision a, b;
    ASSERT_TRUE(Select(*s, v1::SelectRequest(), now, &a).ok());
    ASSERT_TRUE(Select(**restored, v1::SelectRequest(), now, &b).ok());
    EXPECT_EQ(a.arm_id(), b.arm_id());
    EXPECT_EQ(a.propensity(), b.propensity());
    EXPECT_EQ(a.event_id(), b.event_id());
  }
}

// Every registered policy: an accepted arm change (one arm removed, one added) leaves a config
// and state whose snapshot restores (the config lists the arm set as it now is, and no count the
// policy's own config keeps can disagree with it).
TEST(InstanceState, ArmChangesKeepASnapshotThatRestores) {
  int changed = 0;
  for (const auto& r : RegisteredPolicies()) {
    for (const auto& example : r.examples) {
      const std::string config = absl::StrCat("policy { ", example.config, " } seed: 5");
      auto s = Make(config.c_str());
      ASSERT_NE(s, nullptr) << config;
      const auto& arms = s->config().policy().arms();
      if (arms.empty()) continue;
      v1::RemoveArmsRequest remove;
      remove.add_arm_ids(arms[0].id());
      v1::AddArmsRequest add;
      auto* arm = add.add_arms();
      arm->set_id("added");
      for (int j = 0; j < arms[0].features_size(); ++j) arm->add_features(0.5);
      for (bool removing : {true, false}) {
        const absl::Status st =
            removing ? s->RemoveArms(remove.arm_ids()) : s->AddArms(add.arms());
        if (!st.ok()) continue;  // a fixed arm set refuses (checked by the policy conformance)
        ++changed;
        v1::InstanceSnapshot snap;
        s->Save(&snap);
        auto restored = InstanceState::FromSnapshot(snap, InstanceLimits{});
        ASSERT_TRUE(restored.ok()) << config << (removing ? ", an arm removed: " : ", an arm added: ")
                                   << restored.status();
        EXPECT_EQ(Bytes(**restored), Bytes(*s)) << config;
      }
    }
  }
  EXPECT_GT(changed, 10);
}

// A snapshot whose config does not list an arm of its policy state, when the arms carry
// features, is refused: restored, that arm would be listed without features, and the instance's
// own next snapshot would not restore (found by fuzzing: a config arm's tag mutated away).
TEST(InstanceState, ASnapshotWhoseConfigMissesAFeaturedArmIsRefused) {
  auto s = Make(
      "policy { gp_ucb {} arms { id: 'a' features: [0, 1] } "
      "arms { id: 'b' features: [1, 0] } } seed: 5");
  ASSERT_NE(s, nullptr);
  v1::InstanceSnapshot snap;
  s->Save(&snap);
  ASSERT_TRUE(InstanceState::FromSnapshot(snap, InstanceLimits{}).ok());
  snap.mutable_config()->mutable_policy()->mutable_arms()->RemoveLast();
  auto restored = InstanceState::FromSnapshot(snap, InstanceLimits{});
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(restored.status().message()),
      ::testing::HasSubstr("has arm 'b' in its policy state but not in config.policy.arms"));
}

TEST(InstanceState, ExpiryFollowsTheRewardWaitExactly) {
  auto s = Make();  // reward_wait_ms: 1000
  v1::Decision first, second;
  ASSERT_TRUE(Select(*s, v1::SelectRequest(), kT0, &first).ok());
  ASSERT_TRUE(Select(*s, v1::SelectRequest(), kT0 + 400, &second).ok());
  v1::JournalRecord rec;
  EXPECT_EQ(s->ExpireDue(kT0 + 999, &rec), 0);  // not due before its wait has passed
  EXPECT_EQ(s->ExpireDue(kT0 + 1000, &rec), 1);
  EXPECT_TRUE(rec.has_expire());
  EXPECT_EQ(Update(*s, Reward(first.event_id(), 1), kT0 + 1001).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Update(*s, Reward(second.event_id(), 1), kT0 + 1001).ok());
  EXPECT_EQ(s->ExpireDue(kT0 + 10'000, &rec), 0);  // the second was rewarded, nothing left
}

}  // namespace
}  // namespace bandit::server
