// DOMD-GLB (Lee & Oh: "Nonstationary Generalized Linear Bandits with Discounted Online Mirror
// Descent", Algorithm 1). Contextual over candidate vectors.
//
//   A_t = gamma H_t + (1 - gamma) lambda I                                      (line 4)
//   Select (eq. (3)):  x_t = argmax_x  x'theta_t + beta_t(delta) ||x||_{H_t^{-1}}, beta_t: Theorem 1
//   Update (eq. (1)):  theta_{t+1} = argmin_{||theta||<=S} l~_t(theta) + 1/(2 eta) ||theta - theta_t||_{A_t}^2
//     solved as the two-step update of GLB-OMD Appendix A.3 with A_t in place of H_t:
//     H~ = A_t + eta grad^2 l_t(theta_t), zeta = theta_t - eta H~^{-1} grad l_t(theta_t),
//     theta_{t+1} = H~-norm projection of zeta onto the ball (one eigendecomposition of H~
//     serves both the solve and the projection).
//   H_{t+1} = A_t + mu'(x_t'theta_{t+1}) / g(tau) x_t x_t'                        (line 7)
// A_t is not a rank-one change of H_t, so H_{t+1}^{-1} is refactorized (O(d^3)) every round.
// gamma: explicit, or Theorem 2's tuned value (horizon + path_length) or Theorem 3's
// (horizon + num_changes). State O(d^2), per round O(d^3 + d^2 * arms).
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class DomdGlb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  DomdGlb(const GlbParams& p, double gamma);

  absl::string_view name() const override { return "domd_glb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }  // arg max, ties to the lowest index
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  const GlbParams& params() const { return p_; }
  double gamma() const { return gamma_; }
  const Vector& theta() const { return theta_; }
  const Matrix& h() const { return h_; }
  const Matrix& h_inverse() const { return h_inv_; }
  Matrix PreUpdateMatrix() const;  // A_t
  double Beta() const;             // beta_t for the next round, times radius_multiplier

 private:
  GlbParams p_;
  double gamma_;
  Vector theta_;
  Matrix h_, h_inv_;
  int64_t t_ = 0;
};

// Theorem 2: gamma = 1 - min{1 - 1/T, max{1/T, sqrt(sqrt(k_mu) P_T / (d T))}}.
double DomdGammaDrift(double k_mu, int d, int64_t T, double path_length);
// Theorem 3: gamma = 1 - min{1 - 1/T, max{1/T, (Gamma_T sqrt(c_mu) / (k_mu d T))^{2/3}}}.
double DomdGammaPiecewise(double k_mu, double c_mu, int d, int64_t T, int64_t changes);
// Theorems 2-3's lambda = max{6 eta R k_mu S / g, 32 alpha d R^2 / 7, c_mu / g}, alpha = 3 eta / 2.
double DomdTheoryLambda(const GlbParams& p);
// Theorem 1's beta_t(delta) (without the multiplier).
double DomdBeta(const GlbParams& p, double gamma, int64_t t);

inline absl::StatusOr<std::unique_ptr<Policy>> MakeDomdGlb(const bandit::v1::PolicyConfig& config,
                                                           uint64_t seed) {
  return DomdGlb::Make(config, seed);
}

}  // namespace bandit::glb
