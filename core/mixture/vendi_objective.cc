#include "core/mixture/vendi_objective.h"

#include <cmath>

namespace bandit::mixture {

double VendiObjective::Score(double loss) const { return std::exp(-loss); }

double TraceCLogC(const Matrix& c) {
  Eigen::SelfAdjointEigenSolver<Matrix> es(c, Eigen::EigenvaluesOnly);
  double v = 0;
  for (double l : es.eigenvalues())
    if (l > 0) v += l * std::log(l);
  return v;
}

namespace {

class VendiLoss final : public BoundLoss {
 public:
  explicit VendiLoss(const MixtureStats& stats) : stats_(stats) {}

  double Eval(const Vector& alpha, Vector* grad) const override {
    const int m = stats_.arms();
    const int64_t D = stats_.dim();
    Matrix c = Matrix::Zero(D, D);
    for (int i = 0; i < m; ++i)
      if (alpha[i] != 0) c += alpha[i] * stats_.second(i);
    Eigen::SelfAdjointEigenSolver<Matrix> es(c);
    const Vector& lam = es.eigenvalues();
    double value = 0;
    for (double l : lam)
      if (l > 0) value += l * std::log(l);  // eq. (11) via eq. (18)
    if (grad) {
      Vector w(D);
      for (int64_t k = 0; k < D; ++k) w[k] = std::log(std::max(lam[k], 1e-300)) + 1.0;
      const Matrix& u = es.eigenvectors();
      const Matrix logc_plus_i = u * w.asDiagonal() * u.transpose();
      grad->resize(m);
      // eq. (22): (1/n_i) sum_{j: I_j = i} phi_j' (log C + I) phi_j = <log C + I, S_i>.
      for (int i = 0; i < m; ++i) (*grad)[i] = logc_plus_i.cwiseProduct(stats_.second(i)).sum();
    }
    return value;
  }

 private:
  const MixtureStats& stats_;
};

}  // namespace

std::unique_ptr<BoundLoss> VendiObjective::Bind(const MixtureStats& stats) const {
  return std::make_unique<VendiLoss>(stats);
}

}  // namespace bandit::mixture
