// One step of progressive off-policy evaluation of a learning policy, as Vowpal Wabbit's
// --cb_adf does: the policy gives its action distribution pi(.|x_t) for a logged context, then
// learns from the logged (context, action, reward). Shared by the evaluator (core/ope/evaluator.h,
// over a log) and the server's shadow policies (server/instance/shadows.h, live), so both evaluate
// a candidate the same way.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/policy.h"

namespace bandit::ope {

// A decision's context as logged: exactly one of the three forms.
struct LoggedContext {
  std::span<const Vector> actions;                    // candidate vectors (one per action)
  // The same candidates as sparse vectors (named decisions hashed into a large weight space),
  // instead of `actions`: for a policy that takes sparse input (Policy::TakesSparse).
  std::span<const SparseVector> sparse_actions;
  const Vector* x = nullptr;                          // input x (point policies)
  // Arm set: the logged decision's arms, in its action order; a subset of the policy's arms when
  // the decision was among the arms not excluded (or a later slot of a multi-slot decision).
  const std::vector<std::string>* arm_ids = nullptr;
  int num_actions = 0;
};

// pi(.|x) over the logged actions. `exact` is false when the policy did not report its whole
// distribution and the indicator of its sampled action stands in for it (unbiased, noisier); a
// deterministic choice (propensity 1) is exactly one-hot. `who` prefixes errors. Errors: a
// context of another kind than the policy takes, an arm set that is not the policy's, the
// policy's own Select error. The policy's random engine advances as in a Select.
struct Target {
  Vector pi;
  bool exact = true;
};
absl::StatusOr<Target> TargetDistribution(Policy& policy, const LoggedContext& ctx,
                                          const std::string& who);

// What the policy learns from the logged action and reward (a direct observation: the policy
// did not make the decision). Arm sets: the logged arm id maps to the policy's own slot.
absl::StatusOr<Observation> LoggedObservation(const Policy& policy, const LoggedContext& ctx,
                                              int logged_action, double reward,
                                              const std::string& who);

}  // namespace bandit::ope
