// The policies that run only in simulation (bandit-sim and the tests), beside the served ones of
// core/registry.h: baselines the papers compare against whose state grows with the rounds (every
// past round is revisited), so they are not served and their configs are not in the served
// API's PolicyConfig but in SimPolicyConfig (proto/bandit/v1/sim_policy.proto).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/sim_policy.pb.h"
#include "core/policy.h"
#include "core/registry.h"

namespace bandit {

using SimPolicyFactory = absl::StatusOr<std::unique_ptr<Policy>> (*)(
    const bandit::v1::SimPolicyConfig& config, uint64_t seed);
struct SimPolicyRegistration {
  bandit::v1::SimPolicyConfig::PolicyCase config_case;
  absl::string_view name;
  SimPolicyFactory make;
  std::vector<PolicyExample> examples;  // configs in SimPolicyConfig's text format
};
const std::vector<SimPolicyRegistration>& SimOnlyPolicies();

// A served policy (`served`, built by CreatePolicy) or a simulation-only one (for bandit-sim and
// tests).
absl::StatusOr<std::unique_ptr<Policy>> CreateSimPolicy(const bandit::v1::SimPolicyConfig& config,
                                                        uint64_t seed);

}  // namespace bandit
