#include "core/kernel/candidate_gp_ucb.h"

#include <cmath>

#include "core/state_io.h"
#include "core/validate.h"

namespace bandit {

namespace {
constexpr int64_t kGpMinCapacity = 64;
}

absl::StatusOr<std::unique_ptr<Policy>> CandidateGpUcb::Make(const bandit::v1::PolicyConfig& config,
                                                             const KernelUcbParams& params,
                                                             uint64_t seed) {
  const auto& c = config.gp_ucb();
  if (auto s = CheckCandidatesForm("gp_ucb", c.dimension(), config); !s.ok()) return s;
  const int64_t max_pulls = c.has_max_pulls() ? c.max_pulls() : kDefaultMaxPulls;
  if (max_pulls < 1 || max_pulls > kMaxMaxPulls)
    return absl::InvalidArgumentError(absl::StrCat(
        "gp_ucb.max_pulls is ", max_pulls, ", expected an integer in [1, ", kMaxMaxPulls, "]"));
  return std::unique_ptr<Policy>(new CandidateGpUcb(c.dimension(), params, max_pulls, seed));
}

CandidateGpUcb::CandidateGpUcb(int dim, KernelUcbParams params, int64_t max_pulls, uint64_t seed)
    : CandidateKernelUcb(dim, params, seed), max_pulls_(max_pulls) {
  Clear();
}

void CandidateGpUcb::Clear() {
  X_.resize(dim_, 0);
  y_.resize(0);
  L_.resize(0, 0);
  u_.resize(0);
  trace_inv_ = 0;
  total_ = 0;
  kappa2_ = 1.0;
}

void CandidateGpUcb::Append(const Vector& x, double y) {
  const Eigen::Index t = total_;
  if (t == X_.cols()) {  // grow by doubling up to max_pulls: amortized O(t d + t^2) copies
    const Eigen::Index cap = std::min<Eigen::Index>(std::max<Eigen::Index>(kGpMinCapacity, 2 * t),
                                                    std::max<int64_t>(max_pulls_, t + 1));
    X_.conservativeResize(Eigen::NoChange, cap);
    y_.conservativeResize(cap);
    u_.conservativeResize(cap);
    Matrix L = Matrix::Zero(cap, cap);
    L.topLeftCorner(t, t) = L_.topLeftCorner(t, t);
    L_ = std::move(L);
  }
  const double kxx = params_.kernel.Diag(x);
  // New row of the Cholesky factor of K_{t+1} + lambda I.
  Vector l = params_.kernel.Cross(X_.leftCols(t), x).col(0);
  L_.topLeftCorner(t, t).triangularView<Eigen::Lower>().solveInPlace(l);
  // The Schur complement k(x,x) + lambda - |l|^2 is >= lambda (posterior variance >= 0);
  // anything below is rounding.
  const double c = std::sqrt(std::max(kxx + params_.lambda - l.squaredNorm(), params_.lambda));
  // |L^{-1}|_F^2 gains the new row of L^{-1}: (-l^T L^{-1}, 1) / c.
  Vector g = l;
  L_.topLeftCorner(t, t).triangularView<Eigen::Lower>().transpose().solveInPlace(g);
  trace_inv_ += (g.squaredNorm() + 1.0) / (c * c);
  u_[t] = (y - l.dot(u_.head(t))) / c;
  L_.row(t).head(t) = l.transpose();
  L_(t, t) = c;
  X_.col(t) = x;
  y_[t] = y;
  kappa2_ = NextKappa2(kxx);
  total_ = t + 1;
}

absl::Status CandidateGpUcb::Observe(const Vector& x, double y) {
  if (total_ >= max_pulls_)
    return absl::ResourceExhaustedError(absl::StrCat(
        "gp_ucb holds ", total_, " pulls, its max_pulls; exact GP-UCB keeps every pull (",
        "O(t^2) memory), expected a reset, a larger max_pulls or bkb"));
  Append(x, y);
  return absl::OkStatus();
}

void CandidateGpUcb::Posterior(const Eigen::Ref<const Matrix>& X, Vector* mean, Vector* var) const {
  const Eigen::Index t = total_;
  const Vector kdiag = params_.kernel.DiagAll(X);
  if (t == 0) {
    mean->setZero(X.cols());
    *var = kdiag / params_.lambda;  // prior: k(x,x) / lambda
    return;
  }
  Matrix V = params_.kernel.Cross(X_.leftCols(t), X);  // k_t(x) per column
  L_.topLeftCorner(t, t).triangularView<Eigen::Lower>().solveInPlace(V);
  mean->noalias() = V.transpose() * u_.head(t);  // eq. (1)
  *var =
      ((kdiag - V.colwise().squaredNorm().transpose()) / params_.lambda).cwiseMax(0.0);  // eq. (2)
}

double CandidateGpUcb::SumPulledVariance() const {
  return std::max(0.0, static_cast<double>(total_) - params_.lambda * trace_inv_);
}

void CandidateGpUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, "gp_ucb_candidates", 1);
  w.Put("pulls", Matrix(X_.leftCols(total_)));
  w.Put("rewards", Vector(y_.head(total_)));
  w.PutRng(rng_);
}

absl::Status CandidateGpUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect("gp_ucb_candidates", 1); !s.ok()) return s;
  Matrix X;
  Vector y;
  Rng rng;
  if (auto s = r.Get("pulls", &X, dim_, -1); !s.ok()) return s;
  if (auto s = r.Get("rewards", &y, X.cols()); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  if (X.cols() > max_pulls_)
    return absl::InvalidArgumentError(absl::StrCat(
        "state tensor pulls has ", X.cols(), " pulls, expected at most max_pulls = ", max_pulls_));
  if (!X.allFinite() || !y.allFinite())
    return absl::InvalidArgumentError(
        "state tensors pulls/rewards hold a NaN or infinity, "
        "expected finite numbers");
  // Replaying the appends in order rebuilds L, u and |L^{-1}|_F^2 bit for bit.
  Clear();
  for (Eigen::Index s = 0; s < X.cols(); ++s) Append(X.col(s), y[s]);
  rng_ = rng;
  return absl::OkStatus();
}

int64_t CandidateGpUcb::StateBytes() const {
  const int64_t t = total_;
  return (t * dim_ + 2 * t + t * t) * static_cast<int64_t>(sizeof(double)) + sizeof(rng_) +
         sizeof(trace_inv_);
}

void CandidateGpUcb::ExtraSummary(std::vector<std::pair<std::string, double>>* out) const {
  out->push_back({"max_pulls", static_cast<double>(max_pulls_)});
}

}  // namespace bandit
