#include "core/glb/projection.h"

#include <gtest/gtest.h>

#include "core/rng.h"
#include "glb_test_util.h"

namespace bandit::glb {
namespace BANDIT_UNITY_ID {

Eigen::MatrixXd RandomSpd(Rng& rng, int d, double cond) {
  Eigen::MatrixXd a(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) a(i, j) = rng.Normal();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  Eigen::MatrixXd q = qr.householderQ();
  Eigen::VectorXd l(d);
  for (int i = 0; i < d; ++i) l[i] = std::pow(cond, rng.Uniform());  // eigenvalues in [1, cond]
  return q * l.asDiagonal() * q.transpose();
}

TEST(Projection, InsideBallIsIdentity) {
  Rng rng(1);
  const Eigen::MatrixXd H = RandomSpd(rng, 4, 10);
  Eigen::VectorXd z(4);
  z << 0.1, -0.2, 0.3, 0.05;
  const Projection p = ProjectOntoBall(H, z, 1.0);
  EXPECT_EQ(p.theta, z);
  EXPECT_EQ(p.nu, 0.0);
}

TEST(Projection, MatchesBruteForceAndKkt) {
  Rng rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int d = 2 + trial % 5;
    const double S = 0.5 + 2.5 * rng.Uniform();
    const Eigen::MatrixXd H = RandomSpd(rng, d, 1 + 30 * rng.Uniform());
    Eigen::VectorXd z(d);
    for (int i = 0; i < d; ++i) z[i] = 3 * rng.Normal();
    if (z.norm() <= S) z *= 2 * S / z.norm();
    const Projection p = ProjectOntoBall(H, z, S);
    // Brute force: minimize ||theta - z||_H^2 over the ball by projected gradient descent.
    // 1/2 ||theta - z||_H^2 = const - (Hz)'theta + 1/2 theta'H theta: gradient -Hz at theta0 = 0.
    const Eigen::VectorXd slow =
        testing::SlowQuadraticOverBall(H, -H * z, Eigen::VectorXd::Zero(d), S, 20000);
    EXPECT_LT((p.theta - slow).norm(), 1e-7) << "trial " << trial;
    // KKT: on the sphere, nu > 0, and H (theta - z) + nu theta = 0.
    EXPECT_NEAR(p.theta.norm(), S, 1e-10);
    EXPECT_GT(p.nu, 0);
    EXPECT_LT((H * (p.theta - z) + p.nu * p.theta).norm(), 1e-8 * (1 + (H * z).norm()));
    // No feasible point of a random sample beats it.
    const double best = (p.theta - z).dot(H * (p.theta - z));
    for (int k = 0; k < 200; ++k) {
      Eigen::VectorXd y(d);
      for (int i = 0; i < d; ++i) y[i] = rng.Normal();
      y *= S * std::pow(rng.Uniform(), 1.0 / d) / y.norm();
      EXPECT_GE((y - z).dot(H * (y - z)), best - 1e-9);
    }
  }
}

TEST(Projection, IllConditionedStillOnSphere) {
  Rng rng(3);
  const Eigen::MatrixXd H = RandomSpd(rng, 6, 1e8);
  Eigen::VectorXd z = Eigen::VectorXd::Constant(6, 50.0);
  const Projection p = ProjectOntoBall(H, z, 1.0);
  EXPECT_NEAR(p.theta.norm(), 1.0, 1e-10);
  EXPECT_LT((H * (p.theta - z) + p.nu * p.theta).norm(), 1e-6 * (H * z).norm());
}

}  // namespace
}  // namespace bandit::glb
