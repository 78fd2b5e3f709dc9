#include "core/glb/domd_glb.h"

#include <cmath>

#include <gtest/gtest.h>

#include "core/glb/glb_omd.h"
#include "core/rng.h"
#include "glb_test_util.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

using testing::MustCreate;

bandit::v1::PolicyConfig DomdConfig(int d, double S, double gamma) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_domd_glb();
  g->set_dimension(d);
  g->set_link(bandit::v1::LOGISTIC);
  g->set_s(S);
  g->set_gamma(gamma);
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

DomdGlb& AsDomd(Policy& p) { return dynamic_cast<DomdGlb&>(p); }

TEST(DomdGlb, TunedGammaTheorems2And3) {
  // Theorem 2, logistic k_mu = 1/4, d = 5, T = 5000, P_T = 2 pi * 3 (one turn of radius 3):
  // 1 - sqrt(0.5 * 18.8496 / 25000) = 0.980584.
  EXPECT_NEAR(DomdGammaDrift(0.25, 5, 5000, 2 * M_PI * 3), 0.9805837, 1e-6);
  EXPECT_NEAR(DomdGammaDrift(0.25, 5, 5000, 0.0), 1.0 - 1.0 / 5000, 1e-15);  // clip at 1/T
  EXPECT_NEAR(DomdGammaDrift(0.25, 5, 5000, 1e12), 1.0 / 5000, 1e-15);       // clip at 1 - 1/T
  // Theorem 3, c_mu = mu'(3) = 0.045177, one change: 1 - (0.21255 / 6250)^(2/3) = 0.998951.
  const double c_mu = std::exp(-3.0) / std::pow(1 + std::exp(-3.0), 2);
  EXPECT_NEAR(DomdGammaPiecewise(0.25, c_mu, 5, 5000, 1), 0.9989506, 1e-6);
  // The config path uses the same formulas.
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_domd_glb();
  g->set_dimension(5);
  g->set_s(3);
  g->set_horizon(5000);
  g->set_path_length(2 * M_PI * 3);
  auto p = MustCreate(c, 1);
  EXPECT_NEAR(AsDomd(*p).gamma(), 0.9805837, 1e-6);
  g->clear_path_length();
  g->set_num_changes(1);
  auto q = MustCreate(c, 1);
  EXPECT_NEAR(AsDomd(*q).gamma(), 0.9989506, 1e-6);
  g->set_path_length(1.0);  // both given
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  g->clear_horizon();
  g->clear_path_length();
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreatePolicy(DomdConfig(3, 1, 1.0), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DomdGlb, TheoryLambdaAndRadius) {
  auto c = DomdConfig(5, 3.0, 0.99);
  c.mutable_domd_glb()->set_theory_lambda(true);
  auto p = MustCreate(c, 1);
  // eta = 4, alpha = 6: max{6*4*1*0.25*3, 32*6*5/7, c_mu} = 960/7.
  EXPECT_NEAR(AsDomd(*p).params().lambda, 960.0 / 7, 1e-12);
  // beta_1: the log(1 + k (1 - gamma^0) ...) term vanishes.
  const double lam = 960.0 / 7;
  const double b1 =
      std::sqrt(4 * lam * 9 + 2 * 4 * (1 + 1 / 0.25) * std::log(M_PI * M_PI / (3 * 0.05)));
  EXPECT_NEAR(AsDomd(*p).Beta(), b1, 1e-10);
}

// H_{t+1} = A_t + grad^2 l_t(theta_{t+1}) unrolls to lambda I + sum_s gamma^{t-s} grad^2 l_s(theta_{s+1});
// the maintained inverse matches a direct inverse.
TEST(DomdGlb, DiscountedCurvatureMatchesDefinition) {
  const double gamma = 0.97;
  auto p = MustCreate(DomdConfig(4, 2.0, gamma), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kDrift, 4, 10, 2.0, 300), 3);
  const GlmLink link(LinkKind::kLogistic, 1.0);
  std::vector<Eigen::MatrixXd> hess;
  for (int t = 0; t < 300; ++t) {
    const auto& c = env.NextRound();
    SelectContext ctx;
    ctx.candidates = c;
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok());
    Observation obs;
    obs.features = c[d->arm];
    obs.reward = env.Reward(d->arm);
    ASSERT_TRUE(p->Update(obs).ok());
    hess.push_back(link.MuPrime(obs.features.dot(AsDomd(*p).theta())) * obs.features *
                   obs.features.transpose());
  }
  Eigen::MatrixXd h = 4.0 * Eigen::MatrixXd::Identity(4, 4);  // lambda = d
  const int t = static_cast<int>(hess.size());
  for (int s = 0; s < t; ++s) h += std::pow(gamma, t - 1 - s) * hess[s];
  EXPECT_LT((AsDomd(*p).h() - h).norm(), 1e-10 * h.norm());
  EXPECT_LT((AsDomd(*p).h_inverse() - h.inverse()).norm(), 1e-10 * h.inverse().norm());
}

// Eq. (1) solved by the eigendecomposition + projection against a slow numerical solve.
TEST(DomdGlb, StepMatchesSlowSolveOfEq1) {
  const double S = 0.6;
  auto p = MustCreate(DomdConfig(3, S, 0.9), 1);
  const GlmLink link(LinkKind::kLogistic, 1.0);
  Rng rng(5);
  int projected = 0;
  for (int t = 0; t < 60; ++t) {
    Eigen::VectorXd x(3);
    for (int i = 0; i < 3; ++i) x[i] = 0.5 * rng.Normal();
    x[1] += 1.0;
    x /= x.norm();
    const double r = rng.Uniform() < 0.85;
    const auto& dm = AsDomd(*p);
    const Eigen::VectorXd th = dm.theta();
    const Eigen::MatrixXd A = dm.PreUpdateMatrix();
    const double eta = dm.params().eta(), z = x.dot(th);
    const Eigen::MatrixXd Q = link.LossHess(z) * x * x.transpose() + A / eta;
    const Eigen::VectorXd slow =
        testing::SlowQuadraticOverBall(Q, link.LossGrad(z, r) * x, th, S, 20000);
    Observation obs;
    obs.features = x;
    obs.reward = r;
    ASSERT_TRUE(p->Update(obs).ok());
    EXPECT_LT((dm.theta() - slow).norm(), 1e-7) << "t=" << t;
    projected += std::abs(dm.theta().norm() - S) < 1e-9;
  }
  EXPECT_GT(projected, 10);
}

// With gamma -> 1, A_t -> H_t and DOMD-GLB's estimator is GLB-OMD's: greedy (radius 0) runs agree.
TEST(DomdGlb, GammaNearOneReducesToGlbOmd) {
  auto dc = DomdConfig(4, 2.0, 1.0 - 1e-13);
  dc.mutable_domd_glb()->set_radius_multiplier(0);
  bandit::v1::PolicyConfig oc;
  oc.mutable_glb_omd()->set_dimension(4);
  oc.mutable_glb_omd()->set_s(2.0);
  oc.mutable_glb_omd()->set_radius_multiplier(0);
  auto a = MustCreate(dc, 1), b = MustCreate(oc, 1);
  sim::GlbEnv e1(EnvConfig(sim::GlbEnvKind::kLogistic, 4, 10, 2.0, 300), 9), e2 = e1;
  std::vector<int> arms_a, arms_b;
  testing::Run(*a, e1, 300, &arms_a);
  testing::Run(*b, e2, 300, &arms_b);
  EXPECT_EQ(arms_a, arms_b);
  EXPECT_LT((AsDomd(*a).theta() - dynamic_cast<GlbOmd&>(*b).theta()).norm(), 1e-8);
}

TEST(DomdGlb, RejectsBadInputWithoutChange) {
  auto p = MustCreate(DomdConfig(3, 2.0, 0.95), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kDrift, 3, 5, 2.0, 100), 1);
  testing::Run(*p, env, 50);
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  std::vector<Vector> cands = {Vector::Constant(3, 0.1), Vector::Constant(3, 2.0)};
  SelectContext ctx;
  ctx.candidates = cands;
  auto d = p->Select(ctx);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("candidates[1]"), absl::string_view::npos) << d.status();
  Observation obs;
  obs.features = Vector::Constant(3, 0.1);
  obs.reward = 2.0;
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.reward = 1.0;
  obs.features[0] = INFINITY;
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(DomdGlb, SaveRestoreGivesIdenticalContinuation) {
  auto a = MustCreate(DomdConfig(5, 3.0, 0.98), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kDrift, 5, 20, 3.0, 2000), 4);
  testing::Run(*a, env, 500);
  bandit::v1::PolicyState st;
  a->Save(&st);
  auto b = MustCreate(DomdConfig(5, 3.0, 0.98), 12345);
  ASSERT_TRUE(b->Restore(st).ok());
  auto other = MustCreate(DomdConfig(5, 3.0, 0.5), 1);
  EXPECT_EQ(other->Restore(st).code(), absl::StatusCode::kInvalidArgument);  // different gamma
  sim::GlbEnv env2 = env;
  std::vector<int> arms_a, arms_b;
  testing::Run(*a, env, 1000, &arms_a);
  testing::Run(*b, env2, 1000, &arms_b);
  EXPECT_EQ(arms_a, arms_b);
}

TEST(DomdGlb, StateDoesNotGrowFrom1e3To1e5Rounds) {
  auto p = MustCreate(DomdConfig(3, 2.0, 0.99), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kDrift, 3, 5, 2.0, 100000), 2);
  testing::Run(*p, env, 1000);
  bandit::v1::PolicyState s1, s2;
  p->Save(&s1);
  const int64_t b1 = p->StateBytes();
  testing::Run(*p, env, 99000);
  p->Save(&s2);
  EXPECT_EQ(p->StateBytes(), b1);
  s1.clear_ints();  // the round counter's varint is the only difference
  s2.clear_ints();
  EXPECT_EQ(s1.ByteSizeLong(), s2.ByteSizeLong());
}

// Statistical check on the DOMD paper's piecewise setting (sign flip at T/2), 4 seeds, both with
// the paper's 1/5 radius: forgetting recovers after the flip, GLB-OMD's full memory does not.
TEST(DomdGlb, BeatsGlbOmdAfterSignFlip) {
  double domd = 0, omd = 0;
  const int64_t T = 2000;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto ec = EnvConfig(sim::GlbEnvKind::kPiecewise, 5, 20, 3.0, T);
    bandit::v1::PolicyConfig dc;
    auto* g = dc.mutable_domd_glb();
    g->set_dimension(5);
    g->set_s(3);
    g->set_horizon(T);
    g->set_num_changes(1);
    g->set_radius_multiplier(0.2);
    bandit::v1::PolicyConfig oc;
    oc.mutable_glb_omd()->set_dimension(5);
    oc.mutable_glb_omd()->set_s(3);
    oc.mutable_glb_omd()->set_radius_multiplier(0.2);
    auto a = MustCreate(dc, seed), b = MustCreate(oc, seed);
    sim::GlbEnv e1(ec, seed), e2(ec, seed);
    domd += testing::Run(*a, e1, T);
    omd += testing::Run(*b, e2, T);
  }
  EXPECT_LT(domd, 0.8 * omd) << "domd " << domd / 4 << " glb_omd " << omd / 4;
}

}  // namespace
}  // namespace bandit::glb
