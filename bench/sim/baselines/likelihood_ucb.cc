#include "bench/sim/baselines/likelihood_ucb.h"

#include <cmath>
#include <numbers>

#include "bench/sim/baselines/likelihood_set.h"
#include "core/state_io.h"

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> LikelihoodUcb::MakeOfuglb(
    const bandit::v1::SimPolicyConfig& config, uint64_t) {
  const auto& c = config.ofuglb();
  auto p = ParseParams("ofuglb", c);
  if (!p.ok()) return p.status();
  if (p->link.kind() == LinkKind::kGaussian)
    return absl::InvalidArgumentError(
        "ofuglb.link is GAUSSIAN, expected LOGISTIC or POISSON (the radius L_t is given for "
        "those)");
  return std::unique_ptr<Policy>(new LikelihoodUcb(Kind::kOfuglb, *p));
}

absl::StatusOr<std::unique_ptr<Policy>> LikelihoodUcb::MakeOfulogR(
    const bandit::v1::SimPolicyConfig& config, uint64_t) {
  auto p = ParseParams("ofulog_r", config.ofulog_r());
  if (!p.ok()) return p.status();
  return std::unique_ptr<Policy>(new LikelihoodUcb(Kind::kOfulogR, *p));
}

LikelihoodUcb::LikelihoodUcb(Kind kind, const GlbParams& p)
    : kind_(kind), p_(p), data_(p.d, 0), theta_(Vector::Zero(p.d)) {
  f_hat_ = 0.0;
}

double LikelihoodUcb::Lambda() const {
  if (kind_ == Kind::kOfuglb) return 0.0;
  return p_.lambda * std::log(2.0 + static_cast<double>(data_.size()));  // lambda log(1 + t)
}

double LikelihoodUcb::Beta2() const {
  const double d = p_.d, S = p_.S, delta = p_.delta;
  const double t = static_cast<double>(data_.size()) + 1;  // the round about to be played
  double b2;
  if (kind_ == Kind::kOfuglb) {
    const double Lt = p_.link.kind() == LinkKind::kPoisson ? std::exp(S) * t + std::log(d / delta)
                                                           : (1 + S / 2) * (t - 1);
    b2 = std::log(1 / delta) +
         d * std::log(std::max(std::numbers::e, 2 * std::numbers::e * S * Lt / d));
  } else {
    const double lam = Lambda();
    const double gamma =
        std::sqrt(lam) * (S + 0.5) +
        2 / std::sqrt(lam) *
            (std::log(1 / delta) + d * std::log(2.0) + 0.5 * d * std::log(1 + t / (4 * d * lam)));
    const double beta = gamma + gamma * gamma / lam;
    b2 = beta * beta;
  }
  return p_.radius_multiplier * p_.radius_multiplier * b2;
}

void LikelihoodUcb::Refit() {
  const LikelihoodObjective f(p_.link, data_, Lambda());
  if (kind_ == Kind::kOfuglb) {
    BallMinimum m = MinimizeOverBall(f, p_.S, Vector::Zero(p_.d), theta_);
    theta_ = std::move(m.theta);
    f_hat_ = f.Value(theta_);
  } else {
    // Unconstrained regularized MLE (Abeille et al.'s theta_hat); the set is then cut by Theta.
    BallMinimum m =
        MinimizeOverBall(f, std::numeric_limits<double>::infinity(), Vector::Zero(p_.d), theta_);
    theta_ = std::move(m.theta);
    f_hat_ = f.Value(theta_);
  }
}

double LikelihoodUcb::OptimisticValue(const Vector& x) const {
  const LikelihoodObjective f(p_.link, data_, Lambda());
  return MaximizeOverLikelihoodSet(f, p_.S, x, f_hat_ + Beta2(), theta_, f_hat_).value;
}

bool LikelihoodUcb::InConfidenceSet(const Vector& theta) const {
  if (theta.norm() > p_.S * (1 + 1e-12)) return false;
  const LikelihoodObjective f(p_.link, data_, Lambda());
  return f.Value(theta) - f_hat_ <= Beta2();
}

absl::StatusOr<Decision> LikelihoodUcb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const int n = static_cast<int>(ctx.candidates.size());
  const LikelihoodObjective f(p_.link, data_, Lambda());
  const double b2 = Beta2();
  const double c = f_hat_ + b2;
  Vector ucb(n), logit(n);
  int best = 0;
  for (int i = 0; i < n; ++i) {
    const Vector& x = ctx.candidates[i];
    logit[i] = x.dot(theta_);
    ucb[i] = MaximizeOverLikelihoodSet(f, p_.S, x, c, theta_, f_hat_).value;
    if (ucb[i] > ucb[best]) best = i;
  }
  return UcbDecision(p_.link, best, ucb, logit, std::sqrt(b2), ctx.want_scores);
}

absl::Status LikelihoodUcb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  data_.Add(obs.features, obs.reward);
  Refit();
  return absl::OkStatus();
}

void LikelihoodUcb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  data_.Save(w);
  w.Put("theta", theta_);
  w.PutScalar("f_hat", f_hat_);
}

absl::Status LikelihoodUcb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  GlmHistory data = data_;
  Vector theta;
  double f_hat;
  if (auto s = data.Restore(r); !s.ok()) return s;
  if (auto s = r.Get("theta", &theta, p_.d); !s.ok()) return s;
  if (auto s = r.GetScalar("f_hat", &f_hat); !s.ok()) return s;
  if (!theta.allFinite() || !std::isfinite(f_hat))
    return absl::InvalidArgumentError("state theta/f_hat has non-finite values, expected finite");
  data_ = std::move(data);
  theta_ = std::move(theta);
  f_hat_ = f_hat;
  return absl::OkStatus();
}

int64_t LikelihoodUcb::StateBytes() const {
  return data_.Bytes() + theta_.size() * sizeof(double) + sizeof(f_hat_);
}

std::vector<std::pair<std::string, double>> LikelihoodUcb::Summary() const {
  return {{"rounds", static_cast<double>(data_.size())},
          {"beta2", Beta2()},
          {"lambda", Lambda()},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
