#include "core/oks/raker.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/oks/exp3_schedule.h"

namespace bandit::oks {

absl::StatusOr<Raker> Raker::Create(const std::vector<KernelSpec>& kernels, int dim,
                                    int num_frequencies, LossKind loss, double eta, Rng& rng) {
  if (kernels.empty()) return absl::InvalidArgumentError("raker needs at least one kernel");
  if (!(eta > 0) || !std::isfinite(eta))
    return absl::InvalidArgumentError(
        absl::StrCat("raker step size is ", eta, ", expected a finite number > 0"));
  std::vector<RandomFeatures> maps;
  for (const KernelSpec& k : kernels) {
    auto rf = RandomFeatures::Draw(k.kind, k.sigma, dim, num_frequencies, rng,
                                   RandomFeatureForm::kCosSinPairs);
    if (!rf.ok()) return rf.status();
    maps.push_back(*std::move(rf));
  }
  return Raker(std::move(maps), loss, eta);
}

Raker::Raker(std::vector<RandomFeatures> maps, LossKind loss, double eta)
    : maps_(std::move(maps)), loss_(loss), eta_(eta) {
  const int k = num_kernels();
  for (const auto& m : maps_) theta_.push_back(Eigen::VectorXd::Zero(m.output_dim()));
  cum_loss_ = Eigen::VectorXd::Zero(k);
  z_.resize(k);
  f_.resize(k);
}

Eigen::VectorXd Raker::KernelWeights() const {
  // wbar_p = w_p / sum w, w_p = prod_t exp(-eta l_{t,p}) = exp(-eta L_p)   (eq. (15))
  return ExponentialWeights(cum_loss_, eta_);
}

double Raker::Predict(const Eigen::VectorXd& x) const {
  const Eigen::VectorXd wbar = KernelWeights();
  double f = 0;
  for (int p = 0; p < num_kernels(); ++p) f += wbar[p] * theta_[p].dot(maps_[p].Map(x));
  return f;
}

double Raker::PredictAndUpdate(const Eigen::VectorXd& x, double y) {
  const Eigen::VectorXd wbar = KernelWeights();
  double f = 0;
  for (int p = 0; p < num_kernels(); ++p) {
    maps_[p].MapInto(x, &z_[p]);
    f_[p] = theta_[p].dot(z_[p]);  // eq. (12)
    f += wbar[p] * f_[p];          // eq. (13)
  }
  for (int p = 0; p < num_kernels(); ++p) {
    theta_[p].noalias() -= (eta_ * Derivative(loss_, f_[p], y)) * z_[p];  // eq. (14)
    cum_loss_[p] += Loss(loss_, f_[p], y);                                // eq. (15)
  }
  return f;
}

int64_t Raker::StateBytes() const {
  int64_t b = cum_loss_.size() * sizeof(double);
  for (int p = 0; p < num_kernels(); ++p)
    b += maps_[p].Bytes() + theta_[p].size() * static_cast<int64_t>(sizeof(double));
  return b;
}

}  // namespace bandit::oks
