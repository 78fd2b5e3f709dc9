#include "core/glb/domd_glb.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/glb/projection.h"
#include "core/state_io.h"

namespace bandit::glb {

double DomdGammaDrift(double k_mu, int d, int64_t T, double path_length) {
  const double Td = static_cast<double>(T);
  const double x = std::sqrt(std::sqrt(k_mu) * path_length / (d * Td));
  return 1.0 - std::min(1.0 - 1.0 / Td, std::max(1.0 / Td, x));
}

double DomdGammaPiecewise(double k_mu, double c_mu, int d, int64_t T, int64_t changes) {
  const double Td = static_cast<double>(T);
  const double x =
      std::pow(static_cast<double>(changes) * std::sqrt(c_mu) / (k_mu * d * Td), 2.0 / 3.0);
  return 1.0 - std::min(1.0 - 1.0 / Td, std::max(1.0 / Td, x));
}

double DomdTheoryLambda(const GlbParams& p) {
  const double eta = p.eta(), alpha = 1.5 * eta, g = p.link.g();
  return std::max({6 * eta * p.R * p.link.LMu(p.S) * p.S / g, 32 * alpha * p.d * p.R * p.R / 7,
                   p.link.CMu(p.S) / g});
}

double DomdBeta(const GlbParams& p, double gamma, int64_t t) {
  const double eta = p.eta(), g = p.link.g(), k = p.link.LMu(p.S), lambda = p.lambda;
  const double td = static_cast<double>(t);
  const double b2 =
      4 * lambda * p.S * p.S +
      2 * eta * (1 + p.R * p.R / (g * k)) *
          std::log(std::numbers::pi * std::numbers::pi * td * td / (3 * p.delta)) +
      2 * eta * (3 * eta + 0.5) * p.d *
          std::log(1 + k * (1 - std::pow(gamma, td - 1)) / (lambda * p.d * g * (1 - gamma)));
  return std::sqrt(b2);
}

absl::StatusOr<std::unique_ptr<Policy>> DomdGlb::Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed) {
  const auto& c = config.domd_glb();
  auto p = ParseParams("domd_glb", c);
  if (!p.ok()) return p.status();
  if (c.theory_lambda()) {
    if (c.has_lambda())
      return absl::InvalidArgumentError(
          "domd_glb.lambda and domd_glb.theory_lambda are both set, expected at most one");
    p->lambda = DomdTheoryLambda(*p);
  }
  double gamma;
  if (c.has_gamma()) {
    gamma = c.gamma();
    if (!(gamma > 0 && gamma < 1))
      return absl::InvalidArgumentError(
          absl::StrCat("domd_glb.gamma is ", gamma, ", expected a number in (0, 1)"));
  } else {
    if (!c.has_horizon() || c.horizon() < 2)
      return absl::InvalidArgumentError(
          "domd_glb.gamma is unset and domd_glb.horizon is missing or < 2; expected gamma in (0, "
          "1), "
          "or horizon >= 2 with path_length (Theorem 2) or num_changes (Theorem 3)");
    if (c.has_path_length() == c.has_num_changes())
      return absl::InvalidArgumentError(
          "domd_glb.gamma is unset: expected exactly one of path_length (drifting, Theorem 2) or "
          "num_changes (piecewise stationary, Theorem 3)");
    const double k = p->link.LMu(p->S);
    if (c.has_path_length()) {
      if (auto s = CheckRange("domd_glb.path_length", c.path_length(), 0.0, 1e12); !s.ok())
        return s;
      gamma = DomdGammaDrift(k, p->d, c.horizon(), c.path_length());
    } else {
      if (c.num_changes() < 0)
        return absl::InvalidArgumentError(
            absl::StrCat("domd_glb.num_changes is ", c.num_changes(), ", expected a number >= 0"));
      gamma = DomdGammaPiecewise(k, p->link.CMu(p->S), p->d, c.horizon(), c.num_changes());
    }
    if (!(gamma > 0 && gamma < 1))  // horizon 2 with the clip gives 1/2; never 0 or 1
      return absl::InvalidArgumentError(
          absl::StrCat("tuned gamma is ", gamma, ", expected (0, 1)"));
  }
  return std::unique_ptr<Policy>(new DomdGlb(*p, gamma));
}

DomdGlb::DomdGlb(const GlbParams& p, double gamma) : p_(p), gamma_(gamma) {
  theta_ = Vector::Zero(p.d);
  h_ = p.lambda * Matrix::Identity(p.d, p.d);
  h_inv_ = (1.0 / p.lambda) * Matrix::Identity(p.d, p.d);
}

Matrix DomdGlb::PreUpdateMatrix() const {
  Matrix a = gamma_ * h_;
  a.diagonal().array() += (1 - gamma_) * p_.lambda;
  return a;
}

double DomdGlb::Beta() const { return p_.radius_multiplier * DomdBeta(p_, gamma_, t_ + 1); }

absl::StatusOr<Decision> DomdGlb::Select(const SelectContext& ctx) {
  if (auto s = CheckCandidates(ctx.candidates, p_.d, p_.max_feature_norm); !s.ok()) return s;
  const double beta = Beta();
  Vector ucb, logit;
  const int arm = ArgmaxUcb(ctx.candidates, theta_, h_inv_, beta, &ucb, &logit);  // eq. (3)
  return UcbDecision(p_.link, arm, ucb, logit, beta, ctx.want_scores);
}

absl::Status DomdGlb::Update(const Observation& obs) {
  if (auto s = CheckFeatures(obs.features, p_.d, p_.max_feature_norm); !s.ok()) return s;
  if (auto s = p_.link.CheckReward("reward", obs.reward); !s.ok()) return s;
  const Vector& x = obs.features;
  const double eta = p_.eta();
  const Matrix a = PreUpdateMatrix();  // A_t (line 4)
  const double z = x.dot(theta_);
  const Vector grad = p_.link.LossGrad(z, obs.reward) * x;
  Matrix ht = a;
  ht.noalias() += eta * p_.link.LossHess(z) * x * x.transpose();  // A_t + eta grad^2 l_t(theta_t)
  Eigen::SelfAdjointEigenSolver<Matrix> eig(ht);
  const Vector& l = eig.eigenvalues();
  const Matrix& q = eig.eigenvectors();
  const Vector zeta =
      theta_ - eta * (q * (q.transpose() * grad).cwiseQuotient(l));  // minimizer without the ball
  Vector next = ProjectOntoBallEigen(l, q, zeta, p_.S).theta;        // eq. (1) on ||theta|| <= S
  // Line 7: H_{t+1} = A_t + mu'(x'theta_{t+1}) / g x x'.
  Matrix h = a;
  h.noalias() += p_.link.LossHess(x.dot(next)) * x * x.transpose();
  h_inv_ = h.llt().solve(Matrix::Identity(p_.d, p_.d));
  h_ = std::move(h);
  theta_ = std::move(next);
  ++t_;
  return absl::OkStatus();
}

void DomdGlb::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  SaveOmdState(w, theta_, h_, h_inv_, t_);
  w.PutScalar("gamma", gamma_);
}

absl::Status DomdGlb::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  double gamma;
  if (auto s = r.GetScalar("gamma", &gamma); !s.ok()) return s;
  if (gamma != gamma_)
    return absl::InvalidArgumentError(
        absl::StrCat("state gamma is ", gamma, ", expected this instance's gamma ", gamma_));
  return RestoreOmdState(r, p_.d, &theta_, &h_, &h_inv_, &t_);
}

int64_t DomdGlb::StateBytes() const {
  return (theta_.size() + h_.size() + h_inv_.size()) * sizeof(double) + sizeof(t_);
}

std::vector<std::pair<std::string, double>> DomdGlb::Summary() const {
  return {{"rounds", static_cast<double>(t_)},
          {"beta", Beta()},
          {"gamma", gamma_},
          {"lambda", p_.lambda},
          {"theta_norm", theta_.norm()}};
}

}  // namespace bandit::glb
