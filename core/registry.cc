#include "core/registry.h"

#include "absl/strings/str_cat.h"
#include "core/classic/epsilon_greedy.h"
#include "core/classic/linucb.h"
#include "core/classic/thompson.h"
#include "core/classic/ucb1.h"
#include "core/glb/domd_glb.h"
#include "core/glb/ecolog.h"
#include "core/glb/glb_omd.h"
#include "core/glb/glm_epsilon_greedy.h"
#include "core/glb/glm_ucb.h"
#include "core/glb/gloc.h"
#include "core/glb/likelihood_ucb.h"
#include "core/glb/nonstationary_mle.h"
#include "core/glb/rs_glincb.h"
#include "core/kernel/bkb.h"
#include "core/kernel/gp_ucb.h"
#include "core/mixture/mixture_factory.h"
#include "core/oks/oks_policy.h"

namespace bandit {

using bandit::v1::PolicyConfig;

const std::vector<PolicyRegistration>& RegisteredPolicies() {
  static const auto* registrations = new std::vector<PolicyRegistration>{
      {PolicyConfig::kEpsilonGreedy, "epsilon_greedy", &MakeEpsilonGreedy},
      {PolicyConfig::kGlbOmd, "glb_omd", &glb::MakeGlbOmd},
      {PolicyConfig::kDomdGlb, "domd_glb", &glb::MakeDomdGlb},
      {PolicyConfig::kGlmUcb, "glm_ucb", &glb::MakeGlmUcb},
      {PolicyConfig::kGlmEpsilonGreedy, "glm_epsilon_greedy", &glb::MakeGlmEpsilonGreedy},
      {PolicyConfig::kLinucb, "linucb", &MakeLinUcb},
      {PolicyConfig::kThompson, "thompson", &MakeThompson},
      {PolicyConfig::kUcb1, "ucb1", &MakeUcb1},
      {PolicyConfig::kOks, "oks", &MakeOks},
      {PolicyConfig::kMixture, "mixture", &MakeMixture},
      {PolicyConfig::kBkb, "bkb", &MakeBkb},
      {PolicyConfig::kGpUcb, "gp_ucb", &MakeGpUcb},
      {PolicyConfig::kGloc, "gloc", &glb::MakeGloc},
      {PolicyConfig::kEcolog, "ecolog", &glb::MakeEcolog},
      {PolicyConfig::kRestartGlb, "restart_glb", &glb::MakeNonstationaryGlmUcb},
  };
  return *registrations;
}

const std::vector<PolicyRegistration>& SimOnlyPolicies() {
  static const auto* registrations = new std::vector<PolicyRegistration>{
      {PolicyConfig::kOfuglb, "ofuglb", &glb::MakeOfuglb},
      {PolicyConfig::kOfulogR, "ofulog_r", &glb::MakeOfulogR},
      {PolicyConfig::kRsGlincb, "rs_glincb", &glb::MakeRsGlincb},
      {PolicyConfig::kDGlucb, "d_glucb", &glb::MakeNonstationaryGlmUcb},
      {PolicyConfig::kScDGlucb, "sc_d_glucb", &glb::MakeNonstationaryGlmUcb},
      {PolicyConfig::kBvdGlmUcb, "bvd_glm_ucb", &glb::MakeNonstationaryGlmUcb},
      {PolicyConfig::kScbWeightUcb, "scb_weight_ucb", &glb::MakeNonstationaryGlmUcb},
      {PolicyConfig::kScbPwWeightUcb, "scb_pw_weight_ucb", &glb::MakeNonstationaryGlmUcb},
      {PolicyConfig::kMasterGlmUcb, "master_glm_ucb", &glb::MakeMasterGlmUcb},
  };
  return *registrations;
}

absl::StatusOr<std::unique_ptr<Policy>> CreateSimPolicy(const PolicyConfig& config, uint64_t seed) {
  for (const auto& r : SimOnlyPolicies())
    if (r.config_case == config.policy_case()) return r.make(config, seed);
  return CreatePolicy(config, seed);
}

absl::StatusOr<std::unique_ptr<Policy>> CreatePolicy(const PolicyConfig& config, uint64_t seed) {
  if (config.policy_case() == PolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError("config.policy is not set, expected one policy config");
  for (const auto& r : RegisteredPolicies())
    if (r.config_case == config.policy_case()) return r.make(config, seed);
  for (const auto& r : SimOnlyPolicies())
    if (r.config_case == config.policy_case())
      return absl::InvalidArgumentError(absl::StrCat(
          "config.policy '", r.name,
          "' is not served: it keeps every past round, so its state "
          "grows without bound; it runs in bandit-sim only. Expected a served policy (bounded "
          "alternatives: glb_omd, domd_glb, gloc, ecolog, restart_glb)"));
  return absl::InvalidArgumentError(absl::StrCat("config.policy case ", config.policy_case(),
                                                 " is not a policy this server knows"));
}

absl::Status ReconfigurePolicy(Policy& live, const PolicyConfig& next, uint64_t seed) {
  if (next.policy_case() == PolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError("config.policy is not set, expected one policy config");
  auto fresh = CreatePolicy(next, seed);
  if (!fresh.ok()) return fresh.status();
  if ((*fresh)->name() != live.name())
    return absl::FailedPreconditionError(absl::StrCat("policy '", live.name(), "' cannot become '",
                                                      (*fresh)->name(),
                                                      "' live; create a new instance"));
  return live.Reconfigure(**fresh);
}

}  // namespace bandit
