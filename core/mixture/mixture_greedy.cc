#include "core/mixture/mixture_greedy.h"

namespace bandit::mixture {

Vector MixtureGreedy::ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                                          Vector* arm_gap) {
  diag->push_back({"loss", GreedyStep()});
  return alpha_;
}

}  // namespace bandit::mixture
