// UCB1 over a finite arm set (Auer, Cesa-Bianchi, Fischer 2002, Fig. 1):
//   play each arm once (untried arms first, in slot order); then play
//   argmax_i  mean_i + c * sqrt(2 ln n / n_i)
// where n is the number of rewards received so far and n_i those of arm i. c = 1 is the paper.
// Deterministic: ties go to the lowest slot, propensity 1. "Tried" means at least one reward was
// received for the arm (decisions still waiting for their reward do not count).
#pragma once

#include <limits>
#include <memory>

#include "core/arms.h"
#include "core/policy.h"

namespace bandit {

class Ucb1 final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);

  // Score reported for an untried arm (its index is +infinity in the paper; JSON has no
  // infinity, so the largest finite double stands in for it).
  static constexpr double kUntriedScore = std::numeric_limits<double>::max();

  absl::string_view name() const override { return "ucb1"; }
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
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return stats_.means; }

  // UCB index of every arm at the current state (kUntriedScore for untried arms).
  Vector Indices() const;

 private:
  Ucb1(ArmSet arms, double c);

  ArmSet arms_;
  double c_;
  int64_t n_ = 0;       // rewards received (all arms, including removed ones)
  int64_t rounds_ = 0;  // Select calls
  ArmMeans stats_;      // pulls and empirical mean reward per arm
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeUcb1(const bandit::v1::PolicyConfig& config,
                                                        uint64_t seed) {
  return Ucb1::Make(config, seed);
}

}  // namespace bandit
