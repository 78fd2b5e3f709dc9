#include "core/mixture/kd_objective.h"

#include <algorithm>

namespace bandit::mixture {

std::unique_ptr<BoundLoss> KdObjective::Bind(const MixtureStats& stats) const {
  const Matrix& m = stats.means();
  return std::make_unique<QuadraticLoss>(m.transpose() * m, -2.0 * m.transpose() * mu_ref_,
                                         mu_ref_.squaredNorm());
}

double KdObjective::DefaultStepSize(const MixtureStats& stats) const {
  const Matrix& m = stats.means();
  const double kmax = (m.transpose() * m).cwiseAbs().maxCoeff();
  return 1.0 / (2.0 * std::max(kmax, 1e-12));
}

absl::Status KdObjective::Restore(const StateReader& r) {
  Vector mu;
  if (auto s = r.Get("kd_mu_ref", &mu, mu_ref_.size()); !s.ok()) return s;
  if (!mu.allFinite()) return absl::InvalidArgumentError("state kd_mu_ref is not finite");
  mu_ref_ = std::move(mu);
  return absl::OkStatus();
}

}  // namespace bandit::mixture
