// GLB-OMD with a sketched covariance (glb_omd { covariance: COVARIANCE_SKETCHED sketch_size: l }):
// GLB-OMD (Zhang, Xu, Zhao, Sugiyama, Algorithm 1; core/glb/glb_omd.h) for hashed feature
// spaces too large for a d x d matrix. Its H_t = lambda I + sum_s mu'(x_s'theta_{s+1})/g x_s x_s'
// (line 5) is a regularized design matrix of the rows sqrt(mu'/g) x_s, which a Frequent
// Directions sketch B summarizes (core/common/fd_sketch.h: the algorithm, its guarantee and the
// robust compensation c = lambda + (sum of deltas) / 2):
//   H^_t = c I + B'B
//   Select (eq. (6)):   x'theta_t + beta_t(delta) ||x||_{H^_t^{-1}},  beta_t: Theorem 1
//   Update (eq. (3)-(4), Appendix A.3's two steps), with u = H^_t^{-1} x by Woodbury:
//     zeta = theta_t - eta grad_t / (1 + c_t x'u) u                          (28a)
//       (H~_t = H^_t + c_t x x', c_t = eta mu'(x'theta_t)/g, by Sherman-Morrison)
//     theta_{t+1} = argmin_{||theta|| <= S} ||theta - zeta||_{H~_t}           (28b)
//       exactly: H~_t = c I + B~'B~ with B~ = [B; sqrt(c_t) x], so in the eigenbasis of B~B~'
//       it is diagonal (c + s_i^2 along B~'s right singular vectors, c elsewhere) and the
//       multiplier is ProjectOntoBallDiagonal's over those values and the rest of zeta
//     the row sqrt(mu'(x'theta_{t+1})/g) x appended to the sketch              (line 5)
// Until the buffer first fills (2l - 1 updates), and for every l > d, B'B is the paper's sum and
// the policy is GLB-OMD (to the single precision the sketch holds its rows in). The paper's
// regret bound is not claimed for the sketched form; the sketch's error is reported
// (sketch_spectral_error_bound).
// theta is dense over the coordinates seen: a candidate costs O(l * nnz + l^2), an update
// O(l * seen + l^2 * nnz), a projection O(l * seen + l^3), and every l + 1 updates the shrink
// O(l^3 + l^2 * seen). State: the sketch and theta by slot, O(l) per coordinate seen.
// Candidates and the chosen features may be sparse (Policy::TakesSparse) or dense; they are
// scored under the instance's shared lock (PrepareSelect).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/common/fd_sketch.h"
#include "core/common/sparse.h"
#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class GlbOmdSketched final : public Policy {
 public:
  GlbOmdSketched(const GlbParams& p, int sketch_size);

  absl::string_view name() const override { return "glb_omd"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }  // arg max, ties to the lowest index
  bool TakesSparse() const override { return true; }
  bool PreparesSelect() const override { return true; }
  std::unique_ptr<PreparedSelect> PrepareSelect(const SelectContext& ctx) const override;
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override;

  const GlbParams& params() const { return p_; }
  const FdSketch& sketch() const { return sketch_; }
  int64_t rounds() const { return t_; }
  double Beta() const;  // beta_t for the next round, times radius_multiplier

  static constexpr int kMaxDimension = 1 << 26;
  static int64_t MaxStateBytes(int64_t dim, int sketch_size);

 private:
  struct Score {
    double logit, ucb;  // x'theta_t and eq. (6)'s optimistic score
  };
  // Each candidate's scores; INVALID_ARGUMENT naming candidates[i] for a bad one. Reads the
  // state only (PrepareSelect runs it concurrently).
  absl::Status ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const;
  // x's terms, checked (dimension, finite values, ||x|| <= max_feature_norm): INVALID_ARGUMENT
  // naming `field` (built only on an error).
  absl::Status Terms(absl::FunctionRef<std::string()> field, const SparseVector* sparse,
                     const Vector* dense, CoalescedTerms* out, double* norm2);

  GlbParams p_;
  FdSketch sketch_;
  std::vector<double> theta_;  // theta_t by sketch slot (0 at the zero slot; theta_1 = 0)
  int64_t t_ = 0;              // updates so far; the next round is t_ + 1
  uint64_t model_version_ = 0;  // counts changes, for PrepareSelect's results
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit::glb
