#include "core/mixture/mixture_ucb.h"

#include <cmath>

namespace bandit::mixture {

Vector MixtureUcb::Bonus() const {
  const double delta = params_.ucb_delta ? *params_.ucb_delta : objective_->DefaultUcbDelta();
  const double t = std::max(stats_.total(), 1.0);
  const Vector& n = stats_.counts();
  Vector eps(n.size());
  for (int i = 0; i < n.size(); ++i)
    eps[i] = delta * std::sqrt(params_.ucb_beta * std::log(t) / (2.0 * std::max(n[i], 1.0)));
  return eps;
}

Vector MixtureUcb::ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                                       Vector* arm_gap) {
  const Vector eps = Bonus();
  diag->push_back({"loss", GreedyStep(-eps)});
  return alpha_;
}

}  // namespace bandit::mixture
