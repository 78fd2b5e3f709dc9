// Links, the MLE solver and the MLE baselines (GLM-UCB, sliding-window GLM-UCB, GLM epsilon-greedy).
#include <cmath>

#include <gtest/gtest.h>

#include "core/glb/glm_epsilon_greedy.h"
#include "core/glb/glm_ucb.h"
#include "core/glb/link.h"
#include "core/glb/mle.h"
#include "core/rng.h"
#include "glb_test_util.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

using testing::MustCreate;

TEST(Link, DerivativesMatchFiniteDifferences) {
  for (auto kind : {LinkKind::kLogistic, LinkKind::kPoisson, LinkKind::kGaussian}) {
    const GlmLink link(kind, kind == LinkKind::kGaussian ? 0.7 : 1.0);
    for (double z : {-4.0, -1.0, 0.0, 0.3, 2.5}) {
      const double h = 1e-5;
      EXPECT_NEAR(link.Mu(z), (link.M(z + h) - link.M(z - h)) / (2 * h), 1e-7) << z;
      EXPECT_NEAR(link.MuPrime(z), (link.Mu(z + h) - link.Mu(z - h)) / (2 * h), 1e-7) << z;
      EXPECT_NEAR(link.LossGrad(z, 0.4), (link.Loss(z + h, 0.4) - link.Loss(z - h, 0.4)) / (2 * h),
                  1e-7);
    }
  }
  const GlmLink logistic(LinkKind::kLogistic, 1.0);
  EXPECT_NEAR(logistic.CMu(3.0), std::exp(3.0) / std::pow(1 + std::exp(3.0), 2), 1e-15);
  EXPECT_NEAR(logistic.M(800.0), 800.0, 1e-9);  // stable softplus
  EXPECT_TRUE(logistic.CheckReward("reward", 0.5).ok());
  EXPECT_EQ(logistic.CheckReward("reward", 1.01).code(), absl::StatusCode::kInvalidArgument);
}

// Gaussian link: the regularized MLE is ridge regression, (X X'/g + lambda I)^{-1} X r / g.
TEST(Mle, GaussianIsRidgeClosedForm) {
  const GlmLink link(LinkKind::kGaussian, 0.5);
  GlmHistory data(3, 0);
  Rng rng(2);
  for (int i = 0; i < 40; ++i) {
    Eigen::VectorXd x(3);
    for (int j = 0; j < 3; ++j) x[j] = rng.Normal();
    data.Add(x / x.norm(), rng.Normal());
  }
  const MleFit fit = FitGlmMle(link, data, 2.0, Eigen::VectorXd::Zero(3), 100.0);
  const Eigen::MatrixXd X = data.X();
  const Eigen::VectorXd ridge = (X * X.transpose() / 0.5 + 2.0 * Eigen::MatrixXd::Identity(3, 3))
                                    .ldlt()
                                    .solve(X * data.r() / 0.5);
  EXPECT_LT((fit.theta - ridge).norm(), 1e-10);
  EXPECT_TRUE(fit.converged);
}

// Logistic / Poisson: stationarity (gradient zero) and no better point nearby.
TEST(Mle, LogisticAndPoissonAreStationary) {
  for (auto kind : {LinkKind::kLogistic, LinkKind::kPoisson}) {
    const GlmLink link(kind, 1.0);
    GlmHistory data(4, 0);
    Rng rng(3);
    Eigen::VectorXd truth(4);
    truth << 1.0, -0.5, 0.8, 0.2;
    for (int i = 0; i < 300; ++i) {
      Eigen::VectorXd x(4);
      for (int j = 0; j < 4; ++j) x[j] = rng.Normal();
      x /= x.norm();
      const double m = link.Mu(x.dot(truth));
      const double r =
          kind == LinkKind::kLogistic ? (rng.Uniform() < m) : sim::GlbEnv::Poisson(rng, m);
      data.Add(x, r);
    }
    const double lambda = 1.5;
    const MleFit fit = FitGlmMle(link, data, lambda, Eigen::VectorXd::Zero(4), 10.0);
    EXPECT_TRUE(fit.converged);
    Eigen::VectorXd grad = lambda * fit.theta;
    for (int64_t i = 0; i < data.size(); ++i)
      grad += link.LossGrad(data.X().col(i).dot(fit.theta), data.r()[i]) * data.X().col(i);
    EXPECT_LT(grad.norm(), 1e-5);  // sum of 300 terms of size ~0.5
    const double f = GlmObjective(link, data, lambda, fit.theta);
    for (int k = 0; k < 20; ++k) {
      Eigen::VectorXd e(4);
      for (int j = 0; j < 4; ++j) e[j] = 1e-3 * rng.Normal();
      EXPECT_GE(GlmObjective(link, data, lambda, fit.theta + e), f);
    }
  }
}

TEST(GlmHistory, SlidingWindowKeepsLastRounds) {
  GlmHistory h(2, 3);
  for (int i = 0; i < 7; ++i) h.Add(Eigen::Vector2d(i, 0), i);
  ASSERT_EQ(h.size(), 3);
  std::vector<double> r(h.r().data(), h.r().data() + 3);
  std::sort(r.begin(), r.end());
  EXPECT_EQ(r, (std::vector<double>{4, 5, 6}));
}

bandit::v1::PolicyConfig UcbConfig(int d, double S, int64_t window = 0) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_glm_ucb();
  g->set_dimension(d);
  g->set_s(S);
  if (window) g->set_window(window);
  return c;
}

bandit::v1::PolicyConfig EpsConfig(int d, double eps) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_glm_epsilon_greedy();
  g->set_dimension(d);
  g->set_s(3);
  g->set_epsilon(eps);
  return c;
}

sim::GlbEnvConfig EnvConfig(sim::GlbEnvKind kind, int d, int arms, double S, int64_t T) {
  sim::GlbEnvConfig e;
  e.kind = kind;
  e.d = d;
  e.arms = arms;
  e.S = S;
  e.T = T;
  return e;
}

TEST(GlmUcb, RegretBeatsUniform) {
  double ucb = 0, uni = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const auto ec = EnvConfig(sim::GlbEnvKind::kLogistic, 5, 20, 3.0, 1000);
    auto p = MustCreate(UcbConfig(5, 3.0), seed);
    sim::GlbEnv env(ec, seed), env_u(ec, seed);
    ucb += testing::Run(*p, env, 1000);
    uni += testing::UniformRegret(env_u, 1000, 20);
  }
  EXPECT_LT(ucb, 0.4 * uni) << "glm_ucb " << ucb / 3 << " uniform " << uni / 3;
}

TEST(GlmUcb, WindowBoundsStateAndSaveRestoreContinues) {
  auto a = MustCreate(UcbConfig(3, 2.0, 50), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kDrift, 3, 8, 2.0, 1000), 1);
  testing::Run(*a, env, 100);
  const int64_t b100 = a->StateBytes();
  testing::Run(*a, env, 300);
  EXPECT_EQ(a->StateBytes(), b100);
  EXPECT_EQ(dynamic_cast<GlmUcb&>(*a).history().size(), 50);
  bandit::v1::PolicyState st;
  a->Save(&st);
  auto b = MustCreate(UcbConfig(3, 2.0, 50), 77);
  ASSERT_TRUE(b->Restore(st).ok());
  sim::GlbEnv env2 = env;
  std::vector<int> arms_a, arms_b;
  testing::Run(*a, env, 300, &arms_a);
  testing::Run(*b, env2, 300, &arms_b);
  EXPECT_EQ(arms_a, arms_b);
}

TEST(GlmUcb, RejectsBadInputWithoutChange) {
  auto p = MustCreate(UcbConfig(3, 2.0), 1);
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  Observation obs;
  obs.features = Vector::Constant(3, 0.2);
  obs.reward = -0.5;
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  std::vector<Vector> cands = {Vector::Constant(3, 0.2), Vector::Constant(3, 0.9)};
  SelectContext ctx;
  ctx.candidates = cands;
  EXPECT_NE(p->Select(ctx).status().message().find("candidates[1]"), absl::string_view::npos);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
  auto c = UcbConfig(3, 2.0, -1);
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GlmEpsilonGreedy, PropensitiesAndIdenticalContinuation) {
  auto a = MustCreate(EpsConfig(4, 0.2), 3);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kLogistic, 4, 10, 3.0, 1000), 2);
  testing::Run(*a, env, 200);
  const auto& c = env.NextRound();
  SelectContext ctx;
  ctx.candidates = c;
  ctx.want_scores = true;
  bandit::v1::PolicyState st;
  a->Save(&st);
  auto d = a->Select(ctx);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->scores.sum(), 1.0, 1e-12);
  EXPECT_NEAR(d->scores.maxCoeff(), 0.8 + 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(d->propensity, d->scores[d->arm]);
  // Restored into a policy with another seed: the same draw.
  auto b = MustCreate(EpsConfig(4, 0.2), 999);
  ASSERT_TRUE(b->Restore(st).ok());
  auto d2 = b->Select(ctx);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(d2->arm, d->arm);
  // And a failed Select leaves the RNG untouched.
  std::vector<Vector> bad = {Vector::Constant(4, 0.9)};
  SelectContext bctx;
  bctx.candidates = bad;
  bandit::v1::PolicyState s1, s2;
  b->Save(&s1);
  EXPECT_EQ(b->Select(bctx).status().code(), absl::StatusCode::kInvalidArgument);
  b->Save(&s2);
  EXPECT_EQ(s1.SerializeAsString(), s2.SerializeAsString());
}

}  // namespace
}  // namespace bandit::glb
