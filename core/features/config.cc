#include "core/features/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"

namespace bandit::features {

FeatureSpaceOptions OptionsOf(const bandit::v1::FeatureSpaceConfig& config) {
  FeatureSpaceOptions o;
  o.bits = config.bits();
  o.interactions.assign(config.interactions().begin(), config.interactions().end());
  o.hash_seed = config.hash_seed();
  o.constant = !config.no_constant();
  o.ignore = config.ignore();
  return o;
}

absl::Status SetPolicyDimension(int64_t dimension, bandit::v1::PolicyConfig* policy) {
  // Every contextual policy's config names its vector length `dimension` (an int32).
  const auto* reflection = policy->GetReflection();
  const auto* oneof = policy->GetDescriptor()->FindOneofByName("policy");
  const auto* active = reflection->GetOneofFieldDescriptor(*policy, oneof);
  const google::protobuf::FieldDescriptor* field =
      active == nullptr || active->message_type() == nullptr
          ? nullptr
          : active->message_type()->FindFieldByName("dimension");
  if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT32)
    return absl::InvalidArgumentError(
        "config.feature_space is set, expected a contextual policy (one with a dimension: "
        "linucb, glb_omd, domd_glb, glm_ucb, glm_epsilon_greedy, gloc, ecolog, restart_glb, bkb "
        "or gp_ucb over candidates)");
  google::protobuf::Message* message = reflection->MutableMessage(policy, active);
  const int32_t stated = message->GetReflection()->GetInt32(*message, field);
  if (stated == 0) {
    message->GetReflection()->SetInt32(message, field, static_cast<int32_t>(dimension));
  } else if (stated != dimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.policy dimension is ", stated, ", expected 2^feature_space.bits = ", dimension,
        " (or 0 to take it from the feature space)"));
  }
  return absl::OkStatus();
}

}  // namespace bandit::features
