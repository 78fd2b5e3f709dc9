// Mixture-Oracle (for evaluation, paper Section 6.1): samples from a fixed mixture, normally the
// population-optimal alpha* computed by OracleWeights from large-sample ("population")
// statistics of each generator. With algorithm ONE_ARM_ORACLE the fixed mixture is the vertex
// e_i of the configured arm: the paper's One-Arm Oracle (Fig. 2).
#pragma once

#include "core/mixture/mixture_policy.h"

namespace bandit::mixture {

class MixtureOracle final : public MixturePolicy {
 public:
  MixtureOracle(ArmSet arms, MixtureParams params, FeatureMap features,
                std::unique_ptr<Objective> objective, Rng rng)
      : MixturePolicy(std::move(arms), std::move(params), std::move(features), std::move(objective),
                      rng) {
    alpha_ = probs_ = params_.oracle_weights;
  }

 protected:
  Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                             Vector* arm_gap) override {
    return params_.oracle_weights;
  }
  bool SupportsArmChanges() const override { return false; }
};

struct OracleSolution {
  Vector alpha;
  double loss = 0;   // H(alpha*)
  double score = 0;  // base objective at alpha*, natural units
};

// argmin over the simplex of objective(stats) + sum_i a_i linear_i (linear may be empty), by
// `steps` EG steps from the uniform mixture with step size eta (<= 0: objective default).
OracleSolution OracleWeights(const Objective& objective, const MixtureStats& stats,
                             const Vector& linear = Vector(), int steps = 3000, double eta = 0);

}  // namespace bandit::mixture
