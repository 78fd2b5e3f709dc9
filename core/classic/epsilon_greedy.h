// Epsilon-greedy over a finite arm set: with probability eps_t a uniform arm, otherwise the arm
// with the best empirical mean (ties split uniformly). eps_t = epsilon / (1 + decay * t).
#pragma once

#include <memory>

#include "core/arms.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit {

class EpsilonGreedy final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);

  absl::string_view name() const override { return "epsilon_greedy"; }
  ContextKind context_kind() const override { return ContextKind::kNone; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  std::optional<double> EstimatedMean(int arm) const;
  std::vector<std::string> ArmIds() const override { return arms_.ids(); }
  absl::Status AddArm(const bandit::v1::ArmSpec& arm) override;
  absl::Status RemoveArm(absl::string_view arm_id) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  // Takes `fresh`'s epsilon and decay (the exploration schedule), keeping the arms' statistics,
  // the round count and the random engine; the arm set must be the same.
  absl::Status Reconfigure(Policy& fresh) override;

  // Selection probabilities at the current state (sums to 1).
  // Every arm's probability of being chosen among the allowed arms (SelectContext::allowed_arms;
  // empty = all): eps spread evenly over them, 1 - eps over the allowed arms of highest mean.
  Vector Probabilities(std::span<const char> allowed = {}) const;
  double CurrentEpsilon() const;

 private:
  EpsilonGreedy(ArmSet arms, double epsilon, double decay, uint64_t seed);
  double BestAllowedMean(std::span<const char> allowed) const;

  ArmSet arms_;
  double epsilon_, decay_;
  Rng rng_;
  int64_t t_ = 0;   // rounds selected
  ArmMeans stats_;  // pulls and empirical mean reward per arm
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeEpsilonGreedy(
    const bandit::v1::PolicyConfig& config, uint64_t seed) {
  return EpsilonGreedy::Make(config, seed);
}

}  // namespace bandit
