#include "core/mixture/fd_objective.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace bandit::mixture {

Matrix PsdSqrt(const Matrix& a) {
  Eigen::SelfAdjointEigenSolver<Matrix> es(a);
  const Vector r = es.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  return es.eigenvectors() * r.asDiagonal() * es.eigenvectors().transpose();
}

absl::Status FdObjective::CheckReference(const Vector& mu0, const Matrix& sigma0, int64_t d) {
  if (mu0.size() != d)
    return absl::InvalidArgumentError(absl::StrCat("mixture.reference_mean has ", mu0.size(),
                                                   " values, expected dimension = ", d));
  if (sigma0.rows() != d || sigma0.cols() != d)
    return absl::InvalidArgumentError(absl::StrCat("mixture.reference_covariance has ",
                                                   sigma0.size(), " values, expected d*d = ", d * d,
                                                   " (row-major d x d)"));
  for (int64_t i = 0; i < d; ++i)
    if (!std::isfinite(mu0[i]))
      return absl::InvalidArgumentError(absl::StrCat("mixture.reference_mean[", i, "] is ", mu0[i],
                                                     ", expected a finite number"));
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      if (!std::isfinite(sigma0(i, j)))
        return absl::InvalidArgumentError(absl::StrCat("mixture.reference_covariance[", i, ",", j,
                                                       "] is ", sigma0(i, j),
                                                       ", expected a finite number"));
  const double scale = std::max(1.0, sigma0.cwiseAbs().maxCoeff());
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < i; ++j)
      if (std::abs(sigma0(i, j) - sigma0(j, i)) > 1e-9 * scale)
        return absl::InvalidArgumentError(absl::StrCat(
            "mixture.reference_covariance is not symmetric: [", i, ",", j, "] = ", sigma0(i, j),
            " but [", j, ",", i, "] = ", sigma0(j, i), ", expected a symmetric PSD matrix"));
  Eigen::SelfAdjointEigenSolver<Matrix> es(sigma0, Eigen::EigenvaluesOnly);
  const double lo = es.eigenvalues().minCoeff();
  if (lo < -1e-9 * scale)
    return absl::InvalidArgumentError(
        absl::StrCat("mixture.reference_covariance has eigenvalue ", lo,
                     " < 0, expected a positive semidefinite covariance"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FdObjective>> FdObjective::Make(const Vector& mu0,
                                                               const Matrix& sigma0) {
  if (auto s = CheckReference(mu0, sigma0, mu0.size()); !s.ok()) return s;
  if (mu0.size() == 0)
    return absl::InvalidArgumentError("mixture.reference_mean is empty, expected d values");
  return std::make_unique<FdObjective>(mu0, sigma0);
}

absl::StatusOr<std::unique_ptr<FdObjective>> FdObjective::FromSamples(const Matrix& samples) {
  if (samples.rows() < 2)
    return absl::InvalidArgumentError(
        absl::StrCat("reference samples: ", samples.rows(), " rows, expected at least 2"));
  if (!samples.allFinite())
    return absl::InvalidArgumentError(
        "reference samples contain NaN or Inf, expected finite values");
  const Vector mu = samples.colwise().mean().transpose();
  const Matrix centered = samples.rowwise() - mu.transpose();
  Matrix sigma = centered.transpose() * centered / static_cast<double>(samples.rows());
  sigma = 0.5 * (sigma + sigma.transpose());
  return Make(mu, sigma);
}

FdObjective::FdObjective(Vector mu0, Matrix sigma0) : mu0_(std::move(mu0)) {
  sigma0_ = 0.5 * (sigma0 + sigma0.transpose());
  root0_ = PsdSqrt(sigma0_);
  tr_sigma0_ = sigma0_.trace();
}

double FdObjective::Distance(const Vector& mu, const Matrix& sigma) const {
  const Matrix z = root0_ * sigma * root0_;
  Eigen::SelfAdjointEigenSolver<Matrix> es(0.5 * (z + z.transpose()), Eigen::EigenvaluesOnly);
  return (mu - mu0_).squaredNorm() + sigma.trace() + tr_sigma0_ -
         2.0 * es.eigenvalues().cwiseMax(0.0).cwiseSqrt().sum();
}

namespace {

class FdLoss final : public BoundLoss {
 public:
  FdLoss(const FdObjective& obj, const Matrix& root0, const MixtureStats& stats)
      : obj_(obj), root0_(root0), stats_(stats) {}

  double Eval(const Vector& alpha, Vector* grad) const override {
    const int m = stats_.arms();
    const int64_t d = stats_.dim();
    const Vector mu = stats_.means() * alpha;  // eq. (6)
    Matrix sigma = Matrix::Zero(d, d);
    for (int i = 0; i < m; ++i)
      if (alpha[i] != 0) sigma += alpha[i] * stats_.second(i);
    sigma.noalias() -= mu * mu.transpose();  // eq. (7)
    Matrix z = root0_ * sigma * root0_;
    z = 0.5 * (z + z.transpose());
    Eigen::SelfAdjointEigenSolver<Matrix> es(z);
    const Vector lam = es.eigenvalues();
    const Vector diff = mu - obj_.mu0();
    const double value = diff.squaredNorm() + sigma.trace() + obj_.sigma0().trace() -
                         2.0 * lam.cwiseMax(0.0).cwiseSqrt().sum();  // eq. (8)
    if (grad) {
      // H = R Z^{-1/2} R, G = I - H (eq. 20).
      const double floor = 1e-12 * std::max(lam.maxCoeff(), 1e-300);
      const Vector inv_root = lam.cwiseMax(floor).cwiseSqrt().cwiseInverse();
      const Matrix ru = root0_ * es.eigenvectors();
      const Matrix h = ru * inv_root.asDiagonal() * ru.transpose();
      const Vector hmu = h * mu;
      grad->resize(m);
      for (int i = 0; i < m; ++i) {
        const auto mi = stats_.means().col(i);
        const Matrix& si = stats_.second(i);
        // <G, S_i - mu_i mu' - mu mu_i'> = Tr S_i - <H, S_i> - 2 mu_i'mu + 2 mu_i' H mu  (eq. 19)
        const double g_sigma =
            si.trace() - (h.cwiseProduct(si)).sum() - 2.0 * mi.dot(mu) + 2.0 * mi.dot(hmu);
        (*grad)[i] = 2.0 * diff.dot(mi) + g_sigma;
      }
    }
    return value;
  }

 private:
  const FdObjective& obj_;
  const Matrix& root0_;
  const MixtureStats& stats_;
};

}  // namespace

std::unique_ptr<BoundLoss> FdObjective::Bind(const MixtureStats& stats) const {
  return std::make_unique<FdLoss>(*this, root0_, stats);
}

double FdObjective::DefaultStepSize(const MixtureStats& stats) const {
  double s = tr_sigma0_, cov = 0, spread = 0;
  for (int i = 0; i < stats.arms(); ++i) {
    if (stats.counts()[i] <= 0) continue;
    const auto mi = stats.means().col(i);
    cov = std::max(cov, stats.second(i).trace() - mi.squaredNorm());
    for (int j = 0; j < i; ++j)
      if (stats.counts()[j] > 0)
        spread = std::max(spread, (mi - stats.means().col(j)).squaredNorm());
  }
  s += cov + spread;
  return 1.0 / (2.0 * std::max(s, 1e-12));
}

void FdObjective::Save(StateWriter& w) const {
  w.Put("fd_mu0", mu0_);
  w.Put("fd_sigma0", sigma0_);
}

absl::Status FdObjective::Restore(const StateReader& r) {
  Vector mu0;
  Matrix sigma0;
  const int64_t d = mu0_.size();
  if (auto s = r.Get("fd_mu0", &mu0, d); !s.ok()) return s;
  if (auto s = r.Get("fd_sigma0", &sigma0, d, d); !s.ok()) return s;
  if (auto s = CheckReference(mu0, sigma0, d); !s.ok()) return s;
  *this = FdObjective(std::move(mu0), std::move(sigma0));
  return absl::OkStatus();
}

int64_t FdObjective::Bytes() const {
  return (mu0_.size() + sigma0_.size() + root0_.size()) * static_cast<int64_t>(sizeof(double));
}

}  // namespace bandit::mixture
