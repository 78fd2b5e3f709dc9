// Exact GP-UCB (Srinivas et al. 2010; eq. 1-3 of Calandriello et al. 2019) over a finite arm set,
// with per-arm counters so that one step costs O(p^3 + A p^2), p = distinct pulled arms
// <= min(t, A) (the paper's "O(min(t, A)^3)" baseline). The radius is the eps -> 0 limit of
// BKB's Theorem 4.1 radius ("if we send eps to 0 ... BKB transforms back into exact GP-UCB"),
// so the two are compared with the same confidence rule.
#pragma once

#include <memory>

#include "core/kernel/kernel_ucb.h"

namespace bandit {

// Exact GP posterior (eq. 1, eq. 2 / lambda) of every column of X given per-arm pull counts
// n_i and reward sums s_i. With P the pulled arms and D = diag(sqrt(n_P)):
//   (K_t + lambda I)^{-1} over the t pulls (with repeats) reduces by the push-through identity to
//   mu(x)      = (D k_P(x))^T (D K_P D + lambda I)^{-1} (s_P / sqrt(n_P))
//   sigma^2(x) = (k(x,x) - |L^{-1} D k_P(x)|^2) / lambda,  L L^T = D K_P D + lambda I.
void ExactGpPosterior(const Kernel& kernel, const Matrix& X, const Vector& kdiag,
                      const Vector& counts, const Vector& sums, double lambda, Vector* mean,
                      Vector* var);

class GpUcb final : public KernelUcbPolicy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  absl::string_view name() const override { return "gp_ucb"; }

 protected:
  void ComputePosterior(Vector* mean, Vector* var) const override;

 private:
  GpUcb(ArmSet arms, KernelUcbParams params, uint64_t seed)
      : KernelUcbPolicy(std::move(arms), params, seed) {}
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeGpUcb(const bandit::v1::PolicyConfig& config,
                                                         uint64_t seed) {
  return GpUcb::Make(config, seed);
}

}  // namespace bandit
