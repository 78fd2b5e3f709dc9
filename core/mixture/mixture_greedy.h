// Mixture-Greedy (Algorithm 1): after the warm start, S exponentiated-gradient steps (eq. 13) on
// the plug-in loss H_{t-1}, warm-started from alpha_{t-1}; the arm is drawn from alpha_t.
#pragma once

#include "core/mixture/mixture_policy.h"

namespace bandit::mixture {

class MixtureGreedy final : public MixturePolicy {
 public:
  MixtureGreedy(ArmSet arms, MixtureParams params, FeatureMap features,
                std::unique_ptr<Objective> objective, Rng rng)
      : MixturePolicy(std::move(arms), std::move(params), std::move(features), std::move(objective),
                      rng) {}

 protected:
  Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                             Vector* arm_gap) override;
};

}  // namespace bandit::mixture
