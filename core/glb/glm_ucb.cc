#include "core/glb/glm_ucb.h"

#include <cmath>

#include "core/state_io.h"

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> GlmUcb::Make(const bandit::v1::PolicyConfig& config,
                                                     uint64_t seed) {
  const auto& c = config.glm_ucb();
  auto p = ParseParams("glm_ucb", c);
  if (!p.ok()) return p.status();
  const int64_t window = c.has_window() ? c.window() : 0;
  if (window < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("glm_ucb.window is ", window, ", expected 0 (all history) or a number > 0"));
  auto bonus = c.bonus();
  if (bonus == bandit::v1::GlmUcbConfig::BONUS_UNSPECIFIED)
    bonus = bandit::v1::GlmUcbConfig::LOCAL_HESSIAN;
  if (bonus != bandit::v1::GlmUcbConfig::LOCAL_HESSIAN &&
      bonus != bandit::v1::GlmUcbConfig::DESIGN_MATRIX &&
      bonus != bandit::v1::GlmUcbConfig::FILIPPI)
    return absl::InvalidArgumentError(
        absl::StrCat("glm_ucb.bonus is ", static_cast<int>(bonus),
                     ", expected LOCAL_HESSIAN, DESIGN_MATRIX or FILIPPI"));
  auto policy = std::unique_ptr<GlmUcb>(new GlmUcb(*p, window, bonus));
  policy->horizon_ = c.has_horizon() ? c.horizon() : 3000;
  if (policy->horizon_ < 2)
    return absl::InvalidArgumentError(
        absl::StrCat("glm_ucb.horizon is ", policy->horizon_, ", expected >= 2"));
  policy->reward_bound_ = c.has_reward_bound()
                              ? c.reward_bound()
                              : (p->link.kind() == LinkKind::kPoisson ? 100.0 : 1.0);
  if (!(policy->reward_bound_ > 0) || !std::isfinite(policy->reward_bound_))
    return absl::InvalidArgumentError(absl::StrCat(
        "glm_ucb.reward_bound is ", policy->reward_bound_, ", expected a finite number > 0"));
  return std::unique_ptr<Policy>(std::move(policy));
}

GlmUcb::GlmUcb(const GlbParams& p, int64_t window, bandit::v1::GlmUcbConfig::Bonus bonus)
    : p_(p), bonus_(bonus), data_(p.d, window) {
  theta_ = Vector::Zero(p.d);
  w_inv_ = (1.0 / LambdaT()) * Matrix::Identity(p.d, p.d);
}

double GlmUcb::LambdaT() const {
  return p_.lambda * std::log(2.0 + static_cast<double>(data_.size()));  // lambda log(1 + t)
}

double GlmUcb::Radius() const {
  const int64_t t = data_.size() + 1;
  if (bonus_ == bandit::v1::GlmUcbConfig::LOCAL_HESSIAN)
    return p_.radius_multiplier * GlbOmdBeta(p_, LambdaT(), t);
  if (bonus_ == bandit::v1::GlmUcbConfig::FILIPPI) {
    // Filippi et al. (2010) Theorem 1: rho(t) = 2 k_mu kappa R_max / c_mu sqrt(2 d log t)
    // sqrt(log(2 d T / delta)), kappa = sqrt(3 + 2 log(1 + 2 c_m^2 / lambda_0)); lambda_0 is the
    // smallest eigenvalue of the initial design, here the regularizer lambda.
    const double cm = p_.max_feature_norm;
    const double kappa = std::sqrt(3 + 2 * std::log(1 + 2 * cm * cm / p_.lambda));
    return p_.radius_multiplier * 2 * p_.link.LMu(p_.S) * kappa * reward_bound_ /
           p_.link.CMu(p_.S) * std::sqrt(2 * p_.d * std::log(static_cast<double>(t))) *
           std::sqrt(std::log(2 * p_.d * static_cast<double>(horizon_) / p_.delta));
  }
  const double sigma = p_.link.NoiseScale(p_.S), c_mu = p_.link.CMu(p_.S);
  return p_.radius_multiplier * sigma / c_mu *
         std::sqrt(0.5 * p_.d * std::log(1 + 2.0 * static_cast<double>(t) / p_.d) +
                   std::log(1 / p_.delta));
}

void GlmUcb::Refit() {
  const double lambda = LambdaT();
  MleFit fit = FitGlmMle(p_.link, data_, lambda, theta_, p_.S);
  theta_ = std::move(fit.theta);
  Matrix w;
  if (bonus_ == bandit::v1::GlmUcbConfig::LOCAL_HESSIAN) {
    w = std::move(fit.hessian);
  } else {
    const auto X = data_.X();
    w.noalias() = X * X.transpose();
    w.diagonal().array() += lambda;
  }
  w_inv_ = w.llt().solve(Matrix::Identity(p_.d, p_.d));
}

absl::StatusOr<Decision> GlmUcb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Radius();
  Vector ucb, logit;
  if (bonus_ == bandit::v1::GlmUcbConfig::FILIPPI) {
    // Filippi et al. Algorithm 1: the bonus is added on the mean scale, mu(x'theta) + rho ||x||.
    const int n = static_cast<int>(ctx.candidates.size());
    ucb.resize(n);
    logit.resize(n);
    int best = 0;
    for (int i = 0; i < n; ++i) {
      const Vector& x = ctx.candidates[i];
      logit[i] = x.dot(theta_);
      ucb[i] = p_.link.Mu(logit[i]) + beta * std::sqrt(std::max(x.dot(w_inv_ * x), 0.0));
      if (ucb[i] > ucb[best]) best = i;
    }
    Decision d = UcbDecision(p_.link, best, ucb, logit, beta, ctx.want_scores);
    d.diagnostics[2].second = ucb[best] - p_.link.Mu(logit[best]);
    return d;
  }
  const int arm = ArgmaxUcb(ctx.candidates, theta_, w_inv_, beta, &ucb, &logit);
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status GlmUcb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  data_.Add(obs.features, obs.reward);
  Refit();
  ++t_;
  return absl::OkStatus();
}

void GlmUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  data_.Save(w);
  w.Put("theta", theta_);
  w.Put("w_inv", w_inv_);
  w.PutInt("t", t_);
}

absl::Status GlmUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  GlmHistory data = data_;
  Vector theta;
  Matrix w_inv;
  int64_t t;
  if (auto s = data.Restore(r); !s.ok()) return s;
  if (auto s = r.Get("theta", &theta, p_.d); !s.ok()) return s;
  if (auto s = r.Get("w_inv", &w_inv, p_.d, p_.d); !s.ok()) return s;
  if (auto s = r.GetInt("t", &t); !s.ok()) return s;
  if (!theta.allFinite() || !w_inv.allFinite())
    return absl::InvalidArgumentError("state theta/w_inv has non-finite values, expected finite");
  data_ = std::move(data);
  theta_ = std::move(theta);
  w_inv_ = std::move(w_inv);
  t_ = t;
  return absl::OkStatus();
}

int64_t GlmUcb::StateBytes() const {
  return data_.Bytes() + (theta_.size() + w_inv_.size()) * sizeof(double) + sizeof(t_);
}

std::vector<std::pair<std::string, double>> GlmUcb::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"stored_rounds", static_cast<double>(data_.size())},
          {"radius", Radius()},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
