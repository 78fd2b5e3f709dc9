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

// Coalesces sparse vectors in O(nnz) each: an open-addressing table over the vector's indices
// (twice its length, so it stays in L1 for the sizes a request has), reused between calls; an
// entry is live when its stamp is the current call's, so nothing is cleared.
class Coalescer {
 public:
  // A checked sparse vector: its coordinates in order of first appearance, each value the sum
  // of the vector's values at that index in the vector's order (as the dense form adds them).
  void Coalesce(const SparseVector& x, CoalescedTerms* out);
  // A dense vector's nonzero coordinates, in index order.
  static void FromDense(const Vector& x, CoalescedTerms* out);

 private:
  std::vector<uint32_t> key_, pos_, stamp_;
  uint32_t stamp_now_ = 0;
};

// The per-coordinate figures a diagonal-covariance linear model scores a candidate with, its
// weight w_i and inverse precision 1/a_i, side by side so that each term of a candidate reads
// one cache line (at 2^18 coordinates the arrays exceed the caches).
class DiagonalScorer {
 public:
  DiagonalScorer(int64_t dimension, double weight, double inv_precision)
      : coord_(dimension, Coord{weight, inv_precision}) {}
  void Set(uint32_t i, double weight, double inv_precision) {
    coord_[i].weight = weight;
    coord_[i].inv_precision = inv_precision;
  }
  // mean = sum_i x_i w_i and var = sum_i x_i^2 / a_i over x's coordinates (its repeated indices
  // added up first, as in its dense form, in order of first appearance). `x` checked.
  void Score(const SparseVector& x, double* mean, double* var);
  void Score(const CoalescedTerms& x, double* mean, double* var) const;
  // x's coordinates, as Coalescer::Coalesce.
  void Coalesce(const SparseVector& x, CoalescedTerms* out) { coalescer_.Coalesce(x, out); }
  int64_t dimension() const { return static_cast<int64_t>(coord_.size()); }
  int64_t bytes() const { return dimension() * static_cast<int64_t>(sizeof(Coord)); }

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
