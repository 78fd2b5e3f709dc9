// A Frequent Directions sketch B of a stream of sparse rows over [0, d), and the Woodbury algebra
// of c I + B'B that LinUCB's and GLB-OMD's sketched covariances (core/classic/linucb_sketched.h,
// core/glb/glb_omd_sketched.h) score and step with.
//
// The sketch (Ghashami, Liberty, Phillips, Woodruff, "Frequent Directions: Simple and
// Deterministic Matrix Sketching", SIAM J. Comput. 2016, Alg. 3.1 "fast FD"): rows are appended
// to a buffer of 2l; when it is full, B = U S V', delta = s_l^2 (the l-th largest),
// B <- sqrt(max(S^2 - delta I, 0)) V', which leaves l - 1 nonzero rows. Theorem 3.1: with X the
// rows appended, 0 <= X'X - B'B <= (sum of deltas) I and, for every k < l,
// sum of deltas <= ||X - X_k||_F^2 / (l - k).
// The regularizer c = lambda + (sum of deltas) / 2 is the robust sketch's (Luo, Chen, Zhang,
// Zhang, "Robust Frequent Directions with Application in Online Learning", JMLR 2019, Alg. 2),
// which centres c I + B'B within the guarantee's interval around lambda I + X'X.
//
// Woodbury with G = BB' (at most 2l x 2l) and its Cholesky factor L L' = G + c I (bordered by
// one row per append, refactored after a shrink):
//   (c I + B'B)^{-1} = (I - B'(G + c I)^{-1} B) / c,
//   so  x'(cI + B'B)^{-1}x = (||x||^2 - ||L^{-1}Bx||^2) / c.
// B is held by columns, one per coordinate ever seen (2l single-precision values each), in
// slots; slot 0 is every unseen coordinate's (a zero column), so that a caller's per-slot arrays
// read unseen coordinates as zero without a branch. G is recomputed from the values held after
// each shrink, so the identity holds for the sketch as stored.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/sparse.h"
#include "core/policy.h"
#include "core/state_io.h"

namespace bandit {

class FdSketch {
 public:
  static constexpr uint32_t kZeroSlot = 0;
  static constexpr int kMaxSketchSize = 512;
  static constexpr int kDefaultSketchSize = 64;

  // A policy config's sketch_size (`field`, e.g. "linucb.sketch_size"): the default when unset,
  // INVALID_ARGUMENT when it is outside 2..kMaxSketchSize or set on a covariance that is not
  // sketched.
  static absl::StatusOr<int> SizeFromConfig(absl::string_view field, bool sketched,
                                            std::optional<int> size);
  // The size a footprint is declared for, before the config is checked: in range.
  static int SizeForFootprint(std::optional<int> size);

  FdSketch(int64_t dimension, int sketch_size, double lambda);

  int64_t dimension() const { return static_cast<int64_t>(slot_of_.size()); }
  double lambda() const { return lambda_; }
  int sketch_size() const { return sketch_size_; }
  int rows() const { return rows_; }
  // c = lambda + (sum of deltas) / 2.
  double regularizer() const { return lambda_ + shrinkage_ / 2; }
  // Sum of the shrinks' deltas: ||X'X - B'B||_2 <= it.
  double shrinkage() const { return shrinkage_; }
  int64_t shrinks() const { return shrinks_; }
  // Slots in use, the zero slot included; coordinates seen = slots() - 1.
  size_t slots() const { return coordinate_.size(); }
  uint32_t SlotOf(uint32_t coordinate) const { return slot_of_[coordinate]; }
  uint32_t CoordinateOf(uint32_t slot) const { return coordinate_[slot]; }
  const float* Column(uint32_t slot) const {
    return &columns_[static_cast<size_t>(slot) * buffer_];
  }

  // y = B x over the rows in use (y has rows() entries) for x's terms (an index may repeat), and
  // returns sum_k by_slot[slot of index k] * value k: the dot product of x with a per-slot
  // vector the caller keeps (zero at the zero slot).
  double Times(const uint32_t* index, const double* value, size_t n, const double* by_slot,
               double* y) const;
  // Times for every candidate of a Select: ys[i] (rows() entries, at ys + i * rows()) = B x_i and
  // dots[i] = by_slot'x_i, for checked sparse vectors. The terms that every candidate has at the
  // same position with the same index and value (in a named Select, the context's own features
  // and their interactions, ~40 % of the terms with `-q ::`) are multiplied once.
  void TimesAll(std::span<const SparseVector> xs, const double* by_slot, double* ys,
                double* dots) const;
  // y = B v for a per-slot vector v (over every slot seen).
  void TimesBySlot(const std::vector<double>& v, double* y) const;
  // v <- L^{-1} v and v <- L^{-T} v over the rows in use.
  void ForwardSolve(double* v) const;
  void BackwardSolve(double* v) const;

  // What appending a row changes, computed from the sketch as it is (Prepare), applied by
  // Append. INVALID_ARGUMENT from Prepare, nothing changed, for a row single precision cannot
  // hold or whose sums overflow.
  struct Row {
    std::vector<double> gram;      // B x~, the row's Gram entries with the rows in use
    std::vector<double> cholesky;  // L^{-1} B x~
    double norm2 = 0;              // ||x~||^2
    double eta = 0;                // the factor's new diagonal entry
  };
  // x: one term per index (coalesced), scaled by `scale` (the row appended is scale * x, held
  // in single precision as x~).
  absl::Status Prepare(const CoalescedTerms& x, double scale, Row* row) const;
  // Gives x's coordinates slots (zero columns) if they have none: for a caller whose per-slot
  // values reach coordinates before the sketch's rows do.
  void AddCoordinates(const CoalescedTerms& x);
  // Appends the prepared row (its coordinates take slots if new). Returns true when the buffer
  // filled and the sketch shrank (the rows and the regularizer changed).
  bool Append(const CoalescedTerms& x, double scale, const Row& row);

  // G = BB' over the rows in use.
  Matrix Gram() const { return gram_.topLeftCorner(rows_, rows_); }
  // The sketch as a dense rows() x d matrix, for tests at small d.
  Matrix Rows() const;
  int64_t bytes() const;
  // The state at its largest, every coordinate seen.
  static int64_t MaxBytes(int64_t dimension, int sketch_size);

  // Keys "sketch_*". Restore checks shapes, finiteness and coordinates, and changes nothing on
  // an error.
  void Save(StateWriter& w) const;
  absl::Status Restore(const StateReader& r, absl::string_view who);

 private:
  static constexpr uint32_t kNoCoordinate = ~uint32_t{0};
  float* MutableColumn(uint32_t slot) { return &columns_[static_cast<size_t>(slot) * buffer_]; }
  void Shrink();

  double lambda_;
  int sketch_size_;  // l
  int buffer_;       // 2l rows
  int rows_ = 0;
  double shrinkage_ = 0;
  int64_t shrinks_ = 0;
  std::vector<uint32_t> slot_of_;  // d entries
  std::vector<uint32_t> coordinate_;
  std::vector<float> columns_;
  Matrix gram_;      // G = BB' (buffer_ x buffer_, the rows in use filled)
  Matrix cholesky_;  // L, lower, L L' = G + c I over the rows in use
};

}  // namespace bandit
