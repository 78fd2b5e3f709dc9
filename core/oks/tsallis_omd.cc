#include "core/oks/tsallis_omd.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bandit::oks {

IoksParams IoksTheoremParams(int k, double horizon, double u, double g1, double loss_max,
                             double eta_constant) {
  const double t = horizon, lt = std::log(horizon);
  IoksParams p;
  p.delta = std::pow(t, -0.75);
  p.eta = eta_constant * loss_max * std::pow(static_cast<double>(k), 3.0 / 8.0) /
          (u * g1 * std::sqrt(t * lt));
  p.upsilon = std::exp(2.0 / (3.0 * lt));
  return p;
}

double IoksLossEstimate(double c, double p, double max_eta) {
  return p >= max_eta ? c / p : c / (p + max_eta);
}

namespace {
// Exponents of eq. (5) for general alpha: inner power 1/alpha - 1 = -7/8, outer 1/(1/alpha - 1).
constexpr double kInner = 1.0 / kTsallisAlpha - 1.0;
constexpr double kOuter = 1.0 / kInner;
}  // namespace

Eigen::VectorXd TsallisOmdStep(const Eigen::VectorXd& q, const Eigen::VectorXd& eta,
                               const Eigen::VectorXd& c_tilde, double* mu) {
  const int k = static_cast<int>(q.size());
  const Eigen::ArrayXd base = q.array().pow(kInner);  // q_i^{-7/8}
  auto mass = [&](double m) {
    double s = 0.0;
    for (int i = 0; i < k; ++i) s += std::pow(base[i] + eta[i] * (c_tilde[i] - m), kOuter);
    return s;
  };
  double lo = 0.0, hi = c_tilde.maxCoeff();
  double pole = std::numeric_limits<double>::infinity();
  for (int i = 0; i < k; ++i)
    if (eta[i] > 0) pole = std::min(pole, base[i] / eta[i] + c_tilde[i]);
  hi = std::min(hi, pole);
  double m = 0.0;
  if (hi > 0.0) {
    for (int it = 0; it < 200; ++it) {
      m = 0.5 * (lo + hi);
      if (m <= lo || m >= hi) break;  // interval exhausted at double precision
      const double s = mass(m);
      if (s < 1.0)
        lo = m;
      else if (s > 1.0)
        hi = m;
      else
        break;
    }
  }
  if (mu) *mu = m;
  Eigen::VectorXd out(k);
  for (int i = 0; i < k; ++i) out[i] = std::pow(base[i] + eta[i] * (c_tilde[i] - m), kOuter);
  return out / out.sum();
}

}  // namespace bandit::oks
