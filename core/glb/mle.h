// Maximum-likelihood pieces of the MLE baselines (GLM-UCB, epsilon-greedy over a GLM):
// the stored history (all past rounds, or a sliding window) and a regularized Newton solver
//   theta_mle = argmin_theta  sum_s l_s(theta) + lambda/2 ||theta||^2,
//   l_s(theta) = (m(x_s'theta) - r_s x_s'theta) / g(tau)       (GLB-OMD eq. (2), Theta' = R^d),
// followed by a Euclidean clip to ||theta|| <= S (keeps Poisson fits finite). Every Newton
// iteration touches all stored rounds: O(n d^2) -- the O(t)-per-round cost the papers avoid.
#pragma once

#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/glb/link.h"
#include "core/state_io.h"

namespace bandit::glb {

class GlmHistory {
 public:
  GlmHistory(int d, int64_t window) : d_(d), window_(window) {}
  void Add(const Eigen::VectorXd& x, double r);
  int64_t size() const { return static_cast<int64_t>(r_.size()); }
  int d() const { return d_; }
  int64_t window() const { return window_; }
  // d x n matrix of stored features (physical slot order) and the rewards in the same order.
  Eigen::Map<const Eigen::MatrixXd> X() const { return {x_.data(), d_, size()}; }
  Eigen::Map<const Eigen::VectorXd> r() const { return {r_.data(), size()}; }

  // Keys <prefix>_x, <prefix>_r, <prefix>_head (a policy with two histories uses two prefixes).
  void Save(StateWriter& w, absl::string_view prefix = "history") const;
  absl::Status Restore(const StateReader& r, absl::string_view prefix = "history");
  int64_t Bytes() const { return (x_.size() + r_.size()) * sizeof(double) + sizeof(head_); }

 private:
  int d_;
  int64_t window_;  // 0 = keep everything
  std::vector<double> x_, r_;
  int64_t head_ = 0;  // slot overwritten next once the window is full
};

struct MleFit {
  Eigen::VectorXd theta;
  Eigen::MatrixXd hessian;  // sum mu'(x_s'theta)/g x_s x_s' + lambda I at the returned theta
  int iterations = 0;
  bool converged = false;
};

// Damped Newton from `warm`, backtracking (Armijo) line search; stops when the Newton
// decrement^2 / 2 falls below 1e-16 |objective| (or after 50 iterations).
MleFit FitGlmMle(const GlmLink& link, const GlmHistory& data, double lambda,
                 const Eigen::VectorXd& warm, double S);

// Regularized negative log-likelihood (for tests).
double GlmObjective(const GlmLink& link, const GlmHistory& data, double lambda,
                    const Eigen::VectorXd& theta);

}  // namespace bandit::glb
