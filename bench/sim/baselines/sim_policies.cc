#include "bench/sim/baselines/sim_policies.h"

#include "absl/strings/str_cat.h"
#include "bench/sim/baselines/likelihood_ucb.h"
#include "bench/sim/baselines/master_glm_ucb.h"
#include "bench/sim/baselines/rs_glincb.h"
#include "bench/sim/baselines/discounted_glm_ucb.h"

namespace bandit {

using bandit::v1::SimPolicyConfig;

const std::vector<SimPolicyRegistration>& SimOnlyPolicies() {
  // Every example here grows: keeping every past round is why these are not served.
  static const auto* registrations = new std::vector<SimPolicyRegistration>{
      {SimPolicyConfig::kOfuglb,
       "ofuglb",
       &glb::MakeOfuglb,
       {{"ofuglb { dimension: 3 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kOfulogR,
       "ofulog_r",
       &glb::MakeOfulogR,
       {{"ofulog_r { dimension: 3 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kRsGlincb,
       "rs_glincb",
       &glb::MakeRsGlincb,
       {{"rs_glincb { dimension: 3 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kDGlucb,
       "d_glucb",
       &glb::MakeDiscountedGlmUcb,
       {{"d_glucb { dimension: 3 gamma: 0.9 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kScDGlucb,
       "sc_d_glucb",
       &glb::MakeDiscountedGlmUcb,
       {{"sc_d_glucb { dimension: 3 gamma: 0.9 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kBvdGlmUcb,
       "bvd_glm_ucb",
       &glb::MakeDiscountedGlmUcb,
       {{"bvd_glm_ucb { dimension: 3 gamma: 0.9 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kScbWeightUcb,
       "scb_weight_ucb",
       &glb::MakeDiscountedGlmUcb,
       {{"scb_weight_ucb { dimension: 3 gamma: 0.9 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kScbPwWeightUcb,
       "scb_pw_weight_ucb",
       &glb::MakeDiscountedGlmUcb,
       {{"scb_pw_weight_ucb { dimension: 3 gamma: 0.9 }", StateGrowth::kGrows}}},
      {SimPolicyConfig::kMasterGlmUcb,
       "master_glm_ucb",
       &glb::MakeMasterGlmUcb,
       {{"master_glm_ucb { dimension: 3 horizon: 1000 }", StateGrowth::kGrows}}},
  };
  return *registrations;
}

absl::StatusOr<std::unique_ptr<Policy>> CreateSimPolicy(const SimPolicyConfig& config,
                                                        uint64_t seed) {
  if (config.has_served()) return CreatePolicy(config.served(), seed);
  for (const auto& r : SimOnlyPolicies())
    if (r.config_case == config.policy_case()) return r.make(config, seed);
  if (config.policy_case() == SimPolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError(
        "config.policy is not set, expected a served policy (`served { ... }`) or a "
        "simulation-only baseline");
  return absl::InvalidArgumentError(absl::StrCat("config.policy case ", config.policy_case(),
                                                 " is not a policy this build knows"));
}

}  // namespace bandit
