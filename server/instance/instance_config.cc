// InstanceConfig: defaults and limits, before any policy is built (CreateInstance, import,
// recovery). The learned state itself is instance_state.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "bandit/v1/options.pb.h"
#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "server/instance/decision_log/decision_log.h"
#include "server/instance/instance_state.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {
namespace {

constexpr int64_t kDefaultPendingCapacity = 100'000;
constexpr int64_t kDefaultRewardWaitMs = 600'000;

// What a numeric policy-config field sizes: its (bandit.v1.size) option in the protos
// (proto/bandit/v1/options.proto). Every integer field (and every repeated message field)
// reachable from PolicyConfig declares one, and a test fails while any does not
// (UnclassifiedPolicyConfigFields), so a new policy cannot slip a size past the limits.
bandit::v1::SizeKind SizeOf(const google::protobuf::FieldDescriptor* f) {
  return f->options().GetExtension(bandit::v1::size);
}

bool Classifiable(const google::protobuf::FieldDescriptor* f) {
  using FD = google::protobuf::FieldDescriptor;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_UINT32:
    case FD::CPPTYPE_UINT64:
      return !f->is_repeated();
    case FD::CPPTYPE_MESSAGE:
      return f->is_repeated();
    default:
      return false;
  }
}

void Unclassified(const google::protobuf::Descriptor* d, std::set<std::string>* seen,
                  std::vector<std::string>* out) {
  if (!seen->insert(d->full_name()).second) return;
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (Classifiable(f) && SizeOf(f) == bandit::v1::SIZE_KIND_UNSPECIFIED)
      out->push_back(f->full_name());
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE)
      Unclassified(f->message_type(), seen, out);
  }
}

// Size limits on the policy config, whatever the policy, from its fields' size options. Checked before
// the policy is built, so a config cannot make the server allocate more than the limits allow.
absl::Status CheckConfigSizes(const google::protobuf::Message& m, const InstanceLimits& limits,
                              const std::string& path, int depth = 0) {
  if (depth > 8) return absl::OkStatus();  // configs are shallow; protobuf caps nesting anyway
  const auto* refl = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* f : fields) {
    const std::string field = absl::StrCat(path, ".", f->name());
    const bandit::v1::SizeKind size = SizeOf(f);
    int64_t v = 0;
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        const int n = refl->FieldSize(m, f);
        if (size == bandit::v1::SIZE_KIND_ARM_COUNT && n > limits.max_arms)
          return absl::InvalidArgumentError(absl::StrCat(
              field, " has ", n, " arms, expected at most ", limits.max_arms, " (--max_arms)"));
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
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        v = refl->GetInt32(m, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
        v = refl->GetInt64(m, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        v = refl->GetUInt32(m, f);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
        v = static_cast<int64_t>(std::min<uint64_t>(refl->GetUInt64(m, f), INT64_MAX));
        break;
      default:
        continue;
    }
    if (size == bandit::v1::SIZE_KIND_FEATURE_DIM) {
      // A diagonal or sketched covariance (LinUCB, GLB-OMD) keeps O(dimension) state: its own
      // bound.
      const auto* cov = m.GetDescriptor()->FindFieldByName("covariance");
      const bool diagonal =
          cov != nullptr && refl->GetEnumValue(m, cov) != bandit::v1::COVARIANCE_FULL;
      const int64_t max = diagonal ? limits.max_diagonal_feature_dim : limits.max_feature_dim;
      if (v > max)
        return absl::InvalidArgumentError(
            absl::StrCat(field, " is ", v, ", expected at most ", max,
                         diagonal ? " (--max_diagonal_feature_dim)" : " (--max_feature_dim)"));
    }
    if (size == bandit::v1::SIZE_KIND_LINEAR_FEATURE_DIM && v > limits.max_diagonal_feature_dim)
      return absl::InvalidArgumentError(absl::StrCat(field, " is ", v, ", expected at most ",
                                                     limits.max_diagonal_feature_dim,
                                                     " (--max_diagonal_feature_dim)"));
    if (size == bandit::v1::SIZE_KIND_ARM_COUNT && v > limits.max_arms)
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is ", v, ", expected at most ", limits.max_arms, " (--max_arms)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> UnclassifiedPolicyConfigFields() {
  std::set<std::string> seen;
  std::vector<std::string> out;
  Unclassified(bandit::v1::PolicyConfig::descriptor(), &seen, &out);
  return out;
}

absl::Status CheckAutoOptimization(const bandit::v1::AutoOptimization& a,
                                   const bandit::v1::DecisionLogConfig& log,
                                   absl::string_view field) {
  if (!a.enabled()) return absl::OkStatus();
  constexpr int64_t kMinute = 60'000, kYear = 365 * 1440 * kMinute;
  if (a.frequency_ms() < kMinute || a.frequency_ms() > kYear)
    return absl::InvalidArgumentError(absl::StrCat(field, ".frequency_ms is ", a.frequency_ms(),
                                                   ", expected ", kMinute, "..", kYear,
                                                   " (1 minute to 365 days)"));
  if (a.start_ms() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".start_ms is ", a.start_ms(), ", expected a time since the epoch (0: now)"));
  if (!log.enabled())
    return absl::FailedPreconditionError(absl::StrCat(
        field, ".enabled needs the decision log (decision_log { enabled: true }): automatic "
               "optimization evaluates the logged decisions"));
  return absl::OkStatus();
}

absl::Status NormalizeConfig(const std::string& name, const InstanceLimits& limits,
                             bandit::v1::InstanceConfig* c) {
  // Before the size check: it may fill the policy's dimension (2^bits).
  if (auto s = NormalizeFeatureSpace(limits.max_feature_dim, limits.max_diagonal_feature_dim, c);
      !s.ok())
    return s;
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
  if (p->reward_aggregation() == bandit::v1::REWARD_AGGREGATION_UNSPECIFIED)
    p->set_reward_aggregation(bandit::v1::EARLIEST);
  if (!bandit::v1::RewardAggregation_IsValid(p->reward_aggregation()))
    return absl::InvalidArgumentError(
        "config.pending.reward_aggregation is not a known RewardAggregation, expected EARLIEST "
        "or SUM");
  if (!IsInputNumber(p->default_reward()))
    return absl::InvalidArgumentError(absl::StrCat(
        "config.pending.default_reward is ", p->default_reward(), ", ", kInputNumberExpected));
  if (auto s = DecisionLog::Normalize(c->mutable_decision_log()); !s.ok()) return s;
  if (auto s = CheckAutoOptimization(c->auto_optimization(), c->decision_log(),
                                     "config.auto_optimization");
      !s.ok())
    return s;
  if (c->seed() == 0) c->set_seed(InstanceState::SeedFromName(name));
  return absl::OkStatus();
}

absl::StatusOr<bandit::v1::InstanceConfig> ConfigWithPolicy(
    const std::string& name, const InstanceLimits& limits,
    const bandit::v1::InstanceConfig& current, const bandit::v1::PolicyConfig& policy) {
  bandit::v1::InstanceConfig next = current;
  *next.mutable_policy() = policy;
  next.clear_feature_space();
  if (auto s = NormalizeConfig(name, limits, &next); !s.ok()) return s;
  // Another feature space is fine (ReplacePolicy); named inputs where there were none, or none
  // where there were, would change what the instance's requests are.
  if (next.has_feature_space() != current.has_feature_space())
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name, "' decides over ",
        current.has_feature_space() ? "named actions (a feature space)"
                                    : "its arms or candidate vectors (no feature space)",
        " and the new policy over ",
        next.has_feature_space() ? "named actions" : "arms or candidate vectors",
        ": expected a policy of the same kind of input"));
  return next;
}

}  // namespace bandit::server
