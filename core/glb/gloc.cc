#include "core/glb/gloc.h"

#include <cmath>

#include "core/glb/projection.h"
#include "core/state_io.h"

namespace bandit::glb {

absl::StatusOr<std::unique_ptr<Policy>> Gloc::Make(const bandit::v1::PolicyConfig& config,
                                                   uint64_t) {
  const auto& c = config.gloc();
  auto p = ParseParams("gloc", c);
  if (!p.ok()) return p.status();
  const double eps = c.has_ons_epsilon() ? c.ons_epsilon() : p->lambda;
  if (!(eps > 0) || !std::isfinite(eps))
    return absl::InvalidArgumentError(
        absl::StrCat("gloc.ons_epsilon is ", eps, ", expected a finite number > 0"));
  return std::unique_ptr<Policy>(new Gloc(*p, eps));
}

Gloc::Gloc(const GlbParams& p, double eps) : p_(p) {
  const int d = p.d;
  kappa_ = p.link.CMu(p.S) / p.link.g();
  noise_ = p.link.NoiseScale(p.S);
  theta_ = Vector::Zero(d);
  a_ = eps * Matrix::Identity(d, d);
  a_inv_ = (1.0 / eps) * Matrix::Identity(d, d);
  v_inv_ = (1.0 / p.lambda) * Matrix::Identity(d, d);
  xz_ = Vector::Zero(d);
  theta_hat_ = Vector::Zero(d);
  b_ = 2 * kappa_ * p.S * p.S * eps;  // B_0
}

double Gloc::Beta() const {
  const double k = kappa_, R = noise_, delta = p_.delta, B = b_;
  const double alpha =
      1 + 4 * B / k +
      8 * R * R / (k * k) *
          std::log(
              2 / delta *
              std::sqrt(1 + 2 * B / k + 4 * std::pow(R, 4) / (std::pow(k, 4) * delta * delta)));
  // - (||z||^2 - theta_hat' X'z) <= 0: the data-dependent tightening of Theorem 1.
  const double beta = alpha + p_.lambda * p_.S * p_.S - (zz_ - theta_hat_.dot(xz_));
  return p_.radius_multiplier * std::sqrt(std::max(beta, 0.0));
}

absl::StatusOr<Decision> Gloc::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Beta();
  Vector ucb, logit;
  const int arm = ArgmaxUcb(ctx.candidates, theta_hat_, v_inv_, beta, &ucb, &logit);
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status Gloc::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  // Conversion: z_t is the online learner's prediction before it sees y_t.
  const double z = x.dot(theta_);
  xz_ += z * x;
  zz_ += z * z;
  ShermanMorrisonAdd(v_inv_, x, 1.0);
  theta_hat_.noalias() = v_inv_ * xz_;
  // ONS-GLM step.
  const double gl = p_.link.LossGrad(z, obs.reward);  // l'(x'theta_t, y_t)
  a_.noalias() += x * x.transpose();
  ShermanMorrisonAdd(a_inv_, x, 1.0);
  b_ += gl * gl * x.dot(a_inv_ * x) / (2 * kappa_);
  Vector next = theta_ - (gl / kappa_) * (a_inv_ * x);
  if (next.norm() > p_.S) next = ProjectOntoBall(a_, next, p_.S).theta;
  theta_ = std::move(next);
  ++t_;
  return absl::OkStatus();
}

void Gloc::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  w.Put("theta", theta_);
  w.Put("a", a_);
  w.Put("a_inv", a_inv_);
  w.Put("v_inv", v_inv_);
  w.Put("xz", xz_);
  w.Put("theta_hat", theta_hat_);
  w.PutScalar("zz", zz_);
  w.PutScalar("b", b_);
  w.PutInt("t", t_);
}

absl::Status Gloc::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  const int d = p_.d;
  Vector theta, xz, theta_hat;
  Matrix a, a_inv, v_inv;
  double zz, b;
  int64_t t;
  for (const absl::Status& s :
       {r.Get("theta", &theta, d), r.Get("a", &a, d, d), r.Get("a_inv", &a_inv, d, d),
        r.Get("v_inv", &v_inv, d, d), r.Get("xz", &xz, d), r.Get("theta_hat", &theta_hat, d),
        r.GetScalar("zz", &zz), r.GetScalar("b", &b), r.GetInt("t", &t)})
    if (!s.ok()) return s;
  if (!theta.allFinite() || !a.allFinite() || !a_inv.allFinite() || !v_inv.allFinite() ||
      !xz.allFinite() || !theta_hat.allFinite() || !std::isfinite(zz) || !std::isfinite(b) ||
      zz < 0 || b < 0 || t < 0)
    return absl::InvalidArgumentError("state of gloc has non-finite or negative values");
  theta_ = std::move(theta);
  a_ = std::move(a);
  a_inv_ = std::move(a_inv);
  v_inv_ = std::move(v_inv);
  xz_ = std::move(xz);
  theta_hat_ = std::move(theta_hat);
  zz_ = zz;
  b_ = b;
  t_ = t;
  return absl::OkStatus();
}

int64_t Gloc::StateBytes() const {
  return (theta_.size() + a_.size() + a_inv_.size() + v_inv_.size() + xz_.size() +
          theta_hat_.size() + 2) *
             sizeof(double) +
         sizeof(t_);
}

std::vector<std::pair<std::string, double>> Gloc::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"ons_regret_bound", b_},
          {"lambda", p_.lambda},
          {"theta_norm", theta_hat_.norm()}};
}

}  // namespace bandit::glb
