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

// Coalesces vectors of one dimension in O(nnz) per vector, with an index-sized scratch kept
// between calls (so a Select over 50 candidates allocates nothing).
class Coalescer {
 public:
  explicit Coalescer(int64_t dimension) : slot_(dimension, -1) {}
  // A checked sparse vector: its coordinates in order of first appearance, each value the sum
  // of the vector's values at that index in the vector's order (as the dense form adds them).
  void Coalesce(const SparseVector& x, CoalescedTerms* out);
  // A dense vector's nonzero coordinates, in index order.
  static void FromDense(const Vector& x, CoalescedTerms* out);
  int64_t dimension() const { return static_cast<int64_t>(slot_.size()); }

 private:
  std::vector<int32_t> slot_;  // position of a coordinate in the output, -1 when absent
};

// The per-coordinate figures a diagonal-covariance linear model scores a candidate with, its
// weight w_i and inverse precision 1/a_i, interleaved with the coalescing slot so that each term
// of a candidate reads one cache line (at 2^18 coordinates the arrays exceed the caches; three
// separate arrays cost three misses per term).
class DiagonalScorer {
 public:
  DiagonalScorer(int64_t dimension, double weight, double inv_precision)
      : coord_(dimension, Coord{weight, inv_precision, -1, 0}) {}
  void Set(uint32_t i, double weight, double inv_precision) {
    coord_[i].weight = weight;
    coord_[i].inv_precision = inv_precision;
  }
  // mean = sum_i x_i w_i and var = sum_i x_i^2 / a_i over x's coordinates (its repeated indices
  // added up first, as in its dense form). `x` checked.
  void Score(const SparseVector& x, double* mean, double* var);
  void Score(const CoalescedTerms& x, double* mean, double* var) const;
  // x's coordinates, as Coalescer::Coalesce.
  void Coalesce(const SparseVector& x, CoalescedTerms* out);
  int64_t dimension() const { return static_cast<int64_t>(coord_.size()); }
  int64_t bytes() const { return dimension() * static_cast<int64_t>(sizeof(Coord)); }

 private:
  struct alignas(32) Coord {
    double weight;
    double inv_precision;
    int32_t slot;  // position of the coordinate in the vector being coalesced, -1 when absent
    int32_t unused;
  };
  std::vector<Coord> coord_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit
