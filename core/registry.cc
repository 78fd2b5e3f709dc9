#include "core/registry.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/classic/epsilon_greedy.h"
#include "core/footprint.h"
#include "core/classic/linucb.h"
#include "core/classic/thompson.h"
#include "core/classic/ucb1.h"
#include "core/glb/domd_glb.h"
#include "core/glb/ecolog.h"
#include "core/glb/glb_omd.h"
#include "core/glb/glm_epsilon_greedy.h"
#include "core/glb/glm_ucb.h"
#include "core/glb/gloc.h"
#include "core/glb/restart_glb.h"
#include "core/kernel/bkb.h"
#include "core/kernel/gp_ucb.h"
#include "core/mixture/mixture_factory.h"
#include "core/oks/oks_policy.h"
#include "core/vw/cb_learner.h"

namespace bandit {

using bandit::v1::PolicyConfig;

const std::vector<PolicyRegistration>& RegisteredPolicies() {
  static const auto* registrations = new std::vector<PolicyRegistration>{
      {PolicyConfig::kEpsilonGreedy,
       "epsilon_greedy",
       &MakeEpsilonGreedy,
       {{"epsilon_greedy { epsilon: 0.3 } num_arms: 3", StateGrowth::kConstant}},
       &footprint::EpsilonGreedy},
      {PolicyConfig::kGlbOmd,
       "glb_omd",
       &glb::MakeGlbOmd,
       {{"glb_omd { dimension: 3 }", StateGrowth::kConstant},
        {"glb_omd { dimension: 3 link: GAUSSIAN }", StateGrowth::kConstant},
        {"glb_omd { dimension: 3 link: POISSON theory_lambda: true }", StateGrowth::kConstant},
        {"glb_omd { dimension: 3 covariance: COVARIANCE_DIAGONAL }", StateGrowth::kConstant},
        {"glb_omd { dimension: 3 covariance: COVARIANCE_SKETCHED sketch_size: 2 }",
         StateGrowth::kBounded},
        {"glb_omd { dimension: 5 covariance: COVARIANCE_SKETCHED sketch_size: 3 s: 0.3 }",
         StateGrowth::kBounded},
        // A small S keeps the diagonal form's projection (28b) active.
        {"glb_omd { dimension: 3 covariance: COVARIANCE_DIAGONAL s: 0.05 link: GAUSSIAN }",
         StateGrowth::kConstant}},
       &footprint::GlbOmd},
      {PolicyConfig::kDomdGlb,
       "domd_glb",
       &glb::MakeDomdGlb,
       {{"domd_glb { dimension: 3 gamma: 0.9 }", StateGrowth::kConstant}},
       &footprint::DomdGlb},
      {PolicyConfig::kGlmUcb,
       "glm_ucb",
       &glb::MakeGlmUcb,
       {{"glm_ucb { dimension: 3 }", StateGrowth::kGrows},
        {"glm_ucb { dimension: 3 window: 40 }", StateGrowth::kBounded},
        {"glm_ucb { dimension: 3 bonus: FILIPPI window: 40 }", StateGrowth::kBounded}},
       &footprint::GlmUcb},
      {PolicyConfig::kGlmEpsilonGreedy,
       "glm_epsilon_greedy",
       &glb::MakeGlmEpsilonGreedy,
       {{"glm_epsilon_greedy { dimension: 3 epsilon: 0.3 }", StateGrowth::kGrows}},
       &footprint::GlmEpsilonGreedy},
      {PolicyConfig::kVw,
       "vw",
       &vw::CbLearner::Make,
       {{"vw { arguments: '--cb_explore_adf --epsilon 0.2 -b 2' dimension: 4 }",
         StateGrowth::kConstant},
        {"vw { arguments: '--cb_adf --sgd -l 0.1 -b 2' dimension: 4 }", StateGrowth::kConstant},
        {"vw { arguments: '--cb_explore_adf --squarecb --power_t 0 -b 3' dimension: 8 }",
         StateGrowth::kConstant},
        {"vw { arguments: '--cb_explore_adf --softmax --lambda 2 --l2 1e-4 -b 2' dimension: 4 }",
         StateGrowth::kConstant},
        {"vw { arguments: '--cb_explore_adf --first 3 --epsilon 0.1 -b 2' dimension: 4 }",
         StateGrowth::kConstant},
        {"vw { arguments: '--cb_explore_adf --bag 3 --greedify -b 4' dimension: 4 }",
         StateGrowth::kConstant}},
       &vw::Footprint},
      {PolicyConfig::kLinucb,
       "linucb",
       &MakeLinUcb,
       {{"linucb { dimension: 3 }", StateGrowth::kConstant},
        {"linucb { dimension: 3 covariance: COVARIANCE_DIAGONAL }", StateGrowth::kConstant},
        {"linucb { dimension: 3 covariance: COVARIANCE_SKETCHED sketch_size: 2 }",
         StateGrowth::kBounded},
        {"linucb { dimension: 6 covariance: COVARIANCE_SKETCHED sketch_size: 3 alpha: 0.5 }",
         StateGrowth::kBounded}},
       &footprint::LinUcb},
      {PolicyConfig::kThompson,
       "thompson",
       &MakeThompson,
       {{"thompson {} num_arms: 3", StateGrowth::kConstant},
        {"thompson { propensity_samples: 0 } num_arms: 3", StateGrowth::kConstant},
        {"thompson { likelihood: GAUSSIAN propensity_method: MONTE_CARLO propensity_samples: 50 } "
         "num_arms: 3",
         StateGrowth::kConstant}},
       &footprint::Thompson},
      {PolicyConfig::kUcb1, "ucb1", &MakeUcb1, {{"ucb1 {} num_arms: 3", StateGrowth::kConstant}},
       &footprint::Ucb1},
      {PolicyConfig::kOks,
       "oks",
       &MakeOks,
       {{"oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } kernels { kind: LAPLACIAN "
         "bandwidth: 2 } support_budget: 16 }",
         StateGrowth::kBounded},
        {"oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } random_features: 8 }",
         StateGrowth::kConstant},
        {"oks { variant: OKS horizon: 500 dimension: 2 kernels { bandwidth: 1 } "
         "kernels { bandwidth: 3 } random_features: 8 }",
         StateGrowth::kConstant},
        {"oks { variant: IOKS dimension: 2 kernels { bandwidth: 1 } kernels { kind: LAPLACIAN "
         "bandwidth: 1 } support_budget: 8 }",
         StateGrowth::kBounded}},
       &footprint::Oks},
      {PolicyConfig::kMixture,
       "mixture",
       &MakeMixture,
       {{"mixture { num_arms: 3 dimension: 2 reference_mean: [0, 0] reference_covariance: [1, 0, "
         "0, 1] warm_start: 2 }",
         StateGrowth::kConstant},
        {"mixture { algorithm: MIXTURE_UCB objective: RKE num_arms: 3 dimension: 2 "
         "random_features: 16 warm_start: 2 }",
         StateGrowth::kConstant},
        {"mixture { algorithm: MIXTURE_ORACLE objective: VENDI num_arms: 3 dimension: 2 "
         "oracle_weights: [0.2, 0.3, 0.5] warm_start: 1 }",
         StateGrowth::kConstant},
        {"mixture { algorithm: EPSILON_GREEDY objective: KD num_arms: 3 dimension: 2 "
         "random_features: 8 reference_samples: [0, 0, 1, 1, 2, 0] warm_start: 2 }",
         StateGrowth::kConstant},
        {"mixture { algorithm: ONE_ARM_GREEDY objective: VENDI num_arms: 3 dimension: 2 "
         "warm_start: 2 fidelity_weight: 0 }",
         StateGrowth::kConstant},
        {"mixture { algorithm: ONE_ARM_ORACLE oracle_arm: '1' num_arms: 3 dimension: 2 "
         "reference_mean: [0, 0] reference_covariance: [1, 0, 0, 1] warm_start: 1 }",
         StateGrowth::kConstant}},
       &footprint::Mixture},
      {PolicyConfig::kBkb,
       "bkb",
       &MakeBkb,
       {{"bkb {} arms { id: 'a' features: [0, 1] } arms { id: 'b' features: [1, 0] } arms { id: "
         "'c' features: [1, 1] }",
         StateGrowth::kConstant},
        {"bkb { dimension: 2 }", StateGrowth::kGrows},
        {"bkb { dimension: 2 resample_every: 10 kernel { kind: MATERN52 } }",
         StateGrowth::kGrows}},
       &footprint::Bkb},
      {PolicyConfig::kGpUcb,
       "gp_ucb",
       &MakeGpUcb,
       {{"gp_ucb {} arms { id: 'a' features: [0, 1] } arms { id: 'b' features: [1, 0] }",
         StateGrowth::kConstant},
        {"gp_ucb { dimension: 2 }", StateGrowth::kGrows}},
       &footprint::GpUcb},
      {PolicyConfig::kGloc,
       "gloc",
       &glb::MakeGloc,
       {{"gloc { dimension: 3 }", StateGrowth::kConstant}},
       &footprint::Gloc},
      {PolicyConfig::kEcolog,
       "ecolog",
       &glb::MakeEcolog,
       {{"ecolog { dimension: 3 }", StateGrowth::kConstant}},
       &footprint::Ecolog},
      {PolicyConfig::kRestartGlb,
       "restart_glb",
       &glb::MakeRestartGlb,
       {{"restart_glb { dimension: 3 restart_period: 40 }", StateGrowth::kBounded}},
       &footprint::RestartGlb},
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

absl::StatusOr<int64_t> DeclaredStateBytes(const PolicyConfig& config) {
  if (config.policy_case() == PolicyConfig::POLICY_NOT_SET)
    return absl::InvalidArgumentError("config.policy is not set, expected one policy config");
  for (const auto& r : RegisteredPolicies())
    if (r.config_case == config.policy_case() && r.footprint != nullptr) return r.footprint(config);
  // A policy the server refuses: CreatePolicy says why.
  auto p = CreatePolicy(config, 0);
  if (!p.ok()) return p.status();
  return absl::InternalError(absl::StrCat("policy '", (*p)->name(), "' declares no footprint"));
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

void SetConfigArms(std::span<const std::string> ids, PolicyConfig* config) {
  absl::flat_hash_map<std::string, bandit::v1::ArmSpec> old;
  for (const auto& a : config->arms()) old[a.id()] = a;
  auto* arms = config->mutable_arms();
  arms->Clear();
  for (const auto& id : ids) {
    auto it = old.find(id);
    if (it != old.end()) {
      *arms->Add() = it->second;
    } else {
      arms->Add()->set_id(id);
    }
  }
  config->set_num_arms(0);
  // A mixture's own arm count must agree with the arm set when set; 0 means "the arm set's".
  if (config->has_mixture()) config->mutable_mixture()->set_num_arms(0);
}

}  // namespace bandit
