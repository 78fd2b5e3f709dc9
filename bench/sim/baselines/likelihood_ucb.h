// Optimistic GLB policies over a likelihood-ratio confidence set (the MLE-based baselines of
// the GLB-OMD paper's Section 5):
//
//   OFUGLB (Lee, Yun, Jun 2024, "A Unified Confidence Sequence for Generalized Linear Models,
//   with Applications to Bandits"; as restated in GLB-OMD eq. (44)):
//     theta_hat_t = argmin_{||theta|| <= S} L_t(theta)            (unregularized, norm-constrained)
//     C_t = {theta in Theta : L_t(theta) - L_t(theta_hat_t) <= beta_t^2},
//     beta_t^2 = log(1/delta) + d log(max(e, 2 e S L_t / d)),
//     L_t (Lipschitz constant of L_t over Theta): Poisson e^S t + log(d/delta) (GLB-OMD eq. (44));
//     logistic (1 + S/2)(t - 1) (Bernoulli instance of their Theorem 3.1, as in the authors' code).
//   OFULog-r (Abeille, Faury, Calauzenes 2021, "Instance-Wise Minimax-Optimal Algorithms for
//   Logistic Bandits", Algorithm 1 with the convex relaxation C_t of their Section 4):
//     theta_hat_t = argmin L_t^lambda(theta),  L^lambda = L + lambda_t/2 ||theta||^2,
//     C_t = {theta in Theta : L_t^lambda(theta) - L_t^lambda(theta_hat_t) <= beta_t^2},
//     beta_t = gamma_t + gamma_t^2 / lambda_t,
//     gamma_t = sqrt(lambda_t)(S + 1/2) + 2/sqrt(lambda_t) (log(1/delta) + d log 2
//               + d/2 log(1 + t / (4 d lambda_t)))          (Faury et al. 2020, Theorem 1),
//     lambda_t = lambda log(1 + t), lambda = d            (GLB-OMD Appendix E.1, offline methods).
// Both pick X_t = argmax_x max_{theta in C_t} x'theta (mu is increasing), solved exactly per arm
// (bench/sim/baselines/likelihood_set.h). `radius_multiplier` scales beta_t. State: every past round,
// O(t d), and O(t d^2) work per arm per round: bandit-sim only, not served.
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/glb/mle.h"
#include "bandit/v1/sim_policy.pb.h"
#include "core/policy.h"

namespace bandit::glb {

class LikelihoodUcb final : public Policy {
 public:
  enum class Kind { kOfuglb, kOfulogR };
  static absl::StatusOr<std::unique_ptr<Policy>> MakeOfuglb(const bandit::v1::SimPolicyConfig& c,
                                                            uint64_t seed);
  static absl::StatusOr<std::unique_ptr<Policy>> MakeOfulogR(const bandit::v1::SimPolicyConfig& c,
                                                             uint64_t seed);
  LikelihoodUcb(Kind kind, const GlbParams& p);

  absl::string_view name() const override { return kind_ == Kind::kOfuglb ? "ofuglb" : "ofulog_r"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }  // arg max, ties to the lowest index
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  const Vector& theta() const { return theta_; }
  const GlmHistory& history() const { return data_; }
  // Regularizer of the current likelihood (0 for OFUGLB).
  double Lambda() const;
  // beta_t^2 (times radius_multiplier^2) for the next round: the allowed likelihood excess.
  double Beta2() const;
  // True when theta lies in the current confidence set C_t (for tests and the Fig. 3 plots).
  bool InConfidenceSet(const Vector& theta) const;
  // Optimistic value max_{theta in C_t} x'theta.
  double OptimisticValue(const Vector& x) const;

 private:
  void Refit();

  Kind kind_;
  GlbParams p_;
  GlmHistory data_;
  Vector theta_;        // theta_hat_t
  double f_hat_ = 0.0;  // likelihood at theta_hat_t
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeOfuglb(const bandit::v1::SimPolicyConfig& c,
                                                          uint64_t seed) {
  return LikelihoodUcb::MakeOfuglb(c, seed);
}
inline absl::StatusOr<std::unique_ptr<Policy>> MakeOfulogR(const bandit::v1::SimPolicyConfig& c,
                                                           uint64_t seed) {
  return LikelihoodUcb::MakeOfulogR(c, seed);
}

}  // namespace bandit::glb
