// GLM-UCB baseline (Filippi, Cappe, Garivier, Szepesvari 2010): maximum likelihood on all past
// rounds (or, with `window` > 0, on the last `window` rounds: the sliding-window nonstationary
// baseline, cf. Russac et al. 2020), then an optimistic rule over the candidates:
//   LOCAL_HESSIAN (default):  x'theta_mle + beta_t ||x||_{W_t^{-1}},
//       W_t = lambda_t I + sum_s mu'(x_s'theta_mle)/g x_s x_s',  beta_t of GLB-OMD Theorem 1
//       -- the MLE counterpart of GLB-OMD's rule, so the comparison isolates the estimator.
//   DESIGN_MATRIX:  x'theta_mle + rho_t ||x||_{V_t^{-1}},  V_t = lambda_t I + sum_s x_s x_s',
//       rho_t = sigma / c_mu * sqrt(d/2 log(1 + 2n/d) + log(1/delta))  (kappa-scaled, as in
//       Filippi et al. / Li, Lu, Zhou 2017).
//   FILIPPI:  mu(x'theta_mle) + rho(t) ||x||_{V_t^{-1}} -- Filippi et al.'s own rule and radius
//       (Algorithm 1, Theorem 1), rho(t) = 2 k_mu kappa R_max / c_mu sqrt(2 d log t log(2dT/delta)).
// lambda_t = lambda * log(1 + t) (GLB-OMD Appendix E.1 for offline methods; t = n + 1 with n the
// number of stored rounds). The MLE is refit after every Update: O(n d^2) per Newton iteration,
// state O(n d) -- it grows with the rounds by design (bounded by the window when set).
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/glb/mle.h"
#include "core/policy.h"

namespace bandit::glb {

class GlmUcb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  GlmUcb(const GlbParams& p, int64_t window, bandit::v1::GlmUcbConfig::Bonus bonus);

  absl::string_view name() const override { return "glm_ucb"; }
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
  double Radius() const;
  const Matrix& w_inverse() const { return w_inv_; }
  double LambdaT() const;

 private:
  void Refit();

  GlbParams p_;
  bandit::v1::GlmUcbConfig::Bonus bonus_;
  int64_t horizon_ = 3000;     // FILIPPI only
  double reward_bound_ = 1.0;  // FILIPPI only
  GlmHistory data_;
  Vector theta_;
  Matrix w_inv_;
  int64_t t_ = 0;  // updates so far
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeGlmUcb(const bandit::v1::PolicyConfig& config,
                                                          uint64_t seed) {
  return GlmUcb::Make(config, seed);
}

}  // namespace bandit::glb
