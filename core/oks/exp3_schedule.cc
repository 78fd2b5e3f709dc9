#include "core/oks/exp3_schedule.h"

#include <algorithm>
#include <cmath>

namespace bandit::oks {

OksParams OksRemark1Params(int k, double horizon, double g, double loss_max, double lambda_scale) {
  const double kk = k, t = horizon;
  OksParams p;
  p.delta = std::min(1.0, std::pow(g / loss_max, 2.0 / 3.0) * std::cbrt(kk) / std::cbrt(t));
  p.lambda = lambda_scale * std::sqrt(p.delta / (kk * t * g * g));
  p.eta = std::sqrt(2.0 * (1.0 - p.delta) * std::log(kk)) / std::sqrt(kk * t * loss_max * loss_max);
  return p;
}

double OksPlusPlusDelta(const OksPlusPlusConstants& c, double c_tilde_sum) {
  const double a = std::cbrt(c.g * c.c0) * std::pow(c.u * c.k, 2.0 / 3.0);
  return a / (2.0 * std::max(a, 2.0 * std::cbrt(c_tilde_sum)));
}

double OksPlusPlusEta(int k, double q_weighted_sq_sum) {
  return std::sqrt(2.0 * std::log(static_cast<double>(k))) / std::sqrt(1.0 + q_weighted_sq_sum);
}

double OksPlusPlusLambda(const OksPlusPlusConstants& c, double c_tilde_sum, double delta_i) {
  const double kk = c.k;
  const double gc = c.g * c.c0;
  const double m = std::max(gc * c.u * c.u * kk * kk, 8.0 * c_tilde_sum);
  return std::pow(c.u, 4.0 / 3.0) * std::pow(m, -1.0 / 6.0) /
         (std::sqrt(4.0 / 3.0) * std::pow(kk, 1.0 / 6.0) * std::cbrt(gc) *
          std::sqrt(1.0 + delta_i));
}

Eigen::VectorXd ExponentialWeights(const Eigen::VectorXd& cumulative_loss, double eta) {
  const double m = cumulative_loss.minCoeff();
  Eigen::VectorXd w = (-eta * (cumulative_loss.array() - m)).exp().matrix();
  return w / w.sum();
}

Eigen::VectorXd MixUniform(const Eigen::VectorXd& q, double delta) {
  return ((1.0 - delta) * q.array() + delta / static_cast<double>(q.size())).matrix();
}

}  // namespace bandit::oks
