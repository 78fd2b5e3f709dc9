#include "core/oks/lkmbooks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::oks {

absl::StatusOr<LkmBooks> LkmBooks::Create(const std::vector<KernelSpec>& kernels, int dim,
                                          LossKind loss, const LkmBooksParams& params,
                                          uint64_t seed) {
  if (kernels.empty()) return absl::InvalidArgumentError("lkmbooks needs at least one kernel");
  if (dim <= 0) return absl::InvalidArgumentError("lkmbooks needs input dimension > 0");
  if (params.budget < 1 || params.horizon < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "lkmbooks budget ", params.budget, " and horizon ", params.horizon, " must be >= 1"));
  if (!(params.nu > 0 && params.nu < 1))
    return absl::InvalidArgumentError(
        absl::StrCat("lkmbooks nu is ", params.nu, ", expected (0, 1)"));
  LkmBooks l;
  for (const KernelSpec& k : kernels) {
    if (k.kind != ShiftInvariantKernel::kGaussian)
      return absl::InvalidArgumentError("lkmbooks is written for Gaussian kernels");
    if (!(k.sigma > 0) || !std::isfinite(k.sigma))
      return absl::InvalidArgumentError(absl::StrCat("lkmbooks bandwidth is ", k.sigma));
    l.inv_two_sigma2_.push_back(1.0 / (2.0 * k.sigma * k.sigma));
  }
  l.dim_ = dim;
  l.loss_ = loss;
  l.params_ = params;
  const double T = static_cast<double>(params.horizon);
  const double nu = params.nu;
  if (params.lambda > 0) {
    l.lambda_ = params.lambda;
  } else if (params.classification) {
    l.lambda_ = 5.0 / std::sqrt(T);  // LKMBooks-c script
  } else {
    l.lambda_ = std::sqrt((1 + nu) * static_cast<double>(params.budget)) /
                (std::sqrt(1 - nu) * T);  // LKMBooks-r script
  }
  const int k = static_cast<int>(kernels.size());
  l.eta_ = std::sqrt(8.0 * std::log(static_cast<double>(std::max(k, 2))) / T);
  l.rng_ = Rng(seed);
  l.p_ = Eigen::VectorXd::Constant(k, 1.0 / k);
  return l;
}

double LkmBooks::InclusionProbability() const {
  const double T = static_cast<double>(params_.horizon), nu = params_.nu;
  return std::min(1.0, static_cast<double>(params_.budget) /
                           ((1 - nu) * std::pow(T, 1 - nu) *
                            std::pow(static_cast<double>(gradient_rounds_ + 1), nu)));
}

Eigen::VectorXd LkmBooks::KernelPredictions(const Eigen::VectorXd& x) const {
  const int k = static_cast<int>(inv_two_sigma2_.size());
  Eigen::VectorXd f = Eigen::VectorXd::Zero(k);
  for (size_t j = 0; j < coef_.size(); ++j) {
    // One squared distance per support vector, shared by the K kernels (memory sharing).
    const double r2 =
        (Eigen::Map<const Eigen::VectorXd>(sv_.data() + j * dim_, dim_) - x).squaredNorm();
    for (int i = 0; i < k; ++i) f[i] += coef_[j] * std::exp(-r2 * inv_two_sigma2_[i]);
  }
  return f;
}

double LkmBooks::Predict(const Eigen::VectorXd& x) const { return p_.dot(KernelPredictions(x)); }

double LkmBooks::PredictAndUpdate(const Eigen::VectorXd& x, double y) {
  const Eigen::VectorXd fi = KernelPredictions(x);
  const double f = p_.dot(fi);
  const double g = Derivative(loss_, f, y);
  const double lo = fi.minCoeff(), hi = fi.maxCoeff();
  if (g != 0) {
    // Linearized losses c_i >= 0 and the exponential-weights step.
    Eigen::VectorXd c = g > 0 ? (g * (fi.array() - lo) / g_max_).matrix()
                              : (g * (fi.array() - hi) / g_max_).matrix();
    const Eigen::VectorXd w = (p_.array() * (-eta_ * c.array()).exp()).matrix();
    p_ = w / w.sum();
    const double rho = InclusionProbability();
    const bool keep = rng_.Bernoulli(rho);
    if (keep && static_cast<int64_t>(coef_.size()) < params_.budget) {
      sv_.insert(sv_.end(), x.data(), x.data() + dim_);
      coef_.push_back(-lambda_ * g / rho);
    }
    ++gradient_rounds_;
  }
  g_max_ = std::max(g_max_, hi - lo);
  return f;
}

int64_t LkmBooks::StateBytes() const {
  return static_cast<int64_t>((sv_.size() + coef_.size() + p_.size()) * sizeof(double));
}

}  // namespace bandit::oks
