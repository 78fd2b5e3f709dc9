// LinUCB with a sketched covariance (linucb { covariance: COVARIANCE_SKETCHED sketch_size: l }):
// LinUCB (Li, Chu, Langford, Schapire 2010, Algorithm 1 with one shared theta;
// core/classic/linucb.h) for hashed feature spaces too large for a d x d matrix, with the
// design matrix X (one row per update) summarized by a Frequent Directions sketch B:
//
//   SOFUL (Kuzborskij, Cella, Cesa-Bianchi, "Efficient Linear Bandits through Matrix
//   Sketching", AISTATS 2019, Alg. 1): OFUL's A_t = lambda I + X'X replaced by
//   A~_t = c I + B'B, theta = A~_t^{-1} b, score(x) = x'theta + alpha ||x||_{A~_t^{-1}};
//   the sketch is Frequent Directions with a 2l-row buffer (Ghashami, Liberty, Phillips,
//   Woodruff, "Frequent Directions: Simple and Deterministic Matrix Sketching", SIAM J. Comput.
//   2016, Alg. 3.1 "fast FD"): when the buffer is full, B = U S V', delta = s_l^2,
//   B <- sqrt(max(S^2 - delta I, 0)) V', which leaves l - 1 nonzero rows; its guarantee
//   (Theorem 3.1): 0 <= X'X - B'B <= (sum of deltas) I and, for every k < l,
//   sum of deltas <= ||X - X_k||_F^2 / (l - k);
//   and c = lambda + (sum of deltas) / 2, the robust sketch's compensation (Luo, Chen, Zhang,
//   Zhang, "Robust Frequent Directions with Application in Online Learning", JMLR 2019, Alg. 2;
//   the CBSCFD policy of Chen, Luo et al. uses it for LinUCB), which centres c I + B'B within the
//   guarantee's interval around lambda I + X'X.
//
// Until the buffer first fills (2l - 1 updates) B = X and the policy is LinUCB exactly. After,
// theta is the ridge solution for the sketched matrix, not a per-coordinate estimate: the
// directions the sketch keeps are solved jointly and those it shrank away are regularized by c.
//
// Everything runs through Woodbury's identity with G = BB' (at most 2l x 2l), kept with its
// Cholesky factor L L' = G + c I (bordered by one row per update):
//   x'A~^{-1}x = (||x||^2 - ||L^{-1} Bx||^2) / c,  theta'x = (b'x - (L^{-1} Bb)'(L^{-1} Bx)) / c.
// B is held by columns, one per coordinate ever seen (2l single-precision values each), so the
// state grows with the features seen (at most d of them) and a candidate costs O(l * nnz + l^2);
// an update O(l * nnz + l^2), and every l + 1 updates the shrink O(l^3 + l^2 * seen).
// Candidates and the chosen features may be sparse (Policy::TakesSparse) or dense.
// Deterministic: the lowest-index maximiser is chosen, propensity 1. Candidates are scored under
// the instance's shared lock (PrepareSelect).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

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

  int dimension() const { return static_cast<int>(slot_of_.size()); }
  int sketch_size() const { return sketch_size_; }
  // The sketch B as a dense (rows in use) x d matrix, for tests at small d.
  Matrix SketchRows() const;
  // c = lambda + (sum of deltas) / 2, the multiple of I in A~.
  double regularizer() const { return lambda_ + shrinkage_ / 2; }
  // Sum of the shrinks' deltas: the sketch's spectral error bound, ||X'X - B'B||_2 <= it.
  double shrinkage() const { return shrinkage_; }
  int64_t seen_coordinates() const { return static_cast<int64_t>(coordinate_.size()) - 1; }

  static constexpr int kMaxDimension = 1 << 26;
  static constexpr int kMaxSketchSize = 512;
  static constexpr int kDefaultSketchSize = 64;
  // The state at its largest, every coordinate seen (what the memory budget is told).
  static int64_t MaxStateBytes(int64_t dim, int sketch_size);

 private:
  class Prepared;
  struct Score {
    double mean, width;
  };
  // Each candidate's mean and width; INVALID_ARGUMENT naming candidates[i] for a bad one.
  absl::Status ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const;
  // The mean and width of one candidate: its terms (an index may repeat) and ||x||^2.
  Score ScoreTerms(const uint32_t* index, const double* value, size_t n, double norm2) const;
  // Solves L z = v in place over the rows in use.
  void ForwardSolve(double* v) const;
  // The shrink of a full buffer (Frequent Directions, Alg. 3.1 lines 5-7).
  void Shrink();
  // q = L^{-1} B b, kept with every change.
  void RefreshCrossTerm();
  float* Column(uint32_t slot) { return &columns_[static_cast<size_t>(slot) * buffer_]; }
  const float* Column(uint32_t slot) const {
    return &columns_[static_cast<size_t>(slot) * buffer_];
  }

  double lambda_;
  double alpha_;
  int sketch_size_;  // l
  int buffer_;       // 2l rows
  int rows_ = 0;     // rows of B in use
  double shrinkage_ = 0;  // sum of deltas
  int64_t updates_ = 0;
  int64_t shrinks_ = 0;
  uint64_t model_version_ = 0;  // counts changes, for PrepareSelect's results
  // Coordinates seen, by slot; each slot's column of B (buffer_ floats) and b entry. Slot 0 is
  // every unseen coordinate's: its column and b entry stay zero, so scoring needs no branch.
  static constexpr uint32_t kZeroSlot = 0;
  static constexpr uint32_t kNoCoordinate = ~uint32_t{0};
  std::vector<uint32_t> slot_of_;  // d entries
  std::vector<uint32_t> coordinate_;
  std::vector<float> columns_;
  std::vector<double> b_;
  Matrix gram_;      // G = BB' (buffer_ x buffer_, the rows in use filled)
  Matrix cholesky_;  // L, lower, L L' = G + c I over the rows in use
  Vector bb_;        // B b
  Vector cross_;     // L^{-1} B b
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch of Update
};

}  // namespace bandit
