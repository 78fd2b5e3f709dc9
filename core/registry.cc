#include "core/registry.h"

#include "absl/strings/str_cat.h"
#include "core/classic/epsilon_greedy.h"

namespace bandit {

using bandit::v1::PolicyConfig;

const std::vector<PolicyRegistration>& RegisteredPolicies() {
  static const auto* registrations = new std::vector<PolicyRegistration>{
      {PolicyConfig::kEpsilonGreedy, "epsilon_greedy", &MakeEpsilonGreedy},
  };
  return *registrations;
}

absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const PolicyConfig& config, uint64_t seed) {
  if (config.policy_case() == PolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError("config.policy is not set, expected one policy config");
  for (const auto& r : RegisteredPolicies())
    if (r.config_case == config.policy_case()) return r.make(config, seed);
  return absl::InvalidArgumentError(absl::StrCat("config.policy case ", config.policy_case(),
                                                 " is not a policy this server knows"));
}

}  // namespace bandit
