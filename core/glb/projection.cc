#include "core/glb/projection.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace bandit::glb {

Projection ProjectOntoBall(const Eigen::MatrixXd& H, const Eigen::VectorXd& zeta, double S) {
  if (zeta.norm() <= S) return {zeta, 0.0, 0};
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(H);
  return ProjectOntoBallEigen(eig.eigenvalues(), eig.eigenvectors(), zeta, S);
}

namespace {

// The multiplier nu > 0 with ||theta(nu)|| = S, theta_i(nu) = lc_i / (l_i + nu), given
// ||zeta|| = zn > S; `it` receives the iterations.
double Multiplier(const Eigen::ArrayXd& l, const Eigen::ArrayXd& lc, double zn, double S,
                  int* iterations) {
  // phi(nu) = ||theta(nu)||, phi'(nu) = -sum l_i^2 c_i^2 / (l_i + nu)^3 / phi.
  auto norm_at = [&](double nu, double* dnorm) {
    const Eigen::ArrayXd den = l + nu;
    const Eigen::ArrayXd v = lc / den;
    const double n = std::sqrt(v.square().sum());
    if (dnorm) *dnorm = -(v.square() / den).sum() / n;
    return n;
  };
  double lo = 0.0, hi = std::max(l.maxCoeff(), 0.0) * (zn / S - 1.0);
  // Bracket check: theta(hi) <= S holds since l_i/(l_i+nu) <= l_max/(l_max+nu); widen on rounding.
  while (norm_at(hi, nullptr) > S) hi = 2.0 * hi + 1e-300;
  double nu = 0.0;
  int it = 0;
  for (; it < 200; ++it) {
    double dn;
    const double n = norm_at(nu, &dn);
    const double f = 1.0 / n - 1.0 / S;  // increasing in nu, root at ||theta|| = S
    if (std::abs(n - S) <= 1e-14 * S) break;
    if (f < 0)
      lo = nu;
    else
      hi = nu;
    const double df = -dn / (n * n);  // d/dnu (1/n) > 0
    double next = nu - f / df;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (hi - lo <= 1e-16 * std::max(1.0, hi)) break;
    nu = next;
  }
  *iterations = it;
  return nu;
}

}  // namespace

Projection ProjectOntoBallEigen(const Eigen::VectorXd& l, const Eigen::MatrixXd& Q,
                                const Eigen::VectorXd& zeta, double S) {
  const double zn = zeta.norm();
  if (zn <= S) return {zeta, 0.0, 0};
  const Eigen::VectorXd c = Q.transpose() * zeta;
  const Eigen::ArrayXd lc = l.array() * c.array();
  int it = 0;
  const double nu = Multiplier(l.array(), lc, zn, S, &it);
  Eigen::VectorXd theta = Q * (lc / (l.array() + nu)).matrix();
  // Remove the last rounding so the result is feasible.
  const double tn = theta.norm();
  if (tn > S) theta *= S / tn;
  return {theta, nu, it};
}

Projection ProjectOntoBallDiagonal(const Eigen::VectorXd& l, const Eigen::VectorXd& zeta,
                                   double S) {
  const double zn = zeta.norm();
  if (zn <= S) return {zeta, 0.0, 0};
  std::vector<Eigen::Index> nz;
  for (Eigen::Index i = 0; i < zeta.size(); ++i)
    if (zeta[i] != 0) nz.push_back(i);
  const Eigen::Index m = static_cast<Eigen::Index>(nz.size());
  Eigen::ArrayXd ls(m), lc(m);
  for (Eigen::Index k = 0; k < m; ++k) {
    ls[k] = l[nz[k]];
    lc[k] = l[nz[k]] * zeta[nz[k]];
  }
  int it = 0;
  const double nu = Multiplier(ls, lc, zn, S, &it);
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(zeta.size());
  for (Eigen::Index k = 0; k < m; ++k) theta[nz[k]] = lc[k] / (ls[k] + nu);
  const double tn = theta.norm();
  if (tn > S) theta *= S / tn;
  return {theta, nu, it};
}

}  // namespace bandit::glb
