#include "core/classic/linucb_sketched.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

#include "absl/strings/str_cat.h"
#include "core/classic/ucb_choice.h"
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

class LinUcbSketched::Prepared final : public PreparedSelect {
 public:
  const LinUcbSketched* owner = nullptr;
  uint64_t model_version = 0;
  const void* candidates = nullptr;
  size_t count = 0;
  std::vector<Score> scores;
};

namespace {

// Checks a sparse vector (indices below `dimension`, finite values) and returns ||x||^2 of its
// dense form (a repeated index's values added up first), or -1 for an invalid vector. A bitmap
// of the thread's own (Selects of one instance run concurrently; one bit per coordinate) tells
// a repeat in one pass: ||x||^2 = sum_k v_k^2 + 2 sum over pairs k < m of one index v_k v_m, and
// a repeat (hashed terms collide a few times per thousand terms at 2^18) adds its pairs from a
// scan of the terms before it.
double CheckedSquaredNorm(const SparseVector& x, int64_t dimension) {
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

}  // namespace

LinUcbSketched::LinUcbSketched(int dim, double lambda, double alpha, int sketch_size)
    : lambda_(lambda),
      alpha_(alpha),
      sketch_size_(sketch_size),
      buffer_(2 * sketch_size),
      slot_of_(dim, 0),
      coordinate_{kNoCoordinate},
      columns_(2 * sketch_size, 0.0f),
      b_{0.0},
      gram_(Matrix::Zero(2 * sketch_size, 2 * sketch_size)),
      cholesky_(Matrix::Zero(2 * sketch_size, 2 * sketch_size)),
      bb_(Vector::Zero(2 * sketch_size)),
      cross_(Vector::Zero(2 * sketch_size)),
      coalescer_(dim) {}

int64_t LinUcbSketched::MaxStateBytes(int64_t dim, int sketch_size) {
  const int64_t buffer = 2 * int64_t{sketch_size};
  // Per coordinate: its slot, its coordinate entry, its column, its b entry (and those of the
  // zero slot).
  const int64_t per_coordinate = 4 + 4 + buffer * 4 + 8;
  return dim * 4 + (dim + 1) * (per_coordinate - 4) + (2 * buffer * buffer + 2 * buffer) * 8 +
         (dim + 63) / 64 * 8 + 4 * 8;
}

int64_t LinUcbSketched::StateBytes() const {
  return static_cast<int64_t>(slot_of_.size() * sizeof(int32_t) +
                              coordinate_.capacity() * sizeof(uint32_t) +
                              columns_.capacity() * sizeof(float) + b_.capacity() * sizeof(double)) +
         (gram_.size() + cholesky_.size() + bb_.size() + cross_.size()) * 8 + coalescer_.bytes() +
         4 * 8;
}

void LinUcbSketched::ForwardSolve(double* v) const {
  for (int r = 0; r < rows_; ++r) {
    double s = v[r];
    for (int k = 0; k < r; ++k) s -= cholesky_(r, k) * v[k];
    v[r] = s / cholesky_(r, r);
  }
}

LinUcbSketched::Score LinUcbSketched::ScoreTerms(const uint32_t* index, const double* value,
                                                 size_t n, double norm2) const {
  // b'x and B x are linear in x: a repeated index adds its terms up as the dense form does.
  // At 2^18 coordinates and more, each term's slot, column and b entry are cache misses: the
  // slots are looked up first (each a few terms ahead of the next), then each column and b
  // entry is fetched a few terms ahead of its use. B x adds four columns per pass over its rows.
  // A coordinate never seen is the zero slot's (a zero column and b entry): no branch.
  thread_local std::vector<uint32_t> slots;
  slots.resize(n + 4);
  constexpr size_t kAhead = 8;
  for (size_t q = 0; q < n; ++q) {
    if (q + kAhead < n) __builtin_prefetch(&slot_of_[index[q + kAhead]]);
    slots[q] = slot_of_[index[q]];
  }
  for (size_t q = n; q < n + 4; ++q) slots[q] = kZeroSlot;  // pads the last group of four
  for (size_t q = 0; q < std::min(n, kAhead); ++q) __builtin_prefetch(Column(slots[q]));
  double bx = 0;
  double z[2 * kMaxSketchSize];
  std::fill(z, z + rows_, 0.0);
  const int rows = rows_;
  for (size_t q = 0; q < n; q += 4) {
    for (size_t a = q + kAhead; a < std::min(n, q + kAhead + 4); ++a) {
      __builtin_prefetch(Column(slots[a]));
      __builtin_prefetch(&b_[slots[a]]);
    }
    const double v0 = value[q], v1 = q + 1 < n ? value[q + 1] : 0.0,
                 v2 = q + 2 < n ? value[q + 2] : 0.0, v3 = q + 3 < n ? value[q + 3] : 0.0;
    bx += b_[slots[q]] * v0 + b_[slots[q + 1]] * v1 + b_[slots[q + 2]] * v2 +
          b_[slots[q + 3]] * v3;
    const float* c0 = Column(slots[q]);
    const float* c1 = Column(slots[q + 1]);
    const float* c2 = Column(slots[q + 2]);
    const float* c3 = Column(slots[q + 3]);
    for (int r = 0; r < rows; ++r) z[r] += v0 * c0[r] + v1 * c1[r] + v2 * c2[r] + v3 * c3[r];
  }
  ForwardSolve(z);  // z = L^{-1} B x
  double z2 = 0, qz = 0;
  for (int r = 0; r < rows_; ++r) {
    z2 += z[r] * z[r];
    qz += cross_[r] * z[r];
  }
  const double c = regularizer();
  // Woodbury: (cI + B'B)^{-1} = (I - B'(cI + BB')^{-1}B) / c.
  return Score{(bx - qz) / c, alpha_ * std::sqrt(std::max(0.0, (norm2 - z2) / c))};
}

absl::Status LinUcbSketched::ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const int d = dimension();
  out->resize(n);
  CoalescedTerms terms;
  for (int i = 0; i < n; ++i) {
    if (sparse) {
      const SparseVector& x = ctx.sparse_candidates[i];
      const double norm2 = CheckedSquaredNorm(x, d);
      if (norm2 < 0) return CheckSparse(absl::StrCat("candidates[", i, "]"), x, d);
      (*out)[i] = ScoreTerms(x.index.data(), x.value.data(), x.size(), norm2);
    } else {
      const Vector& x = ctx.candidates[i];
      if (x.size() != d || !IsInputVector(x))
        return CheckVector(absl::StrCat("candidates[", i, "]"), x, d);
      Coalescer::FromDense(x, &terms);
      (*out)[i] = ScoreTerms(terms.index.data(), terms.value.data(), terms.index.size(),
                             x.squaredNorm());
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<PreparedSelect> LinUcbSketched::PrepareSelect(const SelectContext& ctx) const {
  auto prepared = std::make_unique<Prepared>();
  prepared->owner = this;
  prepared->model_version = model_version_;
  const bool sparse = !ctx.sparse_candidates.empty();
  prepared->candidates = sparse ? static_cast<const void*>(ctx.sparse_candidates.data())
                                : static_cast<const void*>(ctx.candidates.data());
  prepared->count = sparse ? ctx.sparse_candidates.size() : ctx.candidates.size();
  if (!ScoreAll(ctx, &prepared->scores).ok()) return nullptr;  // Select reports the error
  return prepared;
}

absl::StatusOr<Decision> LinUcbSketched::Select(const SelectContext& ctx) {
  const bool sparse = !ctx.sparse_candidates.empty();
  const void* candidates = sparse ? static_cast<const void*>(ctx.sparse_candidates.data())
                                  : static_cast<const void*>(ctx.candidates.data());
  const size_t count = sparse ? ctx.sparse_candidates.size() : ctx.candidates.size();
  // Scores prepared for these very candidates on the model as it is now stand; otherwise (an
  // Update in between) they are computed afresh.
  const auto* prepared = dynamic_cast<const Prepared*>(ctx.prepared);
  const bool current = prepared != nullptr && prepared->owner == this &&
                       prepared->model_version == model_version_ &&
                       prepared->candidates == candidates && prepared->count == count;
  std::vector<Score> fresh;
  if (!current)
    if (auto s = ScoreAll(ctx, &fresh); !s.ok()) return s;
  const std::vector<Score>& scores = current ? prepared->scores : fresh;
  UcbChoice choice(static_cast<int>(scores.size()), ctx.want_scores);
  for (size_t i = 0; i < scores.size(); ++i)
    choice.Offer(static_cast<int>(i), scores[i].mean, scores[i].width);
  return std::move(choice).Take();
}

absl::Status LinUcbSketched::Update(const Observation& obs) {
  const int d = dimension();
  if (obs.sparse_features) {
    if (auto s = CheckSparse("features", *obs.sparse_features, d); !s.ok()) return s;
  } else if (auto s = CheckVector("features", obs.features, d); !s.ok()) {
    return s;
  }
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  if (obs.sparse_features)
    coalescer_.Coalesce(*obs.sparse_features, &terms_);
  else
    Coalescer::FromDense(obs.features, &terms_);

  // Everything the new row brings, computed before anything changes: the sketch holds the row
  // in single precision (x~), b the features as given.
  const int r_new = rows_;
  double y[2 * kMaxSketchSize];     // B x, for B b
  double ytil[2 * kMaxSketchSize];  // B x~, the new row of G
  std::fill(y, y + r_new, 0.0);
  std::fill(ytil, ytil + r_new, 0.0);
  double row_norm2 = 0, row_b = 0;
  const double reward = obs.reward;
  for (size_t q = 0; q < terms_.index.size(); ++q) {
    const double v = terms_.value[q];
    const double vt = static_cast<float>(v);
    if (!std::isfinite(vt))
      return absl::InvalidArgumentError(absl::StrCat(
          "features has the value ", v, " at index ", terms_.index[q],
          ", expected a magnitude single precision holds (the sketch keeps rows as floats)"));
    row_norm2 += vt * vt;
    const uint32_t slot = slot_of_[terms_.index[q]];
    const double b_after = b_[slot] + reward * v;  // the zero slot's b is 0
    row_b += vt * b_after;  // x~'b after this update
    if (slot == kZeroSlot) continue;
    const float* col = Column(slot);
    for (int r = 0; r < r_new; ++r) {
      y[r] += v * col[r];
      ytil[r] += vt * col[r];
    }
  }
  // The Cholesky factor's new row: l = L^{-1} g, eta^2 = G_rr + c - l'l, which is at least c
  // (a Schur complement of G + cI >= cI): the floor only guards rounding.
  double l[2 * kMaxSketchSize];
  std::copy(ytil, ytil + r_new, l);
  ForwardSolve(l);
  double l2 = 0;
  for (int r = 0; r < r_new; ++r) l2 += l[r] * l[r];
  const double c = regularizer();
  const double eta = std::sqrt(std::max(row_norm2 + c - l2, c));
  bool finite = std::isfinite(row_norm2) && std::isfinite(row_b) && std::isfinite(eta);
  for (int r = 0; r < r_new && finite; ++r)
    finite = std::isfinite(bb_[r] + reward * y[r]) && std::isfinite(l[r]);
  if (!finite)
    return absl::InvalidArgumentError(
        "features and reward overflow the sketch's sums, expected smaller magnitudes");

  // The update (Alg. 1 line 13's b += r x; the row appended to the sketch's buffer).
  for (size_t q = 0; q < terms_.index.size(); ++q) {
    const uint32_t j = terms_.index[q];
    if (slot_of_[j] == kZeroSlot) {
      if (coordinate_.size() == coordinate_.capacity()) {
        // Grow to at most d coordinates, so the capacity stays within MaxStateBytes.
        const size_t cap =
            std::min<size_t>(std::max<size_t>(16, 2 * coordinate_.size()), size_t{1} + d);
        coordinate_.reserve(cap);
        b_.reserve(cap);
        columns_.reserve(cap * buffer_);
      }
      slot_of_[j] = static_cast<uint32_t>(coordinate_.size());
      coordinate_.push_back(j);
      b_.push_back(0.0);
      columns_.resize(columns_.size() + buffer_, 0.0f);
    }
    const uint32_t slot = slot_of_[j];
    b_[slot] += reward * terms_.value[q];
    Column(slot)[r_new] = static_cast<float>(terms_.value[q]);
  }
  for (int r = 0; r < r_new; ++r) {
    bb_[r] += reward * y[r];
    gram_(r_new, r) = gram_(r, r_new) = ytil[r];
    cholesky_(r_new, r) = l[r];
  }
  bb_[r_new] = row_b;
  gram_(r_new, r_new) = row_norm2;
  cholesky_(r_new, r_new) = eta;
  rows_ = r_new + 1;
  if (rows_ == buffer_) Shrink();
  RefreshCrossTerm();
  ++updates_;
  ++model_version_;
  return absl::OkStatus();
}

void LinUcbSketched::Shrink() {
  // Frequent Directions, Alg. 3.1: B = U S V' with S^2 the eigenvalues of G = BB' and
  // V' = S^{-1} U' B; delta = s_l^2 (the l-th largest); B <- sqrt(max(S^2 - delta, 0)) V', whose
  // rows from the l-th on are zero. In terms of the columns: B <- W B with
  // W = diag(sqrt((s_i^2 - delta) / s_i^2)) U' over the l - 1 largest.
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
  // The columns in blocks, through Eigen's matrix products: B's kept rows W B, then G and B b
  // again from the values held (single precision), so that they are exactly the sketch's.
  using FloatColumns = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>>;
  const Eigen::Index seen = static_cast<Eigen::Index>(coordinate_.size());
  FloatColumns columns(columns_.data(), buffer_, seen);
  const Eigen::Map<const Vector> b(b_.data(), seen);
  constexpr Eigen::Index kBlock = 1024;
  Matrix old, fresh;
  Matrix gram = Matrix::Zero(keep, keep);
  Vector bb = Vector::Zero(keep);
  for (Eigen::Index j0 = 0; j0 < seen; j0 += kBlock) {
    const Eigen::Index nb = std::min(kBlock, seen - j0);
    old = columns.block(0, j0, r, nb).cast<double>();
    fresh.noalias() = w * old;
    columns.block(0, j0, buffer_, nb).setZero();
    columns.block(0, j0, keep, nb) = fresh.cast<float>();
    fresh = columns.block(0, j0, keep, nb).cast<double>();  // the values held
    gram.selfadjointView<Eigen::Lower>().rankUpdate(fresh);
    bb.noalias() += fresh * b.segment(j0, nb);
  }
  gram_.setZero();
  gram_.topLeftCorner(keep, keep) = gram.selfadjointView<Eigen::Lower>();
  bb_.setZero();
  bb_.head(keep) = bb;
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

void LinUcbSketched::RefreshCrossTerm() {
  cross_.setZero();
  for (int r = 0; r < rows_; ++r) cross_[r] = bb_[r];
  ForwardSolve(cross_.data());
}

Vector LinUcbSketched::Weights() const {
  // theta = (b - B'(G + cI)^{-1} B b) / c, with (G + cI)^{-1} B b = L^{-T} (L^{-1} B b).
  Vector w = cross_.head(rows_);
  for (int r = rows_ - 1; r >= 0; --r) {
    double s = w[r];
    for (int k = r + 1; k < rows_; ++k) s -= cholesky_(k, r) * w[k];
    w[r] = s / cholesky_(r, r);
  }
  Vector theta = Vector::Zero(dimension());
  const double c = regularizer();
  for (size_t slot = kZeroSlot + 1; slot < coordinate_.size(); ++slot) {
    const float* col = Column(static_cast<uint32_t>(slot));
    double s = b_[slot];
    for (int r = 0; r < rows_; ++r) s -= col[r] * w[r];
    theta[coordinate_[slot]] = s / c;
  }
  return theta;
}

Matrix LinUcbSketched::SketchRows() const {
  Matrix out = Matrix::Zero(rows_, dimension());
  for (size_t slot = kZeroSlot + 1; slot < coordinate_.size(); ++slot)
    for (int r = 0; r < rows_; ++r)
      out(r, coordinate_[slot]) = Column(static_cast<uint32_t>(slot))[r];
  return out;
}

void LinUcbSketched::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  const size_t seen = coordinate_.size() - 1;  // the zero slot is not saved
  Vector coordinates(seen), b(seen), columns(seen * rows_);
  for (size_t k = 0; k < seen; ++k) {
    const uint32_t slot = static_cast<uint32_t>(k + 1);
    coordinates[k] = coordinate_[slot];
    b[k] = b_[slot];
    for (int r = 0; r < rows_; ++r) columns[k * rows_ + r] = Column(slot)[r];
  }
  w.Put("sketch_coordinates", coordinates);
  w.Put("sketch_b", b);
  w.Put("sketch_columns", columns);
  w.Put("sketch_gram", Matrix(gram_.topLeftCorner(rows_, rows_)));
  w.Put("sketch_cholesky", Matrix(cholesky_.topLeftCorner(rows_, rows_)));
  w.Put("sketch_bb", Vector(bb_.head(rows_)));
  w.PutScalar("sketch_shrinkage", shrinkage_);
  w.PutInt("sketch_size", sketch_size_);
  w.PutInt("sketch_shrinks", shrinks_);
  w.PutInt("updates", updates_);
}

absl::Status LinUcbSketched::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  int64_t size, shrinks, updates;
  double shrinkage;
  Vector coordinates, b, columns, bb;
  Matrix gram, cholesky;
  if (auto s = r.GetInt("sketch_size", &size); !s.ok()) return s;
  if (size != sketch_size_)
    return absl::InvalidArgumentError(absl::StrCat("linucb sketched state has sketch_size ", size,
                                                   ", expected ", sketch_size_));
  if (auto s = r.Get("sketch_coordinates", &coordinates); !s.ok()) return s;
  const int64_t seen = coordinates.size();
  if (auto s = r.Get("sketch_b", &b, seen); !s.ok()) return s;
  if (auto s = r.Get("sketch_gram", &gram); !s.ok()) return s;
  const int64_t rows = gram.rows();
  if (gram.cols() != rows || rows >= buffer_)
    return absl::InvalidArgumentError(
        absl::StrCat("linucb sketched state has a ", gram.rows(), " x ", gram.cols(),
                     " sketch gram, expected a square one of fewer than ", buffer_, " rows"));
  if (auto s = r.Get("sketch_cholesky", &cholesky, rows, rows); !s.ok()) return s;
  if (auto s = r.Get("sketch_bb", &bb, rows); !s.ok()) return s;
  if (auto s = r.Get("sketch_columns", &columns, seen * rows); !s.ok()) return s;
  if (auto s = r.GetScalar("sketch_shrinkage", &shrinkage); !s.ok()) return s;
  if (auto s = r.GetInt("sketch_shrinks", &shrinks); !s.ok()) return s;
  if (auto s = r.GetInt("updates", &updates); !s.ok()) return s;
  if (!b.allFinite() || !gram.allFinite() || !cholesky.allFinite() || !bb.allFinite() ||
      !columns.allFinite() || !std::isfinite(shrinkage) || shrinkage < 0 ||
      (rows > 0 && !(cholesky.diagonal().array() > 0).all()))
    return absl::InvalidArgumentError(
        "linucb sketched state has non-finite values, a negative shrinkage or a singular "
        "factor, expected finite values and a positive factor diagonal");
  std::vector<uint32_t> slot_of(slot_of_.size(), kZeroSlot);
  for (int64_t k = 0; k < seen; ++k) {
    const double c = coordinates[k];
    if (!(c >= 0 && c < dimension()) || c != std::floor(c) ||
        slot_of[static_cast<size_t>(c)] != kZeroSlot)
      return absl::InvalidArgumentError(absl::StrCat(
          "linucb sketched state's sketch_coordinates[", k, "] is ", c,
          ", expected distinct coordinates in [0, ", dimension(), ")"));
    slot_of[static_cast<size_t>(c)] = static_cast<uint32_t>(k + 1);
  }
  slot_of_ = std::move(slot_of);
  coordinate_.assign(seen + 1, kNoCoordinate);
  b_.assign(seen + 1, 0);
  columns_.assign((seen + 1) * buffer_, 0.0f);
  for (int64_t k = 0; k < seen; ++k) {
    const uint32_t slot = static_cast<uint32_t>(k + 1);
    coordinate_[slot] = static_cast<uint32_t>(coordinates[k]);
    b_[slot] = b[k];
    for (int64_t r = 0; r < rows; ++r)
      Column(slot)[r] = static_cast<float>(columns[k * rows + r]);
  }
  rows_ = static_cast<int>(rows);
  gram_.setZero();
  gram_.topLeftCorner(rows, rows) = gram;
  cholesky_.setZero();
  cholesky_.topLeftCorner(rows, rows) = cholesky;
  bb_.setZero();
  bb_.head(rows) = bb;
  shrinkage_ = shrinkage;
  shrinks_ = shrinks;
  updates_ = updates;
  RefreshCrossTerm();
  ++model_version_;
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> LinUcbSketched::Summary() const {
  return {{"updates", static_cast<double>(updates_)},
          {"sketch_rows", static_cast<double>(rows_)},
          {"sketch_shrinks", static_cast<double>(shrinks_)},
          {"sketch_spectral_error_bound", shrinkage_},
          {"regularizer", regularizer()},
          {"seen_coordinates", static_cast<double>(seen_coordinates())}};
}

}  // namespace bandit
