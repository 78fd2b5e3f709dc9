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
                                                    int64_t d, int64_t D, Rng& rng,
                                                    RandomFeatureForm form) {
  if (!(sigma > 0) || !std::isfinite(sigma))
    return absl::InvalidArgumentError(
        absl::StrCat("kernel bandwidth is ", sigma, ", expected a finite number > 0"));
  if (d <= 0 || D <= 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "random features need input dimension and feature count > 0, got d = ", d, ", D = ", D));
  RandomFeatures rf;
  rf.form_ = form;
  rf.W_.resize(D, d);
  if (form == RandomFeatureForm::kCosinePhase) rf.b_.resize(D);
  for (int64_t i = 0; i < D; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      if (kind == ShiftInvariantKernel::kGaussian) {
        rf.W_(i, j) = rng.Normal() / sigma;
      } else {
        // Standard Cauchy by inversion, scaled by 1/sigma.
        rf.W_(i, j) = std::tan(std::numbers::pi * (rng.UniformOpen() - 0.5)) / sigma;
      }
    }
    if (form == RandomFeatureForm::kCosinePhase) rf.b_[i] = 2.0 * std::numbers::pi * rng.Uniform();
  }
  return rf;
}

void RandomFeatures::MapInto(const Eigen::VectorXd& x, Eigen::VectorXd* z) const {
  if (form_ == RandomFeatureForm::kCosSinPairs) {
    // Appendix F of the OKS paper: D^{-1/2} (cos(w_j'x), sin(w_j'x)) pairs, interleaved.
    const Eigen::VectorXd wx = W_ * x;
    const double s = 1.0 / std::sqrt(static_cast<double>(W_.rows()));
    z->resize(2 * W_.rows());
    for (Eigen::Index j = 0; j < wx.size(); ++j) {
      (*z)[2 * j] = s * std::cos(wx[j]);
      (*z)[2 * j + 1] = s * std::sin(wx[j]);
    }
    return;
  }
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
  if (form_ == RandomFeatureForm::kCosinePhase) w.Put(absl::StrCat(prefix, "rff_b"), b_);
}

absl::Status RandomFeatures::Restore(const StateReader& r, absl::string_view prefix, int64_t d,
                                     int64_t D) {
  Eigen::MatrixXd W;
  Eigen::VectorXd b;
  if (auto s = r.Get(absl::StrCat(prefix, "rff_W"), &W, D, d); !s.ok()) return s;
  if (form_ == RandomFeatureForm::kCosinePhase)
    if (auto s = r.Get(absl::StrCat(prefix, "rff_b"), &b, D); !s.ok()) return s;
  W_ = std::move(W);
  b_ = std::move(b);
  return absl::OkStatus();
}

}  // namespace bandit
