// Frechet distance objective (eq. 6-8) with the gradient of Appendix A.2 (eq. 19-20).
//   mu(a) = sum a_i mu_i,  Sigma(a) = sum a_i S_i - mu(a) mu(a)'               (eq. 6-7)
//   L(a) = ||mu(a) - mu0||^2 + Tr Sigma(a) + Tr Sigma0 - 2 Tr (R Sigma(a) R)^{1/2},  R = Sigma0^{1/2}
//   dL/da_i = 2 (mu - mu0)' mu_i + <G, S_i - mu_i mu' - mu mu_i'>,  G = I - R Z^{-1/2} R  (eq. 19-20)
// Z^{-1/2} via the eigendecomposition of Z = R Sigma R with eigenvalues floored at
// 1e-12 * max eigenvalue (the derivative of sqrt is unbounded at 0).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/mixture/objective.h"

namespace bandit::mixture {

class FdObjective final : public Objective {
 public:
  // mu0 (d), sigma0 (d x d): finite, symmetric, PSD; INVALID_ARGUMENT naming `field` otherwise.
  static absl::StatusOr<std::unique_ptr<FdObjective>> Make(const Vector& mu0, const Matrix& sigma0);
  // Mean and (1/n) covariance of the rows of `samples` (n x d, n >= 2, finite).
  static absl::StatusOr<std::unique_ptr<FdObjective>> FromSamples(const Matrix& samples);
  // Validation only (used by Make and by SetReference before mutating).
  static absl::Status CheckReference(const Vector& mu0, const Matrix& sigma0, int64_t d);

  bandit::v1::MixtureObjective kind() const override { return bandit::v1::FD; }
  absl::string_view name() const override { return "fd"; }
  bool NeedsSecondMoment() const override { return true; }
  double Score(double loss) const override { return loss; }
  bool HigherIsBetter() const override { return false; }
  std::unique_ptr<BoundLoss> Bind(const MixtureStats& stats) const override;
  // 1 / (2 s), s = Tr Sigma0 + max_i Tr Cov_i + max_ij ||mu_i - mu_j||^2: the scale of FD's
  // curvature along the simplex.
  double DefaultStepSize(const MixtureStats& stats) const override;
  double DefaultUcbDelta() const override { return tr_sigma0_; }

  // Gaussian FD between (mu, sigma) and the reference, eq. (2).
  double Distance(const Vector& mu, const Matrix& sigma) const;
  const Vector& mu0() const { return mu0_; }
  const Matrix& sigma0() const { return sigma0_; }

  void Save(StateWriter& w) const override;
  absl::Status Restore(const StateReader& r) override;
  int64_t Bytes() const override;
  std::unique_ptr<Objective> Clone() const override { return std::make_unique<FdObjective>(*this); }

  FdObjective(Vector mu0, Matrix sigma0);

 private:
  Vector mu0_;
  Matrix sigma0_, root0_;  // Sigma0 and its PSD square root R
  double tr_sigma0_ = 0;
};

// Symmetric PSD square root via eigendecomposition (negative rounding noise clipped to 0).
Matrix PsdSqrt(const Matrix& a);

}  // namespace bandit::mixture
