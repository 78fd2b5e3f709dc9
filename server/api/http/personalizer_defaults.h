// The instance config that stands for a new Personalizer resource's default learning settings
// (`banditctl create NAME --personalizer`, `banditd --personalizer_auto_create`): a setting of
// the Personalizer API, not of the core. Header-only, over the API's messages alone: banditctl
// and the server both build it; docs/personalizer.md explains the mapping and the
// measurements the choice rests on.
//
// Personalizer's default learning settings are VW's `--cb_explore_adf --epsilon 0.2 --power_t 0
// -l 0.001 --cb_type mtr -q ::` at VW's 2^18 weights. The default here is Vowpal Wabbit's
// learner (the `vw` policy, VW's own predictions) at that scale, exploring with SquareCB: of the
// policies served at 2^18 within 1.5x the server CPU of VW's learner per round, it learned best
// on the measured data (Soybean, one pass: SquareCB 0.287, Personalizer's epsilon-greedy flags
// 0.131, LinUCB's diagonal covariance 0.125, its sketched covariance at l = 16 0.173; the
// sketched covariance at l >= 128 learns more, at several times the cost). LinUCB with a full
// matrix learns more too but only at 2^10 to 2^12 and at 50 times the cost. The reward wait (10
// minutes) and the default reward (0) applied when it passes are Personalizer's defaults; the
// decision log is on, as Personalizer's logs were (its offline evaluations read it).
#pragma once

#include "bandit/v1/service.pb.h"

namespace bandit::server::http {

// VW's weight space and interactions (every namespace pair), as Personalizer runs them.
inline constexpr int kPersonalizerBits = 18;
inline constexpr char kPersonalizerVwArguments[] = "--cb_explore_adf --squarecb -q :: -b 18";
inline constexpr int64_t kPersonalizerRewardWaitMs = 10 * 60 * 1000;

inline bandit::v1::InstanceConfig PersonalizerDefaultConfig() {
  bandit::v1::InstanceConfig config;
  config.mutable_policy()->mutable_vw()->set_arguments(kPersonalizerVwArguments);
  // Stated beside the arguments (which agree with it), so that a config merged over these
  // defaults with another policy keeps Personalizer's feature space.
  bandit::v1::FeatureSpaceConfig* space = config.mutable_feature_space();
  space->set_bits(kPersonalizerBits);
  space->add_interactions("::");
  bandit::v1::PendingConfig* pending = config.mutable_pending();
  pending->set_reward_wait_ms(kPersonalizerRewardWaitMs);
  pending->set_on_expiry(bandit::v1::APPLY_DEFAULT);
  pending->set_default_reward(0);
  // Personalizer kept every resource's logs for its offline evaluations: the decision log, with
  // its default retention (the newest 100,000 decisions within 64 MiB).
  config.mutable_decision_log()->set_enabled(true);
  return config;
}

}  // namespace bandit::server::http
