// LinUCB with a diagonal covariance (linucb { covariance: COVARIANCE_DIAGONAL }): an
// approximation of LinUCB (Li, Chu, Langford, Schapire 2010, Algorithm 1 with one shared theta,
// core/classic/linucb.h) for hashed feature spaces too large for a d x d matrix (2^18 and up).
// The paper's A = lambda I + sum_s x_s x_s' is replaced by its diagonal:
//   a_i = lambda + sum_s x_{s,i}^2,  b_i = sum_s r_s x_{s,i},  theta_i = b_i / a_i,
//   score(x) = sum_i x_i theta_i + alpha * sqrt(sum_i x_i^2 / a_i)       (Alg. 1 line 9, A ~ diag)
// Exact when the features never share a round (one-hot arms); otherwise the cross terms of A are
// dropped, so theta is a per-coordinate ridge estimate rather than the joint one and the width
// ignores correlations. Cost: O(nnz) per candidate and per update, state O(d) (a and b, and
// theta and 1/a kept beside them for scoring, in single precision: core/common/sparse.h).
// Candidates and the chosen features may be sparse (Policy::TakesSparse) or dense. Deterministic:
// the lowest-index maximiser is chosen, propensity 1.
#pragma once

#include <memory>

#include "core/common/sparse.h"
#include "core/policy.h"

namespace bandit {

class LinUcbDiagonal final : public Policy {
 public:
  LinUcbDiagonal(int dim, double lambda, double alpha);

  absl::string_view name() const override { return "linucb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }
  bool TakesSparse() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return b_.array() / a_.array(); }

  int dimension() const { return static_cast<int>(a_.size()); }
  const Vector& a_diagonal() const { return a_; }
  const Vector& b() const { return b_; }

  // Largest dimension (2^26: 1 GiB of state and scratch at most).
  static constexpr int kMaxDimension = 1 << 26;

 private:
  double alpha_;
  Vector a_;  // diag(A)
  Vector b_;  // sum r x
  int64_t updates_ = 0;
  // theta_i = b_i / a_i and 1 / a_i, kept with every change of a and b (derived, not saved;
  // single precision, set from the same doubles on Restore).
  DiagonalScorer scorer_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit
