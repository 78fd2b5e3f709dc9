// Outer level of OKS and OKS++: exponential weights over the cumulative importance-weighted
// losses L_i = sum_tau l(f_{tau,i}(x_tau), y_tau) / p_{tau,i} 1[I_tau = i], mixed with uniform
// exploration:  q_t = softmax(-eta L),  p_t = (1 - delta) q_t + delta / K   (Algorithm 1 line 8).
// With a constant eta this is exactly the multiplicative update of Algorithm 1 line 6
// (w_{t+1,I} = w_{t,I} exp(-eta l / p)); with OKS++'s time-varying eta_t it is the usual
// exponential-weights form q_{t+1} ∝ exp(-eta_t L_t).
#pragma once

#include <Eigen/Dense>

namespace bandit::oks {

// Remark 1 (OKS tuned for the p-regret): delta = (G/l_max)^{2/3} K^{1/3} T^{-1/3} (capped at 1),
// lambda = scale * sqrt(delta / (K T G^2)) (the paper's experiments try scale in {1,5,10,25}),
// eta = sqrt(2 (1 - delta) ln K) / sqrt(K T l_max^2).
struct OksParams {
  double delta, eta, lambda;
};
OksParams OksRemark1Params(int k, double horizon, double g, double loss_max, double lambda_scale);

// Theorem 3.1 (OKS++). G and C0 from Assumptions 1-2 (for nu = 2 the theorem sets G = 1).
struct OksPlusPlusConstants {
  int k;
  double u, g, c0;
};
// delta_t = (G C0)^{1/3} (U K)^{2/3} / (2 max{(G C0)^{1/3} (U K)^{2/3}, 2 C_t^{1/3}}),
// C_t = sum_{tau <= t} sum_i c~_{tau,i}.
double OksPlusPlusDelta(const OksPlusPlusConstants& c, double c_tilde_sum);
// eta_t = sqrt(2 ln K) / sqrt(1 + sum_{tau <= t} sum_i q_{tau,i} c~_{tau,i}^2).
double OksPlusPlusEta(int k, double q_weighted_sq_sum);
// lambda_{t,i} = U^{4/3} max{G C0 U^2 K^2, 8 C_t}^{-1/6} / (sqrt(4/3) K^{1/6} (G C0)^{1/3} sqrt(1 + Delta_{t,i})),
// Delta_{t,i} = sum_{tau <= t} l(f_{tau,i}(x_tau), y_tau) / p_{tau,i} 1[I_tau = i].
double OksPlusPlusLambda(const OksPlusPlusConstants& c, double c_tilde_sum, double delta_i);

// softmax(-eta * L), computed with the minimum subtracted (no overflow).
Eigen::VectorXd ExponentialWeights(const Eigen::VectorXd& cumulative_loss, double eta);
// (1 - delta) q + delta / K.
Eigen::VectorXd MixUniform(const Eigen::VectorXd& q, double delta);

}  // namespace bandit::oks
