// The learning modes of an instance (learning_modes.h).
#include "server/instance/learning_modes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace bandit::server {
namespace {

void SetEstimate(const ope::Interval& i, bandit::v1::Estimate* out) {
  out->set_value(i.value);
  out->set_se(i.se);
  out->set_lo(i.lo);
  out->set_hi(i.hi);
}
}  // namespace

// The baseline modes serve the first action offered, which policies over an arm set or
// candidates have; a point-input policy's actions are its own.
absl::Status CheckLearningMode(int mode, const Policy& policy, absl::string_view field) {
  if (!bandit::v1::LearningMode_IsValid(mode))
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", mode, ", expected ONLINE, APPRENTICE or LOGGING_ONLY"));
  if (mode == bandit::v1::APPRENTICE || mode == bandit::v1::LOGGING_ONLY) {
    if (policy.context_kind() == ContextKind::kPoint)
      return absl::FailedPreconditionError(absl::StrCat(
          field, " is ", bandit::v1::LearningMode_Name(static_cast<bandit::v1::LearningMode>(mode)),
          ", expected ONLINE for policy '", policy.name(),
          "': it decides over an input x, with no baseline action to serve"));
  }
  return absl::OkStatus();
}

bandit::v1::LearningMode ModeOf(const bandit::v1::InstanceConfig& c) {
  return c.learning_mode() == bandit::v1::LEARNING_MODE_UNSPECIFIED ? bandit::v1::ONLINE
                                                                     : c.learning_mode();
}

Decision BaselineDecision(const Policy& served, const SelectContext& ctx, const SelectInputs& in,
                          const Decision* policy, PendingDecision* p) {
  Decision b;
  b.propensity = 1.0;
  b.score_kind = bandit::v1::PROBABILITY;
  // The actions offered, in the order the policy sees them, and the baseline's position among
  // them: the first (the excluded actions are not offered).
  int n = 0;
  int baseline = 0;
  switch (served.context_kind()) {
    case ContextKind::kNone: {
      const std::vector<std::string> ids = served.ArmIds();
      n = static_cast<int>(ids.size());
      baseline = in.offered_arms.empty() ? 0 : in.offered_arms.front();
      b.arm_id = ids[static_cast<size_t>(baseline)];
      break;
    }
    case ContextKind::kCandidates:
      n = static_cast<int>(!ctx.sparse_candidates.empty() ? ctx.sparse_candidates.size()
                                                          : ctx.candidates.size());
      break;
    case ContextKind::kPoint:  // refused by CheckLearningMode
      break;
  }
  b.arm = baseline;
  b.scores = Vector::Zero(n);
  if (n > 0) b.scores[baseline] = 1.0;
  if (policy != nullptr) {
    // pi(baseline|x): from the policy's distribution where it gave one over these actions, else
    // the indicator of its choice (exact for a deterministic policy, unbiased for a sampled one).
    const bool distribution =
        policy->score_kind == bandit::v1::PROBABILITY && policy->scores.size() == n;
    p->apprentice_target = distribution ? policy->scores[baseline]
                                        : (policy->arm == baseline ? 1.0 : 0.0);
    if (!std::isfinite(p->apprentice_target)) p->apprentice_target = 0;
    p->apprentice_target = std::clamp(p->apprentice_target, 0.0, 1.0);
    p->apprentice_chose_baseline = policy->arm == baseline;
  }
  return b;
}

Decision SlotBaselineDecision(const std::vector<int>& offered, int baseline,
                              const Decision* policy, PendingDecision* p) {
  const int n = static_cast<int>(offered.size());
  const int at = static_cast<int>(std::find(offered.begin(), offered.end(), baseline) -
                                  offered.begin());  // < n: see SelectSlots
  Decision b;
  b.propensity = 1.0;
  b.score_kind = bandit::v1::PROBABILITY;
  b.arm = at;
  b.scores = Vector::Zero(n);
  b.scores[at] = 1.0;
  if (policy != nullptr) {
    // pi(baseline|x, earlier slots' choices): as BaselineDecision, among the slot's offered
    // actions.
    const bool distribution =
        policy->score_kind == bandit::v1::PROBABILITY && policy->scores.size() == n;
    p->apprentice_target = distribution ? policy->scores[at] : (policy->arm == at ? 1.0 : 0.0);
    if (!std::isfinite(p->apprentice_target)) p->apprentice_target = 0;
    p->apprentice_target = std::clamp(p->apprentice_target, 0.0, 1.0);
    p->apprentice_chose_baseline = policy->arm == at;
  }
  return b;
}

void ApprenticeEstimates::Figures::Count(const PendingDecision& target, double reward) {
  estimators.AddTerms(target.apprentice_target, 1.0, reward, 0.0, 0.0);
  if (target.apprentice_chose_baseline) {
    ++chose_baseline;
    imitated_reward += reward;
  }
}

void ApprenticeEstimates::Figures::Save(bandit::v1::ApprenticeSnapshot* out) const {
  estimators.Save(out->mutable_estimators());
  out->set_policy_chose_baseline(chose_baseline);
  out->set_imitated_reward_sum(imitated_reward);
}

absl::Status ApprenticeEstimates::Figures::Restore(const bandit::v1::ApprenticeSnapshot& in) {
  if (auto s = estimators.Restore(in.estimators()); !s.ok()) return s;
  if (in.policy_chose_baseline() < 0 || in.policy_chose_baseline() > in.estimators().events() ||
      !std::isfinite(in.imitated_reward_sum()))
    return absl::InvalidArgumentError(absl::StrCat(
        "policy_chose_baseline ", in.policy_chose_baseline(), " or imitated_reward_sum ",
        in.imitated_reward_sum(), " is not what ", in.estimators().events(),
        " events could make"));
  chose_baseline = in.policy_chose_baseline();
  imitated_reward = in.imitated_reward_sum();
  return absl::OkStatus();
}

void ApprenticeEstimates::Count(const PendingDecision& target, double reward) {
  if (target.learning_mode != bandit::v1::APPRENTICE) return;
  pooled_.Count(target, reward);
  if (target.slot_index < 0) return;  // a single decision
  const size_t position = static_cast<size_t>(std::min(target.slot_index, kLastSlotPosition));
  if (slots_.size() <= position) slots_.resize(position + 1);
  slots_[position].Count(target, reward);
}

template <typename Message, typename Write>
void ApprenticeEstimates::WriteAll(Message* out, Write write) const {
  write(pooled_, out);
  for (size_t k = 0; k < slots_.size(); ++k) {
    auto* slot = out->add_slots();
    slot->set_position(static_cast<int32_t>(k));
    write(slots_[k], slot);
  }
}

void ApprenticeEstimates::Save(bandit::v1::ApprenticeSnapshot* out) const {
  WriteAll(out, [](const Figures& f, bandit::v1::ApprenticeSnapshot* m) { f.Save(m); });
}

absl::Status ApprenticeEstimates::Restore(const bandit::v1::ApprenticeSnapshot& in) {
  if (auto s = pooled_.Restore(in); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(": ", s.message()));
  if (in.slots_size() > kLastSlotPosition + 1)
    return absl::InvalidArgumentError(absl::StrCat(" has ", in.slots_size(),
                                                   " slot positions, expected at most ",
                                                   kLastSlotPosition + 1));
  slots_.resize(in.slots_size());
  for (int k = 0; k < in.slots_size(); ++k) {
    if (in.slots(k).position() != k)
      return absl::InvalidArgumentError(absl::StrCat(".slots[", k, "] is position ",
                                                     in.slots(k).position(), ", expected ", k));
    if (auto s = slots_[k].Restore(in.slots(k)); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat(".slots[", k, "]: ", s.message()));
  }
  return absl::OkStatus();
}

void ApprenticeEstimates::Describe(bandit::v1::ApprenticeStatus* out) const {
  WriteAll(out, [](const Figures& f, bandit::v1::ApprenticeStatus* m) { f.Describe(m); });
}

void ApprenticeEstimates::Figures::Describe(bandit::v1::ApprenticeStatus* a) const {
  a->set_events(estimators.events());
  bandit::v1::OpeEstimatorState sums;  // the reward sum as added up, not mean x count
  estimators.Save(&sums);
  a->set_reward_sum(sums.logged_sum());
  SetEstimate(estimators.Logged(), a->mutable_baseline());
  SetEstimate(estimators.Ips(), a->mutable_ips());
  SetEstimate(estimators.Snips(), a->mutable_snips());
  a->set_policy_chose_baseline(chose_baseline);
  a->set_imitated_reward_sum(imitated_reward);
  a->set_effective_sample_size(estimators.EffectiveSampleSize());
}

}  // namespace bandit::server
