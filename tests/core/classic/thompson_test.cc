#include "core/classic/thompson.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/registry.h"
#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using TC = bandit::v1::ThompsonConfig;

bandit::v1::PolicyConfig Bern(int arms, int samples, double a0 = 1, double b0 = 1) {
  bandit::v1::PolicyConfig c;
  auto* t = c.mutable_thompson();
  t->set_likelihood(TC::BERNOULLI);
  t->set_prior_alpha(a0);
  t->set_prior_beta(b0);
  t->set_propensity_samples(samples);
  c.set_num_arms(arms);
  return c;
}

bandit::v1::PolicyConfig Gauss(int arms, int samples, double m0 = 0.5, double v0 = 2.0,
                               double s2 = 0.25) {
  bandit::v1::PolicyConfig c;
  auto* t = c.mutable_thompson();
  t->set_likelihood(TC::GAUSSIAN);
  t->set_prior_mean(m0);
  t->set_prior_variance(v0);
  t->set_noise_variance(s2);
  t->set_propensity_samples(samples);
  c.set_num_arms(arms);
  return c;
}

bandit::v1::PolicyConfig MonteCarlo(bandit::v1::PolicyConfig c) {
  c.mutable_thompson()->set_propensity_method(TC::MONTE_CARLO);
  return c;
}

std::unique_ptr<Policy> Make(const bandit::v1::PolicyConfig& c, uint64_t seed = 1) {
  auto p = CreatePolicy(c, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

Thompson& Ts(const std::unique_ptr<Policy>& p) { return *dynamic_cast<Thompson*>(p.get()); }

absl::Status Reward(Policy& p, const std::string& arm, double r) {
  Observation obs;
  obs.arm_id = arm;
  obs.reward = r;
  return p.Update(obs);
}

TEST(Thompson, DefaultsAndConfigValidation) {
  bandit::v1::PolicyConfig c;
  c.mutable_thompson();
  c.set_num_arms(2);
  auto p = Make(c);
  EXPECT_EQ(p->name(), "thompson");
  EXPECT_EQ(Ts(p).likelihood(), Thompson::Likelihood::kBernoulli);
  EXPECT_EQ(Ts(p).PosteriorA(0), 1.0);
  EXPECT_EQ(Ts(p).PosteriorB(1), 1.0);
  auto d = p->Select({});
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(std::isnan(d->propensity));  // default M = 1000 estimates it
  bandit::v1::PolicyConfig g;
  g.mutable_thompson()->set_likelihood(TC::GAUSSIAN);
  g.set_num_arms(1);
  auto q = Make(g);
  EXPECT_EQ(Ts(q).PosteriorA(0), 0.0);  // N(0, 1) prior
  EXPECT_EQ(Ts(q).PosteriorB(0), 1.0);

  auto code = [](const bandit::v1::PolicyConfig& c) { return CreatePolicy(c, 1).status().code(); };
  EXPECT_EQ(code(Bern(2, 10, 0.0, 1.0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Bern(2, 10, 1.0, -1.0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Bern(2, -1)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Bern(2, 2000000)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Gauss(2, 10, std::nan(""))), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Gauss(2, 10, 0.0, 0.0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Gauss(2, 10, 0.0, 1.0, -0.5)), absl::StatusCode::kInvalidArgument);
  auto bad_enum = Bern(2, 10);
  bad_enum.mutable_thompson()->set_likelihood(static_cast<TC::Likelihood>(7));
  EXPECT_EQ(code(bad_enum), absl::StatusCode::kInvalidArgument);
}

// Beta prior (2, 3); rewards 1, 0, 0.3 on arm "1": alpha = 2 + 1.3 = 3.3, beta = 3 + 1.7 = 4.7.
TEST(Thompson, BetaPosteriorClosedForm) {
  auto p = Make(Bern(3, 0, 2.0, 3.0));
  for (double r : {1.0, 0.0, 0.3}) ASSERT_TRUE(Reward(*p, "1", r).ok());
  EXPECT_DOUBLE_EQ(Ts(p).PosteriorA(1), 3.3);
  EXPECT_DOUBLE_EQ(Ts(p).PosteriorB(1), 4.7);
  EXPECT_DOUBLE_EQ(Ts(p).PosteriorA(0), 2.0);
  EXPECT_DOUBLE_EQ(*Ts(p).EstimatedMean(1), 3.3 / 8.0);
  EXPECT_DOUBLE_EQ(*Ts(p).EstimatedMean(2), 0.4);
  EXPECT_EQ(Ts(p).pulls()[1], 3.0);
}

// Prior N(0.5, 2), noise 0.25; rewards 1, 2, 0:
//   v = 1 / (1/2 + 3/0.25) = 0.08,  m = 0.08 * (0.5/2 + 3/0.25) = 0.98.
TEST(Thompson, GaussianPosteriorClosedForm) {
  auto p = Make(Gauss(2, 0));
  for (double r : {1.0, 2.0, 0.0}) ASSERT_TRUE(Reward(*p, "0", r).ok());
  EXPECT_NEAR(Ts(p).PosteriorA(0), 0.98, 1e-14);
  EXPECT_NEAR(Ts(p).PosteriorB(0), 0.08, 1e-15);
  EXPECT_DOUBLE_EQ(Ts(p).PosteriorA(1), 0.5);
  EXPECT_DOUBLE_EQ(Ts(p).PosteriorB(1), 2.0);
  EXPECT_NEAR(*Ts(p).EstimatedMean(0), 0.98, 1e-14);
  // Rewards outside [0, 1] are fine for the Gaussian likelihood.
  EXPECT_TRUE(Reward(*p, "1", -7.5).ok());
}

// With M = 0 the scores are the posterior draws: their sample mean and variance match the
// closed forms (statistical, fixed seed, margins ~5 standard errors).
TEST(Thompson, SamplerMomentsMatchPosterior) {
  auto p = Make(Bern(2, 0, 0.5, 0.5));  // arm 1 stays Beta(0.5, 0.5): the shape < 1 path
  for (double r : {1.0, 0.0, 0.3}) ASSERT_TRUE(Reward(*p, "0", r).ok());
  auto g = Make(Gauss(1, 0));
  for (double r : {1.0, 2.0, 0.0}) ASSERT_TRUE(Reward(*g, "0", r).ok());
  SelectContext ctx;
  ctx.want_scores = true;
  const int n = 40000;
  Vector sum = Vector::Zero(3), sq = Vector::Zero(3);
  for (int i = 0; i < n; ++i) {
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->score_kind, bandit::v1::POSTERIOR_SAMPLE);
    ASSERT_TRUE(std::isnan(d->propensity));
    auto e = g->Select(ctx);
    Vector x(3);
    x << d->scores[0], d->scores[1], e->scores[0];
    sum += x;
    sq += x.cwiseProduct(x);
  }
  const Vector mean = sum / n;
  const Vector var = sq / n - mean.cwiseProduct(mean);
  // Beta(1.8, 2.2): mean a / (a+b) = 0.45, var ab / ((a+b)^2 (a+b+1)) = 0.0495.
  EXPECT_NEAR(mean[0], 0.45, 0.006);
  EXPECT_NEAR(var[0], 0.0495, 0.003);
  EXPECT_NEAR(mean[1], 0.5, 0.01);
  EXPECT_NEAR(var[1], 0.125, 0.003);
  EXPECT_NEAR(mean[2], 0.98, 0.008);
  EXPECT_NEAR(var[2], 0.08, 0.004);
}

double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Probability that Beta(a1, b1) > Beta(a2, b2), by numerical integration of f1(x) F2(x).
double BetaWinProbability(double a1, double b1, double a2, double b2) {
  const int n = 200000;
  const double h = 1.0 / n;
  auto logc = [](double a, double b) {
    return std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b);
  };
  double cdf2 = 0, prob = 0;
  for (int i = 0; i < n; ++i) {
    const double x = (i + 0.5) * h;
    const double f2 = std::exp(logc(a2, b2) + (a2 - 1) * std::log(x) + (b2 - 1) * std::log1p(-x));
    const double f1 = std::exp(logc(a1, b1) + (a1 - 1) * std::log(x) + (b1 - 1) * std::log1p(-x));
    prob += f1 * (cdf2 + 0.5 * f2 * h) * h;
    cdf2 += f2 * h;
  }
  return prob;
}

TEST(Thompson, MonteCarloPropensityEstimatesArgmaxProbability) {
  const int m = 20000;
  // Gaussian: P(theta_1 > theta_0) = Phi((m1 - m0) / sqrt(v0 + v1)).
  auto g = Make(MonteCarlo(Gauss(2, m)));
  for (double r : {1.0, 2.0, 0.0}) ASSERT_TRUE(Reward(*g, "0", r).ok());  // N(0.98, 0.08)
  ASSERT_TRUE(Reward(*g, "1", 1.2).ok());                                 // below
  const double v1 = 1.0 / (0.5 + 4.0), m1 = v1 * (0.25 + 1.2 / 0.25);
  const double p1 = Phi((m1 - 0.98) / std::sqrt(0.08 + v1));
  SelectContext ctx;
  ctx.want_scores = true;
  auto d = g->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->score_kind, bandit::v1::PROBABILITY);
  EXPECT_NEAR(d->scores.sum(), 1.0, 1e-12);
  EXPECT_NEAR(d->scores[1], p1, 0.015);
  EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);
  // Bernoulli: Beta(3, 2) against Beta(2, 3) by numerical integration.
  auto b = Make(MonteCarlo(Bern(2, m, 1.0, 1.0)));
  for (double r : {1.0, 1.0, 0.0}) ASSERT_TRUE(Reward(*b, "0", r).ok());
  for (double r : {1.0, 0.0, 0.0}) ASSERT_TRUE(Reward(*b, "1", r).ok());
  const double p0 = BetaWinProbability(3, 2, 2, 3);
  EXPECT_GT(p0, 0.7);
  EXPECT_LT(p0, 0.8);
  auto e = b->Select(ctx);
  EXPECT_NEAR(e->scores[0], p0, 0.015);
  // A small M still gives every chosen arm a positive propensity (its own draw counts).
  auto s = Make(MonteCarlo(Bern(4, 3)));
  for (int i = 0; i < 50; ++i) {
    auto f = s->Select(ctx);
    EXPECT_GE(f->propensity, 0.25 - 1e-15);
    EXPECT_NEAR(f->scores.sum(), 1.0, 1e-12);
  }
}

// The default QUADRATURE propensity against the same closed forms, to 1e-6.
TEST(Thompson, QuadraturePropensityIsTheArgmaxProbability) {
  SelectContext ctx;
  ctx.want_scores = true;
  auto g = Make(Gauss(2, 1000));
  EXPECT_EQ(Ts(g).propensity_method(), Thompson::PropensityMethod::kQuadrature);
  for (double r : {1.0, 2.0, 0.0}) ASSERT_TRUE(Reward(*g, "0", r).ok());  // N(0.98, 0.08)
  ASSERT_TRUE(Reward(*g, "1", 1.2).ok());
  const double v1 = 1.0 / (0.5 + 4.0), m1 = v1 * (0.25 + 1.2 / 0.25);
  const double p1 = Phi((m1 - 0.98) / std::sqrt(0.08 + v1));
  for (int i = 0; i < 20; ++i) {
    auto d = g->Select(ctx);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->score_kind, bandit::v1::PROBABILITY);
    EXPECT_NEAR(d->scores[1], p1, 1e-6);
    EXPECT_NEAR(d->scores.sum(), 1.0, 2e-6);
    EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);
    auto e = g->Select({});  // without scores: the chosen arm only, same value
    EXPECT_NEAR(e->propensity, e->arm == 1 ? p1 : 1 - p1, 1e-6);
  }
  auto b = Make(Bern(2, 1000, 1.0, 1.0));
  for (double r : {1.0, 1.0, 0.0}) ASSERT_TRUE(Reward(*b, "0", r).ok());
  for (double r : {1.0, 0.0, 0.0}) ASSERT_TRUE(Reward(*b, "1", r).ok());
  const double p0 = BetaWinProbability(3, 2, 2, 3);
  auto e = b->Select(ctx);
  EXPECT_NEAR(e->scores[0], p0, 1e-6);
  EXPECT_NEAR(Ts(b).ArgmaxProbabilities()[0], p0, 1e-6);
}

// Conditional on an allowed-arms mask (a later slot of a multi-slot decision), the QUADRATURE
// probabilities are those of the argmax over the allowed arms' posteriors alone: checked against
// the frequencies of 10^6 joint draws made here with the standard library's own gamma sampler
// (Beta = G_a / (G_a + G_b)), each within 5 standard errors, and the excluded arms get 0.
TEST(Thompson, MaskedQuadratureIsTheConditionalArgmaxProbability) {
  auto b = Make(Bern(5, 1000, 1.0, 1.0));
  const std::vector<std::vector<double>> rewards = {
      {1, 1, 0}, {1, 1, 1, 1}, {1, 0, 0}, {0, 1}, {1, 1, 0, 0, 1}};
  for (int i = 0; i < 5; ++i)
    for (double r : rewards[i]) ASSERT_TRUE(Reward(*b, std::to_string(i), r).ok());
  const std::vector<char> mask = {1, 0, 1, 1, 1};  // arm 1 (the best) taken by an earlier slot
  SelectContext ctx;
  ctx.want_scores = true;
  ctx.allowed_arms = mask;
  auto d = b->Select(ctx);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->score_kind, bandit::v1::PROBABILITY);
  EXPECT_EQ(d->scores[1], 0.0);
  EXPECT_NE(d->arm, 1);
  EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);

  std::mt19937_64 gen(2024);
  auto beta = [&gen](double a, double bb) {
    const double x = std::gamma_distribution<double>(a, 1.0)(gen);
    const double y = std::gamma_distribution<double>(bb, 1.0)(gen);
    return x / (x + y);
  };
  std::vector<double> wins(5, 0.0);
  const int n = 1000000;
  for (int t = 0; t < n; ++t) {
    int best = -1;
    double top = -1;
    for (int i = 0; i < 5; ++i) {
      if (!mask[i]) continue;
      const double theta = beta(Ts(b).PosteriorA(i), Ts(b).PosteriorB(i));
      if (theta > top) top = theta, best = i;
    }
    wins[best] += 1;
  }
  for (int i = 0; i < 5; ++i) {
    const double f = wins[i] / n;
    const double se = std::sqrt(std::max(f * (1 - f), 1e-12) / n);
    EXPECT_NEAR(d->scores[i], f, 5 * se + 1e-6) << "arm " << i;
  }
  // Without the scores, the chosen arm's propensity is the same conditional probability.
  ctx.want_scores = false;
  for (int t = 0; t < 20; ++t) {
    auto e = b->Select(ctx);
    ASSERT_TRUE(e.ok());
    ASSERT_NE(e->arm, 1);
    EXPECT_NEAR(e->propensity, d->scores[e->arm], 1e-5);
  }
}

// The chosen arm's QUADRATURE propensity is never below kPropensityFloor, even when the
// sampled arm is one whose exact probability is far smaller. Both arms have the prior
// Beta(10^6, 1); arm "1" then gets 21 zero rewards: Beta(10^6, 22). Near 1 the draws are
// 1 - Gamma(shape)/10^6, so P(arm 1 wins) = P(Gamma(22) < Gamma(1)) = 2^-22 = 2.4e-7 < 1e-6.
// Seed 5598167 is one (found by search with propensity off) whose first decision is arm 1.
TEST(Thompson, QuadraturePropensityFloor) {
  for (int samples : {0, 1000}) {
    auto p = Make(Bern(2, samples, 1e6, 1.0), 5598167);
    for (int i = 0; i < 21; ++i) ASSERT_TRUE(Reward(*p, "1", 0.0).ok());
    EXPECT_NEAR(Ts(p).ArgmaxProbabilities()[1], std::ldexp(1.0, -22), 1e-9);
    auto d = p->Select({});
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->arm, 1) << "samples " << samples;  // the improbable arm (same stream)
    if (samples == 0) {
      EXPECT_TRUE(std::isnan(d->propensity));
    } else {
      EXPECT_EQ(d->propensity, Thompson::kPropensityFloor);
    }
  }
}

TEST(Thompson, RejectsBadInputWithoutChange) {
  auto p = Make(Bern(3, 10));
  ASSERT_TRUE(Reward(*p, "1", 0.5).ok());
  ASSERT_TRUE(p->Select({}).ok());
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  for (double r : {1.5, -0.1, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_EQ(Reward(*p, "1", r).code(), absl::StatusCode::kInvalidArgument) << r;
  EXPECT_EQ(Reward(*p, "nope", 1.0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p->RemoveArm("nope").code(), absl::StatusCode::kNotFound);
  bandit::v1::ArmSpec bad;
  bad.set_id("bad id");
  EXPECT_EQ(p->AddArm(bad).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());

  // Update never draws randomness.
  ASSERT_TRUE(Reward(*p, "2", 0.25).ok());
  p->Save(&after);
  EXPECT_EQ(before.rng(), after.rng());

  auto g = Make(Gauss(2, 10));
  g->Save(&before);
  EXPECT_EQ(Reward(*g, "0", std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reward(*g, "0", -INFINITY).code(), absl::StatusCode::kInvalidArgument);
  g->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());

  // Empty arm set: FAILED_PRECONDITION, random engine untouched.
  auto e = Make(Bern(1, 10));
  ASSERT_TRUE(e->RemoveArm("0").ok());
  e->Save(&before);
  EXPECT_EQ(e->Select({}).status().code(), absl::StatusCode::kFailedPrecondition);
  e->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());

  // A Bernoulli state cannot be restored into a Gaussian policy.
  p->Save(&before);
  EXPECT_EQ(g->Restore(before).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Thompson, ArmsCanBeAddedAndRemoved) {
  auto p = Make(Bern(2, 0, 2.0, 2.0));
  ASSERT_TRUE(Reward(*p, "1", 1.0).ok());
  bandit::v1::ArmSpec arm;
  arm.set_id("new");
  ASSERT_TRUE(p->AddArm(arm).ok());
  EXPECT_EQ(Ts(p).PosteriorA(2), 2.0);  // the prior
  ASSERT_TRUE(p->RemoveArm("0").ok());
  EXPECT_EQ(p->ArmIds(), (std::vector<std::string>{"1", "new"}));
  EXPECT_EQ(Ts(p).PosteriorA(0), 3.0);
  EXPECT_EQ(Ts(p).PosteriorB(0), 2.0);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Reward(*p, "new", 1.0).ok());  // Beta(22, 2)
    ASSERT_TRUE(Reward(*p, "1", 0.0).ok());    // Beta(3, 22)
  }
  auto d = p->Select({});
  EXPECT_EQ(d->arm_id, "new");

  auto g = Make(Gauss(2, 0));
  ASSERT_TRUE(g->AddArm(arm).ok());
  ASSERT_TRUE(Reward(*g, "new", 1.0).ok());
  ASSERT_TRUE(g->RemoveArm("0").ok());
  EXPECT_NEAR(Ts(g).PosteriorB(1), 1.0 / (0.5 + 4.0), 1e-15);
}

struct BernoulliEnv {
  std::vector<double> means = {0.1, 0.25, 0.4, 0.55, 0.7};
  Rng rng;
  explicit BernoulliEnv(uint64_t seed) : rng(seed) {}
};

std::pair<int, double> Step(Policy& p, BernoulliEnv& env, bool gaussian_rewards = false) {
  auto d = p.Select({});
  EXPECT_TRUE(d.ok());
  const double r = gaussian_rewards ? env.rng.Normal(env.means[d->arm], 0.5)
                                    : (env.rng.Bernoulli(env.means[d->arm]) ? 1.0 : 0.0);
  EXPECT_TRUE(Reward(p, d->arm_id, r).ok());
  return {d->arm, d->propensity};
}

TEST(Thompson, SaveRestoreGivesIdenticalContinuation) {
  for (bool gaussian : {false, true}) {
    auto config = gaussian ? Gauss(5, 20) : Bern(5, 20);
    auto a = Make(config, 1);
    BernoulliEnv env(9);
    for (int i = 0; i < 200; ++i) Step(*a, env, gaussian);
    bandit::v1::PolicyState state;
    a->Save(&state);
    auto b = Make(config, 12345);  // different seed: the engine must come from the state
    ASSERT_TRUE(b->Restore(state).ok());
    BernoulliEnv copy = env;
    std::vector<std::pair<int, double>> xs, ys;
    for (int i = 0; i < 1000; ++i) xs.push_back(Step(*a, env, gaussian));
    for (int i = 0; i < 1000; ++i) ys.push_back(Step(*b, copy, gaussian));
    EXPECT_EQ(xs, ys) << "gaussian " << gaussian;  // arms and propensities
  }
}

// The quadrature keeps per-arm data between Selects (see posteriors_ in thompson.h). After
// every kind of state change (updates, arms added and removed, Restore of an older state) the
// cached propensities must equal the exact evaluation of the policy's current posteriors, built
// afresh: a stale entry (one arm's curve from before its update) would be off by far more than
// 1e-6. Each chosen arm's propensity is checked against the same reference as well.
TEST(Thompson, CachedPropensityMatchesTheExactEvaluationThroughStateChanges) {
  for (bool gaussian : {false, true}) {
    auto p = Make(gaussian ? Gauss(5, 1000) : Bern(5, 1000), 3);
    BernoulliEnv env(17);
    env.means.push_back(0.6);  // for the arm added below
    auto exact = [&] {
      const int k = static_cast<int>(p->ArmIds().size());
      Vector first(k), second(k);
      for (int i = 0; i < k; ++i) {
        first[i] = Ts(p).PosteriorA(i);
        second[i] = gaussian ? std::sqrt(Ts(p).PosteriorB(i)) : Ts(p).PosteriorB(i);
      }
      ArgmaxProbability reference(
          gaussian ? ArgmaxProbability::Family::kNormal : ArgmaxProbability::Family::kBeta,
          first, second);
      reference.SetExactForTesting(true);
      return reference;
    };
    auto check = [&](const std::string& when) {
      const Vector cached = Ts(p).ArgmaxProbabilities();
      const Vector reference = exact().All();
      ASSERT_EQ(cached.size(), reference.size()) << when;
      for (int i = 0; i < cached.size(); ++i)
        EXPECT_NEAR(cached[i], reference[i], 1e-6) << when << ", arm " << i << ", gaussian "
                                                   << gaussian;
    };
    auto rounds = [&](int n, const std::string& when) {
      for (int i = 0; i < n; ++i) {
        const ArgmaxProbability reference = exact();
        auto [arm, propensity] = Step(*p, env, gaussian);
        if (i % 10 == 0) {
          EXPECT_NEAR(propensity, std::max(reference.Of(arm), Thompson::kPropensityFloor), 1e-6)
              << when << ", round " << i << ", gaussian " << gaussian;
        }
      }
      check(when);
    };
    check("fresh");
    rounds(150, "updates");
    bandit::v1::ArmSpec arm;
    arm.set_id("added");
    ASSERT_TRUE(p->AddArm(arm).ok());
    check("arm added");
    rounds(60, "updates after the add");
    ASSERT_TRUE(p->RemoveArm("1").ok());
    env.means.erase(env.means.begin() + 1);
    check("arm removed");
    rounds(60, "updates after the remove");
    bandit::v1::PolicyState saved;
    p->Save(&saved);
    rounds(100, "updates after the save");
    ASSERT_TRUE(p->Restore(saved).ok());
    check("restored");
    rounds(60, "updates after the restore");
  }
}

TEST(Thompson, StateDoesNotGrow) {
  for (bool gaussian : {false, true}) {
    auto p = Make(MonteCarlo(gaussian ? Gauss(5, 5) : Bern(5, 5)));
    BernoulliEnv env(4);
    auto size_after = [&](int rounds) {
      for (int i = 0; i < rounds; ++i) Step(*p, env, gaussian);
      bandit::v1::PolicyState s;
      p->Save(&s);
      return std::make_pair(p->StateBytes(), s.ByteSizeLong());
    };
    const auto small = size_after(1000);
    const auto large = size_after(99000);
    EXPECT_EQ(small.first, large.first);
    // Fixed-width tensors; the engine's text form and a varint counter vary by a few bytes.
    EXPECT_LE(large.second, small.second + 64);
    EXPECT_GE(large.second + 64, small.second);
  }
}

TEST(Thompson, PicksTheBestArmMostOften) {
  for (bool gaussian : {false, true}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      auto p = Make(gaussian ? Gauss(5, 0, 0.0, 1.0, 0.25) : Bern(5, 0), seed);
      BernoulliEnv env(1000 + seed);
      std::vector<int> pulls(5);
      double regret = 0;
      for (int t = 0; t < 5000; ++t) {
        const int a = Step(*p, env, gaussian).first;
        ++pulls[a];
        regret += 0.7 - env.means[a];
      }
      EXPECT_EQ(std::max_element(pulls.begin(), pulls.end()) - pulls.begin(), 4)
          << "seed " << seed << " gaussian " << gaussian;
      // Observed with these seeds: 4686..4945 pulls, regret 17..55.
      EXPECT_GT(pulls[4], 4000) << "seed " << seed;
      EXPECT_LT(regret, 0.1 * 5000 * 0.3) << "seed " << seed;  // uniform: 0.3 per round
    }
  }
}

// The propensity method does not change the random stream: the same seed gives the same
// decisions under QUADRATURE and MONTE_CARLO (whatever M), which are also the decisions made
// before quadrature existed (the Monte-Carlo path is unchanged), so journals replay identically.
TEST(Thompson, PropensityMethodKeepsTheDecisionStream) {
  for (bool gaussian : {false, true}) {
    auto q = Make(gaussian ? Gauss(5, 1000) : Bern(5, 1000), 77);
    auto m = Make(MonteCarlo(gaussian ? Gauss(5, 7) : Bern(5, 7)), 77);
    BernoulliEnv env_q(3), env_m(3);
    for (int i = 0; i < 500; ++i)
      ASSERT_EQ(Step(*q, env_q, gaussian).first, Step(*m, env_m, gaussian).first) << i;
    bandit::v1::PolicyState sq, sm;
    q->Save(&sq);
    m->Save(&sm);
    EXPECT_EQ(sq.SerializeAsString(), sm.SerializeAsString());
  }
}

}  // namespace
}  // namespace bandit
