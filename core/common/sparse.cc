#include "core/common/sparse.h"

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
  for (size_t k = 0; k < x.index.size(); ++k) {
    const uint32_t i = x.index[k];
    int32_t& s = slot_[i];
    if (s < 0) {
      s = static_cast<int32_t>(out->index.size());
      out->index.push_back(i);
      out->value.push_back(x.value[k]);
    } else {
      out->value[s] += x.value[k];
    }
  }
  for (uint32_t i : out->index) slot_[i] = -1;
}

void Coalescer::FromDense(const Vector& x, CoalescedTerms* out) {
  out->clear();
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (x[i] != 0) {
      out->index.push_back(static_cast<uint32_t>(i));
      out->value.push_back(x[i]);
    }
}

void DiagonalScorer::Coalesce(const SparseVector& x, CoalescedTerms* out) {
  out->clear();
  for (size_t k = 0; k < x.index.size(); ++k) {
    Coord& c = coord_[x.index[k]];
    if (c.slot < 0) {
      c.slot = static_cast<int32_t>(out->index.size());
      out->index.push_back(x.index[k]);
      out->value.push_back(x.value[k]);
    } else {
      out->value[c.slot] += x.value[k];
    }
  }
  for (uint32_t i : out->index) coord_[i].slot = -1;
}

void DiagonalScorer::Score(const SparseVector& x, double* mean, double* var) {
  terms_.clear();
  for (size_t k = 0; k < x.index.size(); ++k) {
    Coord& c = coord_[x.index[k]];
    if (c.slot < 0) {
      c.slot = static_cast<int32_t>(terms_.index.size());
      terms_.index.push_back(x.index[k]);
      terms_.value.push_back(x.value[k]);
    } else {
      terms_.value[c.slot] += x.value[k];
    }
  }
  double m = 0, v = 0;
  for (size_t q = 0; q < terms_.index.size(); ++q) {
    Coord& c = coord_[terms_.index[q]];
    const double xi = terms_.value[q];
    m += xi * c.weight;
    v += xi * xi * c.inv_precision;
    c.slot = -1;
  }
  *mean = m;
  *var = v;
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
