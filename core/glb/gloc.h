// GLOC (Jun, Bhargava, Nowak, Willett 2017, "Scalable Generalized Linear Bandits: Online
// Computation and Hashing", Algorithm 1 with ONS-GLM, Algorithm 2). One pass per round:
//   ONS-GLM (their Alg. 2):  A_t = eps I + sum_{s<=t} x_s x_s',
//     theta'_{t+1} = theta_t - l'(x_t'theta_t, y_t) / kappa  A_t^{-1} x_t,
//     theta_{t+1} = argmin_{||theta|| <= S} ||theta - theta'_{t+1}||_{A_t}   (exact, projection.h)
//   conversion (their Alg. 1, Theorem 1):  z_s = x_s'theta_s (the learner's prediction before y_s),
//     V_t = lambda I + sum x_s x_s',  theta_hat_t = V_t^{-1} sum z_s x_s,
//     beta_t = alpha(B_t) + lambda S^2 - (||z||^2 - theta_hat_t' X'z),
//     alpha(B) = 1 + 4B/kappa + 8 R^2/kappa^2 log(2/delta sqrt(1 + 2B/kappa + 4R^4/(kappa^4 delta^2))),
//     B_t = 2 kappa S^2 eps + 1/(2 kappa) sum_s l'(x_s'theta_s, y_s)^2 ||x_s||^2_{A_s^{-1}}
//       (the data-dependent ONS regret bound of their Theorem 3).
//   Arm:  argmax_x x'theta_hat_t + sqrt(beta_t) ||x||_{V_t^{-1}}.
// kappa = inf mu' over |z| <= S (c_mu), R = the reward noise's sub-Gaussian scale.
// Choices: eps = lambda unless set; the paper's R for Poisson is unbounded, we use sqrt(e^S)
// (the variance bound, as the design-matrix GLM-UCB here does).
// State: theta, A, A^{-1}, V^{-1}, X'z, ||z||^2, B -- O(d^2), independent of t: served.
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class Gloc final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  Gloc(const GlbParams& p, double eps);

  absl::string_view name() const override { return "gloc"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_hat_; }

  const Vector& ons_theta() const { return theta_; }
  const Vector& theta_hat() const { return theta_hat_; }
  const Matrix& v_inverse() const { return v_inv_; }
  double Beta() const;  // sqrt(beta_t) times radius_multiplier

 private:
  GlbParams p_;
  double kappa_, noise_;
  Vector theta_;      // ONS iterate theta_t
  Matrix a_, a_inv_;  // A_t
  Matrix v_inv_;      // V_t^{-1}
  Vector xz_;         // sum z_s x_s
  double zz_ = 0.0;   // sum z_s^2
  double b_ = 0.0;    // B_t
  Vector theta_hat_;  // V_t^{-1} X'z
  int64_t t_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeGloc(const bandit::v1::PolicyConfig& config,
                                                        uint64_t seed) {
  return Gloc::Make(config, seed);
}

}  // namespace bandit::glb
