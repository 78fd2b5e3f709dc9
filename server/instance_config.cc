// InstanceConfig: defaults and limits, before any policy is built (CreateInstance, import,
// recovery). The learned state itself is instance_state.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/strings/str_cat.h"
#include "server/instance_state.h"

namespace bandit::server {
namespace {

constexpr int64_t kDefaultPendingCapacity = 100'000;
constexpr int64_t kDefaultRewardWaitMs = 600'000;
constexpr int64_t kMaxRewardWaitMs = 7LL * 24 * 3600 * 1000;

// Size limits on the policy config, whatever the policy: integer fields named `dimension` or
// `random_features` are feature dimensions, `num_arms` and `arms` count arms. Checked before the
// policy is built, so a config cannot make the server allocate more than the limits allow.
absl::Status CheckConfigSizes(const google::protobuf::Message& m, const InstanceLimits& limits,
                              const std::string& path, int depth = 0) {
  if (depth > 8) return absl::OkStatus();  // configs are shallow; protobuf caps nesting anyway
  const auto* refl = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* f : fields) {
    const std::string field = absl::StrCat(path, ".", f->name());
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        const int n = refl->FieldSize(m, f);
        if (f->name() == "arms" && n > limits.max_arms)
          return absl::InvalidArgumentError(absl::StrCat(field, " has ", n,
                                                         " arms, expected at most ", limits.max_arms));
        for (int i = 0; i < n; ++i)
          if (auto s = CheckConfigSizes(refl->GetRepeatedMessage(m, f, i), limits,
                                        absl::StrCat(field, "[", i, "]"), depth + 1);
              !s.ok())
            return s;
      } else if (auto s = CheckConfigSizes(refl->GetMessage(m, f), limits, field, depth + 1);
                 !s.ok()) {
        return s;
      }
      continue;
    }
    if (f->is_repeated()) continue;
    int64_t v = 0;
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT32) v = refl->GetInt32(m, f);
    else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64) v = refl->GetInt64(m, f);
    else continue;
    if ((f->name() == "dimension" || f->name() == "random_features") && v > limits.max_feature_dim)
      return absl::InvalidArgumentError(absl::StrCat(
          field, " is ", v, ", expected at most ", limits.max_feature_dim, " (--max_feature_dim)"));
    if (f->name() == "num_arms" && v > limits.max_arms)
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is ", v, ", expected at most ", limits.max_arms, " (--max_arms)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NormalizeConfig(const std::string& name, const InstanceLimits& limits,
                             bandit::v1::InstanceConfig* c) {
  if (auto s = CheckConfigSizes(c->policy(), limits, "config.policy"); !s.ok()) return s;
  auto* p = c->mutable_pending();
  if (p->capacity() == 0)
    p->set_capacity(std::min<int64_t>(kDefaultPendingCapacity, limits.max_pending_capacity));
  if (p->capacity() < 0 || p->capacity() > limits.max_pending_capacity)
    return absl::InvalidArgumentError(absl::StrCat("config.pending.capacity is ", p->capacity(),
                                                   ", expected 1..", limits.max_pending_capacity));
  if (p->reward_wait_ms() == 0) p->set_reward_wait_ms(kDefaultRewardWaitMs);
  if (p->reward_wait_ms() < 0 || p->reward_wait_ms() > kMaxRewardWaitMs)
    return absl::InvalidArgumentError(absl::StrCat("config.pending.reward_wait_ms is ",
                                                   p->reward_wait_ms(), ", expected 1..",
                                                   kMaxRewardWaitMs, " (7 days)"));
  if (p->on_expiry() == bandit::v1::EXPIRY_ACTION_UNSPECIFIED)
    p->set_on_expiry(bandit::v1::APPLY_DEFAULT);
  if (!bandit::v1::ExpiryAction_IsValid(p->on_expiry()))
    return absl::InvalidArgumentError("config.pending.on_expiry is not a known ExpiryAction");
  if (!std::isfinite(p->default_reward()))
    return absl::InvalidArgumentError(absl::StrCat("config.pending.default_reward is ",
                                                   p->default_reward(),
                                                   ", expected a finite number"));
  if (c->seed() == 0) c->set_seed(InstanceState::SeedFromName(name));
  return absl::OkStatus();
}

}  // namespace bandit::server
