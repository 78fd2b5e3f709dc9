// GLB-OMD (Zhang, Xu, Zhao, Sugiyama: "Generalized Linear Bandits: Almost Optimal Regret with
// One-Pass Update", Algorithm 1). Contextual over candidate vectors (may change every request).
//
//   Select (eq. (6)):  X_t = argmax_x  x'theta_t + beta_t(delta) ||x||_{H_t^{-1}},  beta_t: Theorem 1
//   Update (eq. (3)-(4)) as the two-step update of Appendix A.3:
//     H~_t = H_t + eta * grad^2 l_t(theta_t),  H~_t^{-1} by Sherman-Morrison from H_t^{-1}
//     zeta = theta_t - eta H~_t^{-1} grad l_t(theta_t)                              (28a)
//     theta_{t+1} = argmin_{||theta|| <= S} ||theta - zeta||_{H~_t}                (28b)
//     H_{t+1} = H_t + mu'(x'theta_{t+1}) / g(tau) x x',  H_{t+1}^{-1} by Sherman-Morrison (line 5)
// State: theta, H, H^{-1}, t -- O(d^2), independent of the number of rounds. Per round:
// O(d^2 * arms) to select, O(d^2) to update plus O(d^3) when the projection is active.
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class GlbOmd final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  explicit GlbOmd(const GlbParams& p);

  absl::string_view name() const override { return "glb_omd"; }
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
  const Vector& theta() const { return theta_; }
  const Matrix& h() const { return h_; }
  const Matrix& h_inverse() const { return h_inv_; }
  int64_t rounds() const { return t_; }
  double Beta() const;  // beta_t for the next round, times radius_multiplier

 private:
  GlbParams p_;
  Vector theta_;   // theta_t (theta_1 = 0)
  Matrix h_;       // H_t
  Matrix h_inv_;   // H_t^{-1}
  int64_t t_ = 0;  // updates so far; the next round is t_ + 1
};

// Theorem 1's lambda = max{14 d eta R^2, 6 eta R S L_mu / g(tau)}.
double GlbOmdTheoryLambda(const GlbParams& p);

inline absl::StatusOr<std::unique_ptr<Policy>> MakeGlbOmd(const bandit::v1::PolicyConfig& config,
                                                          uint64_t seed) {
  return GlbOmd::Make(config, seed);
}

}  // namespace bandit::glb
