#include "core/common/random_features.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"

namespace bandit {

double KernelValue(ShiftInvariantKernel kind, double sigma, const Eigen::VectorXd& x,
                   const Eigen::VectorXd& y) {
  switch (kind) {
    case ShiftInvariantKernel::kGaussian:
      return std::exp(-(x - y).squaredNorm() / (2.0 * sigma * sigma));
    case ShiftInvariantKernel::kLaplacian:
      return std::exp(-(x - y).lpNorm<1>() / sigma);
  }
  return 0.0;
}

absl::StatusOr<RandomFeatures> RandomFeatures::Draw(ShiftInvariantKernel kind, double sigma,
                                                    int64_t d, int64_t D, Rng& rng) {
  if (!(sigma > 0) || !std::isfinite(sigma))
    return absl::InvalidArgumentError(
        absl::StrCat("kernel bandwidth is ", sigma, ", expected a finite number > 0"));
  if (d <= 0 || D <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("random features need input dimension and feature count > 0, got d = ", d,
                     ", D = ", D));
  RandomFeatures rf;
  rf.W_.resize(D, d);
  rf.b_.resize(D);
  for (int64_t i = 0; i < D; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      if (kind == ShiftInvariantKernel::kGaussian) {
        rf.W_(i, j) = rng.Normal() / sigma;
      } else {
        // Standard Cauchy by inversion, scaled by 1/sigma.
        rf.W_(i, j) = std::tan(std::numbers::pi * (rng.UniformOpen() - 0.5)) / sigma;
      }
    }
    rf.b_[i] = 2.0 * std::numbers::pi * rng.Uniform();
  }
  return rf;
}

void RandomFeatures::MapInto(const Eigen::VectorXd& x, Eigen::VectorXd* z) const {
  z->noalias() = W_ * x;
  *z = (std::sqrt(2.0 / static_cast<double>(W_.rows())) * (z->array() + b_.array()).cos()).matrix();
}

Eigen::VectorXd RandomFeatures::Map(const Eigen::VectorXd& x) const {
  Eigen::VectorXd z;
  MapInto(x, &z);
  return z;
}

void RandomFeatures::Save(StateWriter& w, absl::string_view prefix) const {
  w.Put(absl::StrCat(prefix, "rff_W"), W_);
  w.Put(absl::StrCat(prefix, "rff_b"), b_);
}

absl::Status RandomFeatures::Restore(const StateReader& r, absl::string_view prefix, int64_t d,
                                     int64_t D) {
  Eigen::MatrixXd W;
  Eigen::VectorXd b;
  if (auto s = r.Get(absl::StrCat(prefix, "rff_W"), &W, D, d); !s.ok()) return s;
  if (auto s = r.Get(absl::StrCat(prefix, "rff_b"), &b, D); !s.ok()) return s;
  W_ = std::move(W);
  b_ = std::move(b);
  return absl::OkStatus();
}

}  // namespace bandit
