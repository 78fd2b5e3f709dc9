#include "bench/sim/baselines/rs_glincb.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "bench/sim/baselines/likelihood_set.h"
#include "core/state_io.h"

namespace bandit::glb {

namespace {
double LogDet(const Matrix& m) {
  Eigen::LLT<Matrix> llt(m);
  return 2.0 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
}
}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> RsGlincb::Make(const bandit::v1::SimPolicyConfig& config,
                                                       uint64_t) {
  const auto& c = config.rs_glincb();
  auto p = ParseParams("rs_glincb", c);
  if (!p.ok()) return p.status();
  const int64_t T = c.has_horizon() ? c.horizon() : 3000;
  if (T < 2)
    return absl::InvalidArgumentError(absl::StrCat("rs_glincb.horizon is ", T, ", expected >= 2"));
  const double R = c.has_reward_bound() ? c.reward_bound()
                                        : (p->link.kind() == LinkKind::kPoisson ? 100.0 : 1.0);
  if (!(R > 0) || !std::isfinite(R))
    return absl::InvalidArgumentError(
        absl::StrCat("rs_glincb.reward_bound is ", R, ", expected a finite number > 0"));
  if (c.theory_lambda()) {
    if (c.has_lambda())
      return absl::InvalidArgumentError(
          "rs_glincb.lambda and rs_glincb.theory_lambda are both set, expected at most one");
    p->lambda = p->d * std::log(static_cast<double>(T) / p->delta);
  }
  return std::unique_ptr<Policy>(new RsGlincb(*p, T, R));
}

RsGlincb::RsGlincb(const GlbParams& p, int64_t horizon, double reward_bound)
    : p_(p), warm_(p.d, 0), main_(p.d, 0) {
  const int d = p.d;
  const double logterm = std::sqrt(d * std::log(static_cast<double>(horizon) / p.delta));
  kappa_ = p.link.g() / p.link.CMu(p.S);
  gamma_ = 25.0 * reward_bound * p.S * logterm;
  ucb_radius_ = p.radius_multiplier * 150.0 * logterm;
  v_inv_ = (1.0 / p.lambda) * Matrix::Identity(d, d);
  h_ = p.lambda * Matrix::Identity(d, d);
  h_tau_inv_ = (1.0 / p.lambda) * Matrix::Identity(d, d);
  logdet_h_tau_ = d * std::log(p.lambda);
  theta_o_ = Vector::Zero(d);
  theta_tau_ = Vector::Zero(d);
}

absl::StatusOr<Decision> RsGlincb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const int n = static_cast<int>(ctx.candidates.size());
  Vector unc(n);
  for (int i = 0; i < n; ++i) unc[i] = ctx.candidates[i].dot(v_inv_ * ctx.candidates[i]);
  int widest = 0;
  for (int i = 1; i < n; ++i)
    if (unc[i] > unc[widest]) widest = i;
  Vector logit(n), ucb(n);
  for (int i = 0; i < n; ++i) logit[i] = ctx.candidates[i].dot(theta_tau_);
  if (unc[widest] >= WarmupThreshold()) {  // Switching criterion I: warm-up round
    Decision d = UcbDecision(p_.link, widest, unc, logit, 0.0, ctx.want_scores);
    d.diagnostics.push_back({"warmup", 1.0});
    return d;
  }
  // Arm elimination around theta_o.
  const double elim = p_.radius_multiplier * gamma_ * std::sqrt(kappa_);
  double max_lcb = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i)
    max_lcb = std::max(max_lcb, ctx.candidates[i].dot(theta_o_) - elim * std::sqrt(unc[i]));
  int best = -1;
  for (int i = 0; i < n; ++i) {
    const Vector& x = ctx.candidates[i];
    ucb[i] = logit[i] + ucb_radius_ * std::sqrt(std::max(x.dot(h_tau_inv_ * x), 0.0));
    const bool kept = x.dot(theta_o_) + elim * std::sqrt(unc[i]) >= max_lcb;
    if (!kept) {
      ucb[i] = -std::numeric_limits<double>::infinity();
      continue;
    }
    if (best < 0 || ucb[i] > ucb[best]) best = i;
  }
  Decision d = UcbDecision(p_.link, best, ucb, logit, ucb_radius_, ctx.want_scores);
  d.diagnostics.push_back({"warmup", 0.0});
  return d;
}

absl::Status RsGlincb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  const double inf = std::numeric_limits<double>::infinity();
  if (x.dot(v_inv_ * x) >= WarmupThreshold()) {
    warm_.Add(x, obs.reward);
    ShermanMorrisonAdd(v_inv_, x, 1.0);
    const LikelihoodObjective f(p_.link, warm_, p_.lambda);
    theta_o_ = MinimizeOverBall(f, inf, Vector::Zero(p_.d), theta_o_).theta;
    return absl::OkStatus();
  }
  main_.Add(x, obs.reward);
  h_.noalias() += (p_.link.MuPrime(x.dot(theta_o_)) / std::numbers::e) * x * x.transpose();
  const double logdet = LogDet(h_);
  if (logdet > std::log(2.0) + logdet_h_tau_) {  // Switching criterion II
    logdet_h_tau_ = logdet;
    h_tau_inv_ = h_.llt().solve(Matrix::Identity(p_.d, p_.d));
    const LikelihoodObjective f(p_.link, main_, 0.0);
    theta_tau_ = MinimizeOverBall(f, p_.S, Vector::Zero(p_.d), theta_tau_).theta;
    ++switches_;
  }
  return absl::OkStatus();
}

void RsGlincb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  warm_.Save(w, "warm");
  main_.Save(w, "main");
  w.Put("v_inv", v_inv_);
  w.Put("h", h_);
  w.Put("h_tau_inv", h_tau_inv_);
  w.PutScalar("logdet_h_tau", logdet_h_tau_);
  w.Put("theta_o", theta_o_);
  w.Put("theta_tau", theta_tau_);
  w.PutInt("switches", switches_);
}

absl::Status RsGlincb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  const int d = p_.d;
  GlmHistory warm = warm_, main = main_;
  Matrix v_inv, h, h_tau_inv;
  Vector theta_o, theta_tau;
  double logdet;
  int64_t switches;
  for (const absl::Status& s :
       {warm.Restore(r, "warm"), main.Restore(r, "main"), r.Get("v_inv", &v_inv, d, d),
        r.Get("h", &h, d, d), r.Get("h_tau_inv", &h_tau_inv, d, d),
        r.GetScalar("logdet_h_tau", &logdet), r.Get("theta_o", &theta_o, d),
        r.Get("theta_tau", &theta_tau, d), r.GetInt("switches", &switches)})
    if (!s.ok()) return s;
  if (!v_inv.allFinite() || !h.allFinite() || !h_tau_inv.allFinite() || !std::isfinite(logdet) ||
      !theta_o.allFinite() || !theta_tau.allFinite() || switches < 0)
    return absl::InvalidArgumentError("state of rs_glincb has non-finite or negative values");
  warm_ = std::move(warm);
  main_ = std::move(main);
  v_inv_ = std::move(v_inv);
  h_ = std::move(h);
  h_tau_inv_ = std::move(h_tau_inv);
  logdet_h_tau_ = logdet;
  theta_o_ = std::move(theta_o);
  theta_tau_ = std::move(theta_tau);
  switches_ = switches;
  return absl::OkStatus();
}

int64_t RsGlincb::StateBytes() const {
  return warm_.Bytes() + main_.Bytes() +
         (v_inv_.size() + h_.size() + h_tau_inv_.size() + theta_o_.size() + theta_tau_.size() + 1) *
             sizeof(double) +
         sizeof(switches_);
}

std::vector<std::pair<std::string, double>> RsGlincb::Summary() const {
  return {{"rounds", static_cast<double>(warm_.size() + main_.size())},
          {"warmup_rounds", static_cast<double>(warm_.size())},
          {"switches", static_cast<double>(switches_)},
          {"warmup_threshold", WarmupThreshold()},
          {"lambda", p_.lambda}};
}

}  // namespace bandit::glb
