#include "core/kernel/kernel.h"

#include "core/policy.h"
#include "core/rng.h"

#include <cmath>

#include <gtest/gtest.h>

namespace bandit {
namespace BANDIT_UNITY_ID {

using bandit::v1::KernelSpec;

Kernel Make(KernelSpec::Kind kind, std::optional<double> bw = {}, std::optional<int> deg = {},
            std::optional<double> off = {}) {
  KernelSpec s;
  s.set_kind(kind);
  if (bw) s.set_bandwidth(*bw);
  if (deg) s.set_degree(*deg);
  if (off) s.set_offset(*off);
  auto k = Kernel::FromSpec(s, "kernel");
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

TEST(Kernel, ClosedForms) {
  Eigen::Vector2d x(0.1, -0.4), y(0.7, 0.4);
  const double r = std::sqrt(0.6 * 0.6 + 0.8 * 0.8);  // = 1
  const double h = 0.5;
  EXPECT_NEAR(Make(KernelSpec::GAUSSIAN, h)(x, y), std::exp(-r * r / (2 * h * h)), 1e-14);
  EXPECT_NEAR(Make(KernelSpec::KIND_UNSPECIFIED, h)(x, y), std::exp(-r * r / (2 * h * h)), 1e-14);
  const double a3 = std::sqrt(3.0) * r / h, a5 = std::sqrt(5.0) * r / h;
  EXPECT_NEAR(Make(KernelSpec::MATERN32, h)(x, y), (1 + a3) * std::exp(-a3), 1e-14);
  EXPECT_NEAR(Make(KernelSpec::MATERN52, h)(x, y),
              (1 + a5 + 5.0 * r * r / (3 * h * h)) * std::exp(-a5), 1e-14);
  const double ip = 0.1 * 0.7 - 0.4 * 0.4;
  EXPECT_NEAR(Make(KernelSpec::LINEAR)(x, y), ip, 1e-15);
  EXPECT_NEAR(Make(KernelSpec::POLYNOMIAL, {}, 3, 0.5)(x, y), std::pow(ip + 0.5, 3), 1e-15);
  EXPECT_NEAR(Make(KernelSpec::POLYNOMIAL)(x, y), std::pow(ip + 1.0, 2), 1e-15);  // defaults
  EXPECT_DOUBLE_EQ(Make(KernelSpec::MATERN52, h).Diag(x), 1.0);
  EXPECT_NEAR(Make(KernelSpec::LINEAR).Diag(x), x.squaredNorm(), 1e-15);
}

TEST(Kernel, CrossMatchesPairwiseAndIsPsd) {
  Rng rng(3);
  Matrix X(3, 9), Y(3, 5);
  for (int i = 0; i < X.size(); ++i) X.data()[i] = rng.Uniform();
  for (int i = 0; i < Y.size(); ++i) Y.data()[i] = rng.Uniform();
  for (auto kind : {KernelSpec::GAUSSIAN, KernelSpec::MATERN32, KernelSpec::MATERN52,
                    KernelSpec::LINEAR, KernelSpec::POLYNOMIAL}) {
    const Kernel k =
        kind == KernelSpec::LINEAR || kind == KernelSpec::POLYNOMIAL ? Make(kind) : Make(kind, 0.3);
    const Matrix C = k.Cross(X, Y);
    for (int i = 0; i < X.cols(); ++i)
      for (int j = 0; j < Y.cols(); ++j) EXPECT_NEAR(C(i, j), k(X.col(i), Y.col(j)), 1e-12);
    const Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Matrix>(k.Cross(X, X)).eigenvalues();
    EXPECT_GT(ev.minCoeff(), -1e-10) << "kind " << kind;
    const Vector d = k.DiagAll(X);
    for (int i = 0; i < X.cols(); ++i) EXPECT_NEAR(d[i], k(X.col(i), X.col(i)), 1e-12);
  }
}

TEST(Kernel, InvalidParametersAreRejected) {
  auto code = [](KernelSpec s) { return Kernel::FromSpec(s, "k").status().code(); };
  KernelSpec s;
  s.set_bandwidth(0.0);
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  s.set_bandwidth(-1.0);
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  s.set_bandwidth(std::nan(""));
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  s.set_bandwidth(INFINITY);
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  KernelSpec lin;
  lin.set_kind(KernelSpec::LINEAR);
  lin.set_bandwidth(1.0);  // not used by the linear kernel
  EXPECT_EQ(code(lin), absl::StatusCode::kInvalidArgument);
  KernelSpec poly;
  poly.set_kind(KernelSpec::POLYNOMIAL);
  poly.set_degree(0);
  EXPECT_EQ(code(poly), absl::StatusCode::kInvalidArgument);
  poly.set_degree(2);
  poly.set_offset(-0.5);
  EXPECT_EQ(code(poly), absl::StatusCode::kInvalidArgument);
  poly.set_offset(0.5);
  EXPECT_TRUE(Kernel::FromSpec(poly, "k").ok());
  KernelSpec gauss_deg;
  gauss_deg.set_degree(3);
  EXPECT_EQ(code(gauss_deg), absl::StatusCode::kInvalidArgument);
  KernelSpec bad_kind;
  bad_kind.set_kind(static_cast<KernelSpec::Kind>(42));
  EXPECT_EQ(code(bad_kind), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit
