#include "core/classic/ucb1.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

bandit::v1::PolicyConfig Config(int arms, std::optional<double> c = std::nullopt) {
  bandit::v1::PolicyConfig cfg;
  auto* u = cfg.mutable_ucb1();
  if (c) u->set_exploration(*c);
  cfg.set_num_arms(arms);
  return cfg;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c, uint64_t seed = 1) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

absl::Status Reward(Policy& p, const std::string& arm, double r) {
  Observation obs;
  obs.arm_id = arm;
  obs.reward = r;
  return p.Update(obs);
}

TEST(Ucb1, UntriedArmsFirstInSlotOrder) {
  auto p = Make(Config(3));
  EXPECT_EQ(p->name(), "ucb1");
  SelectContext ctx;
  ctx.want_scores = true;
  for (int expect = 0; expect < 3; ++expect) {
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->arm, expect);
    EXPECT_EQ(d->arm_id, std::to_string(expect));
    EXPECT_EQ(d->propensity, 1.0);
    EXPECT_EQ(d->scores[expect], Ucb1::kUntriedScore);
    EXPECT_TRUE(std::isnan(d->estimated_gap));  // no estimate for an untried arm
    // A decision without a reward does not make the arm "tried".
    auto again = p->Select(ctx);
    EXPECT_EQ(again->arm, expect);
    ASSERT_TRUE(Reward(*p, d->arm_id, 0.0).ok());
  }
}

// Indices checked by hand: c = 1; arm 0 rewards {1, 0}, arm 1 {0.5}, arm 2 {1}; n = 4.
//   arm 0: 0.5 + sqrt(2 ln 4 / 2) = 0.5 + 1.1774100225154747 = 1.6774100225154747
//   arm 1: 0.5 + sqrt(2 ln 4 / 1) = 0.5 + 1.6651092223153954 = 2.1651092223153954
//   arm 2: 1.0 + 1.6651092223153954                           = 2.6651092223153954
TEST(Ucb1, ScoresByHand) {
  auto p = Make(Config(3));
  ASSERT_TRUE(Reward(*p, "0", 1.0).ok());
  ASSERT_TRUE(Reward(*p, "0", 0.0).ok());
  ASSERT_TRUE(Reward(*p, "1", 0.5).ok());
  ASSERT_TRUE(Reward(*p, "2", 1.0).ok());
  SelectContext ctx;
  ctx.want_scores = true;
  auto d = p->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->score_kind, bandit::v1::UPPER_CONFIDENCE_BOUND);
  EXPECT_NEAR(d->scores[0], 1.6774100225154747, 1e-12);
  EXPECT_NEAR(d->scores[1], 2.1651092223153954, 1e-12);
  EXPECT_NEAR(d->scores[2], 2.6651092223153954, 1e-12);
  EXPECT_EQ(d->arm, 2);
  EXPECT_DOUBLE_EQ(d->estimated_gap, 0.0);
  EXPECT_EQ(*static_cast<const Ucb1&>(*p).EstimatedMean(0), 0.5);
  // Diagnostics.
  std::map<std::string, double> diag(d->diagnostics.begin(), d->diagnostics.end());
  EXPECT_NEAR(diag["ucb"], 2.6651092223153954, 1e-12);
  EXPECT_EQ(diag["mean"], 1.0);
  EXPECT_EQ(diag["pulls"], 1.0);

  // c = 0.5 halves the bonus; c = 0 is greedy (arm 2, then a tie between 0 and 1 -> 0).
  auto q = Make(Config(3, 0.5));
  ASSERT_TRUE(Reward(*q, "0", 1.0).ok());
  ASSERT_TRUE(Reward(*q, "0", 0.0).ok());
  ASSERT_TRUE(Reward(*q, "1", 0.5).ok());
  ASSERT_TRUE(Reward(*q, "2", 0.2).ok());
  auto e = q->Select(ctx);
  EXPECT_NEAR(e->scores[1], 0.5 + 0.5 * 1.6651092223153954, 1e-12);
  EXPECT_EQ(e->arm, 1);
  EXPECT_NEAR(e->estimated_gap, 0.0, 1e-15);
  auto g = Make(Config(2, 0.0));
  ASSERT_TRUE(Reward(*g, "0", 0.3).ok());
  ASSERT_TRUE(Reward(*g, "1", 0.3).ok());
  EXPECT_EQ(g->Select(ctx)->arm, 0);
}

TEST(Ucb1, RejectsBadInputWithoutChange) {
  EXPECT_EQ(CreatePolicy(Config(3, -1.0), 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreatePolicy(Config(3, std::nan("")), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreatePolicy(Config(0), 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto p = Make(Config(3));
  ASSERT_TRUE(Reward(*p, "1", 0.5).ok());
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  EXPECT_EQ(Reward(*p, "1", std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reward(*p, "1", INFINITY).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reward(*p, "nope", 1.0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p->RemoveArm("nope").code(), absl::StatusCode::kNotFound);
  bandit::v1::ArmSpec dup;
  dup.set_id("1");
  EXPECT_EQ(p->AddArm(dup).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::ArmSpec feat;
  feat.set_id("f");
  feat.add_features(1.0);
  EXPECT_EQ(p->AddArm(feat).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(Ucb1, ArmsCanBeAddedAndRemoved) {
  auto p = Make(Config(2));
  ASSERT_TRUE(Reward(*p, "0", 0.9).ok());
  ASSERT_TRUE(Reward(*p, "1", 0.1).ok());
  bandit::v1::ArmSpec arm;
  arm.set_id("new");
  ASSERT_TRUE(p->AddArm(arm).ok());
  auto d = p->Select({});
  EXPECT_EQ(d->arm_id, "new");  // untried arms first
  ASSERT_TRUE(Reward(*p, "new", 0.5).ok());
  ASSERT_TRUE(p->RemoveArm("0").ok());
  EXPECT_EQ(p->ArmIds(), (std::vector<std::string>{"1", "new"}));
  EXPECT_EQ(*static_cast<const Ucb1&>(*p).EstimatedMean(0), 0.1);
  EXPECT_EQ(*static_cast<const Ucb1&>(*p).EstimatedMean(1), 0.5);
  SelectContext ctx;
  ctx.want_scores = true;
  auto e = p->Select(ctx);
  // n = 3 rewards received overall (including the removed arm's).
  EXPECT_NEAR(e->scores[1], 0.5 + std::sqrt(2 * std::log(3.0)), 1e-12);
  EXPECT_EQ(e->arm_id, "new");
  ASSERT_TRUE(p->RemoveArm("1").ok());
  ASSERT_TRUE(p->RemoveArm("new").ok());
  EXPECT_EQ(p->Select({}).status().code(), absl::StatusCode::kFailedPrecondition);
}

struct BernoulliEnv {
  std::vector<double> means = {0.1, 0.25, 0.4, 0.55, 0.7};
  Rng rng;
  explicit BernoulliEnv(uint64_t seed) : rng(seed) {}
  double Pull(int arm) { return rng.Bernoulli(means[arm]) ? 1.0 : 0.0; }
};

int Step(Policy& p, BernoulliEnv& env) {
  auto d = p.Select({});
  EXPECT_TRUE(d.ok());
  EXPECT_TRUE(Reward(p, d->arm_id, env.Pull(d->arm)).ok());
  return d->arm;
}

TEST(Ucb1, SaveRestoreGivesIdenticalContinuation) {
  auto a = Make(Config(5), 1);
  BernoulliEnv env(9);
  for (int i = 0; i < 200; ++i) Step(*a, env);
  bandit::v1::PolicyState state;
  a->Save(&state);
  auto b = Make(Config(5), 77);
  ASSERT_TRUE(b->Restore(state).ok());
  BernoulliEnv copy = env;
  std::vector<int> xs, ys;
  for (int i = 0; i < 1000; ++i) xs.push_back(Step(*a, env));
  for (int i = 0; i < 1000; ++i) ys.push_back(Step(*b, copy));
  EXPECT_EQ(xs, ys);
  // Restoring into a policy with a different arm count gets the arm set from the state.
  auto c = Make(Config(2), 5);
  ASSERT_TRUE(c->Restore(state).ok());
  EXPECT_EQ(c->ArmIds().size(), 5u);
}

TEST(Ucb1, StateDoesNotGrow) {
  auto p = Make(Config(5));
  BernoulliEnv env(4);
  auto size_after = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) Step(*p, env);
    bandit::v1::PolicyState s;
    p->Save(&s);
    return std::make_pair(p->StateBytes(), s.ByteSizeLong());
  };
  const auto small = size_after(1000);
  const auto large = size_after(99000);
  EXPECT_EQ(small.first, large.first);
  EXPECT_LE(large.second, small.second + 4);  // only varint counters may lengthen
}

// Regret sanity: over 5 seeds, after 5000 rounds the best of 5 Bernoulli arms is the most
// pulled, with more than 70% of the pulls, and the pseudo-regret is below 1/5 of uniform play's.
TEST(Ucb1, PicksTheBestArmMostOften) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto p = Make(Config(5), seed);
    BernoulliEnv env(1000 + seed);
    std::vector<int> pulls(5);
    double regret = 0;
    for (int t = 0; t < 5000; ++t) {
      const int a = Step(*p, env);
      ++pulls[a];
      regret += 0.7 - env.means[a];
    }
    EXPECT_EQ(std::max_element(pulls.begin(), pulls.end()) - pulls.begin(), 4) << "seed " << seed;
    // Observed with these seeds: 4331..4622 pulls, regret 104..163.
    EXPECT_GT(pulls[4], 3500) << "seed " << seed;
    EXPECT_LT(regret, 0.2 * 5000 * 0.3) << "seed " << seed;  // uniform: 0.3 per round
  }
}

}  // namespace
}  // namespace bandit
