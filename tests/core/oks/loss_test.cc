#include "core/oks/loss.h"

#include <cmath>

#include <gtest/gtest.h>

namespace bandit::oks {
namespace BANDIT_UNITY_ID {

constexpr LossKind kAll[] = {LossKind::kLogistic, LossKind::kSquare, LossKind::kSquaredHinge,
                             LossKind::kAbsolute, LossKind::kHinge};

TEST(OksLoss, ClosedForms) {
  EXPECT_NEAR(Loss(LossKind::kLogistic, 0.0, 1.0), std::log(2.0), 1e-15);
  EXPECT_NEAR(Loss(LossKind::kLogistic, 2.0, -1.0), std::log(1.0 + std::exp(2.0)), 1e-14);
  EXPECT_NEAR(Loss(LossKind::kLogistic, 800.0, -1.0), 800.0, 1e-9);  // no overflow
  EXPECT_DOUBLE_EQ(Loss(LossKind::kSquare, 0.3, 1.0), 0.49);
  EXPECT_DOUBLE_EQ(Loss(LossKind::kSquaredHinge, 0.5, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(Loss(LossKind::kSquaredHinge, 1.5, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(Loss(LossKind::kAbsolute, 0.3, 1.0), 0.7);
  EXPECT_DOUBLE_EQ(Loss(LossKind::kHinge, -0.5, 1.0), 1.5);
}

TEST(OksLoss, DerivativeMatchesFiniteDifferences) {
  const double h = 1e-6;
  for (LossKind k : kAll)
    for (double y : {-1.0, 1.0, 0.3})
      for (double a : {-2.1, -0.7, 0.05, 0.45, 1.6}) {
        if (Info(k).margin && y == 0.3) continue;
        const double fd = (Loss(k, a + h, y) - Loss(k, a - h, y)) / (2 * h);
        EXPECT_NEAR(Derivative(k, a, y), fd, 1e-6) << Info(k).name << " a=" << a << " y=" << y;
      }
}

TEST(OksLoss, SmoothLossesSatisfyAssumption1) {
  // |l'(a, y)|^nu <= C0 l(a, y) on a grid (Section 3).
  for (LossKind k : kAll) {
    const LossInfo& info = Info(k);
    if (!info.smooth) continue;
    for (double y : {-1.0, 1.0})
      for (double a = -20; a <= 20; a += 0.01) {
        const double lhs = std::pow(std::abs(Derivative(k, a, y)), info.nu);
        EXPECT_LE(lhs, info.c0 * Loss(k, a, y) * (1 + 1e-12) + 1e-300) << info.name << " a=" << a;
      }
  }
}

TEST(OksLoss, LipschitzLossesHaveBoundedDerivative) {
  for (LossKind k : kAll) {
    if (!Info(k).lipschitz) continue;
    for (double a = -20; a <= 20; a += 0.05) EXPECT_LE(std::abs(Derivative(k, a, 1.0)), 1.0);
  }
}

TEST(OksLoss, ProtoMapping) {
  EXPECT_EQ(FromProto(bandit::v1::OKS_LOSS_UNSPECIFIED), LossKind::kLogistic);
  EXPECT_EQ(FromProto(bandit::v1::OKS_SQUARE), LossKind::kSquare);
  EXPECT_EQ(FromProto(bandit::v1::OKS_SQUARED_HINGE), LossKind::kSquaredHinge);
  EXPECT_EQ(FromProto(bandit::v1::OKS_ABSOLUTE), LossKind::kAbsolute);
  EXPECT_EQ(FromProto(bandit::v1::OKS_HINGE), LossKind::kHinge);
}

}  // namespace
}  // namespace bandit::oks
