// Learning modes and live settings through DecisionService (in process, injected clock):
// LOGGING_ONLY serves the baseline and leaves the policy's exported state byte for byte as it
// was; APPRENTICE serves the baseline, learns it as logged data exactly as a twin fed the same
// logged data, and reports estimates recomputed here from the twin's own probabilities; ONLINE
// after APPRENTICE serves the policy that learned meanwhile; ConfigureInstance keeps what was
// learned, pending decisions keep the wait and aggregation they were made under, bad settings
// are refused with exact codes and change nothing, and a crash replays into the twin.
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/rng.h"
#include "server/service/decision_service.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/file_node.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using google::protobuf::util::MessageDifferencer;
using testing::Create;
using testing::InstanceOf;
using testing::SnapshotOf;
namespace v1 = bandit::v1;

constexpr auto& kEps = testing::kFourArmEps;
constexpr auto& kArmMean = testing::kFourArmMeans;

absl::Status Configure(DecisionService& svc, const std::string& name, const std::string& text,
                       v1::Instance* out = nullptr) {
  v1::ConfigureInstanceRequest req;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &req)) << text;
  req.set_name(name);
  v1::Instance ignored;
  return svc.ConfigureInstance(req, out != nullptr ? out : &ignored);
}

v1::Decision SelectOrDie(DecisionService& svc, const std::string& name, bool scores = false) {
  v1::SelectRequest sel;
  sel.set_instance(name);
  sel.set_return_scores(scores);
  v1::Decision d;
  auto s = svc.Select(sel, &d);
  EXPECT_TRUE(s.ok()) << s;
  return d;
}

absl::Status Reward(DecisionService& svc, const std::string& name, const std::string& event,
                    double r) {
  v1::UpdateRequest up;
  up.set_instance(name);
  up.set_event_id(event);
  up.set_reward(r);
  v1::UpdateResponse resp;
  return svc.Update(up, &resp);
}

absl::Status Direct(DecisionService& svc, const std::string& name, const std::string& arm,
                    double r) {
  v1::UpdateRequest up;
  up.set_instance(name);
  up.mutable_direct()->set_arm_id(arm);
  up.set_reward(r);
  v1::UpdateResponse resp;
  return svc.Update(up, &resp);
}

class LearningModeTest : public ::testing::Test {
 protected:
  LearningModeTest() : svc_(&clock_) {}
  void CreateOrDie(const std::string& name, const std::string& config) {
    v1::Instance out;
    auto s = svc_.CreateInstance(Create(name, config), &out);
    ASSERT_TRUE(s.ok()) << s;
  }
  ManualClock clock_;
  DecisionService svc_;
};

// LOGGING_ONLY: every decision is the baseline (the first arm not excluded) with propensity 1;
// rewards join and count, and the policy's exported state does not change by a byte.
TEST_F(LearningModeTest, LoggingOnlyServesTheBaselineAndLearnsNothing) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: LOGGING_ONLY");
  // Some learned state first: the policy's state must be kept as it is, not merely left empty.
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: ONLINE").ok());
  Rng env(3);
  testing::PlayBernoulli(svc_, "a", 100, env);
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: LOGGING_ONLY").ok());
  const std::string before = SnapshotOf(svc_, "a").policy().SerializeAsString();
  const v1::InstanceStats stats_before = testing::Stats(svc_, "a");
  double reward_sum = 0;
  for (int i = 0; i < 200; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("a");
    sel.set_return_scores(true);
    if (i % 2 == 1) sel.add_excluded_actions("0");
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(sel, &d).ok());
    ASSERT_EQ(d.arm_id(), i % 2 == 1 ? "1" : "0");
    ASSERT_EQ(d.propensity(), 1.0);
    ASSERT_EQ(d.scores_size(), 4);
    for (int k = 0; k < 4; ++k) ASSERT_EQ(d.scores(k), k == d.arm_index() ? 1.0 : 0.0);
    const double r = env.Uniform() < kArmMean[d.arm_index()] ? 1.0 : 0.0;
    reward_sum += r;
    ASSERT_TRUE(Reward(svc_, "a", d.event_id(), r).ok());
  }
  EXPECT_EQ(SnapshotOf(svc_, "a").policy().SerializeAsString(), before);
  const v1::InstanceStats stats = testing::Stats(svc_, "a");
  EXPECT_EQ(stats.rounds() - stats_before.rounds(), 200);
  EXPECT_EQ(stats.updates() - stats_before.updates(), 200);
  EXPECT_DOUBLE_EQ(stats.reward_sum() - stats_before.reward_sum(), reward_sum);
  // Logged data is refused: the instance learns nothing in this mode.
  const std::string exported = testing::Exported(svc_, "a");
  auto refused = Direct(svc_, "a", "2", 1.0);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(testing::Exported(svc_, "a"), exported);
  // Not an apprentice: no estimates.
  EXPECT_FALSE(InstanceOf(svc_, "a").has_apprentice());
}

// Candidates: the baseline is the first candidate offered; an expired decision's default reward
// is not learned either.
TEST_F(LearningModeTest, LoggingOnlyOverCandidates) {
  CreateOrDie("c",
              "policy { linucb { dimension: 2 } } learning_mode: LOGGING_ONLY "
              "pending { reward_wait_ms: 1000 default_reward: 0.5 } seed: 4");
  const std::string before = SnapshotOf(svc_, "c").policy().SerializeAsString();
  for (int i = 0; i < 20; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("c");
    for (int k = 0; k < 3; ++k) {
      auto* c = sel.add_candidates();
      c->add_values(0.1 * (i + k));
      c->add_values(1.0 - 0.05 * k);
    }
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(sel, &d).ok());
    ASSERT_EQ(d.arm_index(), 0);
    ASSERT_EQ(d.propensity(), 1.0);
    if (i % 2 == 0) {
      ASSERT_TRUE(Reward(svc_, "c", d.event_id(), 1.0).ok());
    }
  }
  clock_.Advance(2000);
  const v1::InstanceStats stats = InstanceOf(svc_, "c").stats();  // expires the other ten
  EXPECT_EQ(stats.updates(), 20);
  EXPECT_EQ(stats.expired(), 10);
  EXPECT_DOUBLE_EQ(stats.reward_sum(), 10 * 1.0 + 10 * 0.5);
  EXPECT_EQ(SnapshotOf(svc_, "c").policy().SerializeAsString(), before);
}

// APPRENTICE: the baseline is served; the policy decides too (its engine advances as in a
// Select) and learns each reward of the baseline as logged data: its state equals a twin's that
// selected as often and was fed the baseline's rewards directly. The estimates are recomputed
// here from the twin's own probabilities of the baseline. Switching to ONLINE then serves the
// policy that learned meanwhile: its decisions equal the twin's.
TEST_F(LearningModeTest, ApprenticeLearnsTheBaselineAndEstimatesThePolicy) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: APPRENTICE");
  CreateOrDie("twin", kEps);
  Rng env(11);
  const int kRounds = 1500;
  double reward_sum = 0, ips_sum = 0, weight_sum = 0, imitated = 0;
  int64_t chose_baseline = 0;
  for (int i = 0; i < kRounds; ++i) {
    const v1::Decision d = SelectOrDie(svc_, "a");
    ASSERT_EQ(d.arm_id(), "0");
    ASSERT_EQ(d.propensity(), 1.0);
    const v1::Decision twin = SelectOrDie(svc_, "twin", /*scores=*/true);
    ASSERT_EQ(twin.scores_size(), 4);
    const double r = env.Uniform() < kArmMean[0] ? 1.0 : 0.0;
    const double w = twin.scores(0);  // pi(baseline|x) of the same policy state
    reward_sum += r;
    ips_sum += w * r;
    weight_sum += w;
    if (twin.arm_id() == "0") {
      ++chose_baseline;
      imitated += r;
    }
    ASSERT_TRUE(Reward(svc_, "a", d.event_id(), r).ok());
    ASSERT_TRUE(Direct(svc_, "twin", "0", r).ok());
  }
  EXPECT_TRUE(MessageDifferencer::Equals(SnapshotOf(svc_, "a").policy(),
                                         SnapshotOf(svc_, "twin").policy()));
  const v1::Instance inst = InstanceOf(svc_, "a");
  EXPECT_EQ(inst.stats().updates(), kRounds);
  ASSERT_TRUE(inst.has_apprentice());
  const v1::ApprenticeStatus& a = inst.apprentice();
  EXPECT_EQ(a.events(), kRounds);
  EXPECT_NEAR(a.reward_sum(), reward_sum, 1e-9);
  EXPECT_NEAR(a.baseline().value(), reward_sum / kRounds, 1e-12);
  EXPECT_NEAR(a.ips().value(), ips_sum / kRounds, 1e-12);
  EXPECT_NEAR(a.snips().value(), ips_sum / weight_sum, 1e-12);
  EXPECT_EQ(a.policy_chose_baseline(), chose_baseline);
  EXPECT_DOUBLE_EQ(a.imitated_reward_sum(), imitated);
  // The estimates survive an export and import.
  v1::ImportInstanceRequest imp;
  imp.set_name("copy");
  imp.set_snapshot(testing::Exported(svc_, "a"));
  v1::Instance copy;
  ASSERT_TRUE(svc_.ImportInstance(imp, &copy).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(copy.apprentice(), a));

  v1::Instance out;
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: ONLINE", &out).ok());
  EXPECT_EQ(out.config().learning_mode(), v1::ONLINE);
  for (int i = 0; i < 300; ++i) {
    const v1::Decision d = SelectOrDie(svc_, "a", true);
    const v1::Decision twin = SelectOrDie(svc_, "twin", true);
    ASSERT_EQ(d.arm_id(), twin.arm_id()) << "round " << i;
    ASSERT_EQ(d.propensity(), twin.propensity());
    const double r = env.Uniform() < kArmMean[std::stoi(d.arm_id())] ? 1.0 : 0.0;
    ASSERT_TRUE(Reward(svc_, "a", d.event_id(), r).ok());
    ASSERT_TRUE(Reward(svc_, "twin", twin.event_id(), r).ok());
  }
  // Events of ONLINE decisions are not the apprentice's.
  EXPECT_EQ(InstanceOf(svc_, "a").apprentice().events(), kRounds);
}

// A decision is learned as the mode it was made under says, whatever the mode when its reward
// comes.
TEST_F(LearningModeTest, PendingDecisionsKeepTheirMode) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: LOGGING_ONLY");
  const v1::Decision logged = SelectOrDie(svc_, "a");
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: ONLINE").ok());
  const std::string before = SnapshotOf(svc_, "a").policy().SerializeAsString();
  ASSERT_TRUE(Reward(svc_, "a", logged.event_id(), 1.0).ok());
  EXPECT_EQ(SnapshotOf(svc_, "a").policy().SerializeAsString(), before);
  const v1::Decision online = SelectOrDie(svc_, "a");
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: LOGGING_ONLY").ok());
  const std::string mid = SnapshotOf(svc_, "a").policy().SerializeAsString();
  ASSERT_TRUE(Reward(svc_, "a", online.event_id(), 1.0).ok());
  EXPECT_NE(SnapshotOf(svc_, "a").policy().SerializeAsString(), mid);
  EXPECT_EQ(testing::Stats(svc_, "a").updates(), 2);
}

// A multi-slot Select over the instance's arm set: slot k is "s<k>" with baseline
// baselines[k]; `slot_excluded` (if not empty) is excluded for slot 1.
v1::SelectRequest SlotsRequest(const std::string& name, const std::vector<std::string>& baselines,
                               const std::string& slot_excluded = "") {
  v1::SelectRequest sel;
  sel.set_instance(name);
  sel.set_return_scores(true);
  for (size_t k = 0; k < baselines.size(); ++k) {
    v1::Slot* slot = sel.add_slots();
    slot->set_id(absl::StrCat("s", k));
    slot->set_baseline_action(baselines[k]);
    if (k == 1 && !slot_excluded.empty()) slot->add_excluded_actions(slot_excluded);
  }
  return sel;
}

absl::Status SlotReward(DecisionService& svc, const std::string& name, const std::string& event,
                        const std::string& slot, double r) {
  v1::UpdateRequest up;
  up.set_instance(name);
  up.set_event_id(event);
  up.set_slot_id(slot);
  up.set_reward(r);
  v1::UpdateResponse resp;
  return svc.Update(up, &resp);
}

// The apprentice figures of `events` recomputed from the policy's probabilities of the
// baselines (w), the rewards (r) and whether the policy chose the baseline.
struct ApprenticeSums {
  int64_t events = 0, chose = 0;
  double reward = 0, ips = 0, weight = 0, imitated = 0;
  void Add(double w, double r, bool chose_baseline) {
    ++events;
    reward += r;
    ips += w * r;
    weight += w;
    if (chose_baseline) {
      ++chose;
      imitated += r;
    }
  }
  void Expect(const v1::ApprenticeStatus& a, const std::string& what) const {
    EXPECT_EQ(a.events(), events) << what;
    EXPECT_NEAR(a.reward_sum(), reward, 1e-9) << what;
    EXPECT_NEAR(a.baseline().value(), reward / events, 1e-12) << what;
    EXPECT_NEAR(a.ips().value(), ips / events, 1e-12) << what;
    EXPECT_NEAR(a.snips().value(), ips / weight, 1e-12) << what;
    EXPECT_EQ(a.policy_chose_baseline(), chose) << what;
    EXPECT_DOUBLE_EQ(a.imitated_reward_sum(), imitated) << what;
  }
};

// APPRENTICE over multi-slot decisions: each slot serves its baseline (propensity 1); the
// policy decides each slot among the actions the slots before it left (the baselines served),
// and learns each slot's reward as logged data: its state equals a twin's that made the same
// decisions as single Selects (excluding the earlier slots' baselines) and was fed the
// baselines' rewards directly. The estimates, per slot position and pooled, are recomputed here
// from the twin's own probabilities.
TEST_F(LearningModeTest, ApprenticeServesEachSlotsBaselineAndLearnsItsReward) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: APPRENTICE");
  CreateOrDie("twin", kEps);
  Rng env(21);
  const int kRounds = 600;
  ApprenticeSums pooled, per_slot[3];
  for (int i = 0; i < kRounds; ++i) {
    const std::vector<std::string> baselines = {absl::StrCat(i % 4), absl::StrCat((i + 1) % 4),
                                                absl::StrCat((i + 2) % 4)};
    const std::string slot_excluded = i % 2 == 1 ? absl::StrCat((i + 3) % 4) : "";
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(SlotsRequest("a", baselines, slot_excluded), &d).ok());
    ASSERT_EQ(d.slots_size(), 3);
    std::vector<std::string> taken;
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(d.slots(k).action_id(), baselines[k]) << "round " << i << " slot " << k;
      ASSERT_EQ(d.slots(k).propensity(), 1.0);
      ASSERT_EQ(d.slots(k).ranking(0).id(), baselines[k]);
      ASSERT_EQ(d.slots(k).ranking(0).probability(), 1.0);
      // The twin's decision over what slot k was offered.
      v1::SelectRequest single;
      single.set_instance("twin");
      single.set_return_scores(true);
      for (const std::string& t : taken) single.add_excluded_actions(t);
      if (k == 1 && !slot_excluded.empty()) single.add_excluded_actions(slot_excluded);
      v1::Decision twin;
      ASSERT_TRUE(svc_.Select(single, &twin).ok());
      ASSERT_EQ(twin.scores_size(), 4);
      const int b = std::stoi(baselines[k]);
      const double w = twin.scores(b);  // pi(baseline | x, the earlier slots' baselines)
      const double r = env.Uniform() < kArmMean[b] ? 1.0 : 0.0;
      pooled.Add(w, r, twin.arm_id() == baselines[k]);
      per_slot[k].Add(w, r, twin.arm_id() == baselines[k]);
      taken.push_back(baselines[k]);
      ASSERT_TRUE(SlotReward(svc_, "a", d.event_id(), absl::StrCat("s", k), r).ok());
      ASSERT_TRUE(Direct(svc_, "twin", baselines[k], r).ok());
    }
  }
  EXPECT_TRUE(MessageDifferencer::Equals(SnapshotOf(svc_, "a").policy(),
                                         SnapshotOf(svc_, "twin").policy()));
  const v1::Instance inst = InstanceOf(svc_, "a");
  EXPECT_EQ(inst.stats().rounds(), kRounds);
  EXPECT_EQ(inst.stats().updates(), 3 * kRounds);
  ASSERT_EQ(inst.stats().slot_positions_size(), 3);
  ASSERT_TRUE(inst.has_apprentice());
  pooled.Expect(inst.apprentice(), "pooled");
  ASSERT_EQ(inst.apprentice().slots_size(), 3);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(inst.apprentice().slots(k).position(), k);
    EXPECT_EQ(inst.apprentice().slots(k).slots_size(), 0);
    per_slot[k].Expect(inst.apprentice().slots(k), absl::StrCat("slot ", k));
    EXPECT_EQ(inst.stats().slot_positions(k).updates(), kRounds);
  }
  // The policy does not always agree with the baselines (the estimates are not trivial).
  EXPECT_GT(pooled.chose, 0);
  EXPECT_LT(pooled.chose, 3 * kRounds);
  // The figures survive an export and import.
  v1::ImportInstanceRequest imp;
  imp.set_name("copy");
  imp.set_snapshot(testing::Exported(svc_, "a"));
  v1::Instance copy;
  ASSERT_TRUE(svc_.ImportInstance(imp, &copy).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(copy.apprentice(), inst.apprentice()));
  // ONLINE then serves the policy that learned meanwhile: its slots decide as the twin does.
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: ONLINE").ok());
  for (int i = 0; i < 50; ++i) {
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(SlotsRequest("a", {"0", "1"}), &d).ok());
    std::vector<std::string> taken;
    for (int k = 0; k < 2; ++k) {
      v1::SelectRequest single;
      single.set_instance("twin");
      single.set_return_scores(true);
      for (const std::string& t : taken) single.add_excluded_actions(t);
      v1::Decision twin;
      ASSERT_TRUE(svc_.Select(single, &twin).ok());
      ASSERT_EQ(d.slots(k).action_id(), twin.arm_id()) << "round " << i << " slot " << k;
      ASSERT_DOUBLE_EQ(d.slots(k).propensity(), twin.propensity());
      taken.push_back(twin.arm_id());
    }
  }
  // Events of ONLINE decisions are not the apprentice's.
  EXPECT_EQ(InstanceOf(svc_, "a").apprentice().events(), 3 * kRounds);
}

// LOGGING_ONLY over multi-slot decisions: each slot serves its baseline; rewards join and
// count per slot, and the policy's exported state does not change by a byte.
TEST_F(LearningModeTest, LoggingOnlyServesEachSlotsBaselineAndLearnsNothing) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: LOGGING_ONLY");
  const std::string before = SnapshotOf(svc_, "a").policy().SerializeAsString();
  double reward_sum = 0;
  for (int i = 0; i < 100; ++i) {
    const std::vector<std::string> baselines = {absl::StrCat((i + 3) % 4), absl::StrCat(i % 4)};
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(SlotsRequest("a", baselines), &d).ok());
    ASSERT_EQ(d.slots_size(), 2);
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(d.slots(k).action_id(), baselines[k]);
      ASSERT_EQ(d.slots(k).propensity(), 1.0);
      const double r = 0.25 * k + 0.01 * i;
      reward_sum += r;
      ASSERT_TRUE(SlotReward(svc_, "a", d.event_id(), absl::StrCat("s", k), r).ok());
    }
  }
  EXPECT_EQ(SnapshotOf(svc_, "a").policy().SerializeAsString(), before);
  const v1::Instance inst = InstanceOf(svc_, "a");
  EXPECT_EQ(inst.stats().updates(), 200);
  EXPECT_EQ(inst.stats().pending(), 0);
  EXPECT_NEAR(inst.stats().reward_sum(), reward_sum, 1e-9);
  ASSERT_EQ(inst.stats().slot_positions_size(), 2);
  EXPECT_EQ(inst.stats().slot_positions(1).updates(), 100);
  EXPECT_FALSE(inst.has_apprentice());
}

// Outside ONLINE every slot needs its baseline; a baseline excluded for its slot or repeated by
// another slot is refused in every mode. Exact codes and messages, nothing changed.
TEST_F(LearningModeTest, SlotBaselinesAreCheckedBeforeAnythingChanges) {
  CreateOrDie("a", std::string(kEps) + " learning_mode: APPRENTICE");
  CreateOrDie("l", std::string(kEps) + " learning_mode: LOGGING_ONLY");
  struct Case {
    const char* name;
    v1::SelectRequest req;
    const char* message;
  };
  v1::SelectRequest missing = SlotsRequest("a", {"1", ""});
  v1::SelectRequest missing_l = SlotsRequest("l", {"", "1"});
  v1::SelectRequest excluded = SlotsRequest("a", {"1", "2"}, "2");
  v1::SelectRequest repeated = SlotsRequest("a", {"1", "1"});
  const Case cases[] = {
      {"a", missing,
       "slots[1].baseline_action is empty, expected the action to serve for slot 's1': instance "
       "'a' is in APPRENTICE mode, which serves each slot's baseline"},
      {"l", missing_l,
       "slots[0].baseline_action is empty, expected the action to serve for slot 's0': instance "
       "'l' is in LOGGING_ONLY mode, which serves each slot's baseline"},
      {"a", excluded, "slots[1].baseline_action '2' is excluded for that slot"},
      {"a", repeated,
       "slots[1].baseline_action '1' is also slots[0]'s baseline, expected a different one per "
       "slot"},
  };
  for (const Case& c : cases) {
    const std::string before = testing::Exported(svc_, c.name);
    v1::Decision d;
    auto s = svc_.Select(c.req, &d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(testing::Exported(svc_, c.name), before) << c.message;
  }
  // ONLINE serves slots without baselines.
  ASSERT_TRUE(Configure(svc_, "a", "learning_mode: ONLINE").ok());
  v1::Decision d;
  EXPECT_TRUE(svc_.Select(missing, &d).ok());
}

// The wait and the aggregation stay with the decisions made under them; the expiry default is
// the one in force at expiry.
TEST_F(LearningModeTest, PendingDecisionsKeepTheirWaitAndAggregation) {
  CreateOrDie("a",
              "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 77 "
              "pending { reward_wait_ms: 1000 reward_aggregation: SUM default_reward: 0.25 }");
  const int64_t t0 = clock_.NowMs();
  const v1::Decision old_d = SelectOrDie(svc_, "a");
  EXPECT_EQ(old_d.expires_at_ms(), t0 + 1000);
  v1::Instance out;
  ASSERT_TRUE(Configure(svc_, "a", "reward_wait_ms: 5000 reward_aggregation: EARLIEST", &out).ok());
  EXPECT_EQ(out.config().pending().reward_wait_ms(), 5000);
  EXPECT_EQ(out.config().pending().reward_aggregation(), v1::EARLIEST);
  const v1::Decision new_d = SelectOrDie(svc_, "a");
  EXPECT_EQ(new_d.expires_at_ms(), t0 + 5000);
  // The old decision still sums: both rewards are kept and learned together at its deadline.
  ASSERT_TRUE(Reward(svc_, "a", old_d.event_id(), 1.0).ok());
  ASSERT_TRUE(Reward(svc_, "a", old_d.event_id(), 2.0).ok());
  EXPECT_EQ(testing::Stats(svc_, "a").updates(), 0);
  // Kept through an export and import.
  v1::ImportInstanceRequest imp;
  imp.set_name("copy");
  imp.set_snapshot(testing::Exported(svc_, "a"));
  ASSERT_TRUE(svc_.ImportInstance(imp, &out).ok());
  // The new one takes its first reward at once and refuses a second.
  ASSERT_TRUE(Reward(svc_, "a", new_d.event_id(), 1.0).ok());
  EXPECT_EQ(Reward(svc_, "a", new_d.event_id(), 1.0).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Configure(svc_, "a", "default_reward: 0.75").ok());
  ASSERT_TRUE(Configure(svc_, "copy", "default_reward: 0.75").ok());
  const v1::Decision third = SelectOrDie(svc_, "a");  // expires at t0 + 5000 with 0.75
  (void)third;
  clock_.Advance(1000);
  v1::InstanceStats s = InstanceOf(svc_, "a").stats();  // applies expiry
  EXPECT_EQ(s.updates(), 2);
  EXPECT_DOUBLE_EQ(s.reward_sum(), 3.0 + 1.0);
  clock_.Advance(4000);
  s = InstanceOf(svc_, "a").stats();
  EXPECT_EQ(s.updates(), 3);
  EXPECT_DOUBLE_EQ(s.reward_sum(), 3.0 + 1.0 + 0.75);
  // The copy's old decision summed too.
  const v1::InstanceStats c = InstanceOf(svc_, "copy").stats();
  EXPECT_EQ(c.updates(), 2);  // old_d at its deadline (3.0), new_d's default (0.75)
  EXPECT_DOUBLE_EQ(c.reward_sum(), 3.0 + 0.75);
}

// A new epsilon keeps what was learned: the probabilities are then the closed form's with it.
TEST_F(LearningModeTest, EpsilonChangesLive) {
  CreateOrDie("a", kEps);
  Rng env(2);
  testing::PlayBernoulli(svc_, "a", 400, env);
  const v1::InstanceSnapshot before = SnapshotOf(svc_, "a");
  v1::Instance out;
  ASSERT_TRUE(Configure(svc_, "a", "epsilon: 0.05", &out).ok());
  EXPECT_DOUBLE_EQ(out.config().policy().epsilon_greedy().epsilon(), 0.05);
  EXPECT_TRUE(MessageDifferencer::Equals(SnapshotOf(svc_, "a").policy(), before.policy()));
  const v1::Decision d = SelectOrDie(svc_, "a", true);
  ASSERT_EQ(d.scores_size(), 4);
  int best = 0;
  for (int k = 1; k < 4; ++k)
    if (d.scores(k) > d.scores(best)) best = k;
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(d.scores(k), 0.05 / 4 + (k == best ? 0.95 : 0.0), 1e-12) << k;
  // A policy without an epsilon refuses one.
  CreateOrDie("u", "policy { ucb1 {} num_arms: 3 }");
  EXPECT_EQ(Configure(svc_, "u", "epsilon: 0.1").code(), StatusCode::kFailedPrecondition);
}

// Bad settings: exact codes, and nothing changes (not even the settings that were valid).
TEST_F(LearningModeTest, BadSettingsChangeNothing) {
  CreateOrDie("a", kEps);
  CreateOrDie("k",
              "policy { oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } "
              "random_features: 8 } } seed: 3");
  SelectOrDie(svc_, "a");
  const std::string before = testing::Exported(svc_, "a");
  struct Case {
    const char* name;
    const char* text;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"a", "", StatusCode::kInvalidArgument,
       "no setting is set, expected at least one of reward_wait_ms, on_expiry, default_reward, "
       "reward_aggregation, epsilon, learning_mode, auto_optimization"},
      {"a", "reward_wait_ms: 0 learning_mode: APPRENTICE", StatusCode::kInvalidArgument,
       "reward_wait_ms is 0, expected 1..604800000 (7 days)"},
      {"a", "reward_wait_ms: 604800001", StatusCode::kInvalidArgument,
       "reward_wait_ms is 604800001, expected 1..604800000 (7 days)"},
      {"a", "default_reward: inf", StatusCode::kInvalidArgument,
       "default_reward is inf, expected a finite number of magnitude at most 1e+100"},
      {"a", "default_reward: 1e101", StatusCode::kInvalidArgument,
       "default_reward is 1e+101, expected a finite number of magnitude at most 1e+100"},
      {"a", "learning_mode: APPRENTICE epsilon: 1.5", StatusCode::kInvalidArgument,
       "epsilon is 1.5, expected a number in [0, 1]"},
      {"a", "on_expiry: 9", StatusCode::kInvalidArgument,
       "on_expiry is 9, expected APPLY_DEFAULT or DROP"},
      {"a", "reward_aggregation: 7", StatusCode::kInvalidArgument,
       "reward_aggregation is 7, expected EARLIEST or SUM"},
      {"a", "learning_mode: 5", StatusCode::kInvalidArgument,
       "learning_mode is 5, expected ONLINE, APPRENTICE or LOGGING_ONLY"},
      {"k", "learning_mode: APPRENTICE", StatusCode::kFailedPrecondition,
       "learning_mode is APPRENTICE, expected ONLINE for policy 'oks': it decides over an input "
       "x, with no baseline action to serve"},
      {"missing", "learning_mode: APPRENTICE", StatusCode::kNotFound, nullptr},
  };
  for (const Case& c : cases) {
    const std::string k_before = testing::Exported(svc_, "k");
    auto s = Configure(svc_, c.name, c.text);
    EXPECT_EQ(s.code(), c.code) << c.text << ": " << s;
    if (c.message != nullptr) {
      EXPECT_EQ(s.message(), c.message) << c.text;
    }
    EXPECT_EQ(testing::Exported(svc_, "a"), before) << c.text;
    EXPECT_EQ(testing::Exported(svc_, "k"), k_before) << c.text;
  }
  // At creation too.
  v1::Instance out;
  auto s = svc_.CreateInstance(Create("k2",
                                      "policy { oks { dimension: 2 kernels { kind: GAUSSIAN "
                                      "bandwidth: 1 } random_features: 8 } } "
                                      "learning_mode: LOGGING_ONLY"),
                               &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(),
            "config.learning_mode is LOGGING_ONLY, expected ONLINE for policy 'oks': it decides "
            "over an input x, with no baseline action to serve");
}

// Every change of mode and setting is journaled: after a crash the instance replays into a twin
// that made the same calls in memory, and both continue alike.
TEST(LearningModeReplay, ReplaysExactlyAfterACrash) {
  using Node = testing::FileNode;
  ManualClock clock;
  FaultInjectionFs fs;
  DecisionService twin(&clock);
  const std::string config = std::string(kEps) + " pending { reward_wait_ms: 100000 }";
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("x", config), &out).ok());
  Rng env_a(9), env_t(9);
  auto play = [&](DecisionService& svc, Rng& env, int rounds) {
    std::vector<std::string> arms;
    for (int i = 0; i < rounds; ++i) {
      const v1::Decision d = SelectOrDie(svc, "x");
      arms.push_back(d.arm_id());
      const double r = env.Uniform() < kArmMean[std::stoi(d.arm_id())] ? 1.0 : 0.0;
      EXPECT_TRUE(Reward(svc, "x", d.event_id(), r).ok());
    }
    return arms;
  };
  const char* steps[] = {"learning_mode: APPRENTICE", "epsilon: 0.1 reward_wait_ms: 50000",
                         "learning_mode: LOGGING_ONLY reward_aggregation: SUM",
                         "learning_mode: APPRENTICE reward_aggregation: EARLIEST"};
  {
    Node a(&fs, &clock);
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", config), &out).ok());
    ASSERT_EQ(play(a.svc, env_a, 40), play(twin, env_t, 40));
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(Configure(a.svc, "x", steps[k]).ok()) << steps[k];
      ASSERT_TRUE(Configure(twin, "x", steps[k]).ok()) << steps[k];
      ASSERT_EQ(play(a.svc, env_a, 40), play(twin, env_t, 40)) << steps[k];
      if (k == 1) {  // then journal replay from a snapshot
        ASSERT_TRUE(a.persistence->SnapshotAll().ok());
      }
    }
    // One decision pending across the crash.
    const v1::Decision pending_a = SelectOrDie(a.svc, "x");
    const v1::Decision pending_t = SelectOrDie(twin, "x");
    ASSERT_EQ(pending_a.arm_id(), pending_t.arm_id());
    ASSERT_TRUE(a.persistence->storage()->Flush().ok());
    fs.Crash();
  }
  Node b(&fs, &clock);
  const v1::InstanceSnapshot got = SnapshotOf(b.svc, "x");
  const v1::InstanceSnapshot want = SnapshotOf(twin, "x");
  EXPECT_TRUE(MessageDifferencer::Equals(got.policy(), want.policy()));
  EXPECT_TRUE(MessageDifferencer::Equals(got.config(), want.config()));
  EXPECT_TRUE(MessageDifferencer::Equals(got.apprentice(), want.apprentice()));
  EXPECT_TRUE(MessageDifferencer::Equals(got.stats(), want.stats()));
  EXPECT_EQ(got.config().learning_mode(), v1::APPRENTICE);
  EXPECT_GT(got.apprentice().estimators().events(), 0);
  ASSERT_TRUE(Configure(b.svc, "x", "learning_mode: ONLINE").ok());
  ASSERT_TRUE(Configure(twin, "x", "learning_mode: ONLINE").ok());
  EXPECT_EQ(play(b.svc, env_a, 100), play(twin, env_t, 100));
}

// Multi-slot decisions in APPRENTICE mode are journaled and replayed exactly: after a crash
// (one decision pending across it, one slot of it rewarded) the instance equals a twin that
// made the same calls in memory, apprentice figures per slot included, and both continue alike.
TEST(LearningModeReplay, MultiSlotApprenticeReplaysExactlyAfterACrash) {
  using Node = testing::FileNode;
  ManualClock clock;
  FaultInjectionFs fs;
  DecisionService twin(&clock);
  const std::string config = std::string(kEps) + " learning_mode: APPRENTICE";
  v1::Instance out;
  ASSERT_TRUE(twin.CreateInstance(Create("x", config), &out).ok());
  Rng env_a(5), env_t(5);
  // Rounds of 3-slot decisions; returns the served choices; the last one's event is left with
  // its first slot rewarded only.
  auto play = [&](DecisionService& svc, Rng& env, int rounds, std::string* open_event) {
    std::vector<std::string> served;
    for (int i = 0; i < rounds; ++i) {
      v1::Decision d;
      EXPECT_TRUE(svc.Select(SlotsRequest("x", {absl::StrCat((i + 1) % 4), absl::StrCat(i % 4),
                                                absl::StrCat((i + 2) % 4)}),
                             &d)
                      .ok());
      for (int k = 0; k < d.slots_size(); ++k) {
        served.push_back(d.slots(k).action_id());
        const double r = env.Uniform() < kArmMean[std::stoi(d.slots(k).action_id())] ? 1.0 : 0.0;
        if (i + 1 < rounds || k == 0) {
          EXPECT_TRUE(SlotReward(svc, "x", d.event_id(), d.slots(k).slot_id(), r).ok());
        }
      }
      *open_event = d.event_id();
    }
    return served;
  };
  std::string open_a, open_t;
  {
    Node a(&fs, &clock);
    ASSERT_TRUE(a.svc.CreateInstance(Create("x", config), &out).ok());
    ASSERT_EQ(play(a.svc, env_a, 30, &open_a), play(twin, env_t, 30, &open_t));
    ASSERT_TRUE(a.persistence->SnapshotAll().ok());  // then journal replay from a snapshot
    ASSERT_EQ(play(a.svc, env_a, 30, &open_a), play(twin, env_t, 30, &open_t));
    ASSERT_TRUE(a.persistence->storage()->Flush().ok());
    fs.Crash();
  }
  Node b(&fs, &clock);
  const v1::InstanceSnapshot got = SnapshotOf(b.svc, "x");
  const v1::InstanceSnapshot want = SnapshotOf(twin, "x");
  EXPECT_TRUE(MessageDifferencer::Equals(got.policy(), want.policy()));
  EXPECT_TRUE(MessageDifferencer::Equals(got.apprentice(), want.apprentice()));
  EXPECT_TRUE(MessageDifferencer::Equals(got.stats(), want.stats()));
  ASSERT_EQ(got.pending_size(), 2);  // each play's last decision
  ASSERT_EQ(want.pending_size(), 2);
  for (int i = 0; i < 2; ++i) {
    // The event ids differ (the server makes them from the instance's uid); the rest is equal.
    v1::PendingDecisionRecord g = got.pending(i), w = want.pending(i);
    g.clear_event_id();
    w.clear_event_id();
    EXPECT_TRUE(MessageDifferencer::Equals(g, w)) << i;
  }
  EXPECT_EQ(got.apprentice().slots_size(), 3);
  // The pending decision's other slots are learned alike; then both go on deciding alike.
  for (const char* slot : {"s1", "s2"}) {
    ASSERT_TRUE(SlotReward(b.svc, "x", open_a, slot, 1.0).ok());
    ASSERT_TRUE(SlotReward(twin, "x", open_t, slot, 1.0).ok());
  }
  EXPECT_TRUE(MessageDifferencer::Equals(InstanceOf(b.svc, "x").apprentice(),
                                         InstanceOf(twin, "x").apprentice()));
  ASSERT_TRUE(Configure(b.svc, "x", "learning_mode: ONLINE").ok());
  ASSERT_TRUE(Configure(twin, "x", "learning_mode: ONLINE").ok());
  EXPECT_EQ(play(b.svc, env_a, 30, &open_a), play(twin, env_t, 30, &open_t));
}


// The apprentice estimates on their own: only APPRENTICE decisions count, slots from
// kLastSlotPosition on share the last position, a snapshot restores to the same figures, and
// a snapshot no run could make is refused with what was expected.
TEST(ApprenticeEstimatesTest, CountSaveRestoreAndRefusals) {
  ApprenticeEstimates e;
  EXPECT_TRUE(e.empty());
  PendingDecision online;
  online.learning_mode = v1::ONLINE;
  e.Count(online, 1.0);
  EXPECT_TRUE(e.empty());  // an ONLINE decision is not the apprentice's
  PendingDecision single;
  single.learning_mode = v1::APPRENTICE;
  single.apprentice_target = 0.5;
  single.apprentice_chose_baseline = true;
  e.Count(single, 1.0);
  PendingDecision late_slot = single;
  late_slot.slot_index = kLastSlotPosition + 4;  // counted at the last position
  late_slot.apprentice_chose_baseline = false;
  e.Count(late_slot, 0.25);
  EXPECT_FALSE(e.empty());

  v1::ApprenticeSnapshot saved;
  e.Save(&saved);
  EXPECT_EQ(saved.estimators().events(), 2);
  EXPECT_EQ(saved.policy_chose_baseline(), 1);
  EXPECT_DOUBLE_EQ(saved.imitated_reward_sum(), 1.0);
  ASSERT_EQ(saved.slots_size(), kLastSlotPosition + 1);
  EXPECT_EQ(saved.slots(kLastSlotPosition).estimators().events(), 1);
  EXPECT_EQ(saved.slots(0).estimators().events(), 0);
  v1::ApprenticeStatus described;
  e.Describe(&described);
  EXPECT_EQ(described.events(), 2);
  EXPECT_DOUBLE_EQ(described.reward_sum(), 1.25);
  EXPECT_EQ(described.slots_size(), kLastSlotPosition + 1);

  ApprenticeEstimates restored;
  ASSERT_TRUE(restored.Restore(saved).ok());
  v1::ApprenticeSnapshot again;
  restored.Save(&again);
  EXPECT_TRUE(MessageDifferencer::Equals(saved, again));

  v1::ApprenticeSnapshot bad = saved;
  bad.mutable_slots(3)->set_position(4);
  absl::Status s = ApprenticeEstimates().Restore(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), ".slots[3] is position 4, expected 3");
  bad = saved;
  bad.add_slots()->set_position(kLastSlotPosition + 1);
  s = ApprenticeEstimates().Restore(bad);
  EXPECT_EQ(s.message(), absl::StrCat(" has ", kLastSlotPosition + 2,
                                      " slot positions, expected at most ", kLastSlotPosition + 1));
  bad = saved;
  bad.set_policy_chose_baseline(3);  // more than the 2 events
  s = ApprenticeEstimates().Restore(bad);
  EXPECT_TRUE(absl::StartsWith(s.message(), ": policy_chose_baseline 3")) << s.message();

  e.Clear();
  EXPECT_TRUE(e.empty());
}

}  // namespace
}  // namespace bandit::server
