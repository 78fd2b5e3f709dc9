#include "core/glb/glb_omd_sketched.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Eigenvalues>

#include "absl/strings/str_cat.h"
#include "core/common/prepared_scores.h"
#include "core/glb/projection.h"
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit::glb {

GlbOmdSketched::GlbOmdSketched(const GlbParams& p, int sketch_size)
    : p_(p), sketch_(p.d, sketch_size, p.lambda), theta_(1, 0.0), coalescer_(p.d) {}

int64_t GlbOmdSketched::MaxStateBytes(int64_t dim, int sketch_size) {
  // The sketch, theta by slot (every coordinate seen and the zero slot), the coalescing bitmap,
  // the round counter.
  return FdSketch::MaxBytes(dim, sketch_size) + (dim + 1) * 8 + (dim + 63) / 64 * 8 + 8;
}

int64_t GlbOmdSketched::StateBytes() const {
  return sketch_.bytes() + static_cast<int64_t>(theta_.capacity() * sizeof(double)) +
         coalescer_.bytes() + 8;
}

double GlbOmdSketched::Beta() const {
  return p_.radius_multiplier * GlbOmdBeta(p_, p_.lambda, t_ + 1);
}

absl::Status GlbOmdSketched::Terms(absl::FunctionRef<std::string()> field,
                                   const SparseVector* sparse, const Vector* dense,
                                   CoalescedTerms* out, double* norm2) {
  if (sparse) {
    if (!SparseIsValid(*sparse, p_.d)) return CheckSparse(field(), *sparse, p_.d);
    coalescer_.Coalesce(*sparse, out);
  } else {
    if (dense->size() != p_.d || !IsInputVector(*dense)) return CheckVector(field(), *dense, p_.d);
    Coalescer::FromDense(*dense, out);
  }
  *norm2 = 0;
  for (double v : out->value) *norm2 += v * v;
  return CheckNorm(field, *norm2, p_.max_feature_norm);
}

absl::Status GlbOmdSketched::ScoreAll(const SelectContext& ctx, std::vector<Score>* out) const {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one feature vector");
  const double beta = Beta();
  const double c = sketch_.regularizer();
  const int rows = sketch_.rows();
  out->resize(n);
  std::vector<double> norm2(n), logit(n), ys(static_cast<size_t>(n) * rows);
  if (sparse) {
    for (int i = 0; i < n; ++i) {
      const auto field = [i] { return absl::StrCat("candidates[", i, "]"); };
      const SparseVector& x = ctx.sparse_candidates[i];
      norm2[i] = SquaredNormIfValid(x, p_.d);
      if (norm2[i] < 0) return CheckSparse(field(), x, p_.d);
      if (auto s = CheckNorm(field, norm2[i], p_.max_feature_norm); !s.ok()) return s;
    }
    sketch_.TimesAll(ctx.sparse_candidates, theta_.data(), ys.data(), logit.data());
  } else {
    CoalescedTerms terms;  // not the policy's scratch: concurrent PrepareSelect calls score
    for (int i = 0; i < n; ++i) {
      const auto field = [i] { return absl::StrCat("candidates[", i, "]"); };
      const Vector& x = ctx.candidates[i];
      if (x.size() != p_.d || !IsInputVector(x)) return CheckVector(field(), x, p_.d);
      norm2[i] = x.squaredNorm();
      if (auto s = CheckNorm(field, norm2[i], p_.max_feature_norm); !s.ok()) return s;
      Coalescer::FromDense(x, &terms);
      logit[i] = sketch_.Times(terms.index.data(), terms.value.data(), terms.index.size(),
                               theta_.data(), ys.data() + static_cast<size_t>(i) * rows);
    }
  }
  for (int i = 0; i < n; ++i) {
    double* y = ys.data() + static_cast<size_t>(i) * rows;
    sketch_.ForwardSolve(y);  // L^{-1} B x
    double w2 = 0;
    for (int r = 0; r < rows; ++r) w2 += y[r] * y[r];
    // eq. (6), the width by Woodbury
    (*out)[i] = Score{logit[i], logit[i] + beta * std::sqrt(std::max(0.0, (norm2[i] - w2) / c))};
  }
  return absl::OkStatus();
}

std::unique_ptr<PreparedSelect> GlbOmdSketched::PrepareSelect(const SelectContext& ctx) const {
  auto prepared = std::make_unique<PreparedScores<Score>>(this, model_version_, ctx);
  if (!ScoreAll(ctx, &prepared->scores()).ok()) return nullptr;  // Select reports the error
  return prepared;
}

absl::StatusOr<Decision> GlbOmdSketched::Select(const SelectContext& ctx) {
  const std::vector<Score>* scores = PreparedScores<Score>::Current(this, model_version_, ctx);
  std::vector<Score> fresh;
  if (scores == nullptr) {
    if (auto s = ScoreAll(ctx, &fresh); !s.ok()) return s;
    scores = &fresh;
  }
  const int n = static_cast<int>(scores->size());
  Vector ucb(n), logit(n);
  int arm = -1;
  for (int i = 0; i < n; ++i) {
    logit[i] = (*scores)[i].logit;
    ucb[i] = (*scores)[i].ucb;
    if (arm < 0 || ucb[i] > ucb[arm]) arm = i;  // ties to the lowest index
  }
  return UcbDecision(p_.link, arm, ucb, logit, Beta(), ctx.want_scores);
}

absl::Status GlbOmdSketched::Update(const Observation& obs) {
  double norm2;
  if (auto s = Terms([] { return std::string("features"); },
                     obs.sparse_features ? &*obs.sparse_features : nullptr,
                     obs.sparse_features ? nullptr : &obs.features, &terms_, &norm2);
      !s.ok())
    return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const size_t m = terms_.index.size();
  const int rows = sketch_.rows();
  const size_t slots = sketch_.slots();
  const double c = sketch_.regularizer();
  const double eta = p_.eta();
  // Everything is computed before anything changes. x's coordinates without a slot yet are
  // kept apart (`fresh`, by term) until the update is applied.
  double y[2 * FdSketch::kMaxSketchSize];
  const double z = sketch_.Times(terms_.index.data(), terms_.value.data(), m, theta_.data(), y);
  const double grad = p_.link.LossGrad(z, obs.reward);  // grad l_t(theta_t) = grad * x
  const double ct = eta * p_.link.LossHess(z);          // c_t = eta * mu'(x'theta_t) / g
  // u = H^_t^{-1} x = (x - B'(G + cI)^{-1} B x) / c, with (G + cI)^{-1} B x = L^{-T} L^{-1} B x;
  // x'u = (||x||^2 - ||L^{-1} B x||^2) / c.
  double w[2 * FdSketch::kMaxSketchSize];
  std::copy(y, y + rows, w);
  sketch_.ForwardSolve(w);
  double w2 = 0;
  for (int r = 0; r < rows; ++r) w2 += w[r] * w[r];
  const double xu = std::max(0.0, (norm2 - w2) / c);
  sketch_.BackwardSolve(w);
  // (28a): H~_t^{-1} x = u / (1 + c_t x'u) (Sherman-Morrison), zeta = theta_t - eta grad that.
  const double step = eta * grad / (1.0 + ct * xu);
  std::vector<double> zeta(theta_);  // by slot
  std::vector<double> x_by_slot(slots, 0.0);
  std::vector<double> fresh(m, 0.0);  // zeta at x's coordinates without a slot
  for (size_t q = 0; q < m; ++q) {
    const uint32_t slot = sketch_.SlotOf(terms_.index[q]);
    if (slot == FdSketch::kZeroSlot)
      fresh[q] = -step * terms_.value[q] / c;  // B's column there is zero: u_j = x_j / c
    else
      x_by_slot[slot] = terms_.value[q];
  }
  double zeta2 = 0;
  for (size_t slot = FdSketch::kZeroSlot + 1; slot < slots; ++slot) {
    const float* col = sketch_.Column(static_cast<uint32_t>(slot));
    double bw = 0;
    for (int r = 0; r < rows; ++r) bw += col[r] * w[r];
    zeta[slot] -= step * (x_by_slot[slot] - bw) / c;
    zeta2 += zeta[slot] * zeta[slot];
  }
  for (size_t q = 0; q < m; ++q) zeta2 += fresh[q] * fresh[q];

  std::vector<double>& next = zeta;  // theta_{t+1} by slot; `fresh` beside it
  if (std::sqrt(zeta2) > p_.S) {
    // (28b) in H~_t = c I + B~'B~, B~ = [B; sqrt(c_t) x]. With B~B~' = U diag(s2) U', B~'s right
    // singular vectors are v_i = B~'u_i / sqrt(s2_i); a_i = v_i'zeta; H~_t is c + s2_i along v_i
    // and c on the rest, where zeta's part has norm^2 ||zeta||^2 - ||a||^2. Projecting onto the
    // ball in that basis: theta = (H~ + nu I)^{-1} H~ zeta
    //   = c/(c + nu) zeta + sum_i ((c + s2_i)/(c + s2_i + nu) - c/(c + nu)) a_i v_i.
    const int k = rows + 1;
    const double sc = std::sqrt(ct);
    Matrix gram(k, k);
    gram.topLeftCorner(rows, rows) = sketch_.Gram();
    for (int r = 0; r < rows; ++r) gram(rows, r) = gram(r, rows) = sc * y[r];
    gram(rows, rows) = ct * norm2;
    std::vector<double> bz(k, 0.0);  // B~ zeta
    sketch_.TimesBySlot(zeta, bz.data());
    double xz = 0;
    for (size_t q = 0; q < m; ++q) {
      const uint32_t slot = sketch_.SlotOf(terms_.index[q]);
      xz += terms_.value[q] * (slot == FdSketch::kZeroSlot ? fresh[q] : zeta[slot]);
    }
    bz[rows] = sc * xz;
    Eigen::SelfAdjointEigenSolver<Matrix> eig(gram);
    const Vector& s2 = eig.eigenvalues();
    const Matrix& u = eig.eigenvectors();
    const double s2_max = std::max(s2.maxCoeff(), 0.0);
    std::vector<int> kept;
    Vector a_all = Vector::Zero(k);
    double a2 = 0;
    for (int i = 0; i < k; ++i) {
      if (!(s2[i] > 1e-12 * s2_max)) continue;  // no direction: its part of zeta is in the rest
      double uz = 0;
      for (int r = 0; r < k; ++r) uz += u(r, i) * bz[r];
      a_all[i] = uz / std::sqrt(s2[i]);
      a2 += a_all[i] * a_all[i];
      kept.push_back(i);
    }
    const int nk = static_cast<int>(kept.size());
    Vector l(nk + 1), a(nk + 1);
    for (int q = 0; q < nk; ++q) {
      l[q] = c + s2[kept[q]];
      a[q] = a_all[kept[q]];
    }
    l[nk] = c;
    a[nk] = std::sqrt(std::max(0.0, zeta2 - a2));
    const double nu = ProjectOntoBallDiagonal(l, a, p_.S).nu;
    const double rest = c / (c + nu);
    // sum_i kappa_i a_i v_i = B~' q with q = sum_i u_i kappa_i a_i / sqrt(s2_i).
    Vector qv = Vector::Zero(k);
    for (int q = 0; q < nk; ++q) {
      const int i = kept[q];
      const double kappa = l[q] / (l[q] + nu) - rest;
      qv += u.col(i) * (kappa * a[q] / std::sqrt(s2[i]));
    }
    for (size_t slot = FdSketch::kZeroSlot + 1; slot < slots; ++slot) {
      const float* col = sketch_.Column(static_cast<uint32_t>(slot));
      double bq = 0;
      for (int r = 0; r < rows; ++r) bq += col[r] * qv[r];
      next[slot] = rest * next[slot] + bq + sc * qv[rows] * x_by_slot[slot];
    }
    for (size_t q = 0; q < m; ++q) fresh[q] = rest * fresh[q] + sc * qv[rows] * terms_.value[q];
  }
  // Line 5: H_{t+1} = H_t + mu'(x'theta_{t+1})/g x x', the row sqrt(that) x in the sketch.
  double z2 = 0;
  for (size_t q = 0; q < m; ++q) {
    const uint32_t slot = sketch_.SlotOf(terms_.index[q]);
    z2 += terms_.value[q] * (slot == FdSketch::kZeroSlot ? fresh[q] : next[slot]);
  }
  const double c2 = p_.link.LossHess(z2);
  FdSketch::Row row;
  if (c2 > 0)
    if (auto s = sketch_.Prepare(terms_, std::sqrt(c2), &row); !s.ok()) return s;
  bool finite = std::isfinite(z2);
  for (size_t slot = 0; slot < slots && finite; ++slot) finite = std::isfinite(next[slot]);
  if (!finite)
    return absl::InvalidArgumentError(
        "features and reward overflow glb_omd's step, expected smaller magnitudes");

  // Apply: the new coordinates take slots (zero columns), theta_{t+1}, the sketch's row.
  sketch_.AddCoordinates(terms_);
  next.resize(sketch_.slots(), 0.0);
  for (size_t q = 0; q < m; ++q)
    if (const uint32_t slot = sketch_.SlotOf(terms_.index[q]); slot >= slots) next[slot] = fresh[q];
  theta_ = std::move(next);
  if (c2 > 0) sketch_.Append(terms_, std::sqrt(c2), row);
  ++t_;
  ++model_version_;
  return absl::OkStatus();
}

Vector GlbOmdSketched::Weights() const {
  Vector theta = Vector::Zero(p_.d);
  for (size_t slot = FdSketch::kZeroSlot + 1; slot < sketch_.slots(); ++slot)
    theta[sketch_.CoordinateOf(static_cast<uint32_t>(slot))] = theta_[slot];
  return theta;
}

void GlbOmdSketched::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  sketch_.Save(w);
  w.Put("theta", Vector(Eigen::Map<const Vector>(theta_.data() + 1, theta_.size() - 1)));
  w.PutInt("t", t_);
}

absl::Status GlbOmdSketched::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  FdSketch sketch(p_.d, sketch_.sketch_size(), sketch_.lambda());
  if (auto s = sketch.Restore(r, "glb_omd sketched"); !s.ok()) return s;
  Vector theta;
  int64_t t;
  if (auto s = r.Get("theta", &theta, static_cast<int64_t>(sketch.slots()) - 1); !s.ok())
    return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (!theta.allFinite() || t < 0)
    return absl::InvalidArgumentError(
        "glb_omd sketched state has non-finite theta or t < 0, expected finite values, t >= 0");
  sketch_ = std::move(sketch);
  theta_.assign(1, 0.0);
  theta_.insert(theta_.end(), theta.data(), theta.data() + theta.size());
  t_ = t;
  ++model_version_;
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> GlbOmdSketched::Summary() const {
  double norm2 = 0;
  for (double v : theta_) norm2 += v * v;
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"lambda", p_.lambda},
          {"theta_norm", std::sqrt(norm2)},
          {"sketch_rows", static_cast<double>(sketch_.rows())},
          {"sketch_shrinks", static_cast<double>(sketch_.shrinks())},
          {"sketch_spectral_error_bound", sketch_.shrinkage()},
          {"regularizer", sketch_.regularizer()},
          {"seen_coordinates", static_cast<double>(sketch_.slots() - 1)}};
}

}  // namespace bandit::glb
