// Test helpers for the kernel family: configs, and slow dense reference implementations of
// eq. (1)-(2) and eq. (4) that keep the full list of pulls (no counters, no blocking).
#pragma once

#include <vector>

#include "bandit/v1/policy.pb.h"
#include "core/kernel/kernel.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::testing {

// A arms uniform in [0,1]^d with ids "a0", "a1", ...
inline Matrix RandomArms(int A, int d, uint64_t seed) {
  Rng rng(seed);
  Matrix X(d, A);
  for (int i = 0; i < X.size(); ++i) X.data()[i] = rng.Uniform();
  return X;
}

inline void FillArms(const Matrix& X, bandit::v1::PolicyConfig* c) {
  for (int j = 0; j < X.cols(); ++j) {
    auto* a = c->add_arms();
    a->set_id("a" + std::to_string(j));
    for (int i = 0; i < X.rows(); ++i) a->add_features(X(i, j));
  }
}

struct Pull {
  int arm;
  double y;
};

// Exact GP posterior over the t pulls (with repeats), eq. (1) and eq. (2) / lambda.
inline void DenseExact(const Kernel& k, const Matrix& X, const std::vector<Pull>& pulls,
                       double lambda, Vector* mean, Vector* var) {
  const int t = static_cast<int>(pulls.size()), A = static_cast<int>(X.cols());
  Matrix Kt(t, t);
  Vector y(t);
  for (int a = 0; a < t; ++a) {
    y[a] = pulls[a].y;
    for (int b = 0; b < t; ++b) Kt(a, b) = k(X.col(pulls[a].arm), X.col(pulls[b].arm));
  }
  Matrix M = Kt + lambda * Matrix::Identity(t, t);
  Eigen::FullPivLU<Matrix> lu(M);
  mean->resize(A);
  var->resize(A);
  for (int i = 0; i < A; ++i) {
    Vector kt(t);
    for (int a = 0; a < t; ++a) kt[a] = k(X.col(pulls[a].arm), X.col(i));
    (*mean)[i] = kt.dot(lu.solve(y));
    (*var)[i] = (k(X.col(i), X.col(i)) - kt.dot(lu.solve(kt))) / lambda;
  }
}

// BKB's eq. (4) written out literally: z(x) = (K_S^{1/2})^+ k_S(x) with a pseudo-inverse of the
// matrix square root, Z_t the t x m matrix of all pulls, V_t = Z^T Z + lambda I.
inline void DenseBkb(const Kernel& k, const Matrix& X, const std::vector<int>& dict,
                     const std::vector<Pull>& pulls, double lambda, Vector* mean, Vector* var) {
  const int m = static_cast<int>(dict.size()), t = static_cast<int>(pulls.size());
  const int A = static_cast<int>(X.cols());
  Matrix KS(m, m);
  for (int a = 0; a < m; ++a)
    for (int b = 0; b < m; ++b) KS(a, b) = k(X.col(dict[a]), X.col(dict[b]));
  const Matrix root = Eigen::SelfAdjointEigenSolver<Matrix>(KS).operatorSqrt();
  const Matrix pinv = Eigen::CompleteOrthogonalDecomposition<Matrix>(root).pseudoInverse();
  auto z = [&](int i) {
    Vector ks(m);
    for (int a = 0; a < m; ++a) ks[a] = k(X.col(dict[a]), X.col(i));
    return Vector(pinv * ks);
  };
  Matrix Z(t, m);
  Vector y(t);
  for (int s = 0; s < t; ++s) {
    Z.row(s) = z(pulls[s].arm).transpose();
    y[s] = pulls[s].y;
  }
  const Matrix V = Z.transpose() * Z + lambda * Matrix::Identity(m, m);
  const Matrix Vinv = V.inverse();
  mean->resize(A);
  var->resize(A);
  for (int i = 0; i < A; ++i) {
    const Vector zi = z(i);
    (*mean)[i] = zi.dot(Vinv * Z.transpose() * y);
    (*var)[i] = (k(X.col(i), X.col(i)) - zi.dot(Z.transpose() * Z * Vinv * zi)) / lambda;
  }
}

}  // namespace bandit::testing
