// Raker and LKMBooks (the OKS paper's random-feature / budgeted baselines) against direct,
// slow re-computations of their papers' update rules on tiny problems, plus properties from
// the papers.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "core/oks/lkmbooks.h"
#include "core/oks/oks_policy.h"
#include "core/oks/raker.h"
#include "core/oks/rf_hypotheses.h"

namespace bandit::oks {
namespace BANDIT_UNITY_ID {

Eigen::VectorXd RandomPoint(Rng& rng, int d) {
  Eigen::VectorXd x(d);
  for (int j = 0; j < d; ++j) x[j] = 2 * rng.Uniform() - 1;
  return x;
}

std::vector<KernelSpec> Gaussians(std::initializer_list<double> sigmas) {
  std::vector<KernelSpec> k;
  for (double s : sigmas) k.push_back({ShiftInvariantKernel::kGaussian, s});
  return k;
}

TEST(CosSinMap, HasUnitNormAndEstimatesTheKernel) {
  Rng rng(3);
  auto rf = RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, 0.8, 3, 20000, rng,
                                 RandomFeatureForm::kCosSinPairs);
  ASSERT_TRUE(rf.ok());
  EXPECT_EQ(rf->output_dim(), 40000);
  const Eigen::VectorXd x = RandomPoint(rng, 3), y = RandomPoint(rng, 3);
  // Appendix F: ||z(x)||^2 = (1/D) sum (cos^2 + sin^2) = 1 exactly.
  EXPECT_NEAR(rf->Map(x).squaredNorm(), 1.0, 1e-12);
  EXPECT_NEAR(rf->Map(x).dot(rf->Map(y)), KernelValue(ShiftInvariantKernel::kGaussian, 0.8, x, y),
              0.02);
}

// RF-OKS++ with the paper's map: 2D weights per kernel, ||z(x)|| = 1, and a snapshot resumes
// exactly (the pair form has no phases to save).
TEST(CosSinMap, ThroughTheOksPolicySaveRestoreContinues) {
  bandit::v1::OksConfig c;
  c.set_variant(bandit::v1::OksConfig::OKS_PP);
  c.set_dimension(2);
  c.set_loss(bandit::v1::OKS_LOGISTIC);
  for (double s : {0.5, 2.0}) {
    auto* k = c.add_kernels();
    k->set_bandwidth(s);
  }
  c.set_random_features(12);
  c.set_random_feature_map(bandit::v1::OksConfig::COS_SIN_PAIRS);
  auto a = *OnlineKernelSelection::Create(c, 3, false);
  const auto& h = static_cast<const RfHypotheses&>(a->hypotheses());
  EXPECT_EQ(h.weights(0).size(), 24);
  Rng data(4);
  EXPECT_NEAR(h.FeatureNormSq(1, RandomPoint(data, 2)), 1.0, 1e-12);
  auto round = [&](OnlineKernelSelection& p, const Eigen::VectorXd& x) {
    SelectContext ctx;
    ctx.point = &x;
    auto d = p.Select(ctx);
    EXPECT_TRUE(d.ok());
    Observation o;
    o.features = x;
    o.memo = d->memo;
    o.reward = x[0] > x[1] ? 1.0 : -1.0;
    EXPECT_TRUE(p.Update(o).ok());
    return std::pair{d->arm, *d->prediction()};
  };
  for (int t = 0; t < 100; ++t) round(*a, RandomPoint(data, 2));
  bandit::v1::PolicyState st;
  a->Save(&st);
  auto b = *OnlineKernelSelection::Create(c, 99, false);
  ASSERT_TRUE(b->Restore(st).ok());
  for (int t = 0; t < 100; ++t) {
    const Eigen::VectorXd x = RandomPoint(data, 2);
    EXPECT_EQ(round(*a, x), round(*b, x)) << "round " << t;
  }
  c.set_random_feature_map(static_cast<bandit::v1::OksConfig::RandomFeatureMap>(7));
  EXPECT_EQ(OnlineKernelSelection::Create(c, 3, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Raker's Algorithm 1 written out with plain loops: separate per-kernel weights updated
// multiplicatively (eq. (15) as printed), per-kernel theta by eq. (14).
TEST(Raker, MatchesDirectAlgorithm1) {
  Rng draw(5);
  std::vector<RandomFeatures> maps;
  for (double s : {0.5, 2.0, 4.0})
    maps.push_back(*RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, s, 2, 8, draw,
                                         RandomFeatureForm::kCosSinPairs));
  const double eta = 0.3;
  Raker raker(maps, LossKind::kLogistic, eta);
  const int K = 3;
  std::vector<std::vector<double>> theta(K, std::vector<double>(16, 0.0));
  std::vector<double> w(K, 1.0);
  Rng data(6);
  for (int t = 0; t < 60; ++t) {
    const Eigen::VectorXd x = RandomPoint(data, 2);
    const double y = x[0] * x[1] > 0 ? 1.0 : -1.0;
    double wsum = 0, f = 0;
    std::vector<double> fp(K);
    std::vector<Eigen::VectorXd> z(K);
    for (int p = 0; p < K; ++p) wsum += w[p];
    for (int p = 0; p < K; ++p) {
      z[p] = maps[p].Map(x);
      fp[p] = 0;
      for (int j = 0; j < 16; ++j) fp[p] += theta[p][j] * z[p][j];
      f += w[p] / wsum * fp[p];
    }
    EXPECT_NEAR(raker.PredictAndUpdate(x, y), f, 1e-12) << "round " << t;
    for (int p = 0; p < K; ++p) {
      const double g = -y / (1 + std::exp(y * fp[p]));  // logistic l'
      for (int j = 0; j < 16; ++j) theta[p][j] -= eta * g * z[p][j];
      w[p] *= std::exp(-eta * std::log1p(std::exp(-y * fp[p])));
    }
  }
  double wsum = 0;
  for (double v : w) wsum += v;
  for (int p = 0; p < K; ++p) EXPECT_NEAR(raker.KernelWeights()[p], w[p] / wsum, 1e-12);
}

// Property of eq. (15): the weight ratio of two kernels is exp(-eta (L_p - L_q)) of their
// cumulative losses, so the kernel with the smaller cumulative loss carries the larger weight;
// and the served prediction is the one Predict() gives before the update.
TEST(Raker, WeightsFollowCumulativeLoss) {
  Rng rng(9);
  const double eta = 0.05;
  auto raker = Raker::Create(Gaussians({0.05, 0.5, 4.0}), 1, 50, LossKind::kSquare, eta, rng);
  ASSERT_TRUE(raker.ok());
  Rng data(10);
  for (int t = 0; t < 2000; ++t) {
    const Eigen::VectorXd x = RandomPoint(data, 1);
    const double f = raker->Predict(x);
    EXPECT_NEAR(raker->PredictAndUpdate(x, std::sin(4 * x[0])), f, 1e-12);
  }
  const Eigen::VectorXd L = raker->cumulative_loss(), w = raker->KernelWeights();
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) {
      EXPECT_NEAR(std::log(w[p] / w[q]), -eta * (L[p] - L[q]), 1e-9);
      if (L[p] < L[q]) {
        EXPECT_GT(w[p], w[q]);
      }
    }
}

// LKMBooks written out from the authors' R script: explicit support list, kernels summed with
// std::exp over the list, weights updated by the linearized losses, the same Bernoulli draws
// (one uniform per round with a nonzero gradient from an engine seeded identically).
TEST(LkmBooks, MatchesDirectComputation) {
  const std::vector<double> sigmas = {0.25, 1.0, 4.0};
  LkmBooksParams params;
  params.budget = 7;
  params.horizon = 80;
  params.classification = false;
  auto lkm = LkmBooks::Create(Gaussians({0.25, 1.0, 4.0}), 2, LossKind::kSquare, params, 42);
  ASSERT_TRUE(lkm.ok());
  const int K = 3;
  const double T = 80, nu = 1.0 / 3.0, B = 7;
  const double lambda = std::sqrt((1 + nu) * B) / (std::sqrt(1 - nu) * T);
  const double eta = std::sqrt(8 * std::log(3.0) / T);
  EXPECT_NEAR(lkm->lambda(), lambda, 1e-15);
  EXPECT_NEAR(lkm->eta(), eta, 1e-15);
  Rng coin(42);
  std::vector<Eigen::VectorXd> sv;
  std::vector<double> a;
  std::vector<double> p(K, 1.0 / K);
  double gmax = 1;
  int rounds = 0;
  Rng data(7);
  for (int t = 0; t < 80; ++t) {
    const Eigen::VectorXd x = RandomPoint(data, 2);
    const double y = std::sin(3 * x[0]) + x[1];
    std::vector<double> fi(K, 0.0);
    for (int i = 0; i < K; ++i)
      for (size_t j = 0; j < sv.size(); ++j)
        fi[i] += a[j] * std::exp(-(sv[j] - x).squaredNorm() / (2 * sigmas[i] * sigmas[i]));
    double f = 0;
    for (int i = 0; i < K; ++i) f += p[i] * fi[i];
    ASSERT_NEAR(lkm->PredictAndUpdate(x, y), f, 1e-12) << "round " << t;
    const double g = 2 * (f - y);
    const double lo = *std::min_element(fi.begin(), fi.end());
    const double hi = *std::max_element(fi.begin(), fi.end());
    double z = 0;
    std::vector<double> w(K);
    for (int i = 0; i < K; ++i) {
      const double c = g > 0 ? g * (fi[i] - lo) / gmax : g * (fi[i] - hi) / gmax;
      EXPECT_GE(c, 0.0);
      w[i] = p[i] * std::exp(-eta * c);
      z += w[i];
    }
    for (int i = 0; i < K; ++i) p[i] = w[i] / z;
    const double rho =
        std::min(1.0, B / ((1 - nu) * std::pow(T, 1 - nu) * std::pow(rounds + 1, nu)));
    if (coin.Uniform() < rho && static_cast<int>(a.size()) < B) {
      sv.push_back(x);
      a.push_back(-lambda * g / rho);
    }
    ++rounds;
    gmax = std::max(gmax, hi - lo);
    ASSERT_EQ(lkm->support_size(), static_cast<int64_t>(a.size()));
  }
  for (int i = 0; i < K; ++i) EXPECT_NEAR(lkm->p()[i], p[i], 1e-12);
  EXPECT_EQ(lkm->support_size(), 7);  // the budget filled up and stopped there
}

// The budget is a hard cap on memory (and so on per-round time), whatever T and the draws.
TEST(LkmBooks, SupportNeverExceedsBudget) {
  LkmBooksParams params;
  params.budget = 20;
  params.horizon = 3000;
  auto lkm = LkmBooks::Create(Gaussians({0.5, 2.0}), 3, LossKind::kLogistic, params, 1);
  ASSERT_TRUE(lkm.ok());
  Rng data(2);
  for (int t = 0; t < 3000; ++t) {
    const Eigen::VectorXd x = RandomPoint(data, 3);
    lkm->PredictAndUpdate(x, x.sum() > 0 ? 1.0 : -1.0);
    ASSERT_LE(lkm->support_size(), 20);
  }
  EXPECT_EQ(lkm->support_size(), 20);
  EXPECT_NEAR(lkm->p().sum(), 1.0, 1e-12);
}

TEST(LkmBooks, RejectsBadParameters) {
  LkmBooksParams params;
  params.budget = 0;
  EXPECT_EQ(LkmBooks::Create(Gaussians({1.0}), 2, LossKind::kSquare, params, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  params.budget = 5;
  EXPECT_EQ(
      LkmBooks::Create({{ShiftInvariantKernel::kLaplacian, 1.0}}, 2, LossKind::kSquare, params, 1)
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit::oks
