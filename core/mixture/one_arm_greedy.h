// One-Arm Greedy (paper Appendix E.1): after the warm start, always the single arm whose own
// plug-in loss H(e_i) is smallest (the best score alone); ties go to the lowest slot.
#pragma once

#include "core/mixture/mixture_policy.h"

namespace bandit::mixture {

class OneArmGreedy final : public MixturePolicy {
 public:
  OneArmGreedy(ArmSet arms, MixtureParams params, FeatureMap features,
               std::unique_ptr<Objective> objective, Rng rng)
      : MixturePolicy(std::move(arms), std::move(params), std::move(features), std::move(objective),
                      rng) {}

 protected:
  Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                             Vector* arm_gap) override;
};

}  // namespace bandit::mixture
