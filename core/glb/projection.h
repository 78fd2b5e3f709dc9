// Exact projection onto the Euclidean ball in a Mahalanobis norm (GLB-OMD Appendix A.3, eq. (28b)):
//   theta = argmin_{||theta||_2 <= S} ||theta - zeta||_H^2,   H symmetric positive definite.
// If ||zeta|| <= S the answer is zeta. Otherwise the KKT conditions give
//   H (theta - zeta) + nu theta = 0,  nu > 0,  ||theta|| = S,
// i.e. theta(nu) = (H + nu I)^{-1} H zeta. With H = Q diag(l) Q' and c = Q' zeta,
//   ||theta(nu)||^2 = sum_i (l_i c_i / (l_i + nu))^2,
// strictly decreasing in nu; the multiplier is the root of ||theta(nu)|| = S, found by a
// safeguarded Newton iteration on 1/||theta(nu)|| - 1/S (convex and nearly linear in nu,
// as in More & Sorensen's trust-region solver) inside the bracket [0, l_max (||zeta||/S - 1)].
// Cost: one symmetric eigendecomposition, O(d^3), plus O(d) per root-finding iteration.
#pragma once

#include <Eigen/Dense>

namespace bandit::glb {

struct Projection {
  Eigen::VectorXd theta;
  double nu = 0.0;     // Lagrange multiplier (0 when zeta is inside the ball)
  int iterations = 0;  // root-finding iterations
};

Projection ProjectOntoBall(const Eigen::MatrixXd& H, const Eigen::VectorXd& zeta, double S);
// Same, with H given by its eigendecomposition H = Q diag(l) Q'.
Projection ProjectOntoBallEigen(const Eigen::VectorXd& l, const Eigen::MatrixXd& Q,
                                const Eigen::VectorXd& zeta, double S);
// Same, with H diagonal (Q = I, l = diag(H)): theta_i = l_i zeta_i / (l_i + nu). Coordinates
// where zeta is 0 stay 0, so the cost is O(d) to find the others plus O(nnz(zeta)) per
// root-finding iteration.
Projection ProjectOntoBallDiagonal(const Eigen::VectorXd& l, const Eigen::VectorXd& zeta,
                                   double S);

}  // namespace bandit::glb
