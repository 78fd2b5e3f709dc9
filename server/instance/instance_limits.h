// The limits an instance checks its requests and changes against (banditd's flags, see
// server/server_flags.h), shared by the requests' translation (server/instance/calls.h) and the
// state (server/instance/instance_state.h).
#pragma once

#include <cstdint>
#include <limits>

#include "core/features/feature_space.h"

namespace bandit::server {

// Per-instance limits (banditd flags, see main.cc). Request-shape limits answer INVALID_ARGUMENT
// (the same request will never succeed); limits on what the server holds answer
// RESOURCE_EXHAUSTED (a later request may succeed once something is freed).
struct InstanceLimits {
  int64_t max_candidates = 10'000;    // candidate vectors per Select
  int64_t max_vector_size = 100'000;  // entries of one feature vector / x / embedding
  int64_t max_pending_capacity = 10'000'000;
  int64_t max_arms_per_request = 10'000;
  // The two below default to "no limit" so that recovery (which builds instances with default
  // limits) never refuses what the server once accepted; banditd's flags set real values.
  // Every config field that sizes a vector or matrix (dimension, random features, support
  // budget; the classification is in instance_config.cc).
  int64_t max_feature_dim = std::numeric_limits<int32_t>::max();
  // The same for the diagonal-covariance forms of LinUCB and GLB-OMD (O(dimension) state, sparse
  // inputs): --max_diagonal_feature_dim.
  int64_t max_diagonal_feature_dim = std::numeric_limits<int32_t>::max();
  // Arms of one instance: config arms / num_arms at create, and the total after AddArms.
  int64_t max_arms = std::numeric_limits<int32_t>::max();
  // Instance name length (core's CheckId also caps ids at 128 characters).
  int64_t max_name_length = 128;
  // Shadow policies per instance (each costs about a policy's Select and Update per round;
  // banditd --max_shadows). Checked when AddShadow is asked for, with the server's current
  // value (DecisionService passes it), never on replay: a restart with a lower limit keeps the
  // shadows the server once accepted and refuses new ones.
  int64_t max_shadows = 8;
  // Named inputs (instances with a feature space): per JSON document.
  features::InputLimits named;
};

// The longest reward wait (config.pending.reward_wait_ms): 7 days.
constexpr int64_t kMaxRewardWaitMs = 7LL * 24 * 3600 * 1000;

}  // namespace bandit::server
