#include "core/kernel/candidate_bkb.h"

#include <algorithm>
#include <cmath>

#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

namespace {
constexpr int kMaxResampleEvery = 1000000;
constexpr Eigen::Index kInitialCapacity = 64;

// Lexicographic order of feature vectors.
bool LexLess(const Eigen::Ref<const Vector>& a, const Eigen::Ref<const Vector>& b) {
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if (a[i] < b[i]) return true;
    if (a[i] > b[i]) return false;
  }
  return false;
}
// L L^T + z z^T in place, L lower triangular with a positive diagonal: the Givens-style
// rank-one Cholesky update (Golub & Van Loan, Matrix Computations, Sec. 6.5.4), O(r^2).
void CholeskyRankOneUpdate(Matrix* L, Vector z) {
  const Eigen::Index n = z.size();
  for (Eigen::Index k = 0; k < n; ++k) {
    const double lkk = (*L)(k, k);
    const double rkk = std::hypot(lkk, z[k]);
    const double c = rkk / lkk, s = z[k] / lkk;
    (*L)(k, k) = rkk;
    const Eigen::Index rest = n - k - 1;
    if (rest == 0) break;
    auto col = L->col(k).tail(rest);
    auto zt = z.tail(rest);
    col = (col + s * zt) / c;
    zt = c * zt - s * col;
  }
}
}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> CandidateBkb::Make(const bandit::v1::PolicyConfig& config,
                                                           const KernelUcbParams& params,
                                                           double q_bar, uint64_t seed) {
  const auto& c = config.bkb();
  if (auto s = CheckCandidatesForm("bkb", c.dimension(), config); !s.ok()) return s;
  const int resample_every = c.has_resample_every() ? c.resample_every() : 1;
  if (resample_every < 1 || resample_every > kMaxResampleEvery)
    return absl::InvalidArgumentError(absl::StrCat("bkb.resample_every is ", resample_every,
                                                   ", expected an integer in [1, ",
                                                   kMaxResampleEvery, "]"));
  const int64_t max_points = c.has_max_points() ? c.max_points() : kDefaultMaxPoints;
  if (max_points < 1 || max_points > kMaxMaxPoints)
    return absl::InvalidArgumentError(absl::StrCat(
        "bkb.max_points is ", max_points, ", expected an integer in [1, ", kMaxMaxPoints, "]"));
  return std::unique_ptr<Policy>(
      new CandidateBkb(c.dimension(), params, q_bar, resample_every, max_points, seed));
}

CandidateBkb::CandidateBkb(int dim, KernelUcbParams params, double q_bar, int resample_every,
                           int64_t max_points, uint64_t seed)
    : CandidateKernelUcb(dim, params, seed),
      q_bar_(q_bar),
      resample_every_(resample_every),
      max_points_(max_points) {
  X_.resize(dim_, 0);
  Rebuild();
  rebuilds_ = 0;  // the empty embedding is not a pass over pulls
}

std::pair<int, bool> CandidateBkb::Locate(const Vector& x) const {
  const auto it = std::lower_bound(order_.begin(), order_.end(), x, [this](int j, const Vector& v) {
    return LexLess(X_.col(j), v);
  });
  const int pos = static_cast<int>(it - order_.begin());
  return {pos, it != order_.end() && X_.col(*it) == x};
}

std::vector<int> CandidateBkb::DictionaryPoints() const {
  std::vector<int> dict;
  for (int j : order_)
    if (in_dict_[j]) dict.push_back(j);
  return dict;
}

void CandidateBkb::Refactor() {
  const Eigen::Index r = embedding_.rank();
  if (r == 0) {
    L_.resize(0, 0);
    trace_inv_ = 0;
    Resolve();
    return;
  }
  Matrix V = G_;
  V.diagonal().array() += params_.lambda;
  Eigen::LLT<Matrix> llt(V);
  L_ = llt.matrixL();
  // tr(V^{-1}) = |L^{-1}|_F^2.
  Matrix Linv = Matrix::Identity(r, r);
  L_.triangularView<Eigen::Lower>().solveInPlace(Linv);
  trace_inv_ = Linv.squaredNorm();
  Resolve();
}

void CandidateBkb::Resolve() {
  const Eigen::Index r = embedding_.rank();
  const double lambda = params_.lambda;
  if (r == 0) {
    w_.resize(0);
    sum_var_ = sum_kdiag_ / lambda;
    return;
  }
  w_ = b_;
  L_.triangularView<Eigen::Lower>().solveInPlace(w_);
  L_.triangularView<Eigen::Lower>().transpose().solveInPlace(w_);
  // sum_s sigma~_t^2(x_s) = (sum_s k(x_s,x_s) - tr(G V^{-1} G)) / lambda (eq. 4 summed over the
  // pulls), with tr(G V^{-1} G) = tr(G) - lambda r + lambda^2 tr(V^{-1}) because G = V - lambda I.
  sum_var_ = std::max(
      0.0, (sum_kdiag_ - G_.trace()) / lambda + static_cast<double>(r) - lambda * trace_inv_);
}

void CandidateBkb::Rebuild() {
  ++rebuilds_;
  const std::vector<int> dict = DictionaryPoints();
  const Eigen::Index m = static_cast<Eigen::Index>(dict.size());
  Matrix Xs(dim_, m);
  for (Eigen::Index j = 0; j < m; ++j) Xs.col(j) = X_.col(dict[j]);
  embedding_ = NystromEmbedding::Make(params_.kernel, std::move(Xs));
  const Eigen::Index r = embedding_.rank();
  if (r == 0) {
    G_.resize(0, 0);
    b_.resize(0);
    Refactor();
    return;
  }
  // Re-embed every past pull (Section 3: "store and re-embed previously selected arms"):
  // G = sum_i n_i z_i z_i^T and b = sum_i s_i z_i, points in lexicographic order.
  Matrix Xp(dim_, n_);
  Vector n(n_), s(n_);
  for (int k = 0; k < n_; ++k) {
    Xp.col(k) = X_.col(order_[k]);
    n[k] = counts_[order_[k]];
    s[k] = sums_[order_[k]];
  }
  const Matrix Zp = embedding_.Embed(params_.kernel, Xp);
  G_.resize(r, r);
  G_.noalias() = Zp * n.asDiagonal() * Zp.transpose();
  b_ = Zp * s;
  Refactor();
}

absl::Status CandidateBkb::Observe(const Vector& x, double y) {
  const auto [pos, found] = Locate(x);
  if (!found && n_ >= max_points_)
    return absl::ResourceExhaustedError(
        absl::StrCat("bkb holds ", n_,
                     " distinct pulled points, its max_points; expected a reset or a larger "
                     "max_points"));
  const bool first = total_ == 0;
  const bool full = !first && since_resample_ + 1 >= resample_every_;
  // sigma~_t^2 of the state before this observation (Fig. 1 draws with the posterior of step t).
  Vector var_points, mean_unused;
  double var_x = 0;
  if (full) {
    Matrix P(dim_, n_ + (found ? 0 : 1));
    P.leftCols(n_) = X_.leftCols(n_);
    if (!found) P.col(n_) = x;
    Posterior(P, &mean_unused, &var_points);
  } else if (!first) {
    Vector v;
    Posterior(x, &mean_unused, &v);
    var_x = v[0];
  }

  int idx;
  if (found) {
    idx = order_[pos];
  } else {
    if (n_ == X_.cols()) {  // grow by doubling
      const Eigen::Index cap = std::max<Eigen::Index>(kInitialCapacity, 2 * n_);
      X_.conservativeResize(Eigen::NoChange, cap);
      counts_.conservativeResize(cap);
      sums_.conservativeResize(cap);
    }
    idx = n_;
    X_.col(idx) = x;
    counts_[idx] = 0;
    sums_[idx] = 0;
    in_dict_.push_back(0);
    order_.insert(order_.begin() + pos, idx);
    ++n_;
  }
  counts_[idx] += 1.0;
  sums_[idx] += y;
  const double kxx = params_.kernel.Diag(x);
  sum_kdiag_ += kxx;
  kappa2_ = NextKappa2(kxx);
  ++total_;

  if (first) {  // Fig. 1: "Initialize S_1 = {x_1}"
    std::fill(in_dict_.begin(), in_dict_.end(), 0);
    in_dict_[idx] = 1;
    since_resample_ = 0;
    Rebuild();
    return absl::OkStatus();
  }
  if (full) {
    // Fig. 1 inner loop: S_{t+1} drawn from scratch from all pulls, p~ = q_bar sigma~_t^2; a point
    // pulled n_i times enters with probability 1 - (1 - p~_i)^{n_i}.
    const Vector keep = Bkb::ArmInclusion(q_bar_, var_points, counts_.head(n_));
    for (int j : order_) in_dict_[j] = rng_.Uniform() < keep[j] ? 1 : 0;
    since_resample_ = 0;
    Rebuild();
    return absl::OkStatus();
  }
  ++since_resample_;
  if (!in_dict_[idx] && rng_.Uniform() < std::clamp(q_bar_ * var_x, 0.0, 1.0)) {
    in_dict_[idx] = 1;  // the new pull's own draw of Fig. 1
    Rebuild();
    return absl::OkStatus();
  }
  // S unchanged: the pull is a rank-one change of the r x r system (see the header).
  if (embedding_.rank() > 0) {
    const Vector z = embedding_.Embed(params_.kernel, x).col(0);
    Vector v = z;  // V^{-1} z through the factor of the state before this pull
    L_.triangularView<Eigen::Lower>().solveInPlace(v);
    const double zvz = v.squaredNorm();
    L_.triangularView<Eigen::Lower>().transpose().solveInPlace(v);
    trace_inv_ = std::max(0.0, trace_inv_ - v.squaredNorm() / (1.0 + zvz));
    G_.noalias() += z * z.transpose();
    b_ += y * z;
    CholeskyRankOneUpdate(&L_, z);
  }
  Resolve();
  return absl::OkStatus();
}

void CandidateBkb::Posterior(const Eigen::Ref<const Matrix>& X, Vector* mean, Vector* var) const {
  DtcPosterior(params_.kernel, embedding_, L_, w_, X, params_.kernel.DiagAll(X), params_.lambda,
               mean, var);
}

double CandidateBkb::SumPulledVariance() const { return sum_var_; }

void CandidateBkb::Save(bandit::v1::PolicyState* out) const {
  // Version 2 adds the Cholesky factor and tr(V^{-1}): between redraws they are rank-one
  // updated, and a fresh factorization would differ in the last bits, so a resumed instance
  // would not decide exactly as the saved one.
  StateWriter w(out, "bkb_candidates", 2);
  w.Put("points", Matrix(X_.leftCols(n_)));
  w.Put("counts", Vector(counts_.head(n_)));
  w.Put("sums", Vector(sums_.head(n_)));
  Vector dict(n_);
  for (int j = 0; j < n_; ++j) dict[j] = in_dict_[j] ? 1.0 : 0.0;
  w.Put("dictionary", dict);
  w.PutScalar("sum_kdiag", sum_kdiag_);
  w.PutInt("since_resample", since_resample_);
  w.Put("gram", G_);
  w.Put("zy", b_);
  w.Put("cholesky", L_);
  w.PutScalar("trace_inv", trace_inv_);
  w.PutRng(rng_);
}

absl::Status CandidateBkb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  // Version 1 (no factor) is still read: V is then factored afresh.
  const bool v1 = r.Expect("bkb_candidates", 1).ok();
  if (!v1)
    if (auto s = r.Expect("bkb_candidates", 2); !s.ok()) return s;
  Matrix X, G, L;
  double trace_inv = 0;
  Vector counts, sums, dict, b;
  double sum_kdiag = 0;
  int64_t since = 0;
  Rng rng;
  if (auto s = r.Get("points", &X, dim_, -1); !s.ok()) return s;
  const Eigen::Index n = X.cols();
  if (n > max_points_)
    return absl::InvalidArgumentError(absl::StrCat(
        "state tensor points has ", n, " points, expected at most max_points = ", max_points_));
  if (auto s = r.Get("counts", &counts, n); !s.ok()) return s;
  if (auto s = r.Get("sums", &sums, n); !s.ok()) return s;
  if (auto s = r.Get("dictionary", &dict, n); !s.ok()) return s;
  if (auto s = r.GetScalar("sum_kdiag", &sum_kdiag); !s.ok()) return s;
  if (auto s = r.GetInt("since_resample", &since); !s.ok()) return s;
  if (auto s = r.Get("gram", &G); !s.ok()) return s;
  if (auto s = r.Get("zy", &b); !s.ok()) return s;
  if (!v1) {
    if (auto s = r.Get("cholesky", &L, G.rows(), G.cols()); !s.ok()) return s;
    if (auto s = r.GetScalar("trace_inv", &trace_inv); !s.ok()) return s;
  }
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  if (!X.allFinite() || !sums.allFinite() || !std::isfinite(sum_kdiag) || sum_kdiag < 0)
    return absl::InvalidArgumentError(
        "state tensors points/sums/sum_kdiag hold a NaN, infinity or negative sum, expected finite "
        "numbers");
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!std::isfinite(counts[i]) || counts[i] < 1 || counts[i] != std::floor(counts[i]))
      return absl::InvalidArgumentError(absl::StrCat("state tensor counts[", i, "] is ", counts[i],
                                                     ", expected a positive integer"));
    if (dict[i] != 0.0 && dict[i] != 1.0)
      return absl::InvalidArgumentError(
          absl::StrCat("state tensor dictionary[", i, "] is ", dict[i], ", expected 0 or 1"));
  }
  if (since < 0 || since >= resample_every_)
    return absl::InvalidArgumentError(absl::StrCat("state scalar since_resample is ", since,
                                                   ", expected an integer in [0, ", resample_every_,
                                                   ")"));
  std::vector<int> order(n);
  for (int j = 0; j < n; ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&X](int a, int c) { return LexLess(X.col(a), X.col(c)); });
  for (Eigen::Index k = 1; k < n; ++k)
    if (X.col(order[k - 1]) == X.col(order[k]))
      return absl::InvalidArgumentError(absl::StrCat("state tensor points has point ", order[k],
                                                     " twice, expected distinct points"));
  std::vector<int> dict_points;
  for (int j : order)
    if (dict[j] == 1.0) dict_points.push_back(j);
  Matrix Xs(dim_, dict_points.size());
  for (size_t j = 0; j < dict_points.size(); ++j) Xs.col(j) = X.col(dict_points[j]);
  NystromEmbedding e = NystromEmbedding::Make(params_.kernel, std::move(Xs));
  if (G.rows() != e.rank() || G.cols() != e.rank() || b.size() != e.rank() || !G.allFinite() ||
      !b.allFinite())
    return absl::InvalidArgumentError(absl::StrCat(
        "state tensors gram/zy have shape ", G.rows(), "x", G.cols(), " / ", b.size(),
        ", expected the dictionary's embedding rank ", e.rank(), " and finite numbers"));
  if (!v1) {
    // L must be a Cholesky factor of G + lambda I: lower triangular, positive diagonal, and
    // L L^T within rounding of G + lambda I.
    const Eigen::Index rk = G.rows();
    Matrix V = G;
    V.diagonal().array() += params_.lambda;
    bool ok = L.allFinite() && std::isfinite(trace_inv) && trace_inv >= 0;
    for (Eigen::Index j = 0; ok && j < rk; ++j) {
      ok = L(j, j) > 0 && (j == 0 || L.col(j).head(j).isZero(0.0));
    }
    if (ok && rk > 0) {
      const Matrix LLt = L.triangularView<Eigen::Lower>() * L.transpose();
      // Loose on purpose: a factor rank-one updated over up to resample_every (10^6) pulls
      // carries their accumulated rounding; a damaged factor is off by far more.
      ok = (LLt - V).norm() <= 1e-6 * V.norm();
    }
    if (!ok)
      return absl::InvalidArgumentError(
          "state tensor cholesky is not a Cholesky factor of gram + lambda I (lower triangular, "
          "positive diagonal, L L^T = gram + lambda I to rounding) or trace_inv is not a finite "
          "number >= 0, expected the factor the policy saved");
  }

  n_ = static_cast<int>(n);
  X_ = std::move(X);
  counts_ = std::move(counts);
  sums_ = std::move(sums);
  order_ = std::move(order);
  in_dict_.assign(n, 0);
  for (Eigen::Index j = 0; j < n; ++j) in_dict_[j] = dict[j] == 1.0 ? 1 : 0;
  sum_kdiag_ = sum_kdiag;
  since_resample_ = static_cast<int>(since);
  total_ = static_cast<int64_t>(counts_.sum());
  kappa2_ = 1.0;
  if (!params_.kernel.stationary() && n > 0) kappa2_ = params_.kernel.DiagAll(X_).maxCoeff();
  embedding_ = std::move(e);
  G_ = std::move(G);
  b_ = std::move(b);
  rng_ = rng;
  rebuilds_ = 0;
  if (v1) {
    Refactor();
  } else {
    L_ = std::move(L);
    trace_inv_ = trace_inv;
    Resolve();
  }
  return absl::OkStatus();
}

int64_t CandidateBkb::StateBytes() const {
  const int64_t m = dictionary_size(), r = rank();
  return static_cast<int64_t>(n_) * ((dim_ + 2) * sizeof(double) + 1 + sizeof(int)) +
         (m * dim_ + r * m + 2 * r * r + 2 * r) * static_cast<int64_t>(sizeof(double)) +
         sizeof(rng_) + sizeof(sum_kdiag_) + sizeof(trace_inv_);
}

void CandidateBkb::ExtraSummary(std::vector<std::pair<std::string, double>>* out) const {
  out->push_back({"points", static_cast<double>(n_)});
  out->push_back({"dictionary_size", static_cast<double>(dictionary_size())});
  out->push_back({"embedding_rank", static_cast<double>(rank())});
  out->push_back({"q_bar", q_bar_});
  out->push_back({"epsilon", params_.epsilon});
  out->push_back({"resample_every", static_cast<double>(resample_every_)});
}

void CandidateBkb::ExtraDiagnostics(Decision* d) const {
  d->diagnostics.push_back({"dictionary_size", static_cast<double>(dictionary_size())});
}

}  // namespace bandit
