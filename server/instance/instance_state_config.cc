#include "server/instance/instance_state.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/arms.h"
#include "core/common/sparse.h"
#include "core/registry.h"
#include "server/instance/instance_state_internal.h"
#include "server/instance/named_inputs.h"

namespace bandit::server {

bool InstanceState::SumsRewards(const PendingDecision& event) const {
  const bandit::v1::RewardAggregation a =
      event.aggregation != bandit::v1::REWARD_AGGREGATION_UNSPECIFIED
          ? bandit::v1::RewardAggregation(event.aggregation)
          : config_.pending().reward_aggregation();
  return a == bandit::v1::SUM;
}

absl::Status InstanceState::Reset() {
  auto fresh = CreatePolicy(config_.policy(), config_.seed());
  if (!fresh.ok()) return fresh.status();
  // Shadows restart with the instance (their estimates were about the policy just forgotten).
  if (auto s = shadows_.Reset(); !s.ok()) return s;
  policy_ = *std::move(fresh);
  pending_.Clear();
  apprentice_.Clear();
  // The log is a record of what happened, not learned state: it stays, and the decisions whose
  // rewards can no longer be joined say so.
  log_.DiscardPending(0);
  const int64_t evicted = stats_.decision_log_evicted();
  stats_.Clear();
  stats_.set_decision_log_evicted(evicted);
  return absl::OkStatus();
}

absl::Status InstanceState::SetMixtureReference(const MixtureReference& reference) {
  using bandit::v1::MixtureObjective;
  if (!config_.policy().has_mixture())
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' runs policy '", policy_->name(),
        "', which has no reference distribution; expected a mixture instance (FD or KD)"));
  const MixtureObjective objective = config_.policy().mixture().objective();
  if (objective != bandit::v1::FD && objective != bandit::v1::KD &&
      objective != bandit::v1::OBJECTIVE_UNSPECIFIED)
    return absl::FailedPreconditionError(absl::StrCat(
        "instance '", name_, "' scores with ", bandit::v1::MixtureObjective_Name(objective),
        ", which uses no reference; expected an FD or KD mixture"));
  const bool stats = !reference.mean.empty() || !reference.covariance.empty();
  const bool embeddings = !reference.embeddings.empty();
  if (stats == embeddings)
    return absl::InvalidArgumentError(absl::StrCat(
        "expected either mean and covariance or embeddings, got ", stats ? "both" : "neither"));
  if (stats && reference.append)
    return absl::InvalidArgumentError("append applies to embeddings, not to mean and covariance");
  if (stats && objective == bandit::v1::KD)
    return absl::InvalidArgumentError(
        "KD compares against reference embeddings, expected embeddings rather than mean and "
        "covariance");

  // The request becomes a new config (the reference lives in the mixture config, so a reset,
  // a snapshot or an export keeps it); the policy factory validates it, once, in
  // ApplyConfig (shapes, finiteness, a symmetric PSD covariance). Checked here only what the
  // config cannot express: one embedding per row, and the server's bound on their total.
  InstanceConfig next = config_;
  auto* m = next.mutable_policy()->mutable_mixture();
  const int d = m->dimension();
  if (stats) {
    m->mutable_reference_mean()->Assign(reference.mean.begin(), reference.mean.end());
    m->mutable_reference_covariance()->Assign(reference.covariance.begin(), reference.covariance.end());
    m->clear_reference_samples();
  } else {
    if (!reference.append) m->clear_reference_samples();
    m->clear_reference_mean();
    m->clear_reference_covariance();
    const int64_t total =
        m->reference_samples_size() + static_cast<int64_t>(reference.embeddings.size()) * d;
    if (total > kMaxReferenceValues)
      return absl::ResourceExhaustedError(
          absl::StrCat("the reference would hold ", total,
                       " values (embeddings x dimension), expected at most ", kMaxReferenceValues));
    m->mutable_reference_samples()->Reserve(static_cast<int>(total));
    for (size_t i = 0; i < reference.embeddings.size(); ++i) {
      const std::span<const double> e = reference.embeddings[i];
      if (static_cast<int64_t>(e.size()) != d)
        return absl::InvalidArgumentError(absl::StrCat("embeddings[", i, "] has ", e.size(),
                                                       " values, expected the dimension ", d));
      m->mutable_reference_samples()->Add(e.begin(), e.end());
    }
  }
  if (auto s = ApplyConfig(std::move(next)); !s.ok())
    return absl::Status(s.code(), absl::StrCat("reference: ", s.message()));
  return absl::OkStatus();
}

absl::Status InstanceState::Configure(const LiveSettings& settings) {
  if (!settings.any())
    return absl::InvalidArgumentError(
        "no setting is set, expected at least one of reward_wait_ms, on_expiry, default_reward, "
        "reward_aggregation, epsilon, learning_mode, auto_optimization");
  // Checked as NormalizeConfig checks them at creation, all before anything changes.
  const bandit::v1::RewardAggregation aggregation_before = config_.pending().reward_aggregation();
  InstanceConfig next = config_;
  auto* p = next.mutable_pending();
  if (settings.reward_wait_ms.has_value()) {
    if (*settings.reward_wait_ms < 1 || *settings.reward_wait_ms > kMaxRewardWaitMs)
      return absl::InvalidArgumentError(absl::StrCat("reward_wait_ms is ", *settings.reward_wait_ms,
                                                     ", expected 1..", kMaxRewardWaitMs,
                                                     " (7 days)"));
    p->set_reward_wait_ms(*settings.reward_wait_ms);
  }
  if (settings.on_expiry.has_value()) {
    if (!bandit::v1::ExpiryAction_IsValid(*settings.on_expiry))
      return absl::InvalidArgumentError(absl::StrCat(
          "on_expiry is ", *settings.on_expiry, ", expected APPLY_DEFAULT or DROP"));
    p->set_on_expiry(*settings.on_expiry == bandit::v1::EXPIRY_ACTION_UNSPECIFIED
                         ? bandit::v1::APPLY_DEFAULT
                         : *settings.on_expiry);
  }
  if (settings.default_reward.has_value()) {
    if (!IsInputNumber(*settings.default_reward))
      return absl::InvalidArgumentError(
          absl::StrCat("default_reward is ", *settings.default_reward, ", ", kInputNumberExpected));
    p->set_default_reward(*settings.default_reward);
  }
  if (settings.reward_aggregation.has_value()) {
    if (!bandit::v1::RewardAggregation_IsValid(*settings.reward_aggregation))
      return absl::InvalidArgumentError(absl::StrCat(
          "reward_aggregation is ", *settings.reward_aggregation, ", expected EARLIEST or SUM"));
    p->set_reward_aggregation(*settings.reward_aggregation ==
                                      bandit::v1::REWARD_AGGREGATION_UNSPECIFIED
                                  ? bandit::v1::EARLIEST
                                  : *settings.reward_aggregation);
  }
  if (settings.auto_optimization.has_value()) {
    if (auto s = CheckAutoOptimization(*settings.auto_optimization, next.decision_log(),
                                       "auto_optimization");
        !s.ok())
      return s;
    *next.mutable_auto_optimization() = *settings.auto_optimization;
  }
  if (settings.learning_mode.has_value()) {
    if (auto s = CheckLearningMode(*settings.learning_mode, *policy_, "learning_mode"); !s.ok())
      return s;
    next.set_learning_mode(*settings.learning_mode == bandit::v1::LEARNING_MODE_UNSPECIFIED
                               ? bandit::v1::ONLINE
                               : *settings.learning_mode);
  }
  if (settings.epsilon.has_value()) {
    if (!(*settings.epsilon >= 0.0 && *settings.epsilon <= 1.0))
      return absl::InvalidArgumentError(
          absl::StrCat("epsilon is ", *settings.epsilon, ", expected a number in [0, 1]"));
    auto* policy = next.mutable_policy();
    if (policy->has_epsilon_greedy()) {
      policy->mutable_epsilon_greedy()->set_epsilon(*settings.epsilon);
    } else if (policy->has_glm_epsilon_greedy()) {
      policy->mutable_glm_epsilon_greedy()->set_epsilon(*settings.epsilon);
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "epsilon is set, but instance '", name_, "' runs policy '", policy_->name(),
          "', which has no epsilon; expected epsilon_greedy or glm_epsilon_greedy"));
    }
    // The policy takes the new epsilon keeping what it learned (Policy::Reconfigure); the last
    // step that can fail, so nothing has changed if it does.
    if (auto s = ApplyConfig(next); !s.ok()) return s;
  }
  // Decisions already pending keep the aggregation they were made under.
  if (p->reward_aggregation() != aggregation_before) {
    pending_.ForEach([&](PendingDecision& d) {
      if (d.aggregation == bandit::v1::REWARD_AGGREGATION_UNSPECIFIED)
        d.aggregation = aggregation_before;
    });
  }
  config_ = std::move(next);
  return absl::OkStatus();
}

absl::Status InstanceState::ApplyConfig(InstanceConfig next) {
  if (auto s = ReconfigurePolicy(*policy_, next.policy(), next.seed()); !s.ok()) return s;
  config_ = std::move(next);
  SyncConfigArms();
  return absl::OkStatus();
}

absl::Status InstanceState::AdmitArms(const ArmSpecs& arms) const {
  if (arms.empty())
    return absl::InvalidArgumentError("arms is empty, expected at least one arm");
  if (arms.size() > limits_.max_arms_per_request)
    return absl::InvalidArgumentError(absl::StrCat(
        "arms has ", arms.size(), " entries, expected at most ", limits_.max_arms_per_request));
  if (const int64_t have = static_cast<int64_t>(policy_->ArmIds().size());
      have + arms.size() > limits_.max_arms)
    return absl::ResourceExhaustedError(absl::StrCat(
        "instance '", name_, "' has ", have, " arms; adding ", arms.size(),
        " would exceed the configured maximum of ", limits_.max_arms, " (--max_arms)"));
  return absl::OkStatus();
}

absl::Status InstanceState::AdmitArmRemoval(const ArmIds& arm_ids) const {
  if (arm_ids.empty())
    return absl::InvalidArgumentError("arm_ids is empty, expected at least one arm id");
  if (arm_ids.size() > limits_.max_arms_per_request)
    return absl::InvalidArgumentError(absl::StrCat("arm_ids has ", arm_ids.size(),
                                                   " entries, expected at most ",
                                                   limits_.max_arms_per_request));
  return absl::OkStatus();
}

absl::Status InstanceState::AddArms(const ArmSpecs& arms) {
  bandit::v1::PolicyState before;
  policy_->Save(&before);
  const bandit::v1::PolicyConfig config_before = config_.policy();
  for (int i = 0; i < arms.size(); ++i) {
    if (auto s = policy_->AddArm(arms.Get(i)); !s.ok()) {
      RollBack(config_before, before);
      return absl::Status(s.code(), absl::StrCat("arms[", i, "]: ", s.message()));
    }
    *config_.mutable_policy()->add_arms() = arms.Get(i);
  }
  if (auto s = shadows_.AddArms(arms); !s.ok()) {
    RollBack(config_before, before);
    return s;
  }
  SyncConfigArms();
  return absl::OkStatus();
}

absl::Status InstanceState::RemoveArms(const ArmIds& arm_ids) {
  bandit::v1::PolicyState before;
  policy_->Save(&before);
  const bandit::v1::PolicyConfig config_before = config_.policy();
  for (int i = 0; i < arm_ids.size(); ++i) {
    if (auto s = policy_->RemoveArm(arm_ids.Get(i)); !s.ok()) {
      RollBack(config_before, before);
      return absl::Status(s.code(), absl::StrCat("arm_ids[", i, "]: ", s.message()));
    }
  }
  if (auto s = shadows_.RemoveArms(arm_ids); !s.ok()) {
    RollBack(config_before, before);
    return s;
  }
  SyncConfigArms();
  return absl::OkStatus();
}

void InstanceState::RollBack(const bandit::v1::PolicyConfig& config,
                             const bandit::v1::PolicyState& state) {
  // A multi-arm change failed part-way: rebuild the policy exactly as it was before the request.
  *config_.mutable_policy() = config;
  auto fresh = CreatePolicy(config, config_.seed());
  if (fresh.ok() && (*fresh)->Restore(state).ok()) policy_ = *std::move(fresh);
}

bandit::v1::InstanceStats InstanceState::Stats(
    std::vector<std::pair<std::string, double>>* summary) const {
  bandit::v1::InstanceStats stats = stats_;
  stats.set_pending(pending_.size());
  stats.set_state_bytes(policy_->StateBytes());
  stats.set_decision_log_events(log_.events());
  stats.set_decision_log_first_ms(log_.first_decided_ms());
  stats.set_decision_log_last_ms(log_.last_decided_ms());
  stats.set_decision_log_bytes(log_.bytes());
  if (summary) *summary = policy_->Summary();
  return stats;
}

void InstanceState::Describe(bandit::v1::Instance* out) const {
  out->Clear();
  out->set_name(name_);
  *out->mutable_config() = config_;
  *out->mutable_stats() = stats_;
  out->mutable_stats()->set_pending(pending_.size());
  out->mutable_stats()->set_state_bytes(policy_->StateBytes());
  out->mutable_stats()->set_decision_log_events(log_.events());
  out->mutable_stats()->set_decision_log_first_ms(log_.first_decided_ms());
  out->mutable_stats()->set_decision_log_last_ms(log_.last_decided_ms());
  out->mutable_stats()->set_decision_log_bytes(log_.bytes());
  for (const auto& [k, v] : policy_->Summary()) (*out->mutable_summary())[k] = v;
  for (const auto& id : policy_->ArmIds()) out->add_arm_ids(id);
  const Vector w = policy_->Weights();
  out->mutable_weights()->Assign(w.data(), w.data() + w.size());
  shadows_.Describe(out);
  if (!apprentice_.empty() || ModeOf(config_) == bandit::v1::APPRENTICE)
    apprentice_.Describe(out->mutable_apprentice());
}

absl::Status InstanceState::AddShadow(const std::string& name, bandit::v1::ShadowConfig* config,
                                      int64_t max_shadows) {
  // Within kMaxDenseDimension shadows score and learn dense vectors (and keep a dense direct
  // model): over named features that is 2^bits per action, admitted within the full-matrix
  // bound only. Beyond it they take the sparse vectors (ShadowSet::Prepare).
  if (feature_space_ != nullptr && ShadowSet::SparseDimension(config_) == 0 &&
      feature_space_->dimension() > limits_.max_feature_dim)
    return absl::InvalidArgumentError(absl::StrCat(
        "shadow '", name, "' would score dense vectors of dimension 2^",
        feature_space_->options().bits, " = ", feature_space_->dimension(),
        ", expected at most --max_feature_dim=", limits_.max_feature_dim,
        ": shadows are not available on an instance with this many feature bits"));
  auto shadow = shadows_.Prepare(
      name_, *policy_, config_, name, *config,
      [&](InstanceConfig* c) { return NormalizeConfig(name_ + ":" + name, limits_, c); },
      max_shadows);
  if (!shadow.ok()) return shadow.status();
  // Journaled normalized (seed and arms filled in), so replay builds the same shadow.
  *config = shadow->config;
  shadows_.Insert(*std::move(shadow));
  return absl::OkStatus();
}

absl::Status InstanceState::RemoveShadow(const std::string& shadow) {
  auto taken = shadows_.Take(name_, shadow);
  if (!taken.ok()) return taken.status();
  return absl::OkStatus();
}

absl::Status InstanceState::PromoteShadow(const std::string& shadow) {
  auto taken = shadows_.Take(name_, shadow);
  if (!taken.ok()) return taken.status();
  // The shadow's policy object, with everything it learned and its random engine, becomes the
  // served policy; its config becomes the instance's (so Reset and recovery rebuild it).
  *config_.mutable_policy() = taken->config.policy();
  config_.set_seed(taken->config.seed());
  policy_ = std::move(taken->policy);
  // Decisions still pending were made by the policy just dropped: their memos mean nothing to
  // the new one, which learns their rewards as logged data.
  pending_.ForEach([](PendingDecision& p) {
    p.learn_direct = true;
    p.memo.resize(0);
  });
  SyncConfigArms();
  return absl::OkStatus();
}

absl::Status InstanceState::ReplacePolicy(const bandit::v1::ReplacePolicy& r) {
  auto configured = ConfigWithPolicy(name_, limits_, config_, r.policy());
  if (!configured.ok()) return configured.status();
  InstanceConfig next = *std::move(configured);
  // Another feature space (other interactions, bits, ...): the decisions are hashed into it from
  // now on. The shadows learn from the served decisions' vectors, so they must go first.
  const bool new_space =
      next.feature_space().SerializeAsString() != config_.feature_space().SerializeAsString();
  std::shared_ptr<const features::FeatureSpace> space = feature_space_;
  if (new_space) {
    if (!shadows_.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "the new policy's feature space (", next.feature_space().ShortDebugString(),
          ") is not instance '", name_, "''s (", config_.feature_space().ShortDebugString(),
          ") and the instance has shadows, which learn from its decisions' vectors; expected "
          "arguments with the same feature space, or the shadows removed first"));
    auto created = FeatureSpaceOf(next);
    if (!created.ok()) return created.status();
    space = *std::move(created);
  }
  auto policy = CreatePolicy(next.policy(), next.seed());
  if (!policy.ok()) return policy.status();
  if (r.has_state())
    if (auto s = (*policy)->Restore(r.state()); !s.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("the new policy's learned state: ", s.message()));
  if (auto s = CheckLearningMode(next.learning_mode(), **policy, "config.learning_mode"); !s.ok())
    return absl::InvalidArgumentError(s.message());
  config_ = std::move(next);
  policy_ = *std::move(policy);
  feature_space_ = std::move(space);
  // As after PromoteShadow: the pending decisions' memos were the old policy's. In another
  // feature space their vectors mean nothing to the new policy either: their rewards are
  // recorded (stats, the decision log) and not learned, as in LOGGING_ONLY mode.
  pending_.ForEach([new_space](PendingDecision& p) {
    p.learn_direct = true;
    p.memo.resize(0);
    if (!new_space) return;
    p.learning_mode = bandit::v1::LOGGING_ONLY;
    for (PendingDecision& slot : p.slots) slot.learning_mode = bandit::v1::LOGGING_ONLY;
  });
  SyncConfigArms();
  return absl::OkStatus();
}

}  // namespace bandit::server
