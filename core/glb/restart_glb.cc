#include "core/glb/restart_glb.h"

#include <algorithm>
#include <cmath>

namespace bandit::glb {

// ---------------------------------------------------------------- weighted MLE pieces

double WeightedObjective(const GlmLink& link, const WeightedData& data, double lambda,
                         const Vector& theta) {
  const Vector z = data.X.transpose() * theta;
  double f = 0.5 * lambda * theta.squaredNorm();
  for (Eigen::Index i = 0; i < z.size(); ++i) f += data.w[i] * link.Loss(z[i], data.r[i]);
  return f;
}

void WeightedGradHess(const GlmLink& link, const WeightedData& data, double lambda,
                      const Vector& theta, Vector* grad, Matrix* hess) {
  const Vector z = data.X.transpose() * theta;
  Vector a(z.size()), h(z.size());
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    a[i] = data.w[i] * link.LossGrad(z[i], data.r[i]);
    h[i] = data.w[i] * link.LossHess(z[i]);
  }
  if (grad) *grad = data.X * a + lambda * theta;
  if (hess) {
    hess->noalias() =
        (data.X.array().rowwise() * h.transpose().array()).matrix() * data.X.transpose();
    hess->diagonal().array() += lambda;
  }
}

Vector WeightedMle(const GlmLink& link, const WeightedData& data, double lambda,
                   const Vector& warm) {
  Vector theta = warm;
  const int d = static_cast<int>(warm.size());
  Vector grad(d);
  Matrix hess(d, d);
  double f = WeightedObjective(link, data, lambda, theta);
  for (int it = 0; it < 50; ++it) {
    WeightedGradHess(link, data, lambda, theta, &grad, &hess);
    const Vector step = hess.llt().solve(grad);
    const double dec2 = grad.dot(step);
    if (dec2 / 2 <= 1e-14 * std::max(1.0, std::abs(f))) break;
    double s = 1.0;
    Vector cand = theta - step;
    double fc = WeightedObjective(link, data, lambda, cand);
    for (int ls = 0; ls < 40 && !(fc <= f - 1e-4 * s * dec2); ++ls) {
      s *= 0.5;
      cand = theta - s * step;
      fc = WeightedObjective(link, data, lambda, cand);
    }
    if (!(fc < f)) break;  // no progress at machine precision
    theta = std::move(cand);
    f = fc;
  }
  return theta;
}

Vector WeightedG(const GlmLink& link, const WeightedData& data, double lambda,
                 const Vector& theta) {
  const Vector z = data.X.transpose() * theta;
  Vector m(z.size());
  for (Eigen::Index i = 0; i < z.size(); ++i) m[i] = data.w[i] * link.Mu(z[i]);
  return data.X * m + lambda * theta;
}

Matrix WeightedHessian(const GlmLink& link, const WeightedData& data, double lambda,
                       const Vector& theta) {
  Matrix h(theta.size(), theta.size());
  WeightedGradHess(link, data, lambda, theta, nullptr, &h);
  return h;
}

Vector ProjectByGradient(const GlmLink& link, const WeightedData& data, double lambda,
                         const Vector& theta_hat, const Matrix& m_inv, double S, int steps) {
  if (theta_hat.norm() <= S) return theta_hat;  // theta_hat itself attains the minimum 0
  const Vector target = WeightedG(link, data, lambda, theta_hat);
  // h(theta) = ||g(theta) - target||^2_{M^{-1}}, grad h = 2 J(theta) M^{-1} (g(theta) - target),
  // J(theta) = sum w_s mu'(x_s'theta) x_s x_s' + lambda I, applied in O(n d) without forming it.
  auto objective = [&](const Vector& th, Vector* resid) {
    *resid = WeightedG(link, data, lambda, th) - target;
    return resid->dot(m_inv * *resid);
  };
  auto apply_j = [&](const Vector& th, const Vector& v) {
    const Vector z = data.X.transpose() * th;
    const Vector xv = data.X.transpose() * v;
    Vector a(z.size());
    for (Eigen::Index i = 0; i < z.size(); ++i) a[i] = data.w[i] * link.MuPrime(z[i]) * xv[i];
    return Vector(data.X * a + lambda * v);
  };
  Vector theta = theta_hat * (S / theta_hat.norm());
  Vector resid;
  double h = objective(theta, &resid);
  // Initial step 1 / L with L = 2 lambda_max(J)^2 lambda_max(M^{-1}) at the start point;
  // backtracking below keeps every accepted step a descent step.
  const Matrix j0 = WeightedHessian(link, data, lambda, theta);
  const double jmax = j0.selfadjointView<Eigen::Lower>().eigenvalues().maxCoeff();
  const double mmax = m_inv.selfadjointView<Eigen::Lower>().eigenvalues().maxCoeff();
  double step = 1.0 / std::max(1e-300, 2 * jmax * jmax * mmax);
  for (int it = 0; it < steps; ++it) {
    const Vector grad = 2 * apply_j(theta, m_inv * resid);
    bool moved = false;
    for (int ls = 0; ls < 30; ++ls) {
      Vector cand = theta - step * grad;
      if (const double n = cand.norm(); n > S) cand *= S / n;
      Vector cres;
      const double hc = objective(cand, &cres);
      if (hc < h) {
        theta = std::move(cand);
        resid = std::move(cres);
        h = hc;
        moved = true;
        step *= 1.5;  // let the step grow back after a success
        break;
      }
      step *= 0.5;
    }
    if (!moved) break;
  }
  return theta;
}

// ---------------------------------------------------------------- tuning

int64_t RestartGlbPeriod(int d, int64_t T, double path_length) {
  const double h = std::ceil(std::pow(d * static_cast<double>(T) / (1.0 + path_length), 2.0 / 3.0));
  return std::clamp<int64_t>(static_cast<int64_t>(h), 1, T);
}

// ---------------------------------------------------------------- GLM-UCB's rule

double WeightedRadius(const GlbParams& p, double t, double g) {
  const double d = p.d, lam = p.lambda, sigma = p.link.NoiseScale(p.S);
  const double eff = g >= 1.0 ? t - 1 : (1 - std::pow(g, t - 1)) / (1 - g);
  return std::sqrt(lam) * p.S +
         sigma * std::sqrt(2 * std::log(1 / p.delta) + d * std::log(1 + eff / (lam * d)));
}

void ProjectedMleRefit(const MleUcbFit& fit, Vector* theta_hat, Vector* theta, Matrix* bonus_inv) {
  const GlbParams& p = fit.p;
  *theta_hat = WeightedMle(p.link, fit.data, p.lambda, *theta_hat);
  *theta = ProjectByGradient(p.link, fit.data, p.lambda, *theta_hat, fit.v_inv, p.S,
                             fit.projection_steps);
  *bonus_inv = fit.v_inv;
}

const MleUcbRule& GlmUcbRule() {
  static const MleUcbRule rule{
      .name = "restart_glb",
      .scores_in_mean_space = true,
      .refit = &ProjectedMleRefit,
      .radius = [](const GlbParams& p, double t, double gamma) {
        return p.link.LMu(p.S) / p.link.CMu(p.S) * WeightedRadius(p, t, gamma);
      }};
  return rule;
}

// ---------------------------------------------------------------- MleUcbCore

MleUcbCore::MleUcbCore(const MleUcbRule& rule, const GlbParams& p, double gamma,
                       int projection_steps)
    : rule_(&rule), p_(p), gamma_(gamma), projection_steps_(projection_steps) {
  Clear();
}

void MleUcbCore::Clear() {
  x_.clear();
  r_.clear();
  theta_hat_ = Vector::Zero(p_.d);
  theta_ = Vector::Zero(p_.d);
  v_ = p_.lambda * Matrix::Identity(p_.d, p_.d);
  v2_ = v_;
  bonus_inv_ = (1.0 / p_.lambda) * Matrix::Identity(p_.d, p_.d);  // V^{-1} V~ V^{-1} too
}

WeightedData MleUcbCore::Data(Vector* w) const {
  const int64_t n = rounds();
  w->resize(n);
  double g = 1.0;
  for (int64_t s = n - 1; s >= 0; --s) {  // w_s = gamma^{n-1-s}
    (*w)[s] = g;
    g *= gamma_;
  }
  return WeightedData{Eigen::Map<const Matrix>(x_.data(), p_.d, n),
                      Eigen::Map<const Vector>(r_.data(), n), *w};
}

void MleUcbCore::Add(const Vector& x, double r) {
  x_.insert(x_.end(), x.data(), x.data() + p_.d);
  r_.push_back(r);
  // V_{n+1} = gamma V_n + x x' + (1 - gamma) lambda I  (= lambda I + sum gamma^{n-s} x_s x_s').
  v_ *= gamma_;
  v_.noalias() += x * x.transpose();
  v_.diagonal().array() += (1 - gamma_) * p_.lambda;
  const double g2 = gamma_ * gamma_;
  v2_ *= g2;
  v2_.noalias() += x * x.transpose();
  v2_.diagonal().array() += (1 - g2) * p_.lambda;
  Refit();
}

void MleUcbCore::Refit() {
  Vector w;
  const WeightedData data = Data(&w);
  const Matrix v_inv = v_.llt().solve(Matrix::Identity(p_.d, p_.d));
  rule_->refit(MleUcbFit{p_, data, v_inv, v2_, projection_steps_}, &theta_hat_, &theta_,
               &bonus_inv_);
}

double MleUcbCore::Radius() const {
  return p_.radius_multiplier * rule_->radius(p_, static_cast<double>(rounds()) + 1, gamma_);
}

int MleUcbCore::Argmax(std::span<const Vector> candidates, Vector* ucb, Vector* mean) const {
  const int n = static_cast<int>(candidates.size());
  const double rho = Radius();
  ucb->resize(n);
  mean->resize(n);
  const bool mean_space = rule_->scores_in_mean_space;
  int best = 0;
  for (int i = 0; i < n; ++i) {
    const Vector& x = candidates[i];
    const double z = x.dot(theta_);
    const double width = std::sqrt(std::max(0.0, x.dot(bonus_inv_ * x)));
    (*mean)[i] = p_.link.Mu(z);
    (*ucb)[i] = (mean_space ? (*mean)[i] : z) + rho * width;
    if ((*ucb)[i] > (*ucb)[best]) best = i;
  }
  return best;
}

void MleUcbCore::Save(StateWriter& w, absl::string_view prefix) const {
  const int64_t n = rounds();
  w.Put(absl::StrCat(prefix, "x"), Matrix(Eigen::Map<const Matrix>(x_.data(), p_.d, n)));
  w.Put(absl::StrCat(prefix, "r"), Vector(Eigen::Map<const Vector>(r_.data(), n)));
  w.Put(absl::StrCat(prefix, "theta_hat"), theta_hat_);
  w.Put(absl::StrCat(prefix, "theta"), theta_);
  w.Put(absl::StrCat(prefix, "v"), v_);
  w.Put(absl::StrCat(prefix, "v2"), v2_);
  w.Put(absl::StrCat(prefix, "bonus_inv"), bonus_inv_);
}

absl::Status MleUcbCore::Restore(const StateReader& rd, absl::string_view prefix) {
  Vector r, th_hat, th;
  Matrix x, v, v2, b;
  const int d = p_.d;
  if (auto s = rd.Get(absl::StrCat(prefix, "r"), &r); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "x"), &x, d, r.size()); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "theta_hat"), &th_hat, d); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "theta"), &th, d); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "v"), &v, d, d); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "v2"), &v2, d, d); !s.ok()) return s;
  if (auto s = rd.Get(absl::StrCat(prefix, "bonus_inv"), &b, d, d); !s.ok()) return s;
  if (!x.allFinite() || !r.allFinite() || !th_hat.allFinite() || !th.allFinite() ||
      !v.allFinite() || !v2.allFinite() || !b.allFinite())
    return absl::InvalidArgumentError(
        absl::StrCat("state ", prefix, "* has non-finite values, expected finite"));
  x_.assign(x.data(), x.data() + x.size());
  r_.assign(r.data(), r.data() + r.size());
  theta_hat_ = std::move(th_hat);
  theta_ = std::move(th);
  v_ = std::move(v);
  v2_ = std::move(v2);
  bonus_inv_ = std::move(b);
  return absl::OkStatus();
}

int64_t MleUcbCore::Bytes() const {
  return static_cast<int64_t>((x_.size() + r_.size()) * sizeof(double)) +
         (theta_hat_.size() + theta_.size() + v_.size() + v2_.size() + bonus_inv_.size()) *
             static_cast<int64_t>(sizeof(double));
}

// ---------------------------------------------------------------- NonstationaryGlmUcb

namespace {

// A served instance keeps at most H rounds and refits on all of them every update: the cap keeps
// both its memory (H d doubles) and its per-update work bounded.
constexpr int64_t kMaxRestartPeriod = 100'000;

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> NonstationaryGlmUcb::MakeRestartGlb(
    const bandit::v1::PolicyConfig& config, uint64_t) {
  const auto& c = config.restart_glb();
  auto p = ParseParams("restart_glb", c);
  if (!p.ok()) return p.status();
  if (auto s = CheckNonstationaryRanges("restart_glb", c); !s.ok()) return s;
  int64_t h = 0;
  if (c.has_restart_period()) {
    h = c.restart_period();
    if (h < 1 || h > kMaxRestartPeriod)
      return absl::InvalidArgumentError(
          absl::StrCat("restart_glb.restart_period is ", h, ", expected 1..", kMaxRestartPeriod));
  } else {
    if (!c.has_horizon() || !c.has_path_length())
      return absl::InvalidArgumentError(
          "restart_glb.restart_period is unset; expected it, or horizon >= 2 and path_length "
          "(H = ceil((d T / (1 + P_T))^(2/3)))");
    h = std::min(RestartGlbPeriod(p->d, c.horizon(), c.path_length()), kMaxRestartPeriod);
  }
  return std::unique_ptr<Policy>(new NonstationaryGlmUcb(GlmUcbRule(), *p, 1.0, h, 50));
}

NonstationaryGlmUcb::NonstationaryGlmUcb(const MleUcbRule& rule, const GlbParams& p,
                                         double gamma, int64_t restart_period,
                                         int projection_steps)
    : p_(p), restart_period_(restart_period), core_(rule, p, gamma, projection_steps) {}

absl::StatusOr<Decision> NonstationaryGlmUcb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  Vector ucb, mean;
  const int arm = core_.Argmax(ctx.candidates, &ucb, &mean);
  Decision d = OptimisticDecision(arm, ucb, mean.maxCoeff() - mean[arm], ctx.want_scores);
  d.diagnostics = {{"ucb", ucb[arm]}, {"mean", mean[arm]}, {"radius", core_.Radius()}};
  return d;
}

absl::Status NonstationaryGlmUcb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  // RestartGLB: a new block of H rounds starts from scratch (Zhao et al. 2020, Algorithm 1).
  if (restart_period_ > 0 && t_ > 0 && t_ % restart_period_ == 0) core_.Clear();
  core_.Add(obs.features, obs.reward);
  ++t_;
  return absl::OkStatus();
}

void NonstationaryGlmUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  core_.Save(w, "");
  w.PutInt("t", t_);
  w.PutScalar("gamma", core_.gamma());
  w.PutInt("restart_period", restart_period_);
}

absl::Status NonstationaryGlmUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  double gamma;
  int64_t t, h;
  if (auto s = r.GetScalar("gamma", &gamma); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (auto s = r.GetInt("restart_period", &h); !s.ok()) return s;
  if (gamma != core_.gamma() || h != restart_period_)
    return absl::InvalidArgumentError(absl::StrCat("state gamma/restart_period are ", gamma, "/", h,
                                                   ", expected this instance's ", core_.gamma(),
                                                   "/", restart_period_));
  if (t < 0) return absl::InvalidArgumentError(absl::StrCat("state t is ", t, ", expected >= 0"));
  MleUcbCore core = core_;
  if (auto s = core.Restore(r, ""); !s.ok()) return s;
  if (restart_period_ > 0 && core.rounds() > restart_period_)
    return absl::InvalidArgumentError(absl::StrCat("state keeps ", core.rounds(),
                                                   " rounds, expected at most the restart period ",
                                                   restart_period_));
  core_ = std::move(core);
  t_ = t;
  return absl::OkStatus();
}

int64_t NonstationaryGlmUcb::StateBytes() const { return core_.Bytes() + sizeof(t_); }

std::vector<std::pair<std::string, double>> NonstationaryGlmUcb::Summary() const {
  std::vector<std::pair<std::string, double>> s = {
      {"rounds", static_cast<double>(t_)},
      {"stored_rounds", static_cast<double>(core_.rounds())},
      {"radius", core_.Radius()},
      {"lambda", p_.lambda},
      {"theta_norm", core_.theta().norm()}};
  if (restart_period_ > 0)
    s.push_back({"restart_period", static_cast<double>(restart_period_)});
  else
    s.push_back({"gamma", core_.gamma()});
  return s;
}

}  // namespace bandit::glb
