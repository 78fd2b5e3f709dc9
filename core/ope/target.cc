#include "core/ope/target.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace bandit::ope {
namespace {

// The policy's slot of each logged arm (arm sets), or an error naming what does not match. The
// logged arms may be a subset of the policy's (a decision among the arms not excluded, or a
// later slot of a multi-slot decision): *allowed then marks them, the policy's mask for the
// same choice.
absl::StatusOr<std::vector<int>> SlotsOf(const Policy& policy, const LoggedContext& ctx,
                                         const std::string& who, std::vector<char>* allowed) {
  const std::vector<std::string> own = policy.ArmIds();
  const std::vector<std::string>& logged = *ctx.arm_ids;
  if (own.size() < logged.size())
    return absl::InvalidArgumentError(absl::StrCat(
        who, " has ", own.size(), " arms, the logged decision was among ", logged.size()));
  std::vector<int> slots;
  slots.reserve(logged.size());
  allowed->assign(own.size(), 0);
  for (size_t i = 0; i < logged.size(); ++i) {
    int slot = -1;
    if (i < own.size() && own[i] == logged[i]) {  // the common case: the same order
      slot = static_cast<int>(i);
    } else {
      auto it = std::find(own.begin(), own.end(), logged[i]);
      if (it == own.end())
        return absl::InvalidArgumentError(
            absl::StrCat(who, " has no arm '", logged[i], "' that the logged decision had"));
      slot = static_cast<int>(it - own.begin());
    }
    if ((*allowed)[slot])
      return absl::InvalidArgumentError(
          absl::StrCat("the logged decision lists arm '", logged[i], "' twice"));
    (*allowed)[slot] = 1;
    slots.push_back(slot);
  }
  if (logged.size() == own.size()) allowed->clear();  // every arm: no mask
  return slots;
}

}  // namespace

absl::StatusOr<Target> TargetDistribution(Policy& policy, const LoggedContext& ctx,
                                          const std::string& who) {
  const int n = ctx.num_actions;
  SelectContext select;
  select.want_scores = true;
  std::vector<int> slot_of_action;  // arm set: the policy's slot of each logged action
  std::vector<char> allowed;        // arm set: the logged arms, when a subset of the policy's
  switch (policy.context_kind()) {
    case ContextKind::kCandidates:
      if (!ctx.sparse_actions.empty()) {
        if (!policy.TakesSparse())
          return absl::InvalidArgumentError(absl::StrCat(
              who, " takes dense candidate vectors, the logged decision's are sparse (a weight "
                   "space of more coordinates than dense vectors are built for): use a policy "
                   "that takes sparse input (covariance: COVARIANCE_SKETCHED or COVARIANCE_DIAGONAL)"));
        select.sparse_candidates = ctx.sparse_actions;
        break;
      }
      if (ctx.actions.empty())
        return absl::InvalidArgumentError(
            absl::StrCat(who, " takes candidate vectors, the logged decision has none"));
      select.candidates = ctx.actions;
      break;
    case ContextKind::kPoint:
      if (ctx.x == nullptr || ctx.x->size() == 0)
        return absl::InvalidArgumentError(
            absl::StrCat(who, " takes an input x, the logged decision has none"));
      select.point = ctx.x;
      break;
    case ContextKind::kNone: {
      if (ctx.arm_ids == nullptr || ctx.arm_ids->empty())
        return absl::InvalidArgumentError(
            absl::StrCat(who, " chooses among its arms, the logged decision has no arm ids"));
      auto slots = SlotsOf(policy, ctx, who, &allowed);
      if (!slots.ok()) return slots.status();
      slot_of_action = *std::move(slots);
      select.allowed_arms = allowed;
      break;
    }
  }
  auto decision = policy.Select(select);
  if (!decision.ok())
    return absl::Status(decision.status().code(),
                        absl::StrCat(who, ": ", decision.status().message()));
  Target out;
  out.pi = Vector::Zero(n);
  auto action_of = [&](int policy_index) -> int {
    if (slot_of_action.empty()) return policy_index;
    auto it = std::find(slot_of_action.begin(), slot_of_action.end(), policy_index);
    return it == slot_of_action.end() ? -1 : static_cast<int>(it - slot_of_action.begin());
  };
  const Eigen::Index scored = slot_of_action.empty()
                                  ? n
                                  : static_cast<Eigen::Index>(policy.ArmIds().size());
  const bool exact_vector = decision->score_kind == bandit::v1::PROBABILITY &&
                            decision->scores.size() == scored && decision->scores.allFinite();
  if (exact_vector) {
    if (slot_of_action.empty()) {
      out.pi = decision->scores;
    } else {
      for (int a = 0; a < n; ++a) out.pi[a] = decision->scores[slot_of_action[a]];
    }
    return out;
  }
  const int a = action_of(decision->arm);
  if (a < 0 || a >= n)
    return absl::InternalError(
        absl::StrCat(who, " chose action ", decision->arm, " outside the logged decision's ", n));
  out.pi[a] = 1.0;
  out.exact = decision->propensity == 1.0;
  return out;
}

absl::StatusOr<Observation> LoggedObservation(const Policy& policy, const LoggedContext& ctx,
                                              int logged_action, double reward,
                                              const std::string& who) {
  Observation learn;
  learn.direct = true;
  learn.reward = reward;
  switch (policy.context_kind()) {
    case ContextKind::kCandidates:
      if (!ctx.sparse_actions.empty()) {
        learn.sparse_features = ctx.sparse_actions[logged_action];
      } else {
        learn.features = ctx.actions[logged_action];
      }
      break;
    case ContextKind::kPoint:
      learn.features = *ctx.x;
      learn.arm = logged_action;
      break;
    case ContextKind::kNone: {
      const std::string& id = (*ctx.arm_ids)[logged_action];
      const std::vector<std::string> own = policy.ArmIds();
      auto it = std::find(own.begin(), own.end(), id);
      if (it == own.end())
        return absl::InvalidArgumentError(
            absl::StrCat(who, " has no arm '", id, "' that the logged decision had"));
      learn.arm = static_cast<int>(it - own.begin());
      learn.arm_id = id;
      break;
    }
  }
  return learn;
}

}  // namespace bandit::ope
