// The direct model q(x, a) of the doubly robust estimate for sparse hashed vectors, in a weight
// space too large for DirectModel's d x d ridge (named decisions hashed into 2^bits > 4096).
#pragma once

#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "bandit/v1/ope.pb.h"
#include "core/common/sparse.h"
#include "core/policy.h"

namespace bandit::ope {

// Ridge regression with a diagonal matrix over z = [x, 1] (the intercept its own coordinate):
// per coordinate a_j = lambda + sum z_j^2 and b_j = sum r z_j, and q(z) = sum_j z_j b_j / a_j.
// It is DirectModel's ridge with the off-diagonal of sum z z^T dropped (the same when no two
// coordinates are ever active together). The doubly robust estimate stays unbiased whatever q
// is; a rougher q only costs variance. State: the coordinates ever seen (at most 2^bits + 1).
class SparseDirectModel {
 public:
  SparseDirectModel(double lambda, int64_t dimension)
      : lambda_(lambda), dimension_(dimension), coalescer_(dimension) {}
  // q for each action's vector (indices below the dimension: vectors the featurizer built).
  Vector Predict(std::span<const SparseVector> actions);
  void Learn(const SparseVector& x, double reward);
  int64_t coordinates() const { return static_cast<int64_t>(coord_.size()); }
  int64_t dimension() const { return dimension_; }
  double lambda() const { return lambda_; }

  // What the model holds now, and the most it can hold: every coordinate of the weight space.
  int64_t StateBytes() const;
  static int64_t MaxStateBytes(int64_t dimension);

  // The coordinates in increasing index order (the same model saves the same bytes), with
  // lambda in DirectModelState.lambda.
  void Save(bandit::v1::DirectModelState* out) const;
  // INVALID_ARGUMENT (nothing changed) for a state that is not a diagonal ridge of this
  // dimension: lengths that differ, an index repeated, out of order or beyond the dimension,
  // a non-finite sum, a negative sum of squares.
  absl::Status Restore(const bandit::v1::DirectModelState& in);

 private:
  struct Coord {
    double a, b;
  };
  static int64_t BytesFor(int64_t coordinates);
  double lambda_;
  int64_t dimension_;
  absl::flat_hash_map<uint32_t, Coord> coord_;
  Coord intercept_{0, 0};  // lambda added when read, like every coordinate's
  Coalescer coalescer_;
  CoalescedTerms terms_;  // scratch
};

}  // namespace bandit::ope
