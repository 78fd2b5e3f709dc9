// LinUCB with a sketched covariance (linucb { covariance: COVARIANCE_SKETCHED sketch_size: l }):
// LinUCB (Li, Chu, Langford, Schapire 2010, Algorithm 1 with one shared theta;
// core/classic/linucb.h) for hashed feature spaces too large for a d x d matrix, with the
// design matrix X (one row per update) summarized by a Frequent Directions sketch B:
//
//   SOFUL (Kuzborskij, Cella, Cesa-Bianchi, "Efficient Linear Bandits through Matrix
//   Sketching", AISTATS 2019, Alg. 1): OFUL's A_t = lambda I + X'X replaced by
//   A~_t = c I + B'B, theta = A~_t^{-1} b, score(x) = x'theta + alpha ||x||_{A~_t^{-1}};
//   the sketch is Frequent Directions with a 2l-row buffer (Ghashami, Liberty, Phillips,
//   Woodruff 2016, Alg. 3.1) and c = lambda + (sum of the shrinks' deltas) / 2, the robust
//   sketch's compensation (Luo, Chen, Zhang, Zhang 2019; the CBSCFD policy of Chen, Luo et al.
//   uses it for LinUCB): core/common/fd_sketch.h has the algorithm and its guarantee.
//
// Until the buffer first fills (2l - 1 updates) B = X and the policy is LinUCB exactly. After,
// theta is the ridge solution for the sketched matrix, not a per-coordinate estimate: the
// directions the sketch keeps are solved jointly and those it shrank away are regularized by c.
//
// The sketch and its Woodbury algebra are core/common/fd_sketch.h's:
//   x'A~^{-1}x = (||x||^2 - ||L^{-1} Bx||^2) / c,  theta'x = (b'x - (L^{-1} Bb)'(L^{-1} Bx)) / c,
// with L L' = BB' + c I. The state grows with the features seen (at most d of them: 2l floats
// each); a candidate costs O(l * nnz + l^2), an update O(l * nnz + l^2), and every l + 1 updates
// the shrink O(l^3 + l^2 * seen).
// Candidates and the chosen features may be sparse (Policy::TakesSparse) or dense.
// Deterministic: the lowest-index maximiser is chosen, propensity 1. Candidates are scored under
// the instance's shared lock (PrepareSelect).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/common/fd_sketch.h"
#include "core/common/sparse.h"
#include "core/policy.h"

namespace bandit {

class LinUcbSketched final : public Policy {
 public:
  LinUcbSketched(int dim, double lambda, double alpha, int sketch_size);

  absl::string_view name() const override { return "linucb"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }
  bool TakesSparse() const override { return true; }
  bool PreparesSelect() const override { return true; }
  std::unique_ptr<PreparedSelect> PrepareSelect(const SelectContext& ctx) const override;
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  // theta = A~^{-1} b, dense (O(d + l * seen)).
  Vector Weights() const override;

  int dimension() const { return static_cast<int>(sketch_.dimension()); }
  const FdSketch& sketch() const { return sketch_; }

  static constexpr int kMaxDimension = 1 << 26;
  // The state at its largest, every coordinate seen (what the memory budget is told).
  static int64_t MaxStateBytes(int64_t dim, int sketch_size);

 private:
  struct Score {
    double mean, width;
  };
  // Each candidate's mean and width; INVALID_ARGUMENT naming candidates[i] for a bad one.
  absl::Status ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const;
  // The mean and width of one candidate from B x (solved in place), b'x and ||x||^2.
  Score ScoreOf(double* bx_times, double bx, double norm2) const;
  // B b from b (after a shrink), then cross_ = L^{-1} B b.
  void RefreshCrossTerm(bool recompute_bb);

  double alpha_;
  FdSketch sketch_;
  std::vector<double> b_;  // b = sum r x, by sketch slot (0 at the zero slot)
  Vector bb_;              // B b
  Vector cross_;           // L^{-1} B b
  int64_t updates_ = 0;
  uint64_t model_version_ = 0;  // counts changes, for PrepareSelect's results
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch of Update
};

}  // namespace bandit
