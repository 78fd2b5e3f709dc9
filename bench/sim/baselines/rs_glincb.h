// RS-GLinCB (Sawarni, Das, Barman, Sinha 2024, "Generalized Linear Bandits with Limited
// Adaptivity", Algorithm 2). Constants as in the paper (25 and 150, also in the GLB-OMD
// authors' baseline code); kappa = 1/c_mu over ||theta|| <= S.
//   gamma = 25 R S sqrt(d log(T/delta)),  warm-up threshold 1/(gamma^2 kappa).
//   Switching criterion I (warm-up): if max_x ||x||^2_{V^{-1}} >= 1/(gamma^2 kappa), play that
//     arm; then V += x x', and theta_o = regularized MLE (lambda) on the warm-up rounds.
//   Otherwise: keep the arms with UCB_o(x) >= max_y LCB_o(y), bonus gamma sqrt(kappa) ||x||_{V^{-1}}
//     around x'theta_o; play argmax x'theta_tau + 150 sqrt(d log(T/delta)) ||x||_{H_tau^{-1}};
//     then H += mu'(x'theta_o)/e x x' and, on Switching criterion II det(H) > 2 det(H_tau),
//     H_tau = H and theta_tau = norm-constrained MLE on the non-warm-up rounds.
// Choices: the two criteria are evaluated in Update (the same moment in time as the start of
// the next round in the paper), so Select only reads; a round is a warm-up round iff its arm's
// ||x||^2_{V^{-1}} reaches the threshold, which is what the paper's rule implies. lambda = d
// (GLB-OMD Appendix E.1) or the paper's d log(T/delta) with theory_lambda. R is the reward bound
// (logistic 1, Poisson 100 as in the GLB-OMD paper).
// State: both sets of stored rounds (MLE refits at O(log T) switches): grows with t, sim-only.
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/glb/mle.h"
#include "bandit/v1/sim_policy.pb.h"
#include "core/policy.h"

namespace bandit::glb {

class RsGlincb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::SimPolicyConfig& config,
                                                      uint64_t seed);
  RsGlincb(const GlbParams& p, int64_t horizon, double reward_bound);

  absl::string_view name() const override { return "rs_glincb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_tau_; }

  double WarmupThreshold() const { return 1.0 / (gamma_ * gamma_ * kappa_); }
  int64_t warmup_rounds() const { return warm_.size(); }
  int64_t switches() const { return switches_; }
  const Vector& theta_tau() const { return theta_tau_; }
  const Vector& theta_o() const { return theta_o_; }

 private:
  GlbParams p_;
  double kappa_, gamma_, ucb_radius_;
  GlmHistory warm_, main_;  // warm-up rounds / the other rounds
  Matrix v_inv_;            // V^{-1}, V = lambda I + sum_{warm-up} x x'
  Matrix h_, h_tau_inv_;    // H and H_tau^{-1}
  double logdet_h_tau_ = 0.0;
  Vector theta_o_, theta_tau_;
  int64_t switches_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeRsGlincb(const bandit::v1::SimPolicyConfig& c,
                                                            uint64_t seed) {
  return RsGlincb::Make(c, seed);
}

}  // namespace bandit::glb
