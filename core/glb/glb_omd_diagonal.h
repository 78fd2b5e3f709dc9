// GLB-OMD with a diagonal covariance (glb_omd { covariance: COVARIANCE_DIAGONAL }): an
// approximation of GLB-OMD (Zhang, Xu, Zhao, Sugiyama, Algorithm 1; core/glb/glb_omd.h) for
// hashed feature spaces too large for a d x d matrix. Every matrix of the paper's update is
// replaced by its diagonal, H_t ~ diag(h):
//   Select (eq. (6)):   x'theta_t + beta_t(delta) sqrt(sum_i x_i^2 / h_i),  beta_t: Theorem 1
//   Update (eq. (3)-(4), Appendix A.3's two steps):
//     h~_i = h_i + eta mu'(x'theta_t)/g x_i^2                        (diag of H~_t)
//     zeta_i = theta_i - eta grad_t x_i / h~_i                       (28a), grad_t = l_t'(x'theta_t)
//     theta_{t+1} = argmin_{||theta|| <= S} ||theta - zeta||_{diag(h~)}   (28b): theta_i =
//       h~_i zeta_i / (h~_i + nu), nu >= 0 the multiplier (ProjectOntoBallDiagonal)
//     h_i += mu'(x'theta_{t+1})/g x_i^2                              (line 5)
// The off-diagonal terms of H are dropped, so the step and the width ignore correlations between
// features; the paper's regret bound is not claimed for this form. Cost: O(nnz) per candidate;
// an update is O(nnz), plus O(s) when the projection is active (||zeta|| > S), s the number of
// coordinates ever touched (theta is 0 elsewhere). State O(d).
// Candidates and the chosen features may be sparse (Policy::TakesSparse) or dense.
#pragma once

#include <memory>
#include <string>

#include "absl/functional/function_ref.h"

#include "core/common/sparse.h"
#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class GlbOmdDiagonal final : public Policy {
 public:
  explicit GlbOmdDiagonal(const GlbParams& p);

  absl::string_view name() const override { return "glb_omd"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }  // arg max, ties to the lowest index
  bool TakesSparse() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  const GlbParams& params() const { return p_; }
  const Vector& theta() const { return theta_; }
  const Vector& h_diagonal() const { return h_; }
  int64_t rounds() const { return t_; }
  double Beta() const;  // beta_t for the next round, times radius_multiplier

  // Largest dimension (2^26: 1 GiB of state and scratch at most).
  static constexpr int kMaxDimension = 1 << 26;

 private:
  // The terms of candidate / features `x` (sparse or dense), checked: INVALID_ARGUMENT naming
  // `field` for a wrong dimension, a non-finite value or a norm above max_feature_norm.
  // `field` names the input in errors, built only on one.
  absl::Status Terms(absl::FunctionRef<std::string()> field, const SparseVector* sparse,
                     const Vector* dense, CoalescedTerms* out);

  GlbParams p_;
  Vector theta_;         // theta_t (theta_1 = 0)
  Vector h_;             // diag(H_t)
  int64_t t_ = 0;        // updates so far; the next round is t_ + 1
  double norm2_ = 0;     // ||theta_t||^2, kept with theta (recomputed on Restore)
  // theta_i and 1 / h_i, kept with every change of theta and h (derived, not saved; single
  // precision, set from the same doubles on Restore: core/common/sparse.h).
  DiagonalScorer scorer_;
  CoalescedTerms terms_;  // scratch
  // Coordinates ever touched by an update (theta is 0 elsewhere), in order of first touch: the
  // projection runs over them (saved with the state: at most d).
  std::vector<char> in_support_;
  std::vector<uint32_t> support_;
  std::vector<Eigen::Index> support_pos_;  // scratch: a support coordinate's position
};

}  // namespace bandit::glb
