#include "core/common/sparse.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/validate.h"

namespace bandit {

absl::Status CheckSparse(absl::string_view field, const SparseVector& x, int64_t dimension) {
  if (SparseIsValid(x, dimension)) return absl::OkStatus();
  if (x.index.size() != x.value.size())
    return absl::InvalidArgumentError(absl::StrCat(field, " has ", x.index.size(), " indices and ",
                                                   x.value.size(),
                                                   " values, expected one value per index"));
  for (size_t k = 0; k < x.index.size(); ++k) {
    if (x.index[k] >= dimension)
      return absl::InvalidArgumentError(absl::StrCat(field, ".index[", k, "] is ", x.index[k],
                                                     ", expected below the dimension ", dimension));
    if (!IsInputNumber(x.value[k]))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".value[", k, "] is ", x.value[k], ", ", kInputNumberExpected));
  }
  return absl::OkStatus();
}

namespace {
// Above every sum of squares of input numbers' magnitudes up to 3e99 (and below 1e200, the
// square of the input bound kMaxInputMagnitude, by a margin far beyond rounding).
constexpr double kSquaresBound = 1e199;
static_assert(kSquaresBound < kMaxInputMagnitude * kMaxInputMagnitude / 2);

// Whether every value is an input number (IsInputNumber); no early exit, so it vectorizes.
bool ValuesAreInputNumbers(const double* value, size_t n) {
  bool finite = true;
  for (size_t k = 0; k < n; ++k) finite &= IsInputNumber(value[k]);
  return finite;
}
}  // namespace

bool SparseIsValid(const SparseVector& x, int64_t dimension) {
  if (x.index.size() != x.value.size()) return false;
  // No early exit: both reductions vectorize.
  uint32_t max_index = 0;
  bool finite = true;
  for (uint32_t i : x.index) max_index = std::max(max_index, i);
  for (double v : x.value) finite &= IsInputNumber(v);
  return finite && (x.index.empty() || int64_t{max_index} < dimension);
}

void Coalescer::Coalesce(const SparseVector& x, CoalescedTerms* out) {
  const size_t n = x.index.size();
  out->index.resize(n);
  out->value.resize(n);
  uint32_t* index = out->index.data();
  double* value = out->value.data();
  size_t m = 0;
  bool indexed = false;  // whether table_ holds the positions (after a first repeat)
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = x.index[k];
    uint64_t& word = seen_[i >> 6];
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (!(word & bit)) {
      word |= bit;
      if (indexed) PositionOf(i) = static_cast<uint32_t>(m);
      index[m] = i;
      value[m] = x.value[k];
      ++m;
      continue;
    }
    if (!indexed) {
      StartTable(n);
      for (size_t q = 0; q < m; ++q) PositionOf(index[q]) = static_cast<uint32_t>(q);
      indexed = true;
    }
    value[PositionOf(i)] += x.value[k];
  }
  Unmark(index, m);
  out->index.resize(m);
  out->value.resize(m);
}

void Coalescer::StartTable(size_t n) {
  // Sized for the whole vector: every later first appearance is inserted too.
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (table_.size() < cap) {
    table_.assign(cap, Slot{0, 0, 0});
    stamp_now_ = 0;
  }
  if (++stamp_now_ == 0) {  // wrapped: every old stamp could look current
    for (Slot& s : table_) s.stamp = 0;
    stamp_now_ = 1;
  }
}

uint32_t& Coalescer::PositionOf(uint32_t index) {
  const uint32_t mask = static_cast<uint32_t>(table_.size() - 1);
  uint32_t h = (index * 2654435761u) & mask;  // Knuth's multiplicative hash
  while (table_[h].stamp == stamp_now_ && table_[h].key != index) h = (h + 1) & mask;
  Slot& s = table_[h];
  if (s.stamp != stamp_now_) {
    s.stamp = stamp_now_;
    s.key = index;
  }
  return s.pos;
}

void Coalescer::FromDense(const Vector& x, CoalescedTerms* out) {
  out->clear();
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (x[i] != 0) {
      out->index.push_back(static_cast<uint32_t>(i));
      out->value.push_back(x[i]);
    }
}

bool DiagonalScorer::Score(const SparseVector& x, FiguresOf figures, double* mean, double* var,
                           double* norm2) {
  const size_t n = x.index.size();
  if (x.value.size() != n) return false;
  const uint64_t d = static_cast<uint64_t>(dimension());
  uint64_t* seen = coalescer_.seen_.data();
  constexpr size_t kAhead = 16;  // see Score(CoalescedTerms)
  double m = 0, v = 0, s = 0;
  size_t k = 0;
  for (; k < n; ++k) {
    const uint32_t i = x.index[k];
    if (i >= d) break;
    uint64_t& word = seen[i >> 6];
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (word & bit) break;  // a repeat
    word |= bit;
    if (k + kAhead < n && x.index[k + kAhead] < d) __builtin_prefetch(&coord_[x.index[k + kAhead]]);
    const double xi = x.value[k];
    const Coord c = coord_[i];
    m += xi * static_cast<double>(c.weight);
    v += xi * xi * static_cast<double>(c.inv_precision);
    s += xi * xi;
  }
  if (k == n) {
    coalescer_.Unmark(x.index.data(), n);
    // The values are checked through their sum of squares: a sum of nonnegative terms is at
    // least each of them, so s <= kSquaresBound puts every |x_i| below sqrt(kSquaresBound),
    // within the input bound. Only a larger s (or NaN) needs the values read again.
    if (!(s <= kSquaresBound) && !ValuesAreInputNumbers(x.value.data(), n)) return false;
    if (std::isnan(m) || std::isnan(v)) {
      // A coordinate held in double: the same sums in the same order with its figures.
      terms_.index.assign(x.index.begin(), x.index.end());
      terms_.value.assign(x.value.begin(), x.value.end());
      Score(terms_, figures, &m, &v);
    }
  } else {
    // A bad index, or a repeat: terms [0, k) are first appearances, marked in the bitmap, so
    // the coalesced form goes on from k (checking the rest), then is scored exactly.
    if (!CoalesceFrom(x, k, ValuesAreInputNumbers(x.value.data(), k))) return false;
    Score(terms_, figures, &m, &v);
    s = 0;
    for (double xi : terms_.value) s += xi * xi;
  }
  *mean = m;
  *var = v;
  *norm2 = s;
  return true;
}

bool DiagonalScorer::CoalesceFrom(const SparseVector& x, size_t k, bool valid) {
  // A repeat is found by a linear scan of the terms so far while repeats are few (hashed
  // features collide once or twice in a vector), then through the coalescer's table: O(n) for
  // any vector, and no table built for the usual single repeat.
  constexpr int kScans = 4;
  const size_t n = x.index.size();
  const uint64_t d = static_cast<uint64_t>(dimension());
  uint64_t* seen = coalescer_.seen_.data();
  terms_.index.assign(x.index.begin(), x.index.begin() + k);
  terms_.value.assign(x.value.begin(), x.value.begin() + k);
  int scans = 0;
  bool indexed = false;  // whether the coalescer's table holds the positions
  for (; k < n && valid; ++k) {
    const uint32_t i = x.index[k];
    if (i >= d) {
      valid = false;
      break;
    }
    const double xi = x.value[k];
    valid &= IsInputNumber(xi);
    uint64_t& word = seen[i >> 6];
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (!(word & bit)) {
      word |= bit;
      if (indexed) coalescer_.PositionOf(i) = static_cast<uint32_t>(terms_.index.size());
      terms_.index.push_back(i);
      terms_.value.push_back(xi);
      continue;
    }
    if (!indexed && scans < kScans) {
      ++scans;
      const size_t q = static_cast<size_t>(
          std::find(terms_.index.begin(), terms_.index.end(), i) - terms_.index.begin());
      terms_.value[q] += xi;
      continue;
    }
    if (!indexed) {
      coalescer_.StartTable(n);
      for (size_t q = 0; q < terms_.index.size(); ++q)
        coalescer_.PositionOf(terms_.index[q]) = static_cast<uint32_t>(q);
      indexed = true;
    }
    terms_.value[coalescer_.PositionOf(i)] += xi;
  }
  coalescer_.Unmark(terms_.index.data(), terms_.index.size());
  return valid;
}

void DiagonalScorer::Score(const CoalescedTerms& x, FiguresOf figures, double* mean,
                           double* var) const {
  double m = 0, v = 0;
  const size_t n = x.index.size();
  // At 2^18 coordinates and more the pairs live beyond L1: ask for a later term's line early.
  constexpr size_t kAhead = 16;
  for (size_t q = 0; q < n; ++q) {
    if (q + kAhead < n) __builtin_prefetch(&coord_[x.index[q + kAhead]]);
    const Coord c = coord_[x.index[q]];
    const double xi = x.value[q];
    m += xi * static_cast<double>(c.weight);
    v += xi * xi * static_cast<double>(c.inv_precision);
  }
  if (std::isnan(m) || std::isnan(v)) {
    // A coordinate single precision does not hold (NaN-marked): the same sums with its double
    // figures.
    m = v = 0;
    for (size_t q = 0; q < n; ++q) {
      const Coord& held = coord_[x.index[q]];
      const Figures c =
          IsWide(held) ? figures(x.index[q]) : Figures{held.weight, held.inv_precision};
      const double xi = x.value[q];
      m += xi * c.weight;
      v += xi * xi * c.inv_precision;
    }
  }
  *mean = m;
  *var = v;
}

double SquaredNormIfValid(const SparseVector& x, int64_t dimension) {
  thread_local std::vector<uint64_t> marks;
  thread_local std::vector<uint32_t> repeats;
  const size_t n = x.index.size();
  if (n != x.value.size()) return -1;
  const size_t words = static_cast<size_t>((dimension + 63) / 64);
  if (marks.size() < words) marks.assign(words, 0);
  repeats.clear();
  double norm2 = 0;
  bool finite = true;
  size_t k = 0;
  for (; k < n; ++k) {
    const uint32_t i = x.index[k];
    if (i >= dimension) break;
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (marks[i >> 6] & bit) repeats.push_back(static_cast<uint32_t>(k));
    marks[i >> 6] |= bit;
    const double v = x.value[k];
    finite &= std::isfinite(v);
    norm2 += v * v;
  }
  for (size_t m = 0; m < k; ++m) marks[x.index[m] >> 6] = 0;  // only these bits were set
  if (k < n || !finite) return -1;
  for (const uint32_t m : repeats) {
    double earlier = 0;
    for (uint32_t j = 0; j < m; ++j)
      if (x.index[j] == x.index[m]) earlier += x.value[j];
    norm2 += 2 * x.value[m] * earlier;
  }
  return norm2;
}


}  // namespace bandit
