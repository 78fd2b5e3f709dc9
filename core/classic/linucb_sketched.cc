#include "core/classic/linucb_sketched.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/classic/ucb_choice.h"
#include "core/common/prepared_scores.h"
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

LinUcbSketched::LinUcbSketched(int dim, double lambda, double alpha, int sketch_size)
    : alpha_(alpha),
      sketch_(dim, sketch_size, lambda),
      b_(1, 0.0),
      bb_(Vector::Zero(2 * sketch_size)),
      cross_(Vector::Zero(2 * sketch_size)),
      coalescer_(dim) {}

int64_t LinUcbSketched::MaxStateBytes(int64_t dim, int sketch_size) {
  // The sketch, b by slot (every coordinate seen and the zero slot), B b and L^{-1} B b, the
  // coalescing bitmap, the counters.
  return FdSketch::MaxBytes(dim, sketch_size) + (dim + 1) * 8 + 2 * (2 * sketch_size) * 8 +
         (dim + 63) / 64 * 8 + 2 * 8;
}

int64_t LinUcbSketched::StateBytes() const {
  return sketch_.bytes() + static_cast<int64_t>(b_.capacity() * sizeof(double)) +
         (bb_.size() + cross_.size()) * 8 + coalescer_.bytes() + 2 * 8;
}

LinUcbSketched::Score LinUcbSketched::ScoreOf(double* bx_times, double bx, double norm2) const {
  double* z = bx_times;
  sketch_.ForwardSolve(z);  // z = L^{-1} B x
  double z2 = 0, qz = 0;
  for (int r = 0; r < sketch_.rows(); ++r) {
    z2 += z[r] * z[r];
    qz += cross_[r] * z[r];
  }
  const double c = sketch_.regularizer();
  // Woodbury: (cI + B'B)^{-1} = (I - B'(cI + BB')^{-1}B) / c.
  return Score{(bx - qz) / c, alpha_ * std::sqrt(std::max(0.0, (norm2 - z2) / c))};
}

absl::Status LinUcbSketched::ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const int d = dimension();
  const int rows = sketch_.rows();
  out->resize(n);
  std::vector<double> norm2(n), bx(n), ys(static_cast<size_t>(n) * rows);
  if (sparse) {
    for (int i = 0; i < n; ++i) {
      const SparseVector& x = ctx.sparse_candidates[i];
      norm2[i] = SquaredNormIfValid(x, d);
      if (norm2[i] < 0) return CheckSparse(absl::StrCat("candidates[", i, "]"), x, d);
    }
    sketch_.TimesAll(ctx.sparse_candidates, b_.data(), ys.data(), bx.data());  // B x, b'x
  } else {
    CoalescedTerms terms;
    for (int i = 0; i < n; ++i) {
      const Vector& x = ctx.candidates[i];
      if (x.size() != d || !IsInputVector(x))
        return CheckVector(absl::StrCat("candidates[", i, "]"), x, d);
      Coalescer::FromDense(x, &terms);
      norm2[i] = x.squaredNorm();
      bx[i] = sketch_.Times(terms.index.data(), terms.value.data(), terms.index.size(),
                            b_.data(), ys.data() + static_cast<size_t>(i) * rows);
    }
  }
  for (int i = 0; i < n; ++i)
    (*out)[i] = ScoreOf(ys.data() + static_cast<size_t>(i) * rows, bx[i], norm2[i]);
  return absl::OkStatus();
}

std::unique_ptr<PreparedSelect> LinUcbSketched::PrepareSelect(const SelectContext& ctx) const {
  auto prepared = std::make_unique<PreparedScores<Score>>(this, model_version_, ctx);
  if (!ScoreAll(ctx, &prepared->scores()).ok()) return nullptr;  // Select reports the error
  return prepared;
}

absl::StatusOr<Decision> LinUcbSketched::Select(const SelectContext& ctx) {
  const std::vector<Score>* scores = PreparedScores<Score>::Current(this, model_version_, ctx);
  std::vector<Score> fresh;
  if (scores == nullptr) {
    if (auto s = ScoreAll(ctx, &fresh); !s.ok()) return s;
    scores = &fresh;
  }
  UcbChoice choice(static_cast<int>(scores->size()), ctx.want_scores);
  for (size_t i = 0; i < scores->size(); ++i)
    choice.Offer(static_cast<int>(i), (*scores)[i].mean, (*scores)[i].width);
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

  // Everything the update brings, computed before anything changes: the sketch holds the row in
  // single precision (x~), b the features as given.
  FdSketch::Row row;
  if (auto s = sketch_.Prepare(terms_, 1.0, &row); !s.ok()) return s;
  const int r_new = sketch_.rows();
  double y[2 * FdSketch::kMaxSketchSize];  // B x, for B b
  const double reward = obs.reward;
  sketch_.Times(terms_.index.data(), terms_.value.data(), terms_.index.size(), b_.data(), y);
  double row_b = 0;  // x~'b after this update
  bool finite = true;
  for (size_t q = 0; q < terms_.index.size(); ++q) {
    const double v = terms_.value[q];
    const double b_after = b_[sketch_.SlotOf(terms_.index[q])] + reward * v;
    row_b += static_cast<double>(static_cast<float>(v)) * b_after;
    finite &= std::isfinite(b_after);
  }
  finite &= std::isfinite(row_b);
  for (int r = 0; r < r_new && finite; ++r) finite = std::isfinite(bb_[r] + reward * y[r]);
  if (!finite)
    return absl::InvalidArgumentError(
        "features and reward overflow the sketch's sums, expected smaller magnitudes");

  // The update: Alg. 1 line 13's b += r x, the row appended to the sketch.
  const bool shrunk = sketch_.Append(terms_, 1.0, row);
  b_.resize(sketch_.slots(), 0.0);
  for (size_t q = 0; q < terms_.index.size(); ++q)
    b_[sketch_.SlotOf(terms_.index[q])] += reward * terms_.value[q];
  if (!shrunk) {
    for (int r = 0; r < r_new; ++r) bb_[r] += reward * y[r];
    bb_[r_new] = row_b;
  }
  RefreshCrossTerm(/*recompute_bb=*/shrunk);
  ++updates_;
  ++model_version_;
  return absl::OkStatus();
}

void LinUcbSketched::RefreshCrossTerm(bool recompute_bb) {
  if (recompute_bb) {
    bb_.setZero();
    sketch_.TimesBySlot(b_, bb_.data());
  }
  cross_.setZero();
  for (int r = 0; r < sketch_.rows(); ++r) cross_[r] = bb_[r];
  sketch_.ForwardSolve(cross_.data());
}

Vector LinUcbSketched::Weights() const {
  // theta = (b - B'(G + cI)^{-1} B b) / c, with (G + cI)^{-1} B b = L^{-T} (L^{-1} B b).
  Vector w = cross_;
  sketch_.BackwardSolve(w.data());
  Vector theta = Vector::Zero(dimension());
  const double c = sketch_.regularizer();
  for (size_t slot = FdSketch::kZeroSlot + 1; slot < sketch_.slots(); ++slot) {
    const float* col = sketch_.Column(static_cast<uint32_t>(slot));
    double s = b_[slot];
    for (int r = 0; r < sketch_.rows(); ++r) s -= col[r] * w[r];
    theta[sketch_.CoordinateOf(static_cast<uint32_t>(slot))] = s / c;
  }
  return theta;
}

void LinUcbSketched::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  sketch_.Save(w);
  w.Put("sketch_b", Vector(Eigen::Map<const Vector>(b_.data() + 1, b_.size() - 1)));
  w.Put("sketch_bb", Vector(bb_.head(sketch_.rows())));
  w.PutInt("updates", updates_);
}

absl::Status LinUcbSketched::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  FdSketch sketch(dimension(), sketch_.sketch_size(), sketch_.lambda());
  if (auto s = sketch.Restore(r, "linucb sketched"); !s.ok()) return s;
  Vector b, bb;
  int64_t updates;
  if (auto s = r.Get("sketch_b", &b, static_cast<int64_t>(sketch.slots()) - 1); !s.ok()) return s;
  if (auto s = r.Get("sketch_bb", &bb, sketch.rows()); !s.ok()) return s;
  if (auto s = r.GetInt("updates", &updates); !s.ok()) return s;
  if (!b.allFinite() || !bb.allFinite())
    return absl::InvalidArgumentError(
        "linucb sketched state has non-finite sketch_b or sketch_bb, expected finite values");
  sketch_ = std::move(sketch);
  b_.assign(1, 0.0);
  b_.insert(b_.end(), b.data(), b.data() + b.size());
  bb_.setZero();
  bb_.head(sketch_.rows()) = bb;
  updates_ = updates;
  RefreshCrossTerm(/*recompute_bb=*/false);
  ++model_version_;
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> LinUcbSketched::Summary() const {
  return {{"updates", static_cast<double>(updates_)},
          {"sketch_rows", static_cast<double>(sketch_.rows())},
          {"sketch_shrinks", static_cast<double>(sketch_.shrinks())},
          {"sketch_spectral_error_bound", sketch_.shrinkage()},
          {"regularizer", sketch_.regularizer()},
          {"seen_coordinates", static_cast<double>(sketch_.slots() - 1)}};
}

}  // namespace bandit
