// Exact-likelihood pieces of the MLE-based baselines of the GLB-OMD paper's experiments
// (OFUGLB, OFULog-r, RS-GLinCB): the regularized negative log-likelihood over stored rounds,
//   f(theta) = sum_s l(x_s'theta, r_s) + lambda/2 ||theta||^2      (lambda may be 0),
// its minimizer over the ball ||theta|| <= S, and the optimistic value of an arm over a
// likelihood-ratio confidence set
//   max x'theta  s.t.  f(theta) <= c,  ||theta|| <= S          (OFUGLB eq. (44), OFULog-r C_t).
// Both sets are convex (f is convex), so the optimistic value is found exactly through its
// Lagrangian: for s = 1/nu > 0, theta(s) = argmin_{||theta||<=S} f(theta) - s x'theta, and the
// answer is x'theta(s*) at the s* with f(theta(s*)) = c (f(theta(s)) grows with s). Every
// evaluation touches all stored rounds: O(n d^2) -- the O(t)-per-round cost GLB-OMD avoids.
#pragma once

#include <Eigen/Dense>

#include "core/glb/link.h"
#include "core/glb/mle.h"

namespace bandit::glb {

class LikelihoodObjective {
 public:
  LikelihoodObjective(const GlmLink& link, const GlmHistory& data, double lambda)
      : link_(link), data_(data), lambda_(lambda) {}
  double Value(const Eigen::VectorXd& theta) const;
  void GradHess(const Eigen::VectorXd& theta, Eigen::VectorXd* grad, Eigen::MatrixXd* hess) const;
  double lambda() const { return lambda_; }

 private:
  const GlmLink& link_;
  const GlmHistory& data_;
  double lambda_;
};

struct BallMinimum {
  Eigen::VectorXd theta;
  double value = 0.0;  // f(theta) - lin'theta
  int iterations = 0;
  bool converged = false;
};

// argmin_{||theta|| <= S} f(theta) - lin'theta (S = +inf: unconstrained) by projected Newton:
// the step target theta - H^{-1} g is projected onto the ball in the H-norm (exact,
// core/glb/projection.h), then an Armijo backtracking along the segment. H gets a 1e-9 ridge so
// that an unregularized f on fewer rounds than dimensions still gives a step; the ball bounds it.
BallMinimum MinimizeOverBall(const LikelihoodObjective& f, double S, const Eigen::VectorXd& lin,
                             const Eigen::VectorXd& warm);

struct OptimisticPoint {
  double value = 0.0;     // max x'theta over the set
  Eigen::VectorXd theta;  // where it is attained
  bool empty = false;     // f > c everywhere on the ball (value = x'theta_min then)
  int evaluations = 0;    // inner minimizations
};

// max x'theta over {f(theta) <= c, ||theta|| <= S}. `center` minimizes f over the ball (the
// estimator); `center_value` = f(center). Root of h(s) = f(theta(s)) - c by a safeguarded Newton
// step in s (h'(s) = s x'H^{-1}x in the interior) inside a bracket, falling back to bisection.
OptimisticPoint MaximizeOverLikelihoodSet(const LikelihoodObjective& f, double S,
                                          const Eigen::VectorXd& x, double c,
                                          const Eigen::VectorXd& center, double center_value);

}  // namespace bandit::glb
