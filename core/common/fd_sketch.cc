#include "core/common/fd_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include "absl/strings/str_cat.h"

namespace bandit {

absl::StatusOr<int> FdSketch::SizeFromConfig(absl::string_view field, bool sketched,
                                             std::optional<int> size) {
  if (size && !sketched)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is set, expected it only with covariance: COVARIANCE_SKETCHED"));
  const int l = size.value_or(kDefaultSketchSize);
  if (l < 2 || l > kMaxSketchSize)
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", l, ", expected 2..", kMaxSketchSize));
  return l;
}

int FdSketch::SizeForFootprint(std::optional<int> size) {
  return std::clamp(size.value_or(kDefaultSketchSize), 2, kMaxSketchSize);
}

FdSketch::FdSketch(int64_t dimension, int sketch_size, double lambda)
    : lambda_(lambda),
      sketch_size_(sketch_size),
      buffer_(2 * sketch_size),
      slot_of_(dimension, kZeroSlot),
      coordinate_{kNoCoordinate},
      columns_(2 * sketch_size, 0.0f),
      gram_(Matrix::Zero(2 * sketch_size, 2 * sketch_size)),
      cholesky_(Matrix::Zero(2 * sketch_size, 2 * sketch_size)) {}

int64_t FdSketch::MaxBytes(int64_t dimension, int sketch_size) {
  const int64_t buffer = 2 * int64_t{sketch_size};
  // A slot per coordinate; per coordinate seen (and the zero slot) its index and column.
  return dimension * 4 + (dimension + 1) * (4 + buffer * 4) + 2 * buffer * buffer * 8;
}

int64_t FdSketch::bytes() const {
  return static_cast<int64_t>(slot_of_.size() * sizeof(uint32_t) +
                              coordinate_.capacity() * sizeof(uint32_t) +
                              columns_.capacity() * sizeof(float)) +
         (gram_.size() + cholesky_.size()) * 8;
}

double FdSketch::Times(const uint32_t* index, const double* value, size_t n,
                       const double* by_slot, double* y) const {
  // At 2^18 coordinates and more, each term's slot, column and per-slot entry are cache misses:
  // the slots are looked up first (each a few terms ahead of the next), then each column and
  // entry is fetched a few terms ahead of its use. B x adds four columns per pass over its rows.
  // A coordinate never seen is the zero slot's: no branch.
  thread_local std::vector<uint32_t> slots;
  slots.resize(n + 4);
  constexpr size_t kAhead = 8;
  for (size_t q = 0; q < n; ++q) {
    if (q + kAhead < n) __builtin_prefetch(&slot_of_[index[q + kAhead]]);
    slots[q] = slot_of_[index[q]];
  }
  for (size_t q = n; q < n + 4; ++q) slots[q] = kZeroSlot;  // pads the last group of four
  for (size_t q = 0; q < std::min(n, kAhead); ++q) __builtin_prefetch(Column(slots[q]));
  double dot = 0;
  const int rows = rows_;
  std::fill(y, y + rows, 0.0);
  for (size_t q = 0; q < n; q += 4) {
    for (size_t a = q + kAhead; a < std::min(n, q + kAhead + 4); ++a) {
      __builtin_prefetch(Column(slots[a]));
      __builtin_prefetch(&by_slot[slots[a]]);
    }
    const double v0 = value[q], v1 = q + 1 < n ? value[q + 1] : 0.0,
                 v2 = q + 2 < n ? value[q + 2] : 0.0, v3 = q + 3 < n ? value[q + 3] : 0.0;
    dot += by_slot[slots[q]] * v0 + by_slot[slots[q + 1]] * v1 + by_slot[slots[q + 2]] * v2 +
           by_slot[slots[q + 3]] * v3;
    const float* c0 = Column(slots[q]);
    const float* c1 = Column(slots[q + 1]);
    const float* c2 = Column(slots[q + 2]);
    const float* c3 = Column(slots[q + 3]);
    for (int r = 0; r < rows; ++r) y[r] += v0 * c0[r] + v1 * c1[r] + v2 * c2[r] + v3 * c3[r];
  }
  return dot;
}

void FdSketch::TimesAll(std::span<const SparseVector> xs, const double* by_slot, double* ys,
                        double* dots) const {
  const size_t n = xs.size();
  const int rows = rows_;
  // The positions every candidate shares with the first (same length, same index and value).
  thread_local std::vector<char> shared;
  thread_local std::vector<uint32_t> index;
  thread_local std::vector<double> value;
  const size_t terms = n > 0 ? xs[0].size() : 0;
  bool aligned = n >= 2;
  for (size_t i = 1; i < n && aligned; ++i) aligned = xs[i].size() == terms;
  size_t common = 0;
  if (aligned) {
    shared.assign(terms, 1);
    for (size_t i = 1; i < n; ++i) {
      const uint32_t* a = xs[0].index.data();
      const uint32_t* b = xs[i].index.data();
      const double* va = xs[0].value.data();
      const double* vb = xs[i].value.data();
      for (size_t q = 0; q < terms; ++q) shared[q] &= a[q] == b[q] && va[q] == vb[q];
    }
    for (size_t q = 0; q < terms; ++q) common += shared[q];
  }
  if (common < 8) {  // too few to be worth a pass of their own
    for (size_t i = 0; i < n; ++i)
      dots[i] = Times(xs[i].index.data(), xs[i].value.data(), xs[i].size(), by_slot,
                      ys + i * rows);
    return;
  }
  // B x_shared and its dot once, then each candidate's own terms on top.
  double y_shared[2 * kMaxSketchSize];
  index.clear();
  value.clear();
  for (size_t q = 0; q < terms; ++q)
    if (shared[q]) {
      index.push_back(xs[0].index[q]);
      value.push_back(xs[0].value[q]);
    }
  const double dot_shared = Times(index.data(), value.data(), index.size(), by_slot, y_shared);
  for (size_t i = 0; i < n; ++i) {
    index.clear();
    value.clear();
    for (size_t q = 0; q < terms; ++q)
      if (!shared[q]) {
        index.push_back(xs[i].index[q]);
        value.push_back(xs[i].value[q]);
      }
    double* y = ys + i * rows;
    dots[i] = dot_shared + Times(index.data(), value.data(), index.size(), by_slot, y);
    for (int r = 0; r < rows; ++r) y[r] += y_shared[r];
  }
}

void FdSketch::TimesBySlot(const std::vector<double>& v, double* y) const {
  std::fill(y, y + rows_, 0.0);
  for (size_t slot = kZeroSlot + 1; slot < coordinate_.size(); ++slot) {
    const float* col = Column(static_cast<uint32_t>(slot));
    const double s = v[slot];
    for (int r = 0; r < rows_; ++r) y[r] += s * col[r];
  }
}

void FdSketch::ForwardSolve(double* v) const {
  for (int r = 0; r < rows_; ++r) {
    double s = v[r];
    for (int k = 0; k < r; ++k) s -= cholesky_(r, k) * v[k];
    v[r] = s / cholesky_(r, r);
  }
}

void FdSketch::BackwardSolve(double* v) const {
  for (int r = rows_ - 1; r >= 0; --r) {
    double s = v[r];
    for (int k = r + 1; k < rows_; ++k) s -= cholesky_(k, r) * v[k];
    v[r] = s / cholesky_(r, r);
  }
}

absl::Status FdSketch::Prepare(const CoalescedTerms& x, double scale, Row* row) const {
  const int r_new = rows_;
  row->gram.assign(r_new, 0.0);
  row->norm2 = 0;
  for (size_t q = 0; q < x.index.size(); ++q) {
    const double v = scale * x.value[q];
    if (!(std::fabs(v) <= std::numeric_limits<float>::max()))
      return absl::InvalidArgumentError(absl::StrCat(
          "features has the value ", x.value[q], " at index ", x.index[q],
          ", expected a magnitude single precision holds (the sketch keeps rows as floats)"));
    const double vt = static_cast<float>(v);
    row->norm2 += vt * vt;
    const uint32_t slot = slot_of_[x.index[q]];
    if (slot == kZeroSlot) continue;
    const float* col = Column(slot);
    for (int r = 0; r < r_new; ++r) row->gram[r] += vt * col[r];
  }
  // The factor's new row: l = L^{-1} g, eta^2 = G_rr + c - l'l, which is at least c (a Schur
  // complement of G + cI >= cI): the floor only guards rounding.
  row->cholesky = row->gram;
  ForwardSolve(row->cholesky.data());
  double l2 = 0;
  for (int r = 0; r < r_new; ++r) l2 += row->cholesky[r] * row->cholesky[r];
  const double c = regularizer();
  row->eta = std::sqrt(std::max(row->norm2 + c - l2, c));
  bool finite = std::isfinite(row->norm2) && std::isfinite(row->eta);
  for (int r = 0; r < r_new && finite; ++r) finite = std::isfinite(row->cholesky[r]);
  if (!finite)
    return absl::InvalidArgumentError(
        "features overflow the sketch's sums, expected smaller magnitudes");
  return absl::OkStatus();
}

void FdSketch::AddCoordinates(const CoalescedTerms& x) {
  const size_t d = slot_of_.size();
  for (const uint32_t j : x.index) {
    if (slot_of_[j] != kZeroSlot) continue;
    if (coordinate_.size() == coordinate_.capacity()) {
      // Grow to at most d coordinates (and the zero slot), within MaxBytes.
      const size_t cap = std::min<size_t>(std::max<size_t>(16, 2 * coordinate_.size()), d + 1);
      coordinate_.reserve(cap);
      columns_.reserve(cap * buffer_);
    }
    slot_of_[j] = static_cast<uint32_t>(coordinate_.size());
    coordinate_.push_back(j);
    columns_.resize(columns_.size() + buffer_, 0.0f);
  }
}

bool FdSketch::Append(const CoalescedTerms& x, double scale, const Row& row) {
  const int r_new = rows_;
  AddCoordinates(x);
  for (size_t q = 0; q < x.index.size(); ++q)
    MutableColumn(slot_of_[x.index[q]])[r_new] = static_cast<float>(scale * x.value[q]);
  for (int r = 0; r < r_new; ++r) {
    gram_(r_new, r) = gram_(r, r_new) = row.gram[r];
    cholesky_(r_new, r) = row.cholesky[r];
  }
  gram_(r_new, r_new) = row.norm2;
  cholesky_(r_new, r_new) = row.eta;
  rows_ = r_new + 1;
  if (rows_ < buffer_) return false;
  Shrink();
  return true;
}

void FdSketch::Shrink() {
  // Alg. 3.1: B = U S V' with S^2 the eigenvalues of G = BB' and V' = S^{-1} U' B;
  // B <- sqrt(max(S^2 - delta, 0)) V', whose rows from the l-th on are zero. In terms of the
  // columns: B <- W B with W = diag(sqrt((s_i^2 - delta) / s_i^2)) U' over the l - 1 largest.
  const int r = rows_;
  Eigen::SelfAdjointEigenSolver<Matrix> eig(gram_.topLeftCorner(r, r));
  const Vector& s2 = eig.eigenvalues();  // ascending
  const Matrix& u = eig.eigenvectors();
  const double delta = std::max(0.0, s2[r - sketch_size_]);  // the l-th largest
  const int keep = sketch_size_ - 1;
  Matrix w = Matrix::Zero(keep, r);
  for (int i = 0; i < keep; ++i) {
    const int e = r - 1 - i;  // the (i+1)-th largest
    const double f = s2[e] > delta ? std::sqrt((s2[e] - delta) / s2[e]) : 0.0;
    w.row(i) = f * u.col(e).transpose();
  }
  // The columns in blocks, through Eigen's matrix products: the kept rows W B, then G again from
  // the values held (single precision), so that it is exactly the sketch's.
  using FloatColumns = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>>;
  const Eigen::Index seen = static_cast<Eigen::Index>(coordinate_.size());
  FloatColumns columns(columns_.data(), buffer_, seen);
  constexpr Eigen::Index kBlock = 1024;
  Matrix old, fresh;
  Matrix gram = Matrix::Zero(keep, keep);
  for (Eigen::Index j0 = 0; j0 < seen; j0 += kBlock) {
    const Eigen::Index nb = std::min(kBlock, seen - j0);
    old = columns.block(0, j0, r, nb).cast<double>();
    fresh.noalias() = w * old;
    columns.block(0, j0, buffer_, nb).setZero();
    // |W B| stays within B's column norms; the clamp only keeps a column of values near the
    // single-precision limit from overflowing it.
    constexpr double kFloatMax = std::numeric_limits<float>::max();
    columns.block(0, j0, keep, nb) = fresh.cwiseMax(-kFloatMax).cwiseMin(kFloatMax).cast<float>();
    fresh = columns.block(0, j0, keep, nb).cast<double>();  // the values held
    gram.selfadjointView<Eigen::Lower>().rankUpdate(fresh);
  }
  gram_.setZero();
  gram_.topLeftCorner(keep, keep) = gram.selfadjointView<Eigen::Lower>();
  shrinkage_ += delta;
  ++shrinks_;
  rows_ = keep;
  // c changed with the shrinkage: L L' = G + c I afresh.
  Matrix shifted = gram_.topLeftCorner(keep, keep);
  shifted.diagonal().array() += regularizer();
  Eigen::LLT<Matrix> llt(shifted);
  cholesky_.setZero();
  cholesky_.topLeftCorner(keep, keep) = llt.matrixL();
}

Matrix FdSketch::Rows() const {
  Matrix out = Matrix::Zero(rows_, dimension());
  for (size_t slot = kZeroSlot + 1; slot < coordinate_.size(); ++slot)
    for (int r = 0; r < rows_; ++r)
      out(r, coordinate_[slot]) = Column(static_cast<uint32_t>(slot))[r];
  return out;
}

void FdSketch::Save(StateWriter& w) const {
  const size_t seen = coordinate_.size() - 1;  // the zero slot is not saved
  Vector coordinates(seen), columns(seen * rows_);
  for (size_t k = 0; k < seen; ++k) {
    const uint32_t slot = static_cast<uint32_t>(k + 1);
    coordinates[k] = coordinate_[slot];
    for (int r = 0; r < rows_; ++r) columns[k * rows_ + r] = Column(slot)[r];
  }
  w.Put("sketch_coordinates", coordinates);
  w.Put("sketch_columns", columns);
  w.Put("sketch_gram", Matrix(gram_.topLeftCorner(rows_, rows_)));
  w.Put("sketch_cholesky", Matrix(cholesky_.topLeftCorner(rows_, rows_)));
  w.PutScalar("sketch_shrinkage", shrinkage_);
  w.PutInt("sketch_size", sketch_size_);
  w.PutInt("sketch_shrinks", shrinks_);
}

absl::Status FdSketch::Restore(const StateReader& r, absl::string_view who) {
  int64_t size, shrinks;
  double shrinkage;
  Vector coordinates, columns;
  Matrix gram, cholesky;
  if (auto s = r.GetInt("sketch_size", &size); !s.ok()) return s;
  if (size != sketch_size_)
    return absl::InvalidArgumentError(
        absl::StrCat(who, " state has sketch_size ", size, ", expected ", sketch_size_));
  if (auto s = r.Get("sketch_coordinates", &coordinates); !s.ok()) return s;
  const int64_t seen = coordinates.size();
  if (auto s = r.Get("sketch_gram", &gram); !s.ok()) return s;
  const int64_t rows = gram.rows();
  if (gram.cols() != rows || rows >= buffer_)
    return absl::InvalidArgumentError(
        absl::StrCat(who, " state has a ", gram.rows(), " x ", gram.cols(),
                     " sketch gram, expected a square one of fewer than ", buffer_, " rows"));
  if (auto s = r.Get("sketch_cholesky", &cholesky, rows, rows); !s.ok()) return s;
  if (auto s = r.Get("sketch_columns", &columns, seen * rows); !s.ok()) return s;
  if (auto s = r.GetScalar("sketch_shrinkage", &shrinkage); !s.ok()) return s;
  if (auto s = r.GetInt("sketch_shrinks", &shrinks); !s.ok()) return s;
  if (!gram.allFinite() || !cholesky.allFinite() ||
      !(columns.cwiseAbs().array() <= std::numeric_limits<float>::max()).all() ||
      !std::isfinite(shrinkage) || shrinkage < 0 || shrinks < 0 ||
      (rows > 0 && !(cholesky.diagonal().array() > 0).all()))
    return absl::InvalidArgumentError(absl::StrCat(
        who, " state has non-finite sketch values, a negative shrinkage or a singular factor, "
             "expected finite values and a positive factor diagonal"));
  std::vector<uint32_t> slot_of(slot_of_.size(), kZeroSlot);
  for (int64_t k = 0; k < seen; ++k) {
    const double c = coordinates[k];
    if (!(c >= 0 && c < dimension()) || c != std::floor(c) ||
        slot_of[static_cast<size_t>(c)] != kZeroSlot)
      return absl::InvalidArgumentError(
          absl::StrCat(who, " state's sketch_coordinates[", k, "] is ", c,
                       ", expected distinct coordinates in [0, ", dimension(), ")"));
    slot_of[static_cast<size_t>(c)] = static_cast<uint32_t>(k + 1);
  }
  slot_of_ = std::move(slot_of);
  coordinate_.assign(seen + 1, kNoCoordinate);
  columns_.assign((seen + 1) * buffer_, 0.0f);
  for (int64_t k = 0; k < seen; ++k) {
    const uint32_t slot = static_cast<uint32_t>(k + 1);
    coordinate_[slot] = static_cast<uint32_t>(coordinates[k]);
    for (int64_t q = 0; q < rows; ++q)
      MutableColumn(slot)[q] = static_cast<float>(columns[k * rows + q]);
  }
  rows_ = static_cast<int>(rows);
  gram_.setZero();
  gram_.topLeftCorner(rows, rows) = gram;
  cholesky_.setZero();
  cholesky_.topLeftCorner(rows, rows) = cholesky;
  shrinkage_ = shrinkage;
  shrinks_ = shrinks;
  return absl::OkStatus();
}

}  // namespace bandit
