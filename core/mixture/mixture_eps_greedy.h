// epsilon-greedy baseline (paper Appendix E.1, "One-Arm epsilon-Greedy", epsilon = 0.1): with
// probability epsilon a uniform arm, otherwise the one-arm greedy arm; p = eps/m + (1-eps) e_best.
// With epsilon_over_mixture the exploit part is the Mixture-Greedy alpha instead:
// p = eps/m + (1-eps) alpha_t.
#pragma once

#include "core/mixture/mixture_policy.h"

namespace bandit::mixture {

class MixtureEpsGreedy final : public MixturePolicy {
 public:
  MixtureEpsGreedy(ArmSet arms, MixtureParams params, FeatureMap features,
                   std::unique_ptr<Objective> objective, Rng rng)
      : MixturePolicy(std::move(arms), std::move(params), std::move(features), std::move(objective),
                      rng) {}

 protected:
  Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                             Vector* arm_gap) override;
};

}  // namespace bandit::mixture
