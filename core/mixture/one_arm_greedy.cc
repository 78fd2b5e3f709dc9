#include "core/mixture/one_arm_greedy.h"

namespace bandit::mixture {

Vector OneArmGreedy::ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                                         Vector* arm_gap) {
  const Vector v = VertexLosses();
  Eigen::Index best;
  v.minCoeff(&best);
  *arm_gap = v.array() - v[best];
  diag->push_back({"loss", v[best]});
  return Vector::Unit(v.size(), best);
}

}  // namespace bandit::mixture
