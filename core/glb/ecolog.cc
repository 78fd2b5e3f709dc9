#include "core/glb/ecolog.h"

#include <cmath>

#include "core/glb/projection.h"
#include "core/state_io.h"

namespace bandit::glb {

namespace {

const GlmLink kLogistic(LinkKind::kLogistic, 1.0);

// phi and its derivatives in z = x'theta.
double Phi(double z, double r, bool averaged) {
  return averaged ? kLogistic.Loss(z, 0.0) + kLogistic.Loss(z, 1.0) : kLogistic.Loss(z, r);
}
double PhiGrad(double z, double r, bool averaged) {
  return averaged ? 2 * kLogistic.Mu(z) - 1 : kLogistic.LossGrad(z, r);
}
double PhiHess(double z, bool averaged) { return (averaged ? 2 : 1) * kLogistic.MuPrime(z); }

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> Ecolog::Make(const bandit::v1::PolicyConfig& config,
                                                     uint64_t) {
  auto p = ParseParams("ecolog", config.ecolog());
  if (!p.ok()) return p.status();
  return std::unique_ptr<Policy>(new Ecolog(*p));
}

Ecolog::Ecolog(const GlbParams& p) : p_(p) {
  theta_ = Vector::Zero(p.d);
  w_ = p.lambda * Matrix::Identity(p.d, p.d);
  w_inv_ = (1.0 / p.lambda) * Matrix::Identity(p.d, p.d);
}

Vector Ecolog::Step(const Matrix& w, const Vector& center, const Vector& x, double r, bool averaged,
                    double S) {
  // Projected Newton on F(theta) = phi(x'theta) + 1/2 ||theta - center||_W^2 over the ball.
  auto F = [&](const Vector& th) {
    const Vector d = th - center;
    return Phi(x.dot(th), r, averaged) + 0.5 * d.dot(w * d);
  };
  Vector theta = center;
  if (theta.norm() > S) theta *= S / theta.norm();
  double fv = F(theta);
  for (int it = 0; it < 100; ++it) {
    const double z = x.dot(theta);
    const Vector g = PhiGrad(z, r, averaged) * x + w * (theta - center);
    Matrix H = w;
    H.noalias() += PhiHess(z, averaged) * x * x.transpose();
    Vector target = theta - H.llt().solve(g);
    if (target.norm() > S) target = ProjectOntoBall(H, target, S).theta;
    const Vector dir = target - theta;
    const double slope = g.dot(dir);
    if (dir.dot(H * dir) <= 1e-20 * std::max(1.0, std::abs(fv)) || slope >= 0) break;
    double a = 1.0;
    Vector cand = theta + dir;
    double fc = F(cand);
    for (int ls = 0; ls < 50 && !(fc <= fv + 1e-4 * a * slope); ++ls) {
      a *= 0.5;
      cand = theta + a * dir;
      fc = F(cand);
    }
    if (!(fc < fv)) break;
    theta = std::move(cand);
    fv = fc;
  }
  return theta;
}

double Ecolog::Beta() const {
  const double lam = p_.lambda, S = p_.S, t = static_cast<double>(t_) + 1;
  const double g = std::sqrt(lam) / 2 +
                   2 / std::sqrt(lam) * std::log(2 * std::sqrt(1 + t / (4 * lam)) / p_.delta);
  const double b2 = 2 * lam * S * S + (1 + S) * (1 + S) * g + cum_;
  return p_.radius_multiplier * std::sqrt(std::max(b2, 0.0));
}

absl::StatusOr<Decision> Ecolog::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Beta();
  const int n = static_cast<int>(ctx.candidates.size());
  Vector ucb(n), logit(n);
  int best = 0;
  for (int i = 0; i < n; ++i) {
    const Vector& x = ctx.candidates[i];
    logit[i] = x.dot(theta_);
    ucb[i] = p_.link.Mu(logit[i]) + beta * std::sqrt(std::max(x.dot(w_inv_ * x), 0.0));
    if (ucb[i] > ucb[best]) best = i;
  }
  Decision d = UcbDecision(p_.link, best, ucb, logit, beta, ctx.want_scores);
  d.diagnostics[2].second = ucb[best] - p_.link.Mu(logit[best]);  // bonus on the mean scale
  return d;
}

absl::Status Ecolog::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  const double r = obs.reward;
  Vector next = Step(w_, theta_, x, r, false, p_.S);
  const Vector bar = Step(w_, theta_, x, r, true, p_.S);
  const Vector diff = next - bar;
  const double disc = std::sqrt(std::max(diff.dot(w_ * diff), 0.0));
  const double sens = p_.link.MuPrime(x.dot(next));
  if (p_.link.MuPrime(x.dot(bar)) / sens > 2) ++violations_;
  cum_ +=
      2 * (1 + p_.S) * (p_.link.Loss(x.dot(bar), r) - p_.link.Loss(x.dot(next), r)) - 0.5 * disc;
  w_.noalias() += sens * x * x.transpose();
  ShermanMorrisonAdd(w_inv_, x, sens);
  theta_ = std::move(next);
  ++t_;
  return absl::OkStatus();
}

void Ecolog::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  SaveOmdState(w, theta_, w_, w_inv_, t_);
  w.PutScalar("cum", cum_);
  w.PutInt("violations", violations_);
}

absl::Status Ecolog::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  double cum;
  int64_t violations;
  if (auto s = r.GetScalar("cum", &cum); !s.ok()) return s;
  if (auto s = r.GetInt("violations", &violations); !s.ok()) return s;
  if (!std::isfinite(cum) || violations < 0)
    return absl::InvalidArgumentError("state cum/violations out of range, expected finite / >= 0");
  if (auto s = RestoreOmdState(r, p_.d, &theta_, &w_, &w_inv_, &t_); !s.ok()) return s;
  cum_ = cum;
  violations_ = violations;
  return absl::OkStatus();
}

int64_t Ecolog::StateBytes() const {
  return (theta_.size() + w_.size() + w_inv_.size() + 1) * sizeof(double) + 2 * sizeof(int64_t);
}

std::vector<std::pair<std::string, double>> Ecolog::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"lambda", p_.lambda},
          {"condition_violations", static_cast<double>(violations_)},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
