// Sparse candidate vectors for the diagonal-covariance policies: checks, and the one-term-per-
// coordinate form their formulas read (a SparseVector may repeat an index; its dense form adds
// the repeats up).
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

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
  // The position in the coalesced output of `index`, for a vector that repeats one.
  uint32_t& PositionOf(uint32_t index);
  // Clears the bitmap's marks of `n` indices (each marked once), for the next vector.
  void Unmark(const uint32_t* index, size_t n) {
    for (size_t q = 0; q < n; ++q) seen_[index[q] >> 6] &= ~(uint64_t{1} << (index[q] & 63));
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
// one cache line (at 2^18 coordinates the arrays exceed the caches).
class DiagonalScorer {
 public:
  DiagonalScorer(int64_t dimension, double weight, double inv_precision)
      : coord_(dimension, Coord{weight, inv_precision}), coalescer_(dimension) {}
  void Set(uint32_t i, double weight, double inv_precision) {
    coord_[i].weight = weight;
    coord_[i].inv_precision = inv_precision;
  }
  // mean = sum_i x_i w_i, var = sum_i x_i^2 / a_i and norm2 = sum_i x_i^2 over x's coordinates
  // (its repeated indices added up first, as in its dense form, in order of first appearance).
  // Checks x as it goes: false, and nothing written, unless SparseIsValid(x, dimension()).
  // A vector without repeats (most hashed vectors) is read once: checked, told apart from a
  // repeat and scored in one pass; one with a repeat is coalesced first.
  bool Score(const SparseVector& x, double* mean, double* var, double* norm2);
  void Score(const CoalescedTerms& x, double* mean, double* var) const;
  // x's coordinates, as Coalescer::Coalesce.
  void Coalesce(const SparseVector& x, CoalescedTerms* out) { coalescer_.Coalesce(x, out); }
  int64_t dimension() const { return static_cast<int64_t>(coord_.size()); }
  // The scoring pairs and the coalescer's bitmap.
  int64_t bytes() const {
    return dimension() * static_cast<int64_t>(sizeof(Coord)) + coalescer_.bytes();
  }

 private:
  struct Coord {
    double weight;
    double inv_precision;
  };
  std::vector<Coord> coord_;
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit
