#include "core/kernel/gp_ucb.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/kernel/bkb.h"
#include "core/registry.h"
#include "tests/core/kernel/kernel_testing.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

Observation Obs(const std::string& id, double r) {
  Observation o;
  o.arm_id = id;
  o.reward = r;
  return o;
}

bandit::v1::PolicyConfig GpConfig(const Matrix& X, bandit::v1::KernelSpec::Kind kind) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_gp_ucb();
  g->mutable_kernel()->set_kind(kind);
  g->set_lambda(0.5);
  g->set_noise(0.2);
  g->set_f_bound(2.0);
  g->set_delta(0.05);
  testing::FillArms(X, &c);
  return c;
}

// With the linear kernel, eq. (1)-(2) are ridge regression: mu(x) = x^T (X^T X + lambda I)^{-1}
// X^T y and sigma^2(x) / lambda... = x^T (X^T X + lambda I)^{-1} x. BKB keeping every pulled arm
// must agree as well.
TEST(GpUcb, LinearKernelIsRidgeRegression) {
  const Matrix X = testing::RandomArms(12, 3, 2);
  auto g = CreatePolicy(GpConfig(X, bandit::v1::KernelSpec::LINEAR), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  bandit::v1::PolicyConfig bc;
  auto* b = bc.mutable_bkb();
  b->mutable_kernel()->set_kind(bandit::v1::KernelSpec::LINEAR);
  b->set_lambda(0.5);
  b->set_q_bar(1e12);
  testing::FillArms(X, &bc);
  auto k = CreatePolicy(bc, 1);
  ASSERT_TRUE(k.ok()) << k.status();
  Rng env(3);
  Eigen::Matrix3d G = 0.5 * Eigen::Matrix3d::Identity();
  Eigen::Vector3d xy = Eigen::Vector3d::Zero();
  for (int t = 0; t < 25; ++t) {
    const int arm = static_cast<int>(env.UniformInt(12));
    const double y = X.col(arm).sum() + 0.1 * env.Normal();
    ASSERT_TRUE((*g)->Update(Obs("a" + std::to_string(arm), y)).ok());
    ASSERT_TRUE((*k)->Update(Obs("a" + std::to_string(arm), y)).ok());
    G += X.col(arm) * X.col(arm).transpose();
    xy += y * X.col(arm);
    auto* gp = dynamic_cast<GpUcb*>(g->get());
    auto* bkb = dynamic_cast<Bkb*>(k->get());
    for (int i = 0; i < 12; ++i) {
      const Eigen::Vector3d x = X.col(i);
      const double mean = x.dot(G.ldlt().solve(xy));
      const double var = x.dot(G.ldlt().solve(x));
      EXPECT_NEAR(gp->PosteriorMean()[i], mean, 1e-9);
      EXPECT_NEAR(gp->PosteriorVariance()[i], var, 1e-9);
      EXPECT_NEAR(bkb->PosteriorMean()[i], mean, 1e-8);
      EXPECT_NEAR(bkb->PosteriorVariance()[i], var, 1e-8);
    }
  }
}

TEST(GpUcb, BetaFollowsTheoremAtEpsilonZero) {
  const Matrix X = testing::RandomArms(5, 2, 7);
  auto g = CreatePolicy(GpConfig(X, bandit::v1::KernelSpec::POLYNOMIAL), 1);
  ASSERT_TRUE(g.ok()) << g.status();
  auto* gp = dynamic_cast<GpUcb*>(g->get());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*g)->Update(Obs("a" + std::to_string(i % 3), 1.0)).ok());
  // kappa^2 = max_i (x_i^T x_i + 1)^2 for the default polynomial kernel.
  double kappa2 = 0;
  for (int i = 0; i < 5; ++i) kappa2 = std::max(kappa2, std::pow(X.col(i).squaredNorm() + 1, 2));
  EXPECT_NEAR(gp->kappa2(), kappa2, 1e-12);
  const double sum_var = gp->counts().dot(gp->PosteriorVariance());
  const double beta = 2 * 0.2 * std::sqrt(std::log(kappa2 * 7) * sum_var + std::log(1 / 0.05)) +
                      2 * std::sqrt(0.5) * 2.0;
  EXPECT_NEAR(gp->Beta(), beta, 1e-12);
  SelectContext ctx;
  ctx.want_scores = true;
  auto d = (*g)->Select(ctx);
  ASSERT_TRUE(d.ok());
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(d->scores[i], gp->PosteriorMean()[i] + beta * std::sqrt(gp->PosteriorVariance()[i]),
                1e-12);
}

TEST(GpUcb, SaveRestoreAndBadInput) {
  const Matrix X = testing::RandomArms(25, 2, 9);
  auto cfg = GpConfig(X, bandit::v1::KernelSpec::MATERN52);
  cfg.mutable_gp_ucb()->mutable_kernel()->set_bandwidth(0.3);
  auto a = CreatePolicy(cfg, 1);
  ASSERT_TRUE(a.ok()) << a.status();
  Rng env(1);
  auto step = [&](Policy& p) {
    auto d = p.Select({});
    EXPECT_TRUE(d.ok());
    EXPECT_TRUE(p.Update(Obs(d->arm_id, std::sin(5 * X(0, d->arm)) + 0.2 * env.Normal())).ok());
    return d->arm;
  };
  for (int i = 0; i < 50; ++i) step(**a);
  bandit::v1::PolicyState state;
  (*a)->Save(&state);
  auto b = CreatePolicy(cfg, 77);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Restore(state).ok());
  Rng env_copy = env;
  std::vector<int> xs, ys;
  for (int i = 0; i < 300; ++i) xs.push_back(step(**a));
  env = env_copy;
  for (int i = 0; i < 300; ++i) ys.push_back(step(**b));
  EXPECT_EQ(xs, ys);

  bandit::v1::PolicyState before, after;
  (*a)->Save(&before);
  EXPECT_EQ((*a)->Update(Obs("zz", 1.0)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*a)->Update(Obs("a0", NAN)).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::PolicyState wrong = before;
  wrong.set_policy("bkb");
  EXPECT_EQ((*a)->Restore(wrong).code(), absl::StatusCode::kInvalidArgument);
  bandit::v1::PolicyState neg = before;
  for (auto& t : *neg.mutable_tensors())
    if (t.name() == "counts") t.set_data(0, -1.0);
  EXPECT_EQ((*a)->Restore(neg).code(), absl::StatusCode::kInvalidArgument);
  (*a)->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
  auto bad = cfg;
  bad.mutable_gp_ucb()->mutable_kernel()->set_degree(2);  // Matern has no degree
  EXPECT_EQ(CreatePolicy(bad, 1).status().code(), absl::StatusCode::kInvalidArgument);
  bad = cfg;
  bad.mutable_gp_ucb()->set_noise(-1);
  EXPECT_EQ(CreatePolicy(bad, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GpUcb, StateBytesDoNotGrowWithRounds) {
  const Matrix X = testing::RandomArms(10, 2, 3);
  auto cfg = GpConfig(X, bandit::v1::KernelSpec::GAUSSIAN);
  auto p = CreatePolicy(cfg, 1);
  ASSERT_TRUE(p.ok());
  Rng env(2);
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto d = (*p)->Select({});
      ASSERT_TRUE(d.ok());
      ASSERT_TRUE((*p)->Update(Obs(d->arm_id, env.Normal())).ok());
    }
  };
  run(1000);
  const int64_t b1 = (*p)->StateBytes();
  bandit::v1::PolicyState s1, s2;
  (*p)->Save(&s1);
  s1.clear_rng();
  run(99000);
  (*p)->Save(&s2);
  s2.clear_rng();
  EXPECT_EQ((*p)->StateBytes(), b1);
  EXPECT_EQ(s1.ByteSizeLong(), s2.ByteSizeLong());
}

}  // namespace
}  // namespace bandit
