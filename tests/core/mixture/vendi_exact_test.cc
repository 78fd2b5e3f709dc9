// The exact Gram-matrix log-Vendi (eq. 9-11) against independent computations, and the
// random-feature form converging to it as the number of features R grows.
#include <cmath>
#include <complex>

#include <gtest/gtest.h>

#include "core/mixture/features.h"
#include "core/mixture/stats.h"
#include "core/mixture/vendi_exact.h"
#include "core/mixture/vendi_objective.h"
#include "core/sim/generators_env.h"

namespace bandit::mixture {
namespace BANDIT_UNITY_ID {

struct Pool {
  Matrix samples;
  std::vector<int> arm_of;
};

Pool Draw(int per_arm, int arms, int d, uint64_t seed) {
  sim::GeneratorsEnvConfig c;
  c.arms = arms;
  c.d = d;
  auto env = *sim::GeneratorsEnv::Make(c);
  Rng rng(seed);
  Pool p;
  p.samples.resize(per_arm * arms, d);
  for (int i = 0; i < arms; ++i)
    for (int r = 0; r < per_arm; ++r) {
      p.samples.row(i * per_arm + r) = env.Sample(i, rng).transpose();
      p.arm_of.push_back(i);
    }
  return p;
}

// Tr(rho log rho) from the eigenvalues of the NON-symmetric matrix diag(q) K (similar to rho),
// found by Eigen's general eigen solver: a different matrix and a different algorithm.
double DenseNonSymmetric(const Matrix& gram, const std::vector<int>& arm_of, const Vector& counts,
                         const Vector& alpha) {
  Vector q(gram.rows());
  for (Eigen::Index j = 0; j < q.size(); ++j) q[j] = alpha[arm_of[j]] / counts[arm_of[j]];
  const Matrix qk = q.asDiagonal() * gram;
  Eigen::EigenSolver<Matrix> es(qk, false);
  double v = 0;
  for (const std::complex<double>& l : es.eigenvalues())
    if (l.real() > 1e-14) v += l.real() * std::log(l.real());
  return v;
}

TEST(ExactVendi, AgreesWithADenseEigenvalueComputation) {
  const Pool p = Draw(15, 3, 4, 1);
  const Matrix gram = VendiGram(p.samples, VendiKernel::kGaussian, 1.5);
  ExactVendiLoss loss(gram, p.arm_of, 3);
  for (const Vector& a :
       {Vector(Eigen::Vector3d(1. / 3, 1. / 3, 1. / 3)), Vector(Eigen::Vector3d(0.6, 0.3, 0.1))}) {
    EXPECT_NEAR(loss.Value(a), DenseNonSymmetric(gram, p.arm_of, loss.counts(), a), 1e-9);
  }
  // Trace of rho is 1 (eq. 10): Vendi = exp(-L) lies in [1, N].
  const double vendi = std::exp(-loss.Value(Eigen::Vector3d(0.2, 0.5, 0.3)));
  EXPECT_GE(vendi, 1.0);
  EXPECT_LE(vendi, 45.0);
}

// The cosine kernel has the finite feature map x / |x|: the exact N x N form and the d x d
// feature form (eq. 17-18 and eq. 22, vendi_objective.h) must give the same value and gradient.
TEST(ExactVendi, CosineKernelMatchesTheFeatureFormValueAndGradient) {
  const Pool p = Draw(12, 3, 5, 2);
  ExactVendiLoss exact(VendiGram(p.samples, VendiKernel::kCosine, 1.0), p.arm_of, 3);
  FeatureMap cosine = FeatureMap::Cosine(5);
  MixtureStats stats(3, 5, true);
  Vector phi;
  for (Eigen::Index j = 0; j < p.samples.rows(); ++j) {
    cosine.Map(p.samples.row(j).transpose(), &phi);
    stats.Add(p.arm_of[j], phi, std::nullopt);
  }
  auto feature = VendiObjective().Bind(stats);
  const Vector a = Eigen::Vector3d(0.5, 0.2, 0.3);
  Vector g_exact, g_feature;
  EXPECT_NEAR(exact.Eval(a, &g_exact), feature->Eval(a, &g_feature), 1e-10);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g_exact[i], g_feature[i], 1e-7) << "arm " << i;
}

TEST(ExactVendi, GradientMatchesFiniteDifferences) {
  const Pool p = Draw(10, 3, 3, 3);
  ExactVendiLoss loss(VendiGram(p.samples, VendiKernel::kGaussian, 1.0), p.arm_of, 3);
  const Vector a = Eigen::Vector3d(0.45, 0.35, 0.2);
  Vector g;
  loss.Eval(a, &g);
  for (int i = 0; i < 3; ++i) {
    const double h = 1e-6;
    Vector up = a, down = a;
    up[i] += h;
    down[i] -= h;
    EXPECT_NEAR(g[i], (loss.Value(up) - loss.Value(down)) / (2 * h), 1e-5) << "arm " << i;
  }
}

// The random-feature form (unit-normalized Gaussian RFF, vendi_objective.h) approaches the exact
// Gaussian-kernel value as R grows: the mean absolute error over draws shrinks, and at R = 512 it
// is small (its error decays like R^{-1/2}; R stays at 512 so the test's D x D eigenproblems are
// cheap).
TEST(ExactVendi, RandomFeatureFormConvergesAsRGrows) {
  const int d = 6;
  const double sigma = 0.5 * std::sqrt(2.0 * d);
  const Pool p = Draw(20, 4, d, 4);
  ExactVendiLoss exact(VendiGram(p.samples, VendiKernel::kGaussian, sigma), p.arm_of, 4);
  const Vector a = Eigen::Vector4d(0.4, 0.1, 0.4, 0.1);
  const double truth = exact.Value(a);
  std::vector<double> err;
  for (int R : {16, 128, 512}) {
    double e = 0;
    for (uint64_t draw = 0; draw < 2; ++draw) {
      Rng rng(100 + draw);
      FeatureMap f = *FeatureMap::RandomFourier(d, R, sigma, rng);
      MixtureStats stats(4, R, true);
      Vector phi;
      for (Eigen::Index j = 0; j < p.samples.rows(); ++j) {
        f.Map(p.samples.row(j).transpose(), &phi);
        stats.Add(p.arm_of[j], phi, std::nullopt);
      }
      e += std::abs(VendiObjective().Bind(stats)->Value(a) - truth) / 2;
    }
    err.push_back(e);
  }
  EXPECT_LT(err[1], err[0]);
  EXPECT_LT(err[2], err[1]);
  EXPECT_LT(err[2], 0.05 * std::abs(truth));
}

}  // namespace
}  // namespace bandit::mixture
