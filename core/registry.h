// Maps a PolicyConfig to the policy that runs it. Adding a policy = one line in registry.cc.
#pragma once

#include <cstdint>
#include <memory>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "bandit/v1/policy.pb.h"
#include "core/policy.h"

namespace bandit {

using PolicyFactory =
    absl::StatusOr<std::unique_ptr<Policy>> (*)(const bandit::v1::PolicyConfig& config,
                                                uint64_t seed);

struct PolicyRegistration {
  bandit::v1::PolicyConfig::PolicyCase config_case;
  absl::string_view name;
  PolicyFactory make;
};

const std::vector<PolicyRegistration>& RegisteredPolicies();

// INVALID_ARGUMENT when no policy is set, the policy is unknown, or its parameters are invalid.
// Sim-only policies (below) are refused: they are not served.
absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const bandit::v1::PolicyConfig& config,
                                                     uint64_t seed);

// Baselines whose state and per-round work grow with every round (exact-likelihood methods):
// they run in bandit-sim and the tests, never in the server, where an instance would grow
// without bound.
const std::vector<PolicyRegistration>& SimOnlyPolicies();
// CreatePolicy plus the sim-only policies (bandit-sim, tests).
absl::StatusOr<std::unique_ptr<Policy>> CreateSimPolicy(const bandit::v1::PolicyConfig& config,
                                                        uint64_t seed);

}  // namespace bandit
