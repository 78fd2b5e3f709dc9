#include "core/oks/tsallis_omd.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace bandit::oks {
namespace BANDIT_UNITY_ID {

// The OMD step eq. (3) as an optimization problem, solved by a generic method:
//   q_{t+1} = argmin_{q in simplex} <c~, q> + D_psi(q, q_t),  psi(q) = sum_i -(8/eta_i) q_i^{1/8}.
double Objective(const Eigen::VectorXd& q, const Eigen::VectorXd& qt, const Eigen::VectorXd& eta,
                 const Eigen::VectorXd& c) {
  double f = 0;
  for (int i = 0; i < q.size(); ++i) {
    const double psi = -8.0 / eta[i] * std::pow(q[i], 1.0 / 8);
    const double psit = -8.0 / eta[i] * std::pow(qt[i], 1.0 / 8);
    const double dpsit = -1.0 / eta[i] * std::pow(qt[i], -7.0 / 8);
    f += c[i] * q[i] + psi - psit - dpsit * (q[i] - qt[i]);
  }
  return f;
}

// Ternary search of a convex function on [lo, hi].
double ArgminConvex(const std::function<double(double)>& f, double lo, double hi) {
  for (int it = 0; it < 120; ++it) {
    const double a = lo + (hi - lo) / 3, b = hi - (hi - lo) / 3;
    if (f(a) < f(b))
      hi = b;
    else
      lo = a;
  }
  return 0.5 * (lo + hi);
}

Eigen::VectorXd GenericSolve(const Eigen::VectorXd& qt, const Eigen::VectorXd& eta,
                             const Eigen::VectorXd& c) {
  const int k = static_cast<int>(qt.size());
  if (k == 2) {
    const double a = ArgminConvex(
        [&](double x) { return Objective(Eigen::Vector2d(x, 1 - x), qt, eta, c); }, 0, 1);
    return Eigen::Vector2d(a, 1 - a);
  }
  // k == 3: nested ternary search (the partial minimum of a convex function is convex).
  auto inner = [&](double a) {
    const double b = ArgminConvex(
        [&](double y) { return Objective(Eigen::Vector3d(a, y, 1 - a - y), qt, eta, c); }, 0,
        1 - a);
    return b;
  };
  const double a = ArgminConvex(
      [&](double x) {
        const double b = inner(x);
        return Objective(Eigen::Vector3d(x, b, 1 - x - b), qt, eta, c);
      },
      0, 1);
  const double b = inner(a);
  return Eigen::Vector3d(a, b, 1 - a - b);
}

TEST(TsallisOmd, MatchesGenericSolveOfEq3) {
  Rng rng(5);
  for (int k : {2, 3}) {
    for (int trial = 0; trial < 12; ++trial) {
      Eigen::VectorXd q(k), eta(k), c = Eigen::VectorXd::Zero(k);
      for (int i = 0; i < k; ++i) q[i] = 0.05 + rng.Uniform();
      q /= q.sum();
      for (int i = 0; i < k; ++i) eta[i] = 0.05 + 0.5 * rng.Uniform();
      if (trial % 3 == 2) {
        for (int i = 0; i < k; ++i) c[i] = rng.Uniform();  // a dense loss vector
      } else {
        const int i = static_cast<int>(rng.UniformInt(k));
        // eq. (4) scale: c / p with eta_i c~_i <= 1.
        c[i] = rng.Uniform() / std::max(q[i], eta.maxCoeff());
      }
      const Eigen::VectorXd fast = TsallisOmdStep(q, eta, c);
      const Eigen::VectorXd slow = GenericSolve(q, eta, c);
      for (int i = 0; i < k; ++i)
        EXPECT_NEAR(fast[i], slow[i], 2e-6) << "k=" << k << " trial=" << trial << " i=" << i;
      // And the generic solution is no better than ours.
      EXPECT_LE(Objective(fast, q, eta, c), Objective(slow, q, eta, c) + 1e-12);
    }
  }
}

TEST(TsallisOmd, StaysOnSimplexOverLongRuns) {
  Rng rng(9);
  const int k = 6;
  Eigen::VectorXd q = Eigen::VectorXd::Constant(k, 1.0 / k);
  Eigen::VectorXd eta = Eigen::VectorXd::Constant(k, 0.2);
  for (int t = 0; t < 5000; ++t) {
    Eigen::VectorXd c = Eigen::VectorXd::Zero(k);
    const int i = static_cast<int>(rng.UniformInt(k));
    // Kernel 0 has the smallest losses; some losses exceed l_max (c > 1) on purpose.
    c[i] = (i == 0 ? 0.1 : 1.5) * rng.Uniform() / std::max(q[i], eta.maxCoeff());
    if (t % 500 == 499) eta *= 1.1;
    double mu = -1;
    q = TsallisOmdStep(q, eta, c, &mu);
    ASSERT_TRUE(q.allFinite());
    ASSERT_GE(q.minCoeff(), 0.0);
    ASSERT_NEAR(q.sum(), 1.0, 1e-12);
    ASSERT_GE(mu, 0.0);
    ASSERT_LE(mu, c.maxCoeff() + 1e-15);
  }
  // The loss-free kernel ends with the most mass.
  Eigen::Index best;
  q.maxCoeff(&best);
  EXPECT_EQ(best, 0);
}

TEST(TsallisOmd, ZeroLossKeepsQ) {
  Eigen::VectorXd q(3);
  q << 0.2, 0.3, 0.5;
  const Eigen::VectorXd out =
      TsallisOmdStep(q, Eigen::VectorXd::Constant(3, 0.3), Eigen::VectorXd::Zero(3));
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(out[i], q[i]);
}

TEST(TsallisOmd, ParametersOfTheorem41AndEq4) {
  // Hand-computed for K = 6, T = 1000, U = G1 = l_max = 1, eta constant 8 (Section 6).
  const IoksParams p = IoksTheoremParams(6, 1000, 1, 1, 1, 8);
  EXPECT_NEAR(p.delta, 0.005623413251903491, 1e-15);
  EXPECT_NEAR(p.eta, 0.18846392611401566, 1e-14);
  EXPECT_NEAR(p.upsilon, 1.1013204674967634, 1e-14);
  EXPECT_DOUBLE_EQ(IoksLossEstimate(0.5, 0.4, 0.2), 0.5 / 0.4);
  EXPECT_DOUBLE_EQ(IoksLossEstimate(0.5, 0.2, 0.2), 0.5 / 0.2);  // p >= max eta
  EXPECT_DOUBLE_EQ(IoksLossEstimate(0.5, 0.1, 0.2), 0.5 / 0.3);
}

}  // namespace
}  // namespace bandit::oks
