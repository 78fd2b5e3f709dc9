// Policies that declare SelectReadsOnly() promise that Select changes nothing: the server then
// journals a Select's decision instead of its request and replays it without the policy. The
// invariant checked here, independently of how each policy computes: the saved state (RNG
// included) is byte-identical before and after every Select, over rounds where Update moves it.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/core/glb/glb_test_util.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

using testing::MustCreate;

struct Case {
  std::string label;
  std::string config_text;
};

bandit::v1::SimPolicyConfig Parse(const std::string& text) { return testing::SimConfig(text); }

std::string Saved(const Policy& p) {
  bandit::v1::PolicyState s;
  p.Save(&s);
  return s.SerializeAsString();
}

class SelectReadsOnly : public ::testing::TestWithParam<Case> {};

TEST_P(SelectReadsOnly, SelectLeavesTheSavedStateByteIdentical) {
  auto p = MustCreate(Parse(GetParam().config_text), 7);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(p->SelectReadsOnly());
  sim::GlbEnvConfig e;
  e.kind = sim::GlbEnvKind::kLogistic;
  e.d = 4;
  e.arms = 12;
  e.S = 2.0;
  e.T = 300;
  sim::GlbEnv env(e, 11);
  std::string before_update;
  for (int t = 0; t < 300; ++t) {
    const auto& c = env.NextRound();
    SelectContext ctx;
    ctx.candidates = c;
    ctx.want_scores = (t % 2) == 0;
    const std::string before = Saved(*p);
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok()) << d.status();
    auto again = p->Select(ctx);  // a second Select must not see a changed state either
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->arm, d->arm) << "round " << t;
    ASSERT_EQ(Saved(*p), before) << GetParam().label << ": Select changed the state at round " << t;
    Observation obs;
    obs.features = c[d->arm];
    obs.reward = env.Reward(d->arm);
    ASSERT_TRUE(p->Update(obs).ok());
    // The check above is only meaningful if Update does move the state.
    EXPECT_NE(Saved(*p), before) << "round " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Contextual, SelectReadsOnly,
    ::testing::Values(Case{"glb_omd", "glb_omd { dimension: 4 s: 2 }"},
                      Case{"domd_glb", "domd_glb { dimension: 4 s: 2 gamma: 0.99 }"},
                      Case{"glm_ucb", "glm_ucb { dimension: 4 s: 2 }"},
                      Case{"glm_ucb_dm", "glm_ucb { dimension: 4 s: 2 bonus: DESIGN_MATRIX }"},
                      Case{"sw_glm_ucb", "glm_ucb { dimension: 4 s: 2 window: 50 }"},
                      Case{"linucb", "linucb { dimension: 4 }"},
                      Case{"glm_ucb_filippi",
                           "glm_ucb { dimension: 4 s: 2 bonus: FILIPPI horizon: 300 }"},
                      Case{"gloc", "gloc { dimension: 4 s: 2 }"},
                      Case{"ecolog", "ecolog { dimension: 4 s: 2 }"},
                      Case{"rs_glincb", "rs_glincb { dimension: 4 s: 2 horizon: 300 }"},
                      Case{"ofuglb", "ofuglb { dimension: 4 s: 2 }"},
                      Case{"ofulog_r", "ofulog_r { dimension: 4 s: 2 }"},
                      Case{"restart_glb", "restart_glb { dimension: 4 s: 2 restart_period: 40 }"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.label; });

// Policies that draw randomness or count rounds in Select must not claim it.
TEST(SelectReadsOnly, PoliciesThatChangeStateInSelectDoNotClaimIt) {
  for (const char* text : {"glm_epsilon_greedy { dimension: 4 s: 2 }", "thompson { } num_arms: 3",
                           "epsilon_greedy { } num_arms: 3"}) {
    auto p = MustCreate(Parse(text), 7);
    ASSERT_NE(p, nullptr) << text;
    EXPECT_FALSE(p->SelectReadsOnly()) << text;
  }
}

}  // namespace
}  // namespace bandit::glb
