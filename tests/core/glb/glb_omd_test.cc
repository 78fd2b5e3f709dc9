#include "core/glb/glb_omd.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/glb/domd_glb.h"
#include "core/rng.h"
#include "glb_test_util.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

using testing::MustCreate;

bandit::v1::PolicyConfig OmdConfig(int d, double S, bandit::v1::Link link = bandit::v1::LOGISTIC) {
  bandit::v1::PolicyConfig c;
  auto* g = c.mutable_glb_omd();
  g->set_dimension(d);
  g->set_link(link);
  g->set_s(S);
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

GlbOmd& AsOmd(Policy& p) { return dynamic_cast<GlbOmd&>(p); }

TEST(GlbOmd, RegisteredAndDefaults) {
  auto p = MustCreate(OmdConfig(4, 2.0), 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name(), "glb_omd");
  EXPECT_EQ(p->context_kind(), ContextKind::kCandidates);
  const GlbParams& prm = AsOmd(*p).params();
  EXPECT_EQ(prm.lambda, 4.0);       // lambda = d
  EXPECT_EQ(prm.R, 1.0);            // logistic self-concordance
  EXPECT_EQ(prm.eta(), 1.0 + 2.0);  // eta = 1 + R S
  // Theorem 1 radius at t = 1, closed form.
  const double eta = 3.0, lam = 4.0, S = 2.0, d = 4;
  const double beta1 = std::sqrt(4 * lam * S * S + 2 * eta * std::log(1 / 0.05) +
                                 d * (6 * eta * eta + eta) * std::log(1 + 0.25 * 1 / lam));
  EXPECT_NEAR(AsOmd(*p).Beta(), beta1, 1e-12);
  // theory_lambda = max{14 d eta R^2, 6 eta R S L_mu / g}.
  auto c = OmdConfig(4, 2.0);
  c.mutable_glb_omd()->set_theory_lambda(true);
  auto q = MustCreate(c, 1);
  EXPECT_DOUBLE_EQ(AsOmd(*q).params().lambda, std::max(14.0 * 4 * 3, 6.0 * 3 * 2 * 0.25));
}

TEST(GlbOmd, RejectsBadConfig) {
  auto c = OmdConfig(0, 1.0);
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  c = OmdConfig(3, -1.0);
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  c = OmdConfig(3, 1.0);
  c.mutable_glb_omd()->set_delta(1.5);
  EXPECT_EQ(CreatePolicy(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  c = OmdConfig(3, 1.0);
  c.mutable_glb_omd()->set_dispersion(2.0);  // only Gaussian has a dispersion
  auto s = CreatePolicy(c, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("glb_omd.dispersion"), absl::string_view::npos) << s;
}

// Sherman-Morrison H^{-1} (Appendix A.3) against a direct inverse of the maintained H, and H
// against its definition H_t = lambda I + sum_s mu'(x_s' theta_{s+1}) / g x_s x_s'.
// ArgmaxUcb against a slow exact computation: x_i' theta and x_i' A x_i summed term by term in
// long double, over shapes that exercise the blocks of 8 candidates (n = 1, 7, 8, 9, 50, ...),
// with A symmetric and, as Sherman-Morrison leaves H^{-1}, symmetric only up to rounding (and
// here deliberately not at all: the quadratic form of the stored matrix is what counts). The
// scores are within a few ulps of the sums' magnitude; the chosen arm is the exact argmax
// unless the exact top two are that close. Each call reuses per-thread scratch left by calls
// of other shapes, and a repeated call gives the bits of the first (replay determinism).
TEST(GlbOmd, ArgmaxUcbMatchesAnExactComputationWhateverTheScratchHolds) {
  Rng rng(3);
  struct Shape {
    int d, n;
    bool symmetric;
  };
  const std::vector<Shape> shapes = {{20, 50, true},  {20, 50, false}, {3, 1, true},
                                     {20, 7, true},   {1, 9, true},    {64, 300, true},
                                     {20, 8, false},  {100, 3000, true}, {5, 2, true},
                                     {20, 50, true},  {33, 17, false}};
  struct Case {
    std::vector<Vector> candidates;
    Vector theta;
    Matrix a;
    Vector ucb, logit;
    int best;
  };
  std::vector<Case> cases;
  for (const auto& [d, n, symmetric] : shapes) {
    Case c;
    c.candidates.assign(n, Vector(d));
    for (auto& x : c.candidates)
      for (int k = 0; k < d; ++k) x[k] = rng.Normal();
    c.theta = Vector(d);
    for (int k = 0; k < d; ++k) c.theta[k] = rng.Normal();
    Matrix g(d, d);
    for (int i = 0; i < d; ++i)
      for (int k = 0; k < d; ++k) g(i, k) = rng.Normal();
    c.a = (g * g.transpose() + Matrix::Identity(d, d)).inverse();
    if (!symmetric)
      for (int i = 0; i < d; ++i)
        for (int k = 0; k < i; ++k) c.a(i, k) *= 1 + 1e-6;  // far above rounding
    const double beta = 1.5;

    c.best = ArgmaxUcb(c.candidates, c.theta, c.a, beta, &c.ucb, &c.logit);
    ASSERT_EQ(c.ucb.size(), n);
    ASSERT_EQ(c.logit.size(), n);
    std::vector<long double> exact(n);
    for (int i = 0; i < n; ++i) {
      const Vector& x = c.candidates[i];
      long double logit = 0, logit_abs = 0, quad = 0, quad_abs = 0;
      for (int k = 0; k < d; ++k) {
        logit += static_cast<long double>(x[k]) * c.theta[k];
        logit_abs += std::abs(static_cast<long double>(x[k]) * c.theta[k]);
        for (int l = 0; l < d; ++l) {
          const long double term = static_cast<long double>(x[k]) * c.a(k, l) * x[l];
          quad += term;
          quad_abs += std::abs(term);
        }
      }
      ASSERT_GT(quad, 0) << d << " x " << n << " at " << i;
      const long double bonus = beta * std::sqrt(quad);
      exact[i] = logit + bonus;
      // Rounding of a sum of m terms: <= m eps sum |terms|; the square root halves the relative
      // error of the quadratic form.
      const double eps = std::numeric_limits<double>::epsilon();
      const double logit_tol = 2 * d * eps * static_cast<double>(logit_abs);
      const double quad_tol = 2 * d * eps * static_cast<double>(quad_abs);
      const double bonus_tol = static_cast<double>(bonus) * (quad_tol / static_cast<double>(quad));
      ASSERT_NEAR(c.logit[i], static_cast<double>(logit), logit_tol)
          << d << " x " << n << " at " << i;
      const double ucb_tol =
          logit_tol + bonus_tol + 4 * eps * std::abs(static_cast<double>(exact[i]));
      ASSERT_NEAR(c.ucb[i], static_cast<double>(exact[i]), ucb_tol)
          << d << " x " << n << " at " << i;
    }
    int exact_best = 0;
    for (int i = 1; i < n; ++i)
      if (exact[i] > exact[exact_best]) exact_best = i;
    if (c.best != exact_best) {  // only a near-tie may go either way
      EXPECT_NEAR(static_cast<double>(exact[c.best]), static_cast<double>(exact[exact_best]),
                  1e-12 * (1 + std::abs(static_cast<double>(exact[exact_best]))));
    }
    // Lowest index on ties, and the index of the largest computed score.
    for (int i = 0; i < n; ++i) {
      EXPECT_LE(c.ucb[i], c.ucb[c.best]);
      if (i < c.best) {
        EXPECT_LT(c.ucb[i], c.ucb[c.best]);
      }
    }
    cases.push_back(std::move(c));
  }
  // Same inputs, same bits, whatever shapes ran in between.
  for (int pass = 0; pass < 2; ++pass)
    for (const Case& c : cases) {
      Vector ucb, logit;
      ASSERT_EQ(ArgmaxUcb(c.candidates, c.theta, c.a, 1.5, &ucb, &logit), c.best);
      for (Eigen::Index i = 0; i < ucb.size(); ++i) {
        ASSERT_EQ(ucb[i], c.ucb[i]);
        ASSERT_EQ(logit[i], c.logit[i]);
      }
    }
  // A candidate's score depends on its own features only, not on its place in the list.
  const Case& c = cases[0];
  std::vector<Vector> reversed(c.candidates.rbegin(), c.candidates.rend());
  Vector ucb, logit;
  ArgmaxUcb(reversed, c.theta, c.a, 1.5, &ucb, &logit);
  const Eigen::Index n = ucb.size();
  for (Eigen::Index i = 0; i < n; ++i) ASSERT_EQ(ucb[i], c.ucb[n - 1 - i]);
}

TEST(GlbOmd, ShermanMorrisonMatchesDirectInverse) {
  auto p = MustCreate(OmdConfig(5, 3.0), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kLogistic, 5, 10, 3.0, 400), 3);
  Eigen::MatrixXd h_def = 5.0 * Eigen::MatrixXd::Identity(5, 5);
  const GlmLink link(LinkKind::kLogistic, 1.0);
  for (int t = 0; t < 400; ++t) {
    const auto& c = env.NextRound();
    SelectContext ctx;
    ctx.candidates = c;
    auto d = p->Select(ctx);
    ASSERT_TRUE(d.ok());
    Observation obs;
    obs.features = c[d->arm];
    obs.reward = env.Reward(d->arm);
    ASSERT_TRUE(p->Update(obs).ok());
    const Eigen::VectorXd& th = AsOmd(*p).theta();
    h_def += link.MuPrime(obs.features.dot(th)) * obs.features * obs.features.transpose();
  }
  const auto& omd = AsOmd(*p);
  EXPECT_LT((omd.h() - h_def).norm(), 1e-9 * h_def.norm());
  const Eigen::MatrixXd direct = omd.h().inverse();
  EXPECT_LT((omd.h_inverse() - direct).norm(), 1e-10 * direct.norm());
}

// The two-step update (28a)-(28b) against a slow numerical solve of eq. (3):
//   min_{||theta|| <= S} <grad l(theta_t), theta - theta_t> + 1/2 ||theta - theta_t||^2_{grad^2 l(theta_t)}
//                        + 1/(2 eta) ||theta - theta_t||^2_{H_t}.
TEST(GlbOmd, StepMatchesSlowSolveOfEq3) {
  for (auto link_kind : {bandit::v1::LOGISTIC, bandit::v1::POISSON}) {
    const double S = 0.8;
    auto p = MustCreate(OmdConfig(4, S, link_kind), 1);
    const GlmLink link(link_kind == bandit::v1::POISSON ? LinkKind::kPoisson : LinkKind::kLogistic,
                       1);
    Rng rng(11);
    int projected = 0;
    for (int t = 0; t < 60; ++t) {
      Eigen::VectorXd x(4);
      for (int i = 0; i < 4; ++i) x[i] = 0.5 * rng.Normal();
      x[0] += 1.0;  // a common direction, so theta runs into the ball's boundary
      x /= x.norm();
      const double r =
          link_kind == bandit::v1::POISSON ? std::floor(4 * rng.Uniform()) : (rng.Uniform() < 0.9);
      const auto& omd = AsOmd(*p);
      const Eigen::VectorXd th = omd.theta();
      const Eigen::MatrixXd H = omd.h();
      const double eta = omd.params().eta();
      const double z = x.dot(th);
      const Eigen::VectorXd g = link.LossGrad(z, r) * x;
      const Eigen::MatrixXd Q = link.LossHess(z) * x * x.transpose() + H / eta;
      const Eigen::VectorXd slow = testing::SlowQuadraticOverBall(Q, g, th, S, 20000);
      Observation obs;
      obs.features = x;
      obs.reward = r;
      ASSERT_TRUE(p->Update(obs).ok());
      EXPECT_LT((omd.theta() - slow).norm(), 1e-7) << "t=" << t;
      projected += std::abs(omd.theta().norm() - S) < 1e-9;
    }
    EXPECT_GT(projected, 10) << "the projection was rarely active; the test would not cover (28b)";
  }
}

TEST(GlbOmd, RejectsBadInputWithoutChange) {
  auto p = MustCreate(OmdConfig(3, 2.0), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kLogistic, 3, 5, 2.0, 100), 1);
  testing::Run(*p, env, 50);
  bandit::v1::PolicyState before, after;
  p->Save(&before);
  std::vector<Vector> cands = {Vector::Constant(3, 0.5), Vector::Constant(3, 0.7)};  // norm 1.21
  SelectContext ctx;
  ctx.candidates = cands;
  auto d = p->Select(ctx);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("candidates[1]"), absl::string_view::npos) << d.status();
  cands[1] = Vector::Zero(4);
  EXPECT_NE(p->Select(ctx).status().message().find("candidates[1]"), absl::string_view::npos);
  cands[1] = Vector::Zero(3);
  cands[1][2] = std::nan("");
  EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<Vector> none;
  ctx.candidates = none;
  EXPECT_EQ(p->Select(ctx).status().code(), absl::StatusCode::kInvalidArgument);
  Observation obs;
  obs.features = Vector::Constant(3, 0.5);
  for (double r : {-0.1, 1.5, std::nan(""), static_cast<double>(INFINITY)}) {
    obs.reward = r;
    auto s = p->Update(obs);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << r;
    EXPECT_NE(s.message().find("reward"), absl::string_view::npos);
  }
  obs.reward = 1;
  obs.features = Vector::Constant(3, 1.0);  // norm sqrt(3) > 1
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.features = Vector::Constant(2, 0.1);
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  p->Save(&after);
  EXPECT_EQ(before.SerializeAsString(), after.SerializeAsString());
}

TEST(GlbOmd, PoissonRejectsNegativeRewardGaussianAcceptsAny) {
  auto p = MustCreate(OmdConfig(2, 1.0, bandit::v1::POISSON), 1);
  Observation obs;
  obs.features = Vector::Constant(2, 0.5);
  obs.reward = -1;
  EXPECT_EQ(p->Update(obs).code(), absl::StatusCode::kInvalidArgument);
  obs.reward = 7;
  EXPECT_TRUE(p->Update(obs).ok());
  auto c = OmdConfig(2, 1.0, bandit::v1::GAUSSIAN);
  c.mutable_glb_omd()->set_dispersion(0.5);
  auto q = MustCreate(c, 1);
  obs.reward = -3.5;
  EXPECT_TRUE(q->Update(obs).ok());
  EXPECT_EQ(AsOmd(*q).params().eta(), 1.0);  // R = 0 for the Gaussian link
}

TEST(GlbOmd, SaveRestoreGivesIdenticalContinuation) {
  auto a = MustCreate(OmdConfig(5, 3.0), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kLogistic, 5, 20, 3.0, 2000), 5);
  testing::Run(*a, env, 500);
  bandit::v1::PolicyState st;
  a->Save(&st);
  auto b = MustCreate(OmdConfig(5, 3.0), 999);
  ASSERT_TRUE(b->Restore(st).ok());
  sim::GlbEnv env2 = env;
  std::vector<int> arms_a, arms_b;
  testing::Run(*a, env, 1000, &arms_a);
  testing::Run(*b, env2, 1000, &arms_b);
  EXPECT_EQ(arms_a, arms_b);
  bandit::v1::PolicyState sa, sb;
  a->Save(&sa);
  b->Save(&sb);
  EXPECT_EQ(sa.SerializeAsString(), sb.SerializeAsString());
}

// O(d^2) state: the same bytes after 10^3 and 10^5 rounds (d = 3, 5 arms keeps 10^5 rounds fast).
TEST(GlbOmd, StateDoesNotGrowFrom1e3To1e5Rounds) {
  auto p = MustCreate(OmdConfig(3, 2.0), 1);
  sim::GlbEnv env(EnvConfig(sim::GlbEnvKind::kLogistic, 3, 5, 2.0, 100000), 2);
  testing::Run(*p, env, 1000);
  bandit::v1::PolicyState s1, s2;
  p->Save(&s1);
  const int64_t b1 = p->StateBytes();
  testing::Run(*p, env, 99000);
  p->Save(&s2);
  EXPECT_EQ(p->StateBytes(), b1);
  // Serialized: identical apart from the round counter's varint (1000 vs 100000).
  s1.clear_ints();
  s2.clear_ints();
  EXPECT_EQ(s1.ByteSizeLong(), s2.ByteSizeLong());
  EXPECT_EQ(AsOmd(*p).rounds(), 100000);
  EXPECT_TRUE(AsOmd(*p).h_inverse().allFinite());
  // Sherman-Morrison stays accurate over 10^5 rank-one updates.
  const Eigen::MatrixXd direct = AsOmd(*p).h().inverse();
  EXPECT_LT((AsOmd(*p).h_inverse() - direct).norm(), 1e-8 * direct.norm());
}

// Statistical check, 4 seeds: GLB-OMD (theory radius, lambda = d) has far less regret than a
// uniform policy and learns (the second half adds much less regret than the first).
TEST(GlbOmd, RegretBeatsUniformAndFlattens) {
  double omd = 0, uni = 0, first = 0, second = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto ec = EnvConfig(sim::GlbEnvKind::kLogistic, 5, 20, 3.0, 2000);
    auto p = MustCreate(OmdConfig(5, 3.0), seed);
    sim::GlbEnv env(ec, seed), env_u(ec, seed);
    const double r1 = testing::Run(*p, env, 1000);
    const double r2 = testing::Run(*p, env, 1000);
    omd += r1 + r2;
    first += r1;
    second += r2;
    uni += testing::UniformRegret(env_u, 2000, 20);
  }
  EXPECT_LT(omd, 0.35 * uni) << "omd " << omd / 4 << " uniform " << uni / 4;
  EXPECT_LT(second, 0.7 * first) << "first half " << first / 4 << " second half " << second / 4;
}

}  // namespace
}  // namespace bandit::glb
