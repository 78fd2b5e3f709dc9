// Builds a mixture policy (registry name "mixture") from PolicyConfig.mixture: validates the
// config, draws the random features from the instance's engine, builds the objective with its
// reference data, and instantiates the algorithm (Mixture-Greedy, Mixture-UCB, One-Arm Greedy,
// epsilon-greedy, Mixture-Oracle).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "bandit/v1/policy.pb.h"
#include "core/policy.h"

namespace bandit {

absl::StatusOr<std::unique_ptr<Policy>> MakeMixture(const bandit::v1::PolicyConfig& config,
                                                    uint64_t seed);

}  // namespace bandit
