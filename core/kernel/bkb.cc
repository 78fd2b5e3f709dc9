#include "core/kernel/bkb.h"

#include <cmath>

#include "core/kernel/candidate_bkb.h"
#include "core/validate.h"

namespace bandit {

namespace {
constexpr Eigen::Index kBlock = 2048;     // arms scored per block (bounds temporary memory)
constexpr double kPinvTolerance = 1e-10;  // relative eigenvalue cut for (K_S^{1/2})^+
constexpr double kDefaultEpsilon = 0.5;   // the paper's example value (after Theorem 4.1)
constexpr double kDefaultQBar = 5.0;  // practical default, see docs/algorithms.md (BKB parameters)
}  // namespace

double Bkb::TheoryQBar(double epsilon, double delta, int64_t horizon) {
  const double alpha = (1 + epsilon) / (1 - epsilon);
  return 6.0 * alpha * std::log(4.0 * static_cast<double>(horizon) / delta) / (epsilon * epsilon);
}

absl::StatusOr<std::unique_ptr<Policy>> Bkb::Make(const bandit::v1::PolicyConfig& config,
                                                  uint64_t seed) {
  const auto& c = config.bkb();
  KernelUcbParams params;
  if (auto s =
          ReadKernelUcbParams("bkb", c.kernel(), c.has_lambda(), c.lambda(), c.has_noise(),
                              c.noise(), c.has_f_bound(), c.f_bound(), c.has_delta(), c.delta(),
                              c.has_radius_multiplier(), c.radius_multiplier(), &params);
      !s.ok())
    return s;
  params.epsilon = c.has_epsilon() ? c.epsilon() : kDefaultEpsilon;
  if (!(params.epsilon > 0 && params.epsilon < 1))
    return absl::InvalidArgumentError(
        absl::StrCat("bkb.epsilon is ", params.epsilon, ", expected a number in (0, 1)"));
  double q_bar = kDefaultQBar;
  if (c.has_q_bar() && c.has_horizon())
    return absl::InvalidArgumentError(
        "bkb.q_bar and bkb.horizon are both set, expected at most one (horizon selects the "
        "Theorem 3.1 value of q_bar)");
  if (c.has_q_bar()) {
    q_bar = c.q_bar();
    // Section 3.1: "given a parameter q_bar >= 1".
    if (auto s = CheckRange("bkb.q_bar", q_bar, 1.0, 1e15); !s.ok()) return s;
  } else if (c.has_horizon()) {
    if (c.horizon() < 1 || c.horizon() > (int64_t{1} << 50))
      return absl::InvalidArgumentError(
          absl::StrCat("bkb.horizon is ", c.horizon(), ", expected an integer in [1, 2^50]"));
    q_bar = std::max(1.0, TheoryQBar(params.epsilon, params.delta, c.horizon()));
  }
  if (c.has_dimension()) return CandidateBkb::Make(config, params, q_bar, seed);
  if (c.has_resample_every() || c.has_max_points())
    return absl::InvalidArgumentError(
        "bkb.resample_every and bkb.max_points apply to the candidates form, expected "
        "bkb.dimension with them");
  auto arms = ArmSet::FromConfig(config, ArmFeatures::kRequired);
  if (!arms.ok()) return arms.status();
  return std::unique_ptr<Policy>(new Bkb(*std::move(arms), params, q_bar, seed));
}

Bkb::Bkb(ArmSet arms, KernelUcbParams params, double q_bar, uint64_t seed)
    : KernelUcbPolicy(std::move(arms), params, seed), q_bar_(q_bar) {
  in_dict_ = Vector::Zero(arms_.size());
}

NystromEmbedding NystromEmbedding::Make(const Kernel& kernel, Matrix Xs) {
  NystromEmbedding e;
  e.Xs = std::move(Xs);
  const Eigen::Index m = e.Xs.cols();
  if (m == 0) {
    e.W.resize(0, 0);
    return e;
  }
  // (K_S^{1/2})^+ up to an isometry: W = diag(l)^{-1/2} U^T over the kept eigenpairs.
  Eigen::SelfAdjointEigenSolver<Matrix> eig(kernel.Cross(e.Xs, e.Xs));
  const Vector& l = eig.eigenvalues();  // ascending
  const double cut = kPinvTolerance * std::max(l[m - 1], 0.0);
  Eigen::Index first = 0;
  while (first < m && !(l[first] > cut)) ++first;
  const Eigen::Index r = m - first;
  e.W = (l.tail(r).cwiseSqrt().cwiseInverse().asDiagonal() *
         eig.eigenvectors().rightCols(r).transpose());
  return e;
}

Matrix NystromEmbedding::Embed(const Kernel& kernel, const Eigen::Ref<const Matrix>& X) const {
  Matrix Z(W.rows(), X.cols());
  if (W.rows() > 0) Z.noalias() = W * kernel.Cross(Xs, X);
  return Z;
}

void DtcPosterior(const Kernel& kernel, const NystromEmbedding& e,
                  const Eigen::Ref<const Matrix>& L, const Vector& w,
                  const Eigen::Ref<const Matrix>& X, const Vector& kdiag, double lambda,
                  Vector* mean, Vector* var) {
  const Eigen::Index A = X.cols();
  mean->setZero(A);
  if (e.rank() == 0) {  // z_t = 0: mu~ = 0 and sigma~^2 = k(x,x) / lambda
    *var = kdiag / lambda;
    return;
  }
  const Eigen::Index r = e.rank();
  var->resize(A);
  Matrix Zb;
  for (Eigen::Index b0 = 0; b0 < A; b0 += kBlock) {
    const Eigen::Index nb = std::min(kBlock, A - b0);
    Zb.resize(r, nb);
    Zb.noalias() = e.W * kernel.Cross(e.Xs, X.middleCols(b0, nb));  // z_t(x) per column
    mean->segment(b0, nb).noalias() = Zb.transpose() * w;           // mu~_t (eq. 4)
    const Vector zz = Zb.colwise().squaredNorm().transpose();
    L.triangularView<Eigen::Lower>().solveInPlace(Zb);
    // sigma~^2 = (k - z^T (V - lambda I) V^{-1} z) / lambda = (k - |z|^2) / lambda + z^T V^{-1} z
    var->segment(b0, nb) =
        ((kdiag.segment(b0, nb) - zz) / lambda + Zb.colwise().squaredNorm().transpose())
            .cwiseMax(0.0);
  }
}

void Bkb::ComputePosterior(Vector* mean, Vector* var) const {
  const Matrix& X = arms_.features();
  const Eigen::Index A = X.cols();
  const double lambda = params_.lambda;
  std::vector<Eigen::Index> dict, pulled;
  for (Eigen::Index i = 0; i < A; ++i) {
    if (in_dict_[i] > 0) dict.push_back(i);
    if (counts_[i] > 0) pulled.push_back(i);
  }
  const Eigen::Index m = static_cast<Eigen::Index>(dict.size());
  Matrix Xs(X.rows(), m);
  for (Eigen::Index j = 0; j < m; ++j) Xs.col(j) = X.col(dict[j]);
  const NystromEmbedding e = NystromEmbedding::Make(params_.kernel, std::move(Xs));
  const Eigen::Index r = e.rank();
  rank_ = static_cast<int>(r);
  Eigen::LLT<Matrix> llt;
  Vector w;
  if (r > 0) {
    // V_t = sum_i n_i z_i z_i^T + lambda I and Z^T y = sum_i s_i z_i over the pulled arms.
    const Eigen::Index p = static_cast<Eigen::Index>(pulled.size());
    Matrix Xp(X.rows(), p);
    Vector n(p), s(p);
    for (Eigen::Index j = 0; j < p; ++j) {
      Xp.col(j) = X.col(pulled[j]);
      n[j] = counts_[pulled[j]];
      s[j] = sums_[pulled[j]];
    }
    const Matrix Zp = e.Embed(params_.kernel, Xp);
    Matrix V(r, r);
    V.noalias() = Zp * n.asDiagonal() * Zp.transpose();
    V.diagonal().array() += lambda;
    llt.compute(V);
    const Vector b = Zp * s;
    w = llt.solve(b);
  }
  const Matrix none;
  DtcPosterior(params_.kernel, e, r > 0 ? llt.matrixLLT() : none, w, X, kdiag_, lambda, mean, var);
}

Vector Bkb::PullInclusion(double q_bar, const Vector& var, const Vector& counts) {
  Vector p = Vector::Zero(var.size());
  for (Eigen::Index i = 0; i < var.size(); ++i)
    if (counts[i] > 0) p[i] = std::clamp(q_bar * var[i], 0.0, 1.0);  // p~ = q_bar sigma~^2 (Fig. 1)
  return p;
}

Vector Bkb::ArmInclusion(double q_bar, const Vector& var, const Vector& counts) {
  Vector p = PullInclusion(q_bar, var, counts);
  for (Eigen::Index i = 0; i < p.size(); ++i)
    if (counts[i] > 0) {
      // P(at least one of n_i Bernoulli(p~) draws succeeds) = 1 - (1 - p~)^{n_i}.
      p[i] = p[i] >= 1.0 ? 1.0 : std::clamp(-std::expm1(counts[i] * std::log1p(-p[i])), 0.0, 1.0);
    }
  return p;
}

void Bkb::AfterObserve(int slot, const Vector& var, bool first) {
  if (first) {  // Fig. 1: "Initialize S_1 = {x_1}"
    in_dict_.setZero();
    in_dict_[slot] = 1.0;
    return;
  }
  // Fig. 1 inner loop: S_{t+1} drawn from scratch from the pulled arms with p~ = q_bar sigma~_t^2.
  const Vector keep = ArmInclusion(q_bar_, var, counts_);
  for (Eigen::Index i = 0; i < in_dict_.size(); ++i) {
    if (counts_[i] > 0)
      in_dict_[i] = rng_.Uniform() < keep[i] ? 1.0 : 0.0;
    else
      in_dict_[i] = 0.0;
  }
}

void Bkb::OnAddArm() {
  in_dict_.conservativeResize(in_dict_.size() + 1);
  in_dict_[in_dict_.size() - 1] = 0.0;
}

void Bkb::OnRemoveArm(int slot) { EraseSlot(in_dict_, slot); }  // it leaves the dictionary too

void Bkb::SaveExtra(StateWriter& w) const { w.Put("dictionary", in_dict_); }

absl::Status Bkb::RestoreExtra(const StateReader& r, const ArmSet& arms, const Vector& counts) {
  Vector d;
  if (auto s = r.Get("dictionary", &d, arms.size()); !s.ok()) return s;
  for (Eigen::Index i = 0; i < d.size(); ++i) {
    if (d[i] != 0.0 && d[i] != 1.0)
      return absl::InvalidArgumentError(
          absl::StrCat("state tensor dictionary[", i, "] is ", d[i], ", expected 0 or 1"));
    if (d[i] == 1.0 && counts[i] == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("state tensor dictionary[", i,
                       "] is 1 for an arm never pulled, expected only pulled "
                       "arms in the dictionary"));
  }
  staged_dict_ = std::move(d);
  return absl::OkStatus();
}

void Bkb::ExtraSummary(std::vector<std::pair<std::string, double>>* out) const {
  const Vector& var = PosteriorVariance();
  out->push_back({"dictionary_size", static_cast<double>(dictionary_size())});
  out->push_back({"embedding_rank", static_cast<double>(rank_)});
  out->push_back({"q_bar", q_bar_});
  out->push_back({"epsilon", params_.epsilon});
  out->push_back({"alpha", alpha()});
  // E|S_{t+1}| counted with repeats as in Theorem 3.1: sum over pulls of p~.
  out->push_back({"expected_dictionary_pulls", counts_.dot(PullInclusion(q_bar_, var, counts_))});
}

void Bkb::ExtraDiagnostics(Decision* d) const {
  d->diagnostics.push_back({"dictionary_size", static_cast<double>(dictionary_size())});
}

}  // namespace bandit
