// Exact GP-UCB on per-request candidates: the paper's baseline, which keeps every pull.
// With X_t the t pulls, y_t their rewards and L L^T = K_t + lambda I (Cholesky, grown by one row
// per pull: l = L^{-1} k_t(x_t), c = sqrt(k(x_t, x_t) + lambda - |l|^2)):
//   mu_t(x)      = k_t(x)^T (K_t + lambda I)^{-1} y_t = (L^{-1} k_t(x))^T u,   u = L^{-1} y_t  (eq. 1)
//   sigma_t^2(x) = (k(x,x) - |L^{-1} k_t(x)|^2) / lambda                                 (eq. 2)
//   sum_s sigma_t^2(x_s) = tr(K_t (K_t + lambda I)^{-1}) = t - lambda |L^{-1}|_F^2        (eq. 5)
// u and |L^{-1}|_F^2 are updated with the new row (the new row of L^{-1} is
// (-l^T L^{-1}, 1) / c, so |L^{-1}|_F^2 grows by (|L^{-T} l|^2 + 1) / c^2).
// Cost: O(t^2) per Update, O(n t^2) per Select over n candidates; memory O(t^2 + t d), the
// factor's storage growing by doubling up to max_pulls x max_pulls.
// Snapshots hold the pulls only; Restore rebuilds L by replaying them (O(t^3), bit-identical).
#pragma once

#include <memory>

#include "core/kernel/candidate_kernel_ucb.h"

namespace bandit {

class CandidateGpUcb final : public CandidateKernelUcb {
 public:
  // Served caps on the pulls kept. The factor is held at most at max_pulls x max_pulls doubles:
  // 32 MB at the default 2000, 200 MB at the largest cap 5000 (the horizon of the reproduction in
  // docs/reproductions/bkb.md), where one Select over 50 candidates also costs ~0.1 s of CPU (O(n t^2)).
  // A production user with more pulls than that wants bkb.
  static constexpr int64_t kDefaultMaxPulls = 2000;
  static constexpr int64_t kMaxMaxPulls = 5000;

  // config.gp_ucb() has `dimension` set; `params` already read.
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      const KernelUcbParams& params, uint64_t seed);
  absl::string_view name() const override { return "gp_ucb"; }
  void Posterior(const Eigen::Ref<const Matrix>& X, Vector* mean, Vector* var) const override;
  double SumPulledVariance() const override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;

  int64_t max_pulls() const { return max_pulls_; }

 protected:
  absl::Status Observe(const Vector& x, double y) override;
  void ExtraSummary(std::vector<std::pair<std::string, double>>* out) const override;

 private:
  CandidateGpUcb(int dim, KernelUcbParams params, int64_t max_pulls, uint64_t seed);
  void Append(const Vector& x, double y);
  void Clear();

  int64_t max_pulls_;
  Matrix X_;              // d x capacity; the first t columns are the pulls
  Vector y_;              // rewards
  Matrix L_;              // capacity x capacity; lower triangle of the first t x t block is L
  Vector u_;              // L^{-1} y
  double trace_inv_ = 0;  // |L^{-1}|_F^2 = tr((K_t + lambda I)^{-1})
};

}  // namespace bandit
