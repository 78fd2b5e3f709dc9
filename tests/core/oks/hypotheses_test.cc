#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "core/oks/exact_hypotheses.h"
#include "core/oks/rf_hypotheses.h"

namespace bandit::oks {
namespace BANDIT_UNITY_ID {

Eigen::VectorXd RandomPoint(Rng& rng, int d) {
  Eigen::VectorXd x(d);
  for (int j = 0; j < d; ++j) x[j] = 2 * rng.Uniform() - 1;
  return x;
}

std::vector<KernelSpec> TwoKernels() {
  return {{ShiftInvariantKernel::kGaussian, 0.5}, {ShiftInvariantKernel::kLaplacian, 2.0}};
}

TEST(ExactHypotheses, StepIsTheKernelGradientStep) {
  ExactHypotheses h(TwoKernels(), 3, 0);
  Rng rng(1);
  const Eigen::VectorXd x = RandomPoint(rng, 3), v = RandomPoint(rng, 3);
  h.Step(0, x, 0.3, kNoProjection);
  EXPECT_NEAR(h.Eval(0, v), -0.3 * KernelValue(ShiftInvariantKernel::kGaussian, 0.5, x, v), 1e-15);
  EXPECT_EQ(h.Eval(1, v), 0.0);  // the other kernel is untouched
  h.Step(1, v, -0.2, kNoProjection);
  EXPECT_NEAR(h.Eval(1, x), 0.2 * KernelValue(ShiftInvariantKernel::kLaplacian, 2.0, v, x), 1e-15);
}

TEST(ExactHypotheses, ProjectionLandsOnTheBallEq2) {
  ExactHypotheses h(TwoKernels(), 2, 0);
  Rng rng(2);
  const double u = 0.7;
  int projected = 0;
  for (int t = 0; t < 300; ++t) {
    const int i = t % 2;
    const Eigen::VectorXd x = RandomPoint(rng, 2);
    const double before = h.Eval(i, x);
    h.Step(i, x, rng.Normal(), u);
    const double direct = h.DirectNormSq(i);
    ASSERT_NEAR(h.TrackedNormSq(i), direct, 1e-9 * std::max(1.0, direct));
    ASSERT_LE(std::sqrt(direct), u * (1 + 1e-9));
    if (std::abs(std::sqrt(direct) - u) < 1e-9) ++projected;
    (void)before;
  }
  EXPECT_GT(projected, 100);  // the constraint was active most of the time
}

TEST(ExactHypotheses, ProjectionIsTheNearestPointOfTheBall) {
  // For f outside the ball, Proj(f) = f U/||f|| is the closest point: compare with the
  // distance to random other points of the ball (in the span of the support vectors).
  ExactHypotheses h({{ShiftInvariantKernel::kGaussian, 1.0}}, 1, 0);
  Eigen::VectorXd x(1);
  x << 0.0;
  h.Step(0, x, -3.0, 1.0);  // f = 3 k(0, .), ||f|| = 3 -> projected to k(0, .)
  EXPECT_NEAR(h.Eval(0, x), 1.0, 1e-15);
  EXPECT_NEAR(h.TrackedNormSq(0), 1.0, 1e-15);
}

TEST(ExactHypotheses, BudgetDropsOldestAndKeepsNormExact) {
  ExactHypotheses h(TwoKernels(), 2, 5);
  Rng rng(3);
  Eigen::VectorXd last;
  for (int t = 0; t < 40; ++t) {
    last = RandomPoint(rng, 2);
    h.Step(0, last, rng.Normal(), 0.8);
    ASSERT_LE(h.num_support(0), 5);
    ASSERT_NEAR(h.TrackedNormSq(0), h.DirectNormSq(0), 1e-9);
    ASSERT_LE(std::sqrt(h.DirectNormSq(0)), 0.8 * (1 + 1e-9));
  }
  EXPECT_EQ(h.num_support(0), 5);
  EXPECT_EQ(h.SupportVector(0, 4), last);
  const int64_t bytes = h.Bytes();
  for (int t = 0; t < 40; ++t) h.Step(0, RandomPoint(rng, 2), rng.Normal(), 0.8);
  EXPECT_EQ(h.Bytes(), bytes);
}

TEST(RfHypotheses, BoxProjectionEq8) {
  Rng rng(4), same(4);
  auto h = RfHypotheses::Draw(TwoKernels(), 3, 64, rng);
  ASSERT_TRUE(h.ok());
  // The same feature maps, drawn again from an identically seeded engine (same draw order).
  std::vector<RandomFeatures> maps;
  for (const auto& k : TwoKernels())
    maps.push_back(*RandomFeatures::Draw(k.kind, k.sigma, 3, 64, same));
  const double u = 2.0, c = u / std::sqrt(64.0);
  int clipped = 0;
  for (int t = 0; t < 200; ++t) {
    const int i = t % 2;
    const Eigen::VectorXd x = RandomPoint(rng, 3);
    const Eigen::VectorXd before = h->weights(i);
    const double step = 3 * rng.Normal();
    h->Step(i, x, step, u);
    // Independent: w~ = w - s z(x), then w_j = min{1, U / (|w~_j| sqrt(D))} w~_j.
    const Eigen::VectorXd wt = before - step * maps[i].Map(x);
    const Eigen::VectorXd& w = h->weights(i);
    for (int j = 0; j < 64; ++j) {
      const double expect = std::min(1.0, u / (std::abs(wt[j]) * 8.0)) * wt[j];
      ASSERT_NEAR(w[j], expect, 1e-14);
      if (std::abs(wt[j]) > c) ++clipped;
    }
    ASSERT_LE(w.cwiseAbs().maxCoeff(), c * (1 + 1e-15));
    ASSERT_LE(w.norm(), u * (1 + 1e-12));  // ||w||_2 <= U (Section 5)
    ASSERT_NEAR(h->Eval(i, x), w.dot(maps[i].Map(x)), 1e-13);
  }
  EXPECT_GT(clipped, 100);
}

TEST(RfHypotheses, StepMatchesClosedFormBeforeClipping) {
  Rng rng(6);
  auto h = RfHypotheses::Draw({{ShiftInvariantKernel::kGaussian, 1.0}}, 2, 500, rng);
  ASSERT_TRUE(h.ok());
  Rng pts(7);
  const Eigen::VectorXd x = RandomPoint(pts, 2), v = RandomPoint(pts, 2);
  h->Step(0, x, 0.01, kNoProjection);
  // f(v) = -0.01 z(x)'z(v), and z(x)'z(v) approximates k(x, v) (D = 500).
  EXPECT_NEAR(h->Eval(0, v), -0.01 * KernelValue(ShiftInvariantKernel::kGaussian, 1.0, x, v),
              0.01 * 0.15);
  EXPECT_NEAR(h->FeatureNormSq(0, x), 1.0, 0.15);
  // Clipping at U = 0.01 * sqrt(D) * tiny: every coordinate is at most the box edge.
  const double u = 1e-4;
  h->Step(0, x, 1.0, u);
  EXPECT_LE(h->weights(0).cwiseAbs().maxCoeff(), u / std::sqrt(500.0) * (1 + 1e-15));
}

TEST(RfHypotheses, RejectsInvalidBandwidth) {
  Rng rng(1);
  EXPECT_EQ(RfHypotheses::Draw({{ShiftInvariantKernel::kGaussian, 0.0}}, 2, 8, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit::oks
