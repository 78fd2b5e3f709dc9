// Mixture-UCB (Rezaei et al. 2025) as specified for this service: the plug-in loss with the
// optimistic bonus subtracted from its linear part,
//   H_t(a) - sum_i a_i eps_i,   eps_i = Delta_L * sqrt(beta * log t / (2 n_i)),
// t = number of samples collected so far, minimized by the same warm-started EG steps as
// Mixture-Greedy; the arm is drawn from the result. Delta_L defaults to the objective's range
// (1 for the normalized-kernel objectives, Tr Sigma_ref for FD), beta to 2 (Hoeffding with
// delta_t = t^-2).
#pragma once

#include "core/mixture/mixture_policy.h"

namespace bandit::mixture {

class MixtureUcb final : public MixturePolicy {
 public:
  MixtureUcb(ArmSet arms, MixtureParams params, FeatureMap features,
             std::unique_ptr<Objective> objective, Rng rng)
      : MixturePolicy(std::move(arms), std::move(params), std::move(features), std::move(objective),
                      rng) {}
  // eps_i at the current counts.
  Vector Bonus() const;

 protected:
  Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                             Vector* arm_gap) override;
};

}  // namespace bandit::mixture
