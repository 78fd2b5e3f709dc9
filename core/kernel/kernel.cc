#include "core/kernel/kernel.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validate.h"

namespace bandit {

absl::StatusOr<Kernel> Kernel::FromSpec(const bandit::v1::KernelSpec& spec,
                                        absl::string_view field) {
  using bandit::v1::KernelSpec;
  Kind kind;
  switch (spec.kind()) {
    case KernelSpec::KIND_UNSPECIFIED:
    case KernelSpec::GAUSSIAN:
      kind = Kind::kGaussian;
      break;
    case KernelSpec::MATERN32:
      kind = Kind::kMatern32;
      break;
    case KernelSpec::MATERN52:
      kind = Kind::kMatern52;
      break;
    case KernelSpec::LINEAR:
      kind = Kind::kLinear;
      break;
    case KernelSpec::POLYNOMIAL:
      kind = Kind::kPolynomial;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".kind is ", static_cast<int>(spec.kind()),
                       ", expected GAUSSIAN, MATERN32, MATERN52, LINEAR or POLYNOMIAL"));
  }
  const bool radial = kind == Kind::kGaussian || kind == Kind::kMatern32 || kind == Kind::kMatern52;
  double bandwidth = 1.0, offset = 1.0;
  int degree = 2;
  if (spec.has_bandwidth()) {
    if (!radial)
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".bandwidth is set, expected it unset: only Gaussian and Matern kernels use it"));
    bandwidth = spec.bandwidth();
    if (auto s = CheckPositive(absl::StrCat(field, ".bandwidth"), bandwidth); !s.ok()) return s;
  }
  if (spec.has_degree()) {
    if (kind != Kind::kPolynomial)
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".degree is set, expected it unset: only the polynomial kernel uses it"));
    degree = spec.degree();
    if (degree < 1 || degree > 32)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".degree is ", degree, ", expected an integer in [1, 32]"));
  }
  if (spec.has_offset()) {
    if (kind != Kind::kPolynomial)
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".offset is set, expected it unset: only the polynomial kernel uses it"));
    offset = spec.offset();
    // c >= 0 keeps (x^T y + c)^p positive semi-definite.
    if (auto s = CheckRange(absl::StrCat(field, ".offset"), offset, 0.0, 1e12); !s.ok()) return s;
  }
  return Kernel(kind, bandwidth, degree, offset);
}

double Kernel::FromSquaredDistance(double r2) const {
  r2 = std::max(r2, 0.0);
  const double h = bandwidth_;
  switch (kind_) {
    case Kind::kGaussian:
      return std::exp(-r2 / (2.0 * h * h));
    case Kind::kMatern32: {
      const double a = std::sqrt(3.0 * r2) / h;
      return (1.0 + a) * std::exp(-a);
    }
    case Kind::kMatern52: {
      const double a = std::sqrt(5.0 * r2) / h;
      return (1.0 + a + a * a / 3.0) * std::exp(-a);
    }
    default:
      return 0.0;
  }
}

double Kernel::FromInner(double ip) const {
  if (kind_ == Kind::kLinear) return ip;
  return std::pow(ip + offset_, degree_);
}

double Kernel::operator()(const Eigen::Ref<const Eigen::VectorXd>& x,
                          const Eigen::Ref<const Eigen::VectorXd>& y) const {
  if (stationary()) return FromSquaredDistance((x - y).squaredNorm());
  return FromInner(x.dot(y));
}

double Kernel::Diag(const Eigen::Ref<const Eigen::VectorXd>& x) const {
  if (stationary()) return 1.0;
  return FromInner(x.squaredNorm());
}

Eigen::MatrixXd Kernel::Cross(const Eigen::Ref<const Eigen::MatrixXd>& X,
                              const Eigen::Ref<const Eigen::MatrixXd>& Y) const {
  Eigen::MatrixXd G(X.cols(), Y.cols());
  G.noalias() = X.transpose() * Y;
  if (stationary()) {
    const Eigen::VectorXd nx = X.colwise().squaredNorm().transpose();
    const Eigen::RowVectorXd ny = Y.colwise().squaredNorm();
    for (Eigen::Index j = 0; j < G.cols(); ++j)
      for (Eigen::Index i = 0; i < G.rows(); ++i)
        G(i, j) = FromSquaredDistance(nx[i] + ny[j] - 2.0 * G(i, j));
  } else {
    for (Eigen::Index j = 0; j < G.cols(); ++j)
      for (Eigen::Index i = 0; i < G.rows(); ++i) G(i, j) = FromInner(G(i, j));
  }
  return G;
}

Eigen::VectorXd Kernel::DiagAll(const Eigen::Ref<const Eigen::MatrixXd>& X) const {
  Eigen::VectorXd out(X.cols());
  for (Eigen::Index j = 0; j < X.cols(); ++j) out[j] = Diag(X.col(j));
  return out;
}

}  // namespace bandit
