#include "bench/sim/baselines/discounted_glm_ucb.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/glb/projection.h"

namespace bandit::glb {

Vector WeightedMleOnBall(const GlmLink& link, const WeightedData& data, double lambda,
                         const Vector& warm, double S) {
  Vector theta = warm;
  if (const double n = theta.norm(); n > S) theta *= S / n;
  const int d = static_cast<int>(warm.size());
  Vector grad(d);
  Matrix hess(d, d);
  double f = WeightedObjective(link, data, lambda, theta);
  for (int it = 0; it < 50; ++it) {
    WeightedGradHess(link, data, lambda, theta, &grad, &hess);
    // Minimize the local quadratic model over the ball: ||theta' - zeta||_H with the Newton point.
    const Vector zeta = theta - hess.llt().solve(grad);
    const Vector target = ProjectOntoBall(hess, zeta, S).theta;
    const Vector dir = target - theta;
    const double slope = grad.dot(dir);  // <= 0 (target minimizes the convex model over the ball)
    if (dir.norm() <= 1e-12 * std::max(1.0, theta.norm()) || slope >= 0) break;
    double s = 1.0;
    Vector cand = theta + dir;
    double fc = WeightedObjective(link, data, lambda, cand);
    for (int ls = 0; ls < 40 && !(fc <= f + 1e-4 * s * slope); ++ls) {
      s *= 0.5;
      cand = theta + s * dir;  // convex combination of two ball points stays in the ball
      fc = WeightedObjective(link, data, lambda, cand);
    }
    if (!(fc < f)) break;
    theta = std::move(cand);
    f = fc;
  }
  return theta;
}

namespace {

// rho_t = (k_mu / c_mu) beta_t (BVD-GLM-UCB).
double MeanSpaceRadius(const GlbParams& p, double t, double gamma) {
  return p.link.LMu(p.S) / p.link.CMu(p.S) * WeightedRadius(p, t, gamma);
}

const MleUcbRule kDGlucbRule{
    .name = "d_glucb",
    .scores_in_mean_space = true,
    .refit =
        [](const MleUcbFit& fit, Vector* theta_hat, Vector* theta, Matrix* bonus_inv) {
          ProjectedMleRefit(fit, theta_hat, theta, bonus_inv);
          Matrix& b = *bonus_inv;
          b = fit.v_inv * fit.v2 * fit.v_inv;  // ||x||_{V^{-1} V~ V^{-1}}
          b = 0.5 * (b + b.transpose());
        },
    .radius =
        [](const GlbParams& p, double t, double gamma) {
          return 2 * p.link.LMu(p.S) / p.link.CMu(p.S) * WeightedRadius(p, t, gamma * gamma);
        }};

const MleUcbRule kScDGlucbRule{
    .name = "sc_d_glucb",
    .scores_in_mean_space = false,
    .refit =
        [](const MleUcbFit& fit, Vector* theta_hat, Vector* theta, Matrix* bonus_inv) {
          const GlbParams& p = fit.p;
          *theta_hat = WeightedMleOnBall(p.link, fit.data, p.lambda, *theta_hat, p.S);
          *theta = *theta_hat;
          *bonus_inv = WeightedHessian(p.link, fit.data, p.lambda, *theta)
                           .llt()
                           .solve(Matrix::Identity(p.d, p.d));
        },
    .radius = &WeightedRadius};

const MleUcbRule kBvdGlmUcbRule{.name = "bvd_glm_ucb",
                                .scores_in_mean_space = true,
                                .refit = &ProjectedMleRefit,
                                .radius = &MeanSpaceRadius};

// x'theta~ + (beta_t / sqrt(c_mu)) ||x||_{V^{-1}} (both SCB rules).
double ScbRadius(const GlbParams& p, double t, double gamma) {
  return WeightedRadius(p, t, gamma) / std::sqrt(p.link.CMu(p.S));
}

const MleUcbRule kScbWeightUcbRule{.name = "scb_weight_ucb",
                                   .scores_in_mean_space = false,
                                   .refit = &ProjectedMleRefit,
                                   .radius = &ScbRadius};
const MleUcbRule kScbPwWeightUcbRule{.name = "scb_pw_weight_ucb",
                                     .scores_in_mean_space = false,
                                     .refit = &ProjectedMleRefit,
                                     .radius = &ScbRadius};

double ClipGamma(double one_minus, int64_t T) {
  const double Td = static_cast<double>(T);
  return 1.0 - std::min(1.0 - 1.0 / Td, std::max(1.0 / Td, one_minus));
}

}  // namespace

const MleUcbRule& DiscountedRule(DiscountedKind kind) {
  switch (kind) {
    case DiscountedKind::kDGlucb:
      return kDGlucbRule;
    case DiscountedKind::kScDGlucb:
      return kScDGlucbRule;
    case DiscountedKind::kBvdGlmUcb:
      return kBvdGlmUcbRule;
    case DiscountedKind::kScbWeightUcb:
      return kScbWeightUcbRule;
    case DiscountedKind::kScbPwWeightUcb:
      return kScbPwWeightUcbRule;
  }
  return kDGlucbRule;
}

double TunedGamma(DiscountedKind kind, double c_mu, int d, int64_t T, double path_length,
                  int64_t changes) {
  const double Td = static_cast<double>(T), dd = d, G = static_cast<double>(changes);
  switch (kind) {
    case DiscountedKind::kDGlucb:
    case DiscountedKind::kScbPwWeightUcb:
      return ClipGamma(std::pow(G / (dd * Td), 2.0 / 3.0), T);
    case DiscountedKind::kScDGlucb:
      return ClipGamma(std::pow(std::sqrt(c_mu) * G / (dd * Td), 2.0 / 3.0), T);
    case DiscountedKind::kBvdGlmUcb:
      return ClipGamma(std::pow(path_length / (std::sqrt(dd) * Td), 0.4), T);
    case DiscountedKind::kScbWeightUcb:
      return ClipGamma(std::sqrt(path_length / (dd * Td)), T);
  }
  return 1.0;
}

absl::StatusOr<std::unique_ptr<Policy>> MakeDiscountedGlmUcb(
    const bandit::v1::SimPolicyConfig& config, uint64_t) {
  using PC = bandit::v1::SimPolicyConfig;
  DiscountedKind kind;
  const bandit::v1::DiscountedGlmUcbConfig* c = nullptr;
  switch (config.policy_case()) {
    case PC::kDGlucb:
      kind = DiscountedKind::kDGlucb;
      c = &config.d_glucb();
      break;
    case PC::kScDGlucb:
      kind = DiscountedKind::kScDGlucb;
      c = &config.sc_d_glucb();
      break;
    case PC::kBvdGlmUcb:
      kind = DiscountedKind::kBvdGlmUcb;
      c = &config.bvd_glm_ucb();
      break;
    case PC::kScbWeightUcb:
      kind = DiscountedKind::kScbWeightUcb;
      c = &config.scb_weight_ucb();
      break;
    case PC::kScbPwWeightUcb:
      kind = DiscountedKind::kScbPwWeightUcb;
      c = &config.scb_pw_weight_ucb();
      break;
    default:
      return absl::InvalidArgumentError("config.policy is not a nonstationary GLM-UCB baseline");
  }
  const MleUcbRule& rule = DiscountedRule(kind);
  const std::string field(rule.name);
  auto p = ParseParams(field, *c);
  if (!p.ok()) return p.status();
  if (auto s = CheckNonstationaryRanges(field, *c); !s.ok()) return s;
  int steps = 50;
  if (c->has_projection_steps()) {
    steps = c->projection_steps();
    if (steps < 0 || steps > 10000)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".projection_steps is ", steps, ", expected 0..10000"));
  }
  double gamma;
  if (c->has_gamma()) {
    gamma = c->gamma();
    if (!(gamma > 0 && gamma < 1))
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".gamma is ", gamma, ", expected a number in (0, 1)"));
  } else {
    const bool drift = kind == DiscountedKind::kBvdGlmUcb || kind == DiscountedKind::kScbWeightUcb;
    if (!c->has_horizon())
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".gamma is unset and ", field,
                       ".horizon is missing; expected gamma in (0, 1), or "
                       "horizon >= 2 with ",
                       drift ? "path_length" : "num_changes", " (the paper's tuning)"));
    if (drift && !c->has_path_length())
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".gamma is unset: expected path_length (this baseline is tuned by P_T)"));
    if (!drift && !c->has_num_changes())
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".gamma is unset: expected num_changes (this baseline is tuned by Gamma_T)"));
    if (c->has_num_changes() && c->num_changes() < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".num_changes is ", c->num_changes(), ", expected a number >= 0"));
    gamma =
        TunedGamma(kind, p->link.CMu(p->S), p->d, c->horizon(), c->path_length(), c->num_changes());
  }
  return std::unique_ptr<Policy>(new NonstationaryGlmUcb(rule, *p, gamma, 0, steps));
}

}  // namespace bandit::glb
