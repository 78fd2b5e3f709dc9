// The feature space as an instance config states it (bandit.v1.FeatureSpaceConfig), shared by
// the server and the offline tools (bandit-ope) so both hash a named decision the same way.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "bandit/v1/service.pb.h"
#include "core/features/feature_space.h"

namespace bandit::features {

FeatureSpaceOptions OptionsOf(const bandit::v1::FeatureSpaceConfig& config);

// Sets the `dimension` of the policy config's active policy to `dimension` where it is 0.
// INVALID_ARGUMENT when the policy has no dimension field (it does not decide over candidate
// vectors) or states another one.
absl::Status SetPolicyDimension(int64_t dimension, bandit::v1::PolicyConfig* policy);

}  // namespace bandit::features
