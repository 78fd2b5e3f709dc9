// BKB and GP-UCB instances on per-request candidates, through the DecisionService: an Update by
// event id learns the chosen candidate's features from the pending decision.
#include <cmath>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "server/service/decision_service.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;
using testing::Create;

class KernelCandidatesTest : public ::testing::TestWithParam<std::string> {
 protected:
  ManualClock clock_;
  DecisionService svc_{&clock_};

  std::string Config() const {
    return "seed: 5 policy { " + GetParam() +
           " { kernel { kind: GAUSSIAN bandwidth: 0.4 } dimension: 2 radius_multiplier: 0.3 } }";
  }
  int64_t Rounds(const std::string& name) {
    v1::GetInstanceRequest req;
    req.set_name(name);
    v1::Instance out;
    EXPECT_TRUE(svc_.GetInstance(req, &out).ok());
    return out.stats().rounds();
  }
};

TEST_P(KernelCandidatesTest, UpdateByEventIdLearnsTheChosenCandidatesFeatures) {
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("by_event", Config()), &out).ok());
  ASSERT_TRUE(svc_.CreateInstance(Create("direct", Config()), &out).ok());
  Rng env(1);
  int changed = 0, last = -1;
  for (int t = 0; t < 40; ++t) {
    v1::SelectRequest sel;
    for (int i = 0; i < 6; ++i) {
      auto* c = sel.add_candidates();
      c->add_values(env.Uniform());
      c->add_values(env.Uniform());
    }
    v1::Decision a, b;
    sel.set_instance("by_event");
    ASSERT_TRUE(svc_.Select(sel, &a).ok());
    sel.set_instance("direct");
    ASSERT_TRUE(svc_.Select(sel, &b).ok());
    // The twin learns the same pulls given explicitly: same decisions every round.
    ASSERT_EQ(a.arm_index(), b.arm_index()) << "round " << t;
    const auto& x = sel.candidates(a.arm_index()).values();
    const double reward = std::sin(4 * x[0]) * std::cos(3 * x[1]);
    v1::UpdateRequest up;
    v1::UpdateResponse resp;
    up.set_instance("by_event");
    up.set_event_id(a.event_id());
    up.set_reward(reward);
    ASSERT_TRUE(svc_.Update(up, &resp).ok());
    up.set_instance("direct");
    for (double v : x) up.mutable_direct()->add_features(v);
    ASSERT_TRUE(svc_.Update(up, &resp).ok());
    if (a.arm_index() != last) ++changed;
    last = a.arm_index();
  }
  EXPECT_GT(changed, 5);  // decisions depend on what was learned, not a constant index
}

TEST_P(KernelCandidatesTest, BadCandidatesAreRefusedAndCountNoRound) {
  v1::Instance out;
  ASSERT_TRUE(svc_.CreateInstance(Create("k", Config()), &out).ok());
  v1::SelectRequest sel;
  sel.set_instance("k");
  v1::Decision d;
  EXPECT_EQ(svc_.Select(sel, &d).code(), StatusCode::kInvalidArgument);  // no candidates
  auto* c = sel.add_candidates();
  c->add_values(0.1);
  c->add_values(0.2);
  c = sel.add_candidates();
  c->add_values(0.3);  // dimension 1, expected 2
  auto s = svc_.Select(sel, &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates[1]"), std::string::npos) << s.message();
  c->add_values(NAN);
  EXPECT_EQ(svc_.Select(sel, &d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Rounds("k"), 0);
  c->set_values(1, 0.4);
  ASSERT_TRUE(svc_.Select(sel, &d).ok());
  EXPECT_EQ(Rounds("k"), 1);
}

INSTANTIATE_TEST_SUITE_P(BkbAndGpUcb, KernelCandidatesTest, ::testing::Values("bkb", "gp_ucb"));

}  // namespace
}  // namespace bandit::server
