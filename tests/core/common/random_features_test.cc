#include "core/common/random_features.h"

#include <cmath>

#include <gtest/gtest.h>

namespace bandit {
namespace BANDIT_UNITY_ID {

// Mean absolute error of z(x)'z(y) against k(x, y) over fixed point pairs.
double MeanError(ShiftInvariantKernel kind, int64_t D, uint64_t seed) {
  Rng points(11);
  Rng draw(seed);
  const int d = 4;
  auto rf = RandomFeatures::Draw(kind, 1.5, d, D, draw);
  EXPECT_TRUE(rf.ok());
  double err = 0;
  const int pairs = 50;
  for (int i = 0; i < pairs; ++i) {
    Eigen::VectorXd x(d), y(d);
    for (int j = 0; j < d; ++j) {
      x[j] = points.Uniform() * 2 - 1;
      y[j] = points.Uniform() * 2 - 1;
    }
    err += std::abs(rf->Map(x).dot(rf->Map(y)) - KernelValue(kind, 1.5, x, y));
  }
  return err / pairs;
}

TEST(RandomFeatures, ErrorShrinksLikeInverseSqrtD) {
  for (auto kind : {ShiftInvariantKernel::kGaussian, ShiftInvariantKernel::kLaplacian}) {
    // Average over draws so the comparison is about the rate, not one lucky draw.
    double e_small = 0, e_large = 0;
    for (uint64_t s = 1; s <= 8; ++s) {
      e_small += MeanError(kind, 64, s) / 8;
      e_large += MeanError(kind, 4096, s) / 8;
    }
    // 64x more features -> error ~8x smaller; accept anything between 4x and 16x.
    EXPECT_GT(e_small / e_large, 4.0) << "kind " << static_cast<int>(kind);
    EXPECT_LT(e_small / e_large, 16.0) << "kind " << static_cast<int>(kind);
    EXPECT_LT(e_large, 0.03);
  }
}

TEST(RandomFeatures, SelfInnerProductNearOne) {
  Rng rng(5);
  auto rf = RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, 1.0, 3, 20000, rng);
  ASSERT_TRUE(rf.ok());
  Eigen::VectorXd x = Eigen::VectorXd::Constant(3, 0.3);
  EXPECT_NEAR(rf->Map(x).squaredNorm(), 1.0, 0.03);
}

TEST(RandomFeatures, RejectsBadParameters) {
  Rng rng(1);
  EXPECT_EQ(RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, 0.0, 3, 10, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RandomFeatures::Draw(ShiftInvariantKernel::kGaussian, 1.0, 0, 10, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RandomFeatures, SaveRestoreReproducesMap) {
  Rng rng(9);
  auto rf = RandomFeatures::Draw(ShiftInvariantKernel::kLaplacian, 0.7, 3, 16, rng);
  ASSERT_TRUE(rf.ok());
  bandit::v1::PolicyState st;
  StateWriter w(&st, "x", 1);
  rf->Save(w, "k0_");
  RandomFeatures back;
  ASSERT_TRUE(back.Restore(StateReader(st), "k0_", 3, 16).ok());
  Eigen::VectorXd x(3);
  x << 0.1, -0.2, 0.3;
  EXPECT_EQ(rf->Map(x), back.Map(x));
}

}  // namespace
}  // namespace bandit
