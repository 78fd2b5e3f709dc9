#include "core/common/sparse.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit {

absl::Status CheckSparse(absl::string_view field, const SparseVector& x, int64_t dimension) {
  if (x.index.size() != x.value.size())
    return absl::InvalidArgumentError(absl::StrCat(field, " has ", x.index.size(), " indices and ",
                                                   x.value.size(),
                                                   " values, expected one value per index"));
  for (size_t k = 0; k < x.index.size(); ++k) {
    if (x.index[k] >= dimension)
      return absl::InvalidArgumentError(absl::StrCat(field, ".index[", k, "] is ", x.index[k],
                                                     ", expected below the dimension ", dimension));
    if (!std::isfinite(x.value[k]))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".value[", k, "] is ", x.value[k], ", expected a finite number"));
  }
  return absl::OkStatus();
}

void Coalescer::Coalesce(const SparseVector& x, CoalescedTerms* out) {
  out->clear();
  const size_t n = x.index.size();
  if (key_.size() < 2 * n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    key_.assign(cap, 0);
    pos_.assign(cap, 0);
    stamp_.assign(cap, 0);
    stamp_now_ = 0;
  }
  if (++stamp_now_ == 0) {  // wrapped: every old stamp could look current
    std::fill(stamp_.begin(), stamp_.end(), 0);
    stamp_now_ = 1;
  }
  const uint32_t mask = static_cast<uint32_t>(key_.size() - 1);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = x.index[k];
    uint32_t h = (i * 2654435761u) & mask;  // Knuth's multiplicative hash
    while (stamp_[h] == stamp_now_ && key_[h] != i) h = (h + 1) & mask;
    if (stamp_[h] != stamp_now_) {
      stamp_[h] = stamp_now_;
      key_[h] = i;
      pos_[h] = static_cast<uint32_t>(out->index.size());
      out->index.push_back(i);
      out->value.push_back(x.value[k]);
    } else {
      out->value[pos_[h]] += x.value[k];
    }
  }
}

void Coalescer::FromDense(const Vector& x, CoalescedTerms* out) {
  out->clear();
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (x[i] != 0) {
      out->index.push_back(static_cast<uint32_t>(i));
      out->value.push_back(x[i]);
    }
}

void DiagonalScorer::Score(const SparseVector& x, double* mean, double* var) {
  coalescer_.Coalesce(x, &terms_);
  Score(terms_, mean, var);
}

void DiagonalScorer::Score(const CoalescedTerms& x, double* mean, double* var) const {
  double m = 0, v = 0;
  for (size_t q = 0; q < x.index.size(); ++q) {
    const Coord& c = coord_[x.index[q]];
    const double xi = x.value[q];
    m += xi * c.weight;
    v += xi * xi * c.inv_precision;
  }
  *mean = m;
  *var = v;
}

}  // namespace bandit
