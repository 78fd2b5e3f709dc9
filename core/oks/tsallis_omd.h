// Outer level of IOKS (Algorithm 2): online mirror descent on the simplex with the modified
// alpha-Tsallis regularizer psi_t(p) = sum_i -alpha / eta_{t,i} p_i^{1/alpha}, alpha = 8, and
// per-kernel increasing learning rates.
#pragma once

#include <Eigen/Dense>

namespace bandit::oks {

inline constexpr double kTsallisAlpha = 8.0;

// Theorem 4.1 (with Section 6's constant): delta = T^{-3/4},
// eta = eta_constant * l_max K^{3/8} / (U G1 sqrt(T ln T)) (theorem: 3/2; experiments: 8),
// upsilon = exp(2 / (3 ln T)) (Algorithm 2 line 1).
struct IoksParams {
  double delta, eta, upsilon;
};
IoksParams IoksTheoremParams(int k, double horizon, double u, double g1, double loss_max,
                             double eta_constant);

// eq. (4) for the chosen kernel: c / p if p >= max_i eta_i, else c / (p + max_i eta_i).
double IoksLossEstimate(double c, double p, double max_eta);

// eq. (3) solved in closed form, eq. (5):
//   q_{t+1,i} = (q_{t,i}^{-7/8} + eta_i (c~_i - mu*))^{-8/7}
// with the normalizer mu* found by bisection so that sum_i q_{t+1,i} = 1. mu* lies in
// [0, max_i c~_i] (at 0 every q_i can only shrink, at max c~ only grow) and below the first pole
// q_i^{-7/8} / eta_i + c~_i; the bracket is the intersection, so this also works when eq. (4)'s
// guarantee eta_i c~_i <= 1 fails (losses above l_max). The result is renormalized to sum exactly
// to 1 (a relative correction of the order of the bisection tolerance). `mu` receives mu*.
Eigen::VectorXd TsallisOmdStep(const Eigen::VectorXd& q, const Eigen::VectorXd& eta,
                               const Eigen::VectorXd& c_tilde, double* mu = nullptr);

}  // namespace bandit::oks
