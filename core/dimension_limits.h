// The largest dimension of a policy that keeps dense d x d state (LinUCB's inverse, the candidate
// kernel UCB's Gram inverse, the mixtures' embedding and random features): its memory is O(d^2)
// (4096 doubles squared = 128 MiB) and each update O(d^2), so 4096 is the cap. banditd's
// --max_feature_dim defaults to it (server/server_options.cc). The diagonal-covariance forms
// keep O(d) state and have their own, larger cap.
#pragma once

namespace bandit {

inline constexpr int kMaxDenseDimension = 4096;

}  // namespace bandit
