// The instance config that stands for a new Personalizer resource's default learning settings
// (`banditctl create NAME --personalizer`, `banditd --personalizer_auto_create`). Header-only:
// banditctl and the server both build it; docs/personalizer.md explains the mapping.
//
// Personalizer's default learning settings are VW's `--cb_explore_adf --epsilon 0.2 --power_t 0
// -l 0.001 --cb_type mtr -q ::`: a linear model of the reward over every namespace pair,
// exploring with epsilon-greedy. The served policies with state of fixed size that decide over
// hashed features are LinUCB and the GLB family; the epsilon-greedy one over a linear model
// (glm_epsilon_greedy) refits on every past round, so it is not a default for a service. The
// mapping keeps the model (a linear reward model, squared loss: LinUCB's ridge regression) and
// the features (`-q ::` over VW's hashing) and explores by LinUCB's confidence bound instead of a
// fixed 20%; the reward wait (10 minutes), the default reward (0) applied when it passes, are
// Personalizer's defaults.
#pragma once

#include "bandit/v1/service.pb.h"

namespace bandit::features {

// 2^10 weights: LinUCB keeps d x d matrices (8 MB each at d = 1024); --max_feature_dim caps
// full-matrix policies at 2^12.
inline constexpr int kPersonalizerBits = 10;
// LinUCB's confidence multiplier: exploration that fades as each feature pair is seen.
inline constexpr double kPersonalizerAlpha = 0.5;
inline constexpr int64_t kPersonalizerRewardWaitMs = 10 * 60 * 1000;

inline bandit::v1::InstanceConfig PersonalizerDefaultConfig() {
  bandit::v1::InstanceConfig config;
  config.mutable_policy()->mutable_linucb()->set_alpha(kPersonalizerAlpha);
  bandit::v1::FeatureSpaceConfig* space = config.mutable_feature_space();
  space->set_bits(kPersonalizerBits);
  space->add_interactions("::");
  bandit::v1::PendingConfig* pending = config.mutable_pending();
  pending->set_reward_wait_ms(kPersonalizerRewardWaitMs);
  pending->set_on_expiry(bandit::v1::APPLY_DEFAULT);
  pending->set_default_reward(0);
  return config;
}

}  // namespace bandit::features
