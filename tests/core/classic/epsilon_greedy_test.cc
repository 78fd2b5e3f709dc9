#include "core/classic/epsilon_greedy.h"

#include <cmath>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/registry.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

bandit::v1::PolicyConfig Config(double epsilon, int arms) {
  bandit::v1::PolicyConfig c;
  c.mutable_epsilon_greedy()->set_epsilon(epsilon);
  c.set_num_arms(arms);
  return c;
}

TEST(EpsilonGreedy, ProbabilitiesMatchClosedForm) {
  auto p = CreatePolicy(Config(0.3, 4), 7);
  ASSERT_TRUE(p.ok()) << p.status();
  // Arm "2" gets reward 1 once: it is the unique greedy arm.
  Observation obs;
  obs.arm_id = "2";
  obs.reward = 1.0;
  ASSERT_TRUE((*p)->Update(obs).ok());
  SelectContext ctx;
  ctx.want_scores = true;
  auto d = (*p)->Select(ctx);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->scores.size(), 4);
  EXPECT_NEAR(d->scores[2], 0.7 + 0.3 / 4, 1e-12);
  EXPECT_NEAR(d->scores[0], 0.3 / 4, 1e-12);
  EXPECT_NEAR(d->scores.sum(), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);
}

// Conditional on an allowed-arms mask (a later slot of a multi-slot decision): eps spread over
// the allowed arms, 1 - eps on the best allowed one; checked in closed form and against the
// frequencies of 2*10^5 decisions (each within 5 standard errors).
TEST(EpsilonGreedy, MaskedProbabilitiesMatchClosedFormAndFrequencies) {
  auto p = CreatePolicy(Config(0.3, 5), 11);
  ASSERT_TRUE(p.ok()) << p.status();
  for (auto [arm, r] : {std::pair{"2", 1.0}, {"4", 0.6}, {"0", 0.2}}) {
    Observation obs;
    obs.arm_id = arm;
    obs.reward = r;
    ASSERT_TRUE((*p)->Update(obs).ok());
  }
  // Arm 2 (the best) is taken; arms 0, 3, 4 remain: 4 is the best of them.
  const std::vector<char> mask = {1, 0, 0, 1, 1};
  const std::vector<double> exact = {0.1, 0, 0, 0.1, 0.7 + 0.1};
  SelectContext ctx;
  ctx.want_scores = true;
  ctx.allowed_arms = mask;
  auto d = (*p)->Select(ctx);
  ASSERT_TRUE(d.ok()) << d.status();
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(d->scores[i], exact[i], 1e-12) << "arm " << i;
  std::vector<double> count(5, 0.0);
  const int n = 200000;
  ctx.want_scores = false;
  for (int t = 0; t < n; ++t) {
    auto e = (*p)->Select(ctx);
    ASSERT_TRUE(e.ok());
    count[e->arm] += 1;
    ASSERT_DOUBLE_EQ(e->propensity, exact[e->arm]);
  }
  for (int i = 0; i < 5; ++i) {
    const double se = std::sqrt(exact[i] * (1 - exact[i]) / n);
    EXPECT_NEAR(count[i] / n, exact[i], 5 * se + 1e-12) << "arm " << i;
  }
}

TEST(EpsilonGreedy, EmpiricalMeanIsRunningAverage) {
  auto p = CreatePolicy(Config(0.1, 2), 1);
  ASSERT_TRUE(p.ok());
  const double rewards[] = {0.5, 1.5, -1.0, 4.0};
  for (double r : rewards) {
    Observation obs;
    obs.arm_id = "1";
    obs.reward = r;
    ASSERT_TRUE((*p)->Update(obs).ok());
  }
  EXPECT_DOUBLE_EQ(*static_cast<const EpsilonGreedy&>(**p).EstimatedMean(1),
                   (0.5 + 1.5 - 1.0 + 4.0) / 4);
  EXPECT_DOUBLE_EQ(*static_cast<const EpsilonGreedy&>(**p).EstimatedMean(0), 0.0);
}

TEST(EpsilonGreedy, RejectsBadInputWithoutChange) {
  EXPECT_EQ(CreatePolicy(Config(1.5, 3), 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto p = CreatePolicy(Config(0.2, 3), 1);
  ASSERT_TRUE(p.ok());
  bandit::v1::PolicyState before, after;
  (*p)->Save(&before);
  Observation obs;
  obs.arm_id = "1";
  obs.reward = std::nan("");
  EXPECT_EQ((*p)->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.arm_id = "nope";
  obs.reward = 1;
  EXPECT_EQ((*p)->Update(obs).code(), absl::StatusCode::kNotFound);
  (*p)->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(EpsilonGreedy, SaveRestoreGivesIdenticalContinuation) {
  auto a = CreatePolicy(Config(0.25, 5), 42);
  ASSERT_TRUE(a.ok());
  Rng env(3);
  auto step = [&](Policy& p) {
    auto d = p.Select({});
    EXPECT_TRUE(d.ok());
    Observation obs;
    obs.arm_id = d->arm_id;
    obs.reward = env.Normal(0.1 * d->arm, 1.0);
    EXPECT_TRUE(p.Update(obs).ok());
    return d->arm;
  };
  for (int i = 0; i < 200; ++i) step(**a);
  bandit::v1::PolicyState state;
  (*a)->Save(&state);
  auto b = CreatePolicy(Config(0.25, 5), 999);  // different seed: the RNG must come from state
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Restore(state).ok());
  Rng env_copy = env;
  std::vector<int> xs, ys;
  for (int i = 0; i < 1000; ++i) xs.push_back(step(**a));
  env = env_copy;
  for (int i = 0; i < 1000; ++i) ys.push_back(step(**b));
  EXPECT_EQ(xs, ys);
}

TEST(EpsilonGreedy, ArmsCanBeAddedAndRemoved) {
  auto p = CreatePolicy(Config(0.0, 2), 1);
  ASSERT_TRUE(p.ok());
  bandit::v1::ArmSpec arm;
  arm.set_id("new");
  ASSERT_TRUE((*p)->AddArm(arm).ok());
  EXPECT_EQ((*p)->AddArm(arm).code(), absl::StatusCode::kInvalidArgument);  // duplicate
  Observation obs;
  obs.arm_id = "new";
  obs.reward = 1.0;
  ASSERT_TRUE((*p)->Update(obs).ok());
  ASSERT_TRUE((*p)->RemoveArm("0").ok());
  EXPECT_EQ((*p)->RemoveArm("0").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*p)->ArmIds(), (std::vector<std::string>{"1", "new"}));
  auto d = (*p)->Select({});  // epsilon = 0: the greedy arm "new"
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->arm_id, "new");
  EXPECT_EQ(d->propensity, 1.0);
}

}  // namespace
}  // namespace bandit
