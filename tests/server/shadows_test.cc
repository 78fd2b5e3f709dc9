// Shadow policies through DecisionService (in process, injected clock, seeded environments):
// a shadow identical to the served policy estimates the served policy's own value; a shadow
// whose true value is known in closed form finds it inside its intervals; promote keeps what
// the shadow learned (its next decisions equal a twin policy fed the same history); export and
// import keep every shadow exactly; arm changes and reset reach the shadows; bad requests get
// exact codes and change nothing.
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "server/metrics/metrics.h"
#include "server/service/decision_service.h"
#include "server/service/persistence.h"
#include "server/storage/snapshot_store.h"
#include "tests/server/fault_injection_fs.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using google::protobuf::util::MessageDifferencer;
using testing::Create;
namespace v1 = bandit::v1;

constexpr auto& kEps = testing::kFourArmEps;
constexpr auto& kArmMean = testing::kFourArmMeans;  // Bernoulli arms of known means

v1::AddShadowRequest Shadow(const std::string& instance, const std::string& shadow,
                            const std::string& config_text) {
  v1::AddShadowRequest req;
  req.set_name(instance);
  req.set_shadow(shadow);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, req.mutable_config()))
      << config_text;
  return req;
}

class ShadowTest : public ::testing::Test {
 protected:
  ShadowTest() : svc_(&clock_) {}

  void CreateOrDie(const std::string& name, const std::string& config) {
    v1::Instance out;
    ASSERT_TRUE(svc_.CreateInstance(Create(name, config), &out).ok());
  }
  v1::Instance AddOrDie(const v1::AddShadowRequest& req) {
    v1::Instance out;
    auto s = svc_.AddShadow(req, &out);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  v1::Instance Get(const std::string& name) { return testing::InstanceOf(svc_, name); }
  std::string Export(const std::string& name) { return testing::Exported(svc_, name); }
  v1::InstanceSnapshot Snapshot(const std::string& name) { return testing::SnapshotOf(svc_, name); }
  void PlayBernoulli(const std::string& name, int rounds, Rng& env) {
    testing::PlayBernoulli(svc_, name, rounds, env);
  }

  ManualClock clock_;
  DecisionService svc_;
};

const v1::ShadowStatus& Find(const v1::Instance& inst, const std::string& shadow) {
  for (const auto& s : inst.shadows())
    if (s.name() == shadow) return s;
  ADD_FAILURE() << "no shadow " << shadow;
  static v1::ShadowStatus none;
  return none;
}

bool Inside(double v, const v1::Estimate& e) { return e.lo() <= v && v <= e.hi(); }

// The same config and seed as the served policy: the shadow makes the served policy's own
// choices with its own probabilities, so every importance weight is exactly 1 and IPS is the
// served policy's mean reward; SNIPS and DR agree, and the served value lies in their
// intervals. The served value is computed here independently, from the rewards the test sent.
TEST_F(ShadowTest, TwinOfTheServedPolicyEstimatesItsOwnValue) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "twin", "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 77"));
  Rng env(5);
  double reward_sum = 0;
  const int kRounds = 2000;
  testing::PlayRounds(
      svc_, "a", 0, kRounds, [&](const v1::Decision& d, int, v1::UpdateRequest* up) {
        const double r = env.Uniform() < kArmMean[std::stoi(d.arm_id())] ? 1.0 : 0.0;
        reward_sum += r;
        up->set_reward(r);
      });
  const v1::Instance inst = Get("a");
  const v1::ShadowStatus& s = Find(inst, "twin");
  const double served = reward_sum / kRounds;
  EXPECT_EQ(s.events(), kRounds);
  EXPECT_EQ(s.exact_distribution(), kRounds);
  EXPECT_NEAR(s.served().value(), served, 1e-12);
  EXPECT_NEAR(s.ips().value(), served, 1e-12);
  EXPECT_NEAR(s.snips().value(), served, 1e-12);
  EXPECT_NEAR(s.effective_sample_size(), kRounds, 1e-6);
  EXPECT_EQ(s.largest_weight(), 1.0);
  EXPECT_TRUE(Inside(served, s.ips())) << s.ShortDebugString();
  EXPECT_TRUE(Inside(served, s.snips())) << s.ShortDebugString();
  EXPECT_TRUE(Inside(served, s.dr())) << s.ShortDebugString();
  EXPECT_GT(s.ips().hi(), s.ips().lo());
  EXPECT_EQ(s.errors(), 0);
  // The twin learned what the served policy learned: the same state, engine included.
  const v1::InstanceSnapshot snap = Snapshot("a");
  ASSERT_EQ(snap.shadows_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(snap.shadows(0).policy(), snap.policy()));
}

// A shadow whose value is known in closed form: uniform choice (epsilon 1) earns the mean of
// the arm means. Logged by an epsilon-greedy policy that mostly plays the best arm, the
// estimators must find it (weights vary, so this exercises the reweighting).
TEST_F(ShadowTest, UniformShadowFindsItsClosedFormValue) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "uniform", "policy { epsilon_greedy { epsilon: 1 } num_arms: 4 } seed: 3"));
  Rng env(11);
  PlayBernoulli("a", 4000, env);
  const v1::ShadowStatus s = Find(Get("a"), "uniform");
  const double truth = (kArmMean[0] + kArmMean[1] + kArmMean[2] + kArmMean[3]) / 4;
  EXPECT_TRUE(Inside(truth, s.ips())) << s.ShortDebugString();
  EXPECT_TRUE(Inside(truth, s.snips())) << s.ShortDebugString();
  EXPECT_TRUE(Inside(truth, s.dr())) << s.ShortDebugString();
  EXPECT_LT(s.effective_sample_size(), s.events());  // the weights are not all 1
  EXPECT_GT(s.served().value(), truth);              // the served policy exploits the best arm
}

// Multi-slot decisions (a hero and a tile slot over the arm set): each shadow chooses per slot
// among the arms that slot was offered, so its estimates are per slot position, conditional on
// the served choice of the slot before. A twin of the served policy estimates each position's
// served mean exactly and the page as their sum; a uniform shadow's value per position is
// known from the log (slot 0: the mean of the arm means; slot 1: the mean of the three arms the
// served slot 0 left, averaged over the rewarded tiles) and lies in its intervals. Export and
// import keep the per-position estimators exactly.
TEST_F(ShadowTest, EachSlotPositionIsEstimatedAndThePageIsTheirSum) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "twin", "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 4 } seed: 77"));
  AddOrDie(Shadow("a", "uniform", "policy { epsilon_greedy { epsilon: 1 } num_arms: 4 } seed: 3"));
  Rng env(21);
  const double all_means = kArmMean[0] + kArmMean[1] + kArmMean[2] + kArmMean[3];
  double reward_sum[2] = {0, 0};
  int rewarded[2] = {0, 0};
  double uniform_tile_truth = 0;  // sum over rewarded tiles of the mean of the arms left
  const int kRounds = 3000;
  for (int t = 0; t < kRounds; ++t) {
    v1::SelectRequest req;
    req.set_instance("a");
    req.add_slots()->set_id("hero");
    req.add_slots()->set_id("tile");
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(req, &d).ok());
    ASSERT_EQ(d.slots_size(), 2);
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && t % 3 == 0) continue;  // some tiles are never rewarded: counts differ
      const int arm = std::stoi(d.slots(k).action_id());
      const double r = env.Uniform() < kArmMean[arm] ? 1.0 : 0.0;
      v1::UpdateRequest up;
      up.set_instance("a");
      up.set_event_id(d.event_id());
      up.set_slot_id(d.slots(k).slot_id());
      up.set_reward(r);
      v1::UpdateResponse ur;
      ASSERT_TRUE(svc_.Update(up, &ur).ok());
      reward_sum[k] += r;
      ++rewarded[k];
      if (k == 1) uniform_tile_truth += (all_means - kArmMean[std::stoi(d.slots(0).action_id())]) / 3;
    }
  }
  const v1::Instance inst = Get("a");
  const v1::ShadowStatus& twin = Find(inst, "twin");
  ASSERT_EQ(twin.slots_size(), 2) << twin.ShortDebugString();
  double page = 0;
  for (int k = 0; k < 2; ++k) {
    const v1::ShadowSlotEstimate& slot = twin.slots(k);
    const double served = reward_sum[k] / rewarded[k];
    page += served;
    EXPECT_EQ(slot.position(), k);
    EXPECT_EQ(slot.events(), rewarded[k]);
    EXPECT_NEAR(slot.served().value(), served, 1e-12) << k;
    EXPECT_NEAR(slot.ips().value(), served, 1e-12) << k;
    EXPECT_NEAR(slot.snips().value(), served, 1e-12) << k;
    EXPECT_TRUE(Inside(served, slot.dr())) << slot.ShortDebugString();
  }
  EXPECT_NEAR(twin.page().ips(), page, 1e-12);
  EXPECT_NEAR(twin.page().snips(), page, 1e-12);
  EXPECT_NEAR(twin.page().served(), page, 1e-12);
  // The pooled estimates hold every slot's events.
  EXPECT_EQ(twin.events(), rewarded[0] + rewarded[1]);
  EXPECT_EQ(twin.unscored(), 0);
  EXPECT_EQ(twin.errors(), 0);

  const v1::ShadowStatus& uniform = Find(inst, "uniform");
  ASSERT_EQ(uniform.slots_size(), 2);
  const double truth[2] = {all_means / 4, uniform_tile_truth / rewarded[1]};
  for (int k = 0; k < 2; ++k) {
    // Four checks of one seeded run: within 4 standard errors (each fails with probability
    // 6e-5 for an unbiased estimate), rather than the 95 % intervals.
    for (const v1::Estimate* e : {&uniform.slots(k).ips(), &uniform.slots(k).snips()})
      EXPECT_LE(std::abs(e->value() - truth[k]), 4 * e->se()) << k << uniform.ShortDebugString();
    // The served policy exploits the best arms: a uniform choice is worth less.
    EXPECT_LT(uniform.slots(k).ips().value(), uniform.slots(k).served().value()) << k;
  }
  EXPECT_NEAR(uniform.page().ips(), uniform.slots(0).ips().value() + uniform.slots(1).ips().value(),
              1e-12);
  // The same figures as Prometheus series: 2 shadows x (2 positions + the page) x 4 estimators.
  Metrics metrics(&svc_);
  std::map<std::string, double> series;
  for (const auto& family : metrics.collector()->Collect())
    if (family.name == "bandit_shadow_slot_value")
      for (const auto& m : family.metric) {
        std::string key;
        for (const auto& l : m.label) key += l.name + "=" + l.value + ",";
        series[key] = m.gauge.value;
      }
  EXPECT_EQ(series.size(), 24u);
  EXPECT_EQ(series["instance=a,shadow=twin,position=1,estimator=ips,"], twin.slots(1).ips().value());
  EXPECT_EQ(series["instance=a,shadow=twin,position=page,estimator=served,"],
            twin.page().served());

  v1::ImportInstanceRequest imp;
  imp.set_name("b");
  imp.set_snapshot(Export("a"));
  v1::Instance imported;
  ASSERT_TRUE(svc_.ImportInstance(imp, &imported).ok());
  const v1::InstanceSnapshot a = Snapshot("a"), b = Snapshot("b");
  ASSERT_EQ(a.shadows_size(), 2);
  EXPECT_EQ(a.shadows(0).slot_estimators_size(), 2);
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(a.shadows(i), b.shadows(i)));
  EXPECT_TRUE(MessageDifferencer::Equals(Find(Get("b"), "twin"), twin));
}

// Contextual: GLB-OMD on candidate vectors, a shadow of the same config; a dimension mismatch
// is refused.
TEST_F(ShadowTest, CandidatePolicies) {
  CreateOrDie("g", "policy { glb_omd { dimension: 3 } } seed: 9");
  v1::Instance out;
  auto bad = svc_.AddShadow(Shadow("g", "wide", "policy { glb_omd { dimension: 4 } }"), &out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("expected the instance's dimension 3"), std::string::npos) << bad;
  AddOrDie(Shadow("g", "same", "policy { glb_omd { dimension: 3 } } seed: 9"));
  AddOrDie(Shadow("g", "eager", "policy { glb_omd { dimension: 3 radius_multiplier: 0.1 } }"));
  Rng env(2);
  for (int i = 0; i < 300; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("g");
    for (int c = 0; c < 5; ++c) {
      auto* v = sel.add_candidates();
      for (int j = 0; j < 3; ++j) v->add_values(env.Uniform() - 0.5);  // norm <= 1
    }
    v1::Decision d;
    auto selected = svc_.Select(sel, &d);
    ASSERT_TRUE(selected.ok()) << selected;
    const double z = sel.candidates(d.arm_index()).values(0);
    v1::UpdateRequest up;
    up.set_instance("g");
    up.set_event_id(d.event_id());
    up.set_reward(env.Uniform() < 1 / (1 + std::exp(-2 * z)) ? 1.0 : 0.0);
    v1::UpdateResponse r;
    ASSERT_TRUE(svc_.Update(up, &r).ok());
  }
  const v1::Instance inst = Get("g");
  const v1::ShadowStatus& same = Find(inst, "same");
  EXPECT_EQ(same.events(), 300);
  EXPECT_NEAR(same.ips().value(), same.served().value(), 1e-12);
  EXPECT_TRUE(Inside(same.served().value(), same.dr()));
  const v1::ShadowStatus& eager = Find(inst, "eager");
  EXPECT_EQ(eager.events(), 300);
  EXPECT_EQ(eager.errors(), 0);
  EXPECT_LE(eager.largest_weight(), 1.0);  // both deterministic: weights are 0 or 1
}

// Promote: the shadow becomes the served policy with what it learned. Its twin is a separate
// instance of the shadow's config that made a Select at every round (as the shadow did) and
// learned each logged (arm, reward) as a direct update (as the shadow did): from then on the
// promoted instance decides exactly as the twin does, probabilities included.
TEST_F(ShadowTest, PromoteKeepsWhatTheShadowLearned) {
  const std::string kChallenger = "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 4 } seed: 5";
  CreateOrDie("a", kEps);
  CreateOrDie("twin", kChallenger);
  AddOrDie(Shadow("a", "challenger", kChallenger));
  Rng env(8);
  for (int i = 0; i < 500; ++i) {
    v1::SelectRequest sel;
    sel.set_instance("a");
    v1::Decision d;
    ASSERT_TRUE(svc_.Select(sel, &d).ok());
    v1::SelectRequest twin_sel;
    twin_sel.set_instance("twin");
    v1::Decision twin_d;
    ASSERT_TRUE(svc_.Select(twin_sel, &twin_d).ok());
    const double r = env.Uniform() < kArmMean[std::stoi(d.arm_id())] ? 1.0 : 0.0;
    v1::UpdateRequest up;
    up.set_instance("a");
    up.set_event_id(d.event_id());
    up.set_reward(r);
    v1::UpdateResponse resp;
    ASSERT_TRUE(svc_.Update(up, &resp).ok());
    v1::UpdateRequest direct;
    direct.set_instance("twin");
    direct.mutable_direct()->set_arm_id(d.arm_id());
    direct.set_reward(r);
    ASSERT_TRUE(svc_.Update(direct, &resp).ok());
  }
  v1::PromoteShadowRequest promote;
  promote.set_name("a");
  promote.set_shadow("challenger");
  v1::Instance out;
  ASSERT_TRUE(svc_.PromoteShadow(promote, &out).ok());
  EXPECT_EQ(out.shadows_size(), 0);
  EXPECT_TRUE(out.config().policy().has_epsilon_greedy());
  EXPECT_DOUBLE_EQ(out.config().policy().epsilon_greedy().epsilon(), 0.1);
  EXPECT_EQ(out.config().seed(), 5u);
  EXPECT_TRUE(MessageDifferencer::Equals(Snapshot("a").policy(), Snapshot("twin").policy()));
  for (int i = 0; i < 200; ++i) {
    v1::Decision d, twin_d;
    v1::SelectRequest sel;
    sel.set_instance("a");
    sel.set_return_scores(true);
    ASSERT_TRUE(svc_.Select(sel, &d).ok());
    sel.set_instance("twin");
    ASSERT_TRUE(svc_.Select(sel, &twin_d).ok());
    ASSERT_EQ(d.arm_id(), twin_d.arm_id()) << "round " << i;
    ASSERT_EQ(d.propensity(), twin_d.propensity());
    ASSERT_EQ(d.scores_size(), twin_d.scores_size());
    for (int k = 0; k < d.scores_size(); ++k) ASSERT_EQ(d.scores(k), twin_d.scores(k));
    const double r = env.Uniform() < kArmMean[std::stoi(d.arm_id())] ? 1.0 : 0.0;
    v1::UpdateResponse resp;
    v1::UpdateRequest up;
    up.set_instance("a");
    up.set_event_id(d.event_id());
    up.set_reward(r);
    ASSERT_TRUE(svc_.Update(up, &resp).ok());
    up.set_instance("twin");
    up.set_event_id(twin_d.event_id());
    ASSERT_TRUE(svc_.Update(up, &resp).ok());
  }
}

// A decision still pending at promotion was made by the dropped policy: its reward is then
// learned by the promoted one as logged data.
TEST_F(ShadowTest, RewardOfADecisionPendingAtPromotionIsLearned) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "c", "policy { ucb1 {} num_arms: 4 }"));
  v1::SelectRequest sel;
  sel.set_instance("a");
  v1::Decision d;
  ASSERT_TRUE(svc_.Select(sel, &d).ok());
  v1::PromoteShadowRequest promote;
  promote.set_name("a");
  promote.set_shadow("c");
  v1::Instance out;
  ASSERT_TRUE(svc_.PromoteShadow(promote, &out).ok());
  const v1::InstanceSnapshot before = Snapshot("a");
  v1::UpdateRequest up;
  up.set_instance("a");
  up.set_event_id(d.event_id());
  up.set_reward(1);
  v1::UpdateResponse resp;
  ASSERT_TRUE(svc_.Update(up, &resp).ok());
  EXPECT_EQ(resp.updates(), 1);
  EXPECT_FALSE(MessageDifferencer::Equals(Snapshot("a").policy(), before.policy()));
}

// Export then import: every shadow continues exactly (the same estimates after the same
// further rounds as the original).
TEST_F(ShadowTest, ExportImportKeepsEveryShadowExactly) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "uniform", "policy { epsilon_greedy { epsilon: 1 } num_arms: 4 }"));
  AddOrDie(Shadow("a", "ts", "policy { thompson { } num_arms: 4 } max_weight: 5"));
  Rng env(1);
  PlayBernoulli("a", 300, env);
  {
    v1::ImportInstanceRequest imp;
    imp.set_name("b");
    imp.set_snapshot(Export("a"));
    v1::Instance out;
    ASSERT_TRUE(svc_.ImportInstance(imp, &out).ok());
    EXPECT_EQ(out.shadows_size(), 2);
  }
  Rng env_a(42), env_b(42);
  PlayBernoulli("a", 200, env_a);
  PlayBernoulli("b", 200, env_b);
  v1::InstanceSnapshot a = Snapshot("a"), b = Snapshot("b");
  ASSERT_EQ(a.shadows_size(), 2);
  ASSERT_EQ(b.shadows_size(), 2);
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(a.shadows(i), b.shadows(i)))
        << a.shadows(i).ShortDebugString() << "\n"
        << b.shadows(i).ShortDebugString();
  const v1::ShadowStatus ts = Find(Get("a"), "ts");
  EXPECT_EQ(ts.events(), 500);
  EXPECT_GT(ts.sampled_distribution() + ts.exact_distribution(), 0);
}

// Snapshots of format 1 (before shadows) still load; a newer format is refused.
TEST_F(ShadowTest, SnapshotFormats) {
  CreateOrDie("a", kEps);
  Rng env(1);
  PlayBernoulli("a", 20, env);
  v1::InstanceSnapshot snap = Snapshot("a");
  EXPECT_EQ(snap.format_version(), 2u);
  snap.set_format_version(1);
  v1::ImportInstanceRequest imp;
  imp.set_name("old");
  imp.set_snapshot(SnapshotStore::Encode(snap));
  v1::Instance out;
  ASSERT_TRUE(svc_.ImportInstance(imp, &out).ok());
  EXPECT_EQ(out.stats().updates(), 20);
  snap.set_format_version(3);
  imp.set_name("future");
  imp.set_snapshot(SnapshotStore::Encode(snap));
  auto s = svc_.ImportInstance(imp, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("expected at most 2"), std::string::npos) << s;
}

// Arm changes reach every shadow; Reset restarts them.
TEST_F(ShadowTest, ArmChangesAndResetReachTheShadows) {
  CreateOrDie("a", kEps);
  AddOrDie(Shadow("a", "u", "policy { ucb1 {} }"));  // no arms: the instance's
  v1::AddArmsRequest add;
  add.set_name("a");
  add.add_arms()->set_id("4");
  v1::Instance out;
  ASSERT_TRUE(svc_.AddArms(add, &out).ok());
  ASSERT_EQ(out.shadows_size(), 1);
  EXPECT_EQ(out.shadows(0).config().policy().arms_size(), 5);
  v1::RemoveArmsRequest remove;
  remove.set_name("a");
  remove.add_arm_ids("0");
  ASSERT_TRUE(svc_.RemoveArms(remove, &out).ok());
  EXPECT_EQ(out.shadows(0).config().policy().arms_size(), 4);
  const v1::InstanceSnapshot snap = Snapshot("a");
  EXPECT_EQ(snap.shadows(0).policy().arm_ids_size(), 4);
  testing::PlayRounds(svc_, "a", 0, 30,
                      [](const v1::Decision&, int, v1::UpdateRequest* up) { up->set_reward(1); });
  EXPECT_EQ(Find(Get("a"), "u").events(), 30);
  v1::ResetInstanceRequest reset;
  reset.set_name("a");
  ASSERT_TRUE(svc_.ResetInstance(reset, &out).ok());
  EXPECT_EQ(out.shadows(0).events(), 0);
}

// Every bad request: the exact code, a message saying what was expected, nothing changed.
TEST_F(ShadowTest, BadRequestsChangeNothing) {
  ServiceLimits limits;
  limits.instance.max_shadows = 2;
  DecisionService svc(&clock_, limits);
  v1::Instance out;
  ASSERT_TRUE(svc.CreateInstance(Create("a", kEps), &out).ok());
  ASSERT_TRUE(svc.AddShadow(Shadow("a", "one", "policy { ucb1 {} }"), &out).ok());
  auto exported = [&] {
    v1::ExportInstanceRequest req;
    req.set_name("a");
    v1::ExportInstanceResponse resp;
    EXPECT_TRUE(svc.ExportInstance(req, &resp).ok());
    return resp.snapshot();
  };
  const std::string before = exported();
  struct Case {
    v1::AddShadowRequest req;
    StatusCode code;
    std::string says;
  };
  v1::AddShadowRequest no_config;
  no_config.set_name("a");
  no_config.set_shadow("x");
  const std::vector<Case> cases = {
      {Shadow("nosuch", "x", "policy { ucb1 {} }"), StatusCode::kNotFound, "nosuch"},
      {Shadow("a", "", "policy { ucb1 {} }"), StatusCode::kInvalidArgument, "shadow"},
      {Shadow("a", "bad name!", "policy { ucb1 {} }"), StatusCode::kInvalidArgument, "shadow"},
      {no_config, StatusCode::kInvalidArgument, "expected the shadow's PolicyConfig"},
      {Shadow("a", "x", "policy { epsilon_greedy { epsilon: 2 } }"), StatusCode::kInvalidArgument,
       "config.policy"},
      {Shadow("a", "x", "policy { linucb { dimension: 3 } }"), StatusCode::kInvalidArgument,
       "expected a policy that chooses among its own arm set"},
      {Shadow("a", "x", "policy { ucb1 {} num_arms: 5 }"), StatusCode::kInvalidArgument,
       "expected the instance's arms"},
      {Shadow("a", "x",
              "policy { ucb1 {} arms { id: \"0\" } arms { id: \"1\" } arms { id: "
              "\"2\" } arms { id: \"9\" } }"),
       StatusCode::kInvalidArgument, "expected the instance's arms"},
      {Shadow("a", "x", "policy { ucb1 {} } max_weight: -1"), StatusCode::kInvalidArgument,
       "config.max_weight"},
      {Shadow("a", "x", "policy { ucb1 {} } ridge_lambda: nan"), StatusCode::kInvalidArgument,
       "config.ridge_lambda"},
      {Shadow("a", "one", "policy { ucb1 {} }"), StatusCode::kAlreadyExists, "already has"},
  };
  for (const auto& c : cases) {
    auto s = svc.AddShadow(c.req, &out);
    EXPECT_EQ(s.code(), c.code) << c.req.ShortDebugString() << ": " << s;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
    EXPECT_EQ(exported(), before) << c.req.ShortDebugString();
  }
  ASSERT_TRUE(svc.AddShadow(Shadow("a", "two", "policy { ucb1 {} }"), &out).ok());
  const std::string two = exported();
  auto full = svc.AddShadow(Shadow("a", "three", "policy { ucb1 {} }"), &out);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("maximum of 2"), std::string::npos) << full;
  EXPECT_EQ(exported(), two);
  v1::RemoveShadowRequest remove;
  remove.set_name("a");
  remove.set_shadow("nosuch");
  auto s = svc.RemoveShadow(remove, &out);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("its shadows: [one, two]"), std::string::npos) << s;
  v1::PromoteShadowRequest promote;
  promote.set_name("a");
  promote.set_shadow("nosuch");
  EXPECT_EQ(svc.PromoteShadow(promote, &out).code(), StatusCode::kNotFound);
  EXPECT_EQ(exported(), two);
  remove.set_shadow("one");
  ASSERT_TRUE(svc.RemoveShadow(remove, &out).ok());
  ASSERT_EQ(out.shadows_size(), 1);
  EXPECT_EQ(out.shadows(0).name(), "two");
}

// The shadow limit is the server's current one (banditd --max_shadows), checked when AddShadow
// or ImportInstance asks for a shadow: a restart with a lower limit recovers every shadow the
// server once accepted (recovery never refuses), then refuses new ones until enough are gone.
TEST(ShadowLimit, IsTheServersCurrentLimitAndRecoveryKeepsWhatWasAccepted) {
  FaultInjectionFs fs;
  ManualClock clock;
  auto open = [&](DecisionService* svc) {
    PersistenceOptions o;
    o.fs = &fs;
    o.data_dir = "/data";
    o.clock = &clock;
    auto p = Persistence::Open(o, svc);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  };
  v1::Instance out;
  std::string exported;
  {
    ServiceLimits three;
    three.instance.max_shadows = 3;
    DecisionService svc(&clock, three);
    auto persistence = open(&svc);
    ASSERT_NE(persistence, nullptr);
    ASSERT_TRUE(svc.CreateInstance(Create("a", kEps), &out).ok());
    for (const char* name : {"s1", "s2", "s3"})
      ASSERT_TRUE(svc.AddShadow(Shadow("a", name, "policy { ucb1 {} }"), &out).ok()) << name;
    v1::ExportInstanceRequest req;
    req.set_name("a");
    v1::ExportInstanceResponse resp;
    ASSERT_TRUE(svc.ExportInstance(req, &resp).ok());
    exported = resp.snapshot();
    ASSERT_TRUE(persistence->Close().ok());
  }
  ServiceLimits one;
  one.instance.max_shadows = 1;
  DecisionService svc(&clock, one);
  auto persistence = open(&svc);
  ASSERT_NE(persistence, nullptr);
  v1::GetInstanceRequest get;
  get.set_name("a");
  ASSERT_TRUE(svc.GetInstance(get, &out).ok());
  ASSERT_EQ(out.shadows_size(), 3);  // recovered although above the new limit
  auto refused = svc.AddShadow(Shadow("a", "s4", "policy { ucb1 {} }"), &out);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused;
  EXPECT_EQ(refused.message(),
            "instance 'a' has 3 shadows, the configured maximum of 1 (--max_shadows); remove one "
            "first");
  v1::RemoveShadowRequest remove;
  remove.set_name("a");
  for (const char* name : {"s1", "s2"}) {
    remove.set_shadow(name);
    ASSERT_TRUE(svc.RemoveShadow(remove, &out).ok());
  }
  refused = svc.AddShadow(Shadow("a", "s4", "policy { ucb1 {} }"), &out);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("has 1 shadows, the configured maximum of 1"),
            std::string::npos)
      << refused;
  remove.set_shadow("s3");
  ASSERT_TRUE(svc.RemoveShadow(remove, &out).ok());
  ASSERT_TRUE(svc.AddShadow(Shadow("a", "s4", "policy { ucb1 {} }"), &out).ok());
  ASSERT_EQ(out.shadows_size(), 1);
  EXPECT_EQ(out.shadows(0).name(), "s4");

  // An import brings its shadows to this server: above its limit, refused and nothing created.
  v1::ImportInstanceRequest imp;
  imp.set_name("b");
  imp.set_snapshot(exported);
  auto imported = svc.ImportInstance(imp, &out);
  EXPECT_EQ(imported.code(), StatusCode::kResourceExhausted) << imported;
  EXPECT_EQ(imported.message(),
            "snapshot of instance 'b' has 3 shadows, more than the configured maximum of 1 "
            "(--max_shadows); remove shadows before exporting, or raise the limit");
  get.set_name("b");
  EXPECT_EQ(svc.GetInstance(get, &out).code(), StatusCode::kNotFound);
  ASSERT_TRUE(persistence->Close().ok());

  // 0 refuses every shadow.
  ServiceLimits none;
  none.instance.max_shadows = 0;
  DecisionService plain(&clock, none);
  ASSERT_TRUE(plain.CreateInstance(Create("c", kEps), &out).ok());
  refused = plain.AddShadow(Shadow("c", "s", "policy { ucb1 {} }"), &out);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused;
  EXPECT_EQ(refused.message(),
            "shadows are disabled on this server (--max_shadows=0); instance 'c' cannot take "
            "shadow 's'");
}

}  // namespace
}  // namespace bandit::server
