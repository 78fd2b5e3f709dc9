// BKB, Budgeted Kernel Bandits (Calandriello, Carratino, Lazaric, Valko, Rosasco 2019, Fig. 1).
//
// The GP-UCB scores are approximated on a dictionary S_t of inducing arms:
//   Nystrom embedding   z_t(x) = (K_S^{1/2})^+ k_S(x)                              (Section 3.1)
//   V_t = Z_t^T Z_t + lambda I,  Z_t = rows z_t(x_s) of all pulls s <= t
//   mu~_t(x)     = z_t(x)^T V_t^{-1} Z_t^T y_t                                     (eq. 4)
//   sigma~_t^2(x) = (k(x,x) - z_t(x)^T Z_t^T Z_t V_t^{-1} z_t(x)) / lambda  (DTC)  (eq. 4)
//   u~_t(x) = mu~_t(x) + beta~_t sigma~_t(x), beta~_t from Theorem 4.1
// and after each pull the dictionary is redrawn from scratch from the pulled arms: every pull
// x~_i is kept with probability p~ = q_bar * sigma~_t^2(x~_i) (clipped to [0, 1]).
//
// Implementation (Section 3.2): per-arm counters n_i, s_i replace the list of pulls, so
// Z^T Z = sum_i n_i z_i z_i^T and Z^T y = sum_i s_i z_i over the pulled arms. Fig. 1 draws one
// Bernoulli per pull; the arms pulled n_i times are all the same point, so the arm enters S_{t+1}
// iff at least one of its n_i draws succeeds: one uniform per pulled arm against
// 1 - (1 - p~_i)^{n_i} gives the same distribution of the (distinct) dictionary, in
// O(min(t, A)) time. Repeats of a point in S do not change the embedding's inner products
// (pseudo-inverse), so S is stored as one flag per arm slot.
// The embedding uses the eigendecomposition K_S = U diag(l) U^T and z(x) = diag(l)^{-1/2} U^T k_S(x)
// over the eigenvalues l > 1e-10 max(l): it differs from (K_S^{1/2})^+ k_S(x) by the isometry U,
// which leaves every formula of eq. 4 unchanged, and it has r <= m coordinates.
// Cost of one step: O(A m d + A r m + p r^2 + m^3) with p = pulled arms; memory O(A d + m^2).
#pragma once

#include <memory>

#include "core/kernel/kernel_ucb.h"

namespace bandit {

// The Nystrom embedding of Section 3.1 for a dictionary S (columns of Xs), shared by the fixed-arm
// and the candidates form: K_S = U diag(l) U^T, W = diag(l)^{-1/2} U^T over the eigenvalues
// l > 1e-10 max(l), so z(x) = W k_S(x) has r <= m coordinates.
struct NystromEmbedding {
  Matrix Xs;  // d x m dictionary points
  Matrix W;   // r x m
  int rank() const { return static_cast<int>(W.rows()); }
  static NystromEmbedding Make(const Kernel& kernel, Matrix Xs);
  // z(x) for every column of X (r x n).
  Matrix Embed(const Kernel& kernel, const Eigen::Ref<const Matrix>& X) const;
};

// DTC posterior (eq. 4, variance / lambda) of every column of X, given the embedding, the
// Cholesky factor of V = G + lambda I (the lower triangle of L; the rest is not read) and
// w = V^{-1} Z^T y; kdiag = k(x, x) per column.
// With an empty embedding (r = 0): mean 0, variance k(x, x) / lambda.
void DtcPosterior(const Kernel& kernel, const NystromEmbedding& e,
                  const Eigen::Ref<const Matrix>& L, const Vector& w,
                  const Eigen::Ref<const Matrix>& X, const Vector& kdiag, double lambda,
                  Vector* mean, Vector* var);

class Bkb final : public KernelUcbPolicy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  absl::string_view name() const override { return "bkb"; }

  double q_bar() const { return q_bar_; }
  double alpha() const { return (1 + params_.epsilon) / (1 - params_.epsilon); }
  // Dictionary membership per arm slot (1 = in S_t).
  const Vector& dictionary() const { return in_dict_; }
  int dictionary_size() const { return static_cast<int>(in_dict_.sum()); }
  // Per-pull inclusion probability p~_i = min(1, q_bar sigma~_t^2(x_i)) of every arm at the
  // current state (0 for arms never pulled), and the per-arm probability 1 - (1 - p~_i)^{n_i}
  // that the next resampling keeps arm i (counts as they would be).
  static Vector PullInclusion(double q_bar, const Vector& var, const Vector& counts);
  static Vector ArmInclusion(double q_bar, const Vector& var, const Vector& counts);
  // Theorem 3.1's q_bar >= 6 alpha log(4 T / delta) / eps^2.
  static double TheoryQBar(double epsilon, double delta, int64_t horizon);

 protected:
  void ComputePosterior(Vector* mean, Vector* var) const override;
  void AfterObserve(int slot, const Vector& var, bool first) override;
  void OnAddArm() override;
  void OnRemoveArm(int slot) override;
  void SaveExtra(StateWriter& w) const override;
  absl::Status RestoreExtra(const StateReader& r, const ArmSet& arms,
                            const Vector& counts) override;
  void CommitExtra() override { in_dict_ = std::move(staged_dict_); }
  int64_t ExtraBytes() const override { return in_dict_.size() * sizeof(double) + sizeof(q_bar_); }
  void ExtraSummary(std::vector<std::pair<std::string, double>>* out) const override;
  void ExtraDiagnostics(Decision* d) const override;

 private:
  Bkb(ArmSet arms, KernelUcbParams params, double q_bar, uint64_t seed);

  double q_bar_;
  Vector in_dict_;  // 1 when the arm is in the dictionary S_t
  Vector staged_dict_;
  mutable int rank_ = 0;  // embedding dimension r of the last posterior computation
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeBkb(const bandit::v1::PolicyConfig& config,
                                                       uint64_t seed) {
  return Bkb::Make(config, seed);
}

}  // namespace bandit
