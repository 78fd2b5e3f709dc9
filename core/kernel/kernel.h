// Positive-definite kernels on R^d used by the kernelized bandits (BKB, GP-UCB):
//   Gaussian (RBF)  k(x,y) = exp(-|x-y|^2 / (2 h^2))
//   Matern 3/2      k(x,y) = (1 + sqrt(3) r/h) exp(-sqrt(3) r/h),              r = |x-y|
//   Matern 5/2      k(x,y) = (1 + sqrt(5) r/h + 5 r^2/(3 h^2)) exp(-sqrt(5) r/h)
//   Linear          k(x,y) = x^T y
//   Polynomial      k(x,y) = (x^T y + c)^p,  integer p >= 1, c >= 0
// h is KernelSpec.bandwidth (default 1), p = degree (default 2), c = offset (default 1).
#pragma once

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "bandit/v1/kernel.pb.h"

namespace bandit {

class Kernel {
 public:
  enum class Kind { kGaussian, kMatern32, kMatern52, kLinear, kPolynomial };

  // Validates the spec: bandwidth finite > 0 (Gaussian, Matern only), degree in [1, 32] and
  // offset finite >= 0 (polynomial only). A parameter that the kind does not use must be unset.
  // `field` prefixes error messages (e.g. "bkb.kernel").
  static absl::StatusOr<Kernel> FromSpec(const bandit::v1::KernelSpec& spec,
                                         absl::string_view field);
  static Kernel Gaussian(double bandwidth) { return Kernel(Kind::kGaussian, bandwidth, 2, 1.0); }
  Kernel(Kind kind, double bandwidth, int degree, double offset)
      : kind_(kind), bandwidth_(bandwidth), degree_(degree), offset_(offset) {}

  Kind kind() const { return kind_; }
  // True when k(x, x) is the same constant (1) for every x.
  bool stationary() const { return kind_ != Kind::kLinear && kind_ != Kind::kPolynomial; }

  double operator()(const Eigen::Ref<const Eigen::VectorXd>& x,
                    const Eigen::Ref<const Eigen::VectorXd>& y) const;
  // k(x, x).
  double Diag(const Eigen::Ref<const Eigen::VectorXd>& x) const;
  // Cross-kernel matrix K[i][j] = k(X.col(i), Y.col(j)); X is d x n, Y is d x m.
  Eigen::MatrixXd Cross(const Eigen::Ref<const Eigen::MatrixXd>& X,
                        const Eigen::Ref<const Eigen::MatrixXd>& Y) const;
  // Diagonal k(x_j, x_j) for every column of X.
  Eigen::VectorXd DiagAll(const Eigen::Ref<const Eigen::MatrixXd>& X) const;

 private:
  double FromSquaredDistance(double r2) const;
  double FromInner(double ip) const;

  Kind kind_;
  double bandwidth_;
  int degree_;
  double offset_;
};

}  // namespace bandit
