#include "core/mixture/vendi_exact.h"

#include <algorithm>
#include <cmath>

namespace bandit::mixture {

Matrix VendiGram(const Matrix& samples, VendiKernel kernel, double sigma) {
  const Eigen::Index n = samples.rows();
  Matrix k(n, n);
  if (kernel == VendiKernel::kCosine) {
    const Vector inv = samples.rowwise().norm().cwiseInverse();
    k.noalias() = inv.asDiagonal() * (samples * samples.transpose()) * inv.asDiagonal();
    return k;
  }
  const Vector sq = samples.rowwise().squaredNorm();
  k.noalias() = samples * samples.transpose();
  for (Eigen::Index r = 0; r < n; ++r)
    for (Eigen::Index s = 0; s < n; ++s)
      k(r, s) = std::exp(-std::max(sq[r] + sq[s] - 2 * k(r, s), 0.0) / (2 * sigma * sigma));
  return k;
}

ExactVendiLoss::ExactVendiLoss(Matrix gram, std::vector<int> arm_of, int num_arms)
    : gram_(std::move(gram)), arm_of_(std::move(arm_of)), counts_(Vector::Zero(num_arms)) {
  for (int a : arm_of_) counts_[a] += 1;
}

double ExactVendiLoss::Eval(const Vector& alpha, Vector* grad) const {
  const Eigen::Index n = gram_.rows();
  Vector sq(n);  // sqrt(q_j), eq. (9)
  for (Eigen::Index j = 0; j < n; ++j)
    sq[j] = std::sqrt(std::max(alpha[arm_of_[j]], 0.0) / counts_[arm_of_[j]]);
  const Matrix rho = sq.asDiagonal() * gram_ * sq.asDiagonal();  // eq. (10)
  Eigen::SelfAdjointEigenSolver<Matrix> es(
      rho, grad ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
  const Vector& lam = es.eigenvalues();
  double value = 0;
  Vector h(n);  // lambda (log lambda + 1), 0 for lambda <= 0
  for (Eigen::Index k = 0; k < n; ++k) {
    h[k] = lam[k] > 0 ? lam[k] * (std::log(lam[k]) + 1.0) : 0.0;
    if (lam[k] > 0) value += lam[k] * std::log(lam[k]);  // eq. (11)
  }
  if (grad) {
    const Vector diag = es.eigenvectors().cwiseAbs2() * h;  // [(log rho + I) rho]_jj
    grad->setZero(counts_.size());
    for (Eigen::Index j = 0; j < n; ++j) (*grad)[arm_of_[j]] += diag[j];
    for (Eigen::Index i = 0; i < counts_.size(); ++i) (*grad)[i] /= alpha[i];
  }
  return value;
}

}  // namespace bandit::mixture
