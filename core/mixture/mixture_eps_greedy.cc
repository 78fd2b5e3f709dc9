#include "core/mixture/mixture_eps_greedy.h"

namespace bandit::mixture {

Vector MixtureEpsGreedy::ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                                             Vector* arm_gap) {
  const int m = arms_.size();
  const double eps = params_.epsilon;
  if (params_.epsilon_over_mixture) {
    diag->push_back({"loss", GreedyStep()});
    return Vector::Constant(m, eps / m) + (1.0 - eps) * alpha_;
  }
  const Vector v = VertexLosses();
  Eigen::Index best;
  v.minCoeff(&best);
  *arm_gap = v.array() - v[best];
  diag->push_back({"loss", v[best]});
  return Vector::Constant(m, eps / m) + (1.0 - eps) * Vector::Unit(m, best);
}

}  // namespace bandit::mixture
