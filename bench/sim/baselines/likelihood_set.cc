#include "bench/sim/baselines/likelihood_set.h"

#include <cmath>
#include <limits>

#include "core/glb/projection.h"

namespace bandit::glb {

double LikelihoodObjective::Value(const Eigen::VectorXd& theta) const {
  const Eigen::VectorXd z = data_.X().transpose() * theta;
  const auto r = data_.r();
  double f = 0.5 * lambda_ * theta.squaredNorm();
  for (int64_t i = 0; i < z.size(); ++i) f += link_.Loss(z[i], r[i]);
  return f;
}

void LikelihoodObjective::GradHess(const Eigen::VectorXd& theta, Eigen::VectorXd* grad,
                                   Eigen::MatrixXd* hess) const {
  const auto X = data_.X();
  const auto r = data_.r();
  const Eigen::VectorXd z = X.transpose() * theta;
  Eigen::VectorXd a(z.size()), w(z.size());
  for (int64_t i = 0; i < z.size(); ++i) {
    a[i] = link_.LossGrad(z[i], r[i]);
    w[i] = link_.LossHess(z[i]);
  }
  if (grad) *grad = X * a + lambda_ * theta;
  if (hess) {
    hess->noalias() = (X.array().rowwise() * w.transpose().array()).matrix() * X.transpose();
    hess->diagonal().array() += lambda_;
  }
}

BallMinimum MinimizeOverBall(const LikelihoodObjective& f, double S, const Eigen::VectorXd& lin,
                             const Eigen::VectorXd& warm) {
  BallMinimum out;
  const int d = static_cast<int>(warm.size());
  Eigen::VectorXd theta = warm;
  if (std::isfinite(S) && theta.norm() > S) theta *= S / theta.norm();
  auto F = [&](const Eigen::VectorXd& th) { return f.Value(th) - lin.dot(th); };
  double fv = F(theta);
  Eigen::VectorXd g(d);
  Eigen::MatrixXd H(d, d);
  for (int it = 0; it < 100; ++it) {
    f.GradHess(theta, &g, &H);
    g -= lin;
    H.diagonal().array() += 1e-9;
    Eigen::VectorXd target = theta - H.llt().solve(g);
    if (std::isfinite(S) && target.norm() > S) target = ProjectOntoBall(H, target, S).theta;
    const Eigen::VectorXd dir = target - theta;
    const double slope = g.dot(dir);  // <= 0 for the projected Newton direction
    out.iterations = it + 1;
    const double dec = dir.dot(H * dir);
    if (dec <= 1e-15 * std::max(1.0, std::abs(fv)) || slope >= 0) {
      out.converged = true;
      break;
    }
    double a = 1.0;
    Eigen::VectorXd cand = theta + dir;
    double fc = F(cand);
    for (int ls = 0; ls < 50 && !(fc <= fv + 1e-4 * a * slope); ++ls) {
      a *= 0.5;
      cand = theta + a * dir;
      fc = F(cand);
    }
    if (!(fc < fv)) {  // no progress at machine precision
      out.converged = dec <= 1e-10 * std::max(1.0, std::abs(fv));
      break;
    }
    theta = std::move(cand);
    fv = fc;
  }
  out.theta = std::move(theta);
  out.value = fv;
  return out;
}

OptimisticPoint MaximizeOverLikelihoodSet(const LikelihoodObjective& f, double S,
                                          const Eigen::VectorXd& x, double c,
                                          const Eigen::VectorXd& center, double center_value) {
  OptimisticPoint out;
  const double xn = x.norm();
  if (xn == 0) {
    out.theta = center;
    return out;
  }
  // The ball's own maximizer, if the likelihood constraint allows it.
  if (std::isfinite(S)) {
    const Eigen::VectorXd top = (S / xn) * x;
    if (f.Value(top) <= c) {
      out.value = S * xn;
      out.theta = top;
      return out;
    }
  }
  if (center_value > c) {  // empty set (the estimator itself violates the bound)
    out.empty = true;
    out.value = x.dot(center);
    out.theta = center;
    return out;
  }
  // f is accurate to ~1e-12 relative; 1e-9 relative on the likelihood bound moves x'theta by far
  // less than any gap between arms that matters.
  const double tol = 1e-9 * std::max(1.0, std::abs(c));
  // Initial s from the quadratic model at the center: the ellipsoid's maximizer.
  Eigen::MatrixXd H;
  f.GradHess(center, nullptr, &H);
  H.diagonal().array() += 1e-9;
  const double xhx = std::max(x.dot(H.llt().solve(x)), 1e-300);
  double s = std::sqrt(2.0 * (c - center_value) / xhx);
  double lo = 0.0, hi = std::numeric_limits<double>::infinity();
  double h_lo = center_value - c, h_hi = 0.0;
  int last_side = 0;  // Illinois: which end moved last
  double prev_s = 0.0, prev_h = center_value - c;
  Eigen::VectorXd warm = center;
  Eigen::VectorXd best_feasible = center;
  for (int it = 0; it < 100; ++it) {
    BallMinimum m = MinimizeOverBall(f, S, s * x, warm);
    ++out.evaluations;
    const double h = (m.value + s * x.dot(m.theta)) - c;  // f(theta(s)) - c
    warm = m.theta;
    if (h <= 0) {
      lo = s;
      h_lo = h;
      best_feasible = m.theta;
      if (last_side == -1) h_hi *= 0.5;
      last_side = -1;
    } else {
      hi = s;
      h_hi = h;
      if (last_side == 1) h_lo *= 0.5;
      last_side = 1;
    }
    if (std::abs(h) <= tol) {
      if (h > 0) best_feasible = m.theta;  // within tolerance of the boundary
      break;
    }
    if (std::isfinite(hi) && hi - lo <= 1e-13 * hi) break;
    // Next s: Newton on the first step (h'(s) = s x'H^{-1}x where the ball is inactive), then
    // secant through the last two points -- the Newton slope is wrong once the ball is active;
    // both guarded by the bracket (Illinois false position, or growth while no upper end).
    double next;
    if (it == 0) {
      Eigen::MatrixXd Hs;
      f.GradHess(m.theta, nullptr, &Hs);
      Hs.diagonal().array() += 1e-9;
      const double deriv = s * x.dot(Hs.llt().solve(x));
      next = deriv > 0 ? s - h / deriv : std::numeric_limits<double>::quiet_NaN();
    } else {
      next = h != prev_h ? s - h * (s - prev_s) / (h - prev_h)
                         : std::numeric_limits<double>::quiet_NaN();
    }
    prev_s = s;
    prev_h = h;
    if (!std::isfinite(hi) && next > 8 * s) next = 8 * s;
    if (!(next > lo && next < hi)) {
      next = std::isfinite(hi) ? (lo * h_hi - hi * h_lo) / (h_hi - h_lo) : 4.0 * std::max(s, 1e-12);
      if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    }
    s = next;
  }
  out.theta = best_feasible;
  out.value = x.dot(best_feasible);
  return out;
}

}  // namespace bandit::glb
