// Sparse candidate vectors for the diagonal-covariance policies: checks, and the one-term-per-
// coordinate form their formulas read (a SparseVector may repeat an index; its dense form adds
// the repeats up).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "core/policy.h"

namespace bandit {

// One term per coordinate: `index` unique, `value` the coordinate's value in the dense form.
struct CoalescedTerms {
  std::vector<uint32_t> index;
  std::vector<double> value;
  void clear() {
    index.clear();
    value.clear();
  }
};

// INVALID_ARGUMENT naming `field` unless every index is below `dimension` and every value is
// finite, and index and value have the same length.
absl::Status CheckSparse(absl::string_view field, const SparseVector& x, int64_t dimension);
// Whether CheckSparse passes, without building a message (a few cycles per term): callers that
// name the field per candidate build the name only when this fails.
bool SparseIsValid(const SparseVector& x, int64_t dimension);

// ||x||^2 of a sparse vector's dense form (a repeated index's values added up first) if the
// vector is valid (SparseIsValid), else -1: checked and summed in one pass. A bitmap of the
// thread's own (one bit per coordinate; concurrent Selects each use theirs) tells a repeat:
// ||x||^2 = sum_k v_k^2 + 2 sum over pairs k < m of one index v_k v_m, a repeat (hashed terms
// collide a few times per thousand at 2^18) adding its pairs from a scan of the terms before it.
double SquaredNormIfValid(const SparseVector& x, int64_t dimension);

// Coalesces sparse vectors over [0, dimension) in O(nnz) each. A bitmap over the dimension
// (1 bit per coordinate, cleared again after each call) tells a first appearance from a
// repeat; only a vector that repeats an index builds the open-addressing table of positions.
// Hashed features repeat an index rarely (a collision, or the same feature twice), so most
// vectors cost one bit test per term.
class Coalescer {
 public:
  explicit Coalescer(int64_t dimension) : seen_((dimension + 63) / 64, 0) {}
  // A checked sparse vector: its coordinates in order of first appearance, each value the sum
  // of the vector's values at that index in the vector's order (as the dense form adds them).
  void Coalesce(const SparseVector& x, CoalescedTerms* out);
  // A dense vector's nonzero coordinates, in index order.
  static void FromDense(const Vector& x, CoalescedTerms* out);
  int64_t bytes() const { return static_cast<int64_t>(seen_.size() * sizeof(uint64_t)); }

 private:
  friend class DiagonalScorer;  // its one-pass Score uses the bitmap
  // Empties the table of positions, sized for a vector of n terms.
  void StartTable(size_t n);
  // The position in the coalesced output of `index`, for a vector that repeats one.
  uint32_t& PositionOf(uint32_t index);
  // Clears the bitmap's marks of `n` indices, for the next vector. The bitmap holds no other
  // marks (every call leaves it clear), so each index's whole word is zeroed: a store per index
  // instead of a read, modify and write.
  void Unmark(const uint32_t* index, size_t n) {
    for (size_t q = 0; q < n; ++q) seen_[index[q] >> 6] = 0;
  }
  std::vector<uint64_t> seen_;
  struct Slot {
    uint32_t key, pos, stamp;
  };
  std::vector<Slot> table_;
  uint32_t stamp_now_ = 0;
};

// The per-coordinate figures a diagonal-covariance linear model scores a candidate with, its
// weight w_i and inverse precision 1/a_i, side by side so that each term of a candidate reads
// one cache line (at 2^18 coordinates and more the array exceeds the caches).
//
// The figures are held in single precision (as Vowpal Wabbit holds its weights): a float pair
// is 8 bytes, so at 2^18 coordinates the array is 2 MB, the size of one core's L2, instead of
// 4 MB. The caller's state of record stays in double precision (what it saves and updates);
// this is a scoring cache derived from it, set again from the same doubles on Restore, so a
// restored policy scores to the same bits. Each product and each sum is formed in double
// precision from the rounded figures, so the mean and the variance differ from the same
// formulas over the double figures by a relative 2^-24 of their terms (see Score). A figure that
// single precision cannot hold to its relative precision (beyond FLT_MAX, or nonzero below
// FLT_MIN: extreme inputs) marks its pair NaN; a candidate that meets a mark is scored again
// with that coordinate's double figures, which the caller computes from its state of record
// (FiguresOf), so no memory beyond the array is ever taken.
class DiagonalScorer {
 public:
  // A coordinate's figures in double precision.
  struct Figures {
    double weight;
    double inv_precision;
  };
  // The figures the caller passed to Set(i, ...) last, computed again from its state: asked for
  // the coordinates single precision does not hold.
  using FiguresOf = absl::FunctionRef<Figures(uint32_t)>;

  DiagonalScorer(int64_t dimension, double weight, double inv_precision)
      : coord_(dimension), coalescer_(dimension) {
    // Every coordinate starts at the same figures.
    Set(0, weight, inv_precision);
    std::fill(coord_.begin(), coord_.end(), coord_[0]);
  }
  void Set(uint32_t i, double weight, double inv_precision) {
    const float w = static_cast<float>(weight), p = static_cast<float>(inv_precision);
    if (Holds(weight, w) && Holds(inv_precision, p)) {
      coord_[i] = Coord{w, p};
    } else {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      coord_[i] = Coord{nan, nan};  // a term that reads it makes the one-pass sums NaN
    }
  }
  // mean = sum_i x_i w_i, var = sum_i x_i^2 / a_i and norm2 = sum_i x_i^2 over x's coordinates
  // (its repeated indices added up first, as in its dense form, in order of first appearance),
  // with w_i and 1/a_i as held (single precision; see the class comment). Against the same sums
  // over the double figures: |mean error| <= 2^-24 sum_i |x_i w_i| and |var error| <= 2^-24 var,
  // plus the double sums' own rounding.
  // Checks x as it goes: false, and nothing written, unless SparseIsValid(x, dimension()).
  // A vector without repeats (most hashed vectors) is read once: checked, told apart from a
  // repeat and scored in one pass; one with a repeat is coalesced on from the repeat.
  bool Score(const SparseVector& x, FiguresOf figures, double* mean, double* var, double* norm2);
  void Score(const CoalescedTerms& x, FiguresOf figures, double* mean, double* var) const;
  // x's coordinates, as Coalescer::Coalesce.
  void Coalesce(const SparseVector& x, CoalescedTerms* out) { coalescer_.Coalesce(x, out); }
  int64_t dimension() const { return static_cast<int64_t>(coord_.size()); }
  // The scoring pairs and the coalescer's bitmap.
  int64_t bytes() const {
    return dimension() * static_cast<int64_t>(sizeof(Coord)) + coalescer_.bytes();
  }
  // How many coordinates' figures single precision does not hold (scored from FiguresOf):
  // counted from the marks, O(dimension), for tests and diagnostics.
  int64_t wide_count() const {
    return std::count_if(coord_.begin(), coord_.end(), [](const Coord& c) { return IsWide(c); });
  }

 private:
  struct Coord {
    float weight;
    float inv_precision;
  };
  static bool IsWide(const Coord& c) { return std::isnan(c.weight); }
  // Whether f, the single-precision rounding of v, keeps v to single precision's relative
  // precision: finite and, unless v is 0, normal (a subnormal or a flush to 0 loses digits).
  static bool Holds(double v, float f) {
    const float a = std::fabs(f);
    return a <= std::numeric_limits<float>::max() &&
           (a >= std::numeric_limits<float>::min() || v == 0);
  }
  // x's coalesced form into terms_, given that x's terms [0, k) are distinct and marked in the
  // bitmap and `valid` says whether their values are input numbers: false unless x is valid
  // (SparseIsValid). Leaves the bitmap clear.
  bool CoalesceFrom(const SparseVector& x, size_t k, bool valid);
  std::vector<Coord> coord_;
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit
