// Epsilon-greedy over a GLM maximum-likelihood fit (baseline): with probability epsilon a
// uniformly random candidate, otherwise argmax_x x'theta_mle (lowest index on ties). The MLE is
// the same regularized Newton fit as GLM-UCB (lambda_t = lambda log(1 + t)) on all past rounds,
// refit after every Update: O(t d^2) per round, state O(t d) (grows by design).
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/glb/mle.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::glb {

class GlmEpsilonGreedy final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  GlmEpsilonGreedy(const GlbParams& p, double epsilon, uint64_t seed);

  absl::string_view name() const override { return "glm_epsilon_greedy"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  // Takes `fresh`'s epsilon, keeping the fit, its data and the random engine; every other
  // parameter must be the same (the fit depends on them).
  absl::Status Reconfigure(Policy& fresh) override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  const Vector& theta() const { return theta_; }

 private:
  GlbParams p_;
  double epsilon_;
  Rng rng_;
  GlmHistory data_;
  Vector theta_;
  int64_t t_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeGlmEpsilonGreedy(
    const bandit::v1::PolicyConfig& config, uint64_t seed) {
  return GlmEpsilonGreedy::Make(config, seed);
}

}  // namespace bandit::glb
