// Exponentiated gradient (eq. 13): iterates stay on the simplex and reach the minimizer of small
// convex problems solved independently (KKT enumeration for a quadratic, a dense grid for FD).
#include <cmath>

#include <gtest/gtest.h>

#include "core/mixture/eg_solver.h"
#include "core/mixture/fd_objective.h"
#include "core/mixture/stats.h"
#include "core/rng.h"

namespace bandit::mixture {
namespace BANDIT_UNITY_ID {

// Exact minimizer of a' K a + b' a over the simplex by enumerating supports (KKT conditions).
Vector QuadraticSimplexMin(const Matrix& K, const Vector& b) {
  const int m = static_cast<int>(b.size());
  Vector best;
  double best_val = 1e300;
  for (int mask = 1; mask < (1 << m); ++mask) {
    std::vector<int> sup;
    for (int i = 0; i < m; ++i)
      if (mask & (1 << i)) sup.push_back(i);
    const int k = static_cast<int>(sup.size());
    Matrix A = Matrix::Zero(k + 1, k + 1);
    Vector rhs(k + 1);
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) A(r, c) = 2 * K(sup[r], sup[c]);
      A(r, k) = 1;
      A(k, r) = 1;
      rhs[r] = -b[sup[r]];
    }
    rhs[k] = 1;
    const Vector sol = A.fullPivLu().solve(rhs);
    Vector a = Vector::Zero(m);
    bool feasible = true;
    for (int r = 0; r < k; ++r) {
      a[sup[r]] = sol[r];
      if (sol[r] < -1e-12) feasible = false;
    }
    if (!feasible) continue;
    const double v = a.dot(K * a) + b.dot(a);
    if (v < best_val) best_val = v, best = a;
  }
  return best;
}

TEST(ExponentiatedGradient, StaysOnSimplexAndReachesQuadraticMinimizer) {
  Rng rng(4);
  for (int trial = 0; trial < 5; ++trial) {
    const int m = 4;
    Matrix A(m, m);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) A(i, j) = rng.Normal();
    const Matrix K = A * A.transpose() + 0.1 * Matrix::Identity(m, m);
    Vector b(m);
    for (int i = 0; i < m; ++i) b[i] = rng.Normal();
    QuadraticLoss loss(K, b, 0.0);
    const double eta = 1.0 / (2 * K.cwiseAbs().maxCoeff());
    Vector a = Vector::Constant(m, 1.0 / m);
    for (int s = 0; s < 20000; ++s) {
      a = ExponentiatedGradient(loss, a, 1, eta).alpha;
      ASSERT_NEAR(a.sum(), 1.0, 1e-12);
      ASSERT_GE(a.minCoeff(), 0.0);
    }
    const Vector exact = QuadraticSimplexMin(K, b);
    EXPECT_NEAR(loss.Value(a), loss.Value(exact), 1e-6) << "trial " << trial;
    EXPECT_LT((a - exact).lpNorm<1>(), 2e-2) << "trial " << trial << "\n"
                                             << a.transpose() << "\n"
                                             << exact.transpose();
  }
}

TEST(ExponentiatedGradient, ZeroWeightsStayZeroAndFloorKeepsPositive) {
  QuadraticLoss loss(Matrix::Identity(3, 3), (Vector(3) << 0, 0, 100).finished(), 0.0);
  Vector a(3);
  a << 0.5, 0.0, 0.5;
  const Vector out = ExponentiatedGradient(loss, a, 50, 1.0).alpha;
  EXPECT_EQ(out[1], 0.0);
  EXPECT_NEAR(out.sum(), 1.0, 1e-12);
  const Vector floored =
      ExponentiatedGradient(loss, Vector::Constant(3, 1.0 / 3), 200, 1.0, 1e-9).alpha;
  EXPECT_GE(floored[2], 1e-9 * 0.99);
}

// FD with m = 3 arms: EG's value matches the minimum of a dense grid over the 2-simplex.
TEST(ExponentiatedGradient, ReachesFdMinimizerFoundByGridSearch) {
  Rng rng(9);
  const int m = 3, d = 3;
  MixtureStats s(m, d, true);
  for (int i = 0; i < m; ++i) {
    Vector c(d);
    for (int k = 0; k < d; ++k) c[k] = rng.Normal(0, 2);
    for (int r = 0; r < 40; ++r) {
      Vector x(d);
      for (int k = 0; k < d; ++k) x[k] = c[k] + rng.Normal(0, 0.5 + 0.3 * i);
      s.Add(i, x, std::nullopt);
    }
  }
  auto obj = FdObjective::Make(Vector::Zero(d), 2.0 * Matrix::Identity(d, d));
  ASSERT_TRUE(obj.ok());
  auto loss = (*obj)->Bind(s);
  const EgResult r = ExponentiatedGradient(*loss, Vector::Constant(m, 1.0 / m), 3000,
                                           (*obj)->DefaultStepSize(s), 0.0, true);
  double grid_best = 1e300;
  Vector grid_arg;
  const int G = 400;
  for (int i = 0; i <= G; ++i)
    for (int j = 0; i + j <= G; ++j) {
      Vector a(3);
      a << double(i) / G, double(j) / G, double(G - i - j) / G;
      const double v = loss->Value(a);
      if (v < grid_best) grid_best = v, grid_arg = a;
    }
  EXPECT_LE(r.value, grid_best + 1e-6);
  EXPECT_LT((r.alpha - grid_arg).lpNorm<1>(), 2e-2)
      << r.alpha.transpose() << " vs " << grid_arg.transpose();
}

}  // namespace
}  // namespace bandit::mixture
