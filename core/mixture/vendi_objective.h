// Negative log-Vendi in the finite-feature form (eq. 9-11 via eq. 17-18, gradient eq. 22):
//   C(a) = sum_i a_i S_i  (= sum_j q_j phi(x_j) phi(x_j)', q_j = a_{I_j} / n_{I_j}, eq. 9)
//   L(a) = Tr(C log C),   dL/da_i = <log C + I, S_i>
// with unit-norm features, so Tr C = 1 and Vendi = exp(-L). Eigenvalues <= 0 contribute
// 0 * log 0 = 0 to the value; in the gradient log() is taken of max(lambda, 1e-300).
#pragma once

#include "core/mixture/objective.h"

namespace bandit::mixture {

class VendiObjective final : public Objective {
 public:
  bandit::v1::MixtureObjective kind() const override { return bandit::v1::VENDI; }
  absl::string_view name() const override { return "vendi"; }
  bool NeedsSecondMoment() const override { return true; }
  double Score(double loss) const override;  // exp(-loss)
  bool HigherIsBetter() const override { return true; }
  std::unique_ptr<BoundLoss> Bind(const MixtureStats& stats) const override;
  double DefaultStepSize(const MixtureStats& stats) const override { return 1.0; }
  std::unique_ptr<Objective> Clone() const override {
    return std::make_unique<VendiObjective>(*this);
  }
};

// Tr(C log C) of a symmetric PSD matrix via its eigenvalues (0 log 0 = 0).
double TraceCLogC(const Matrix& c);

}  // namespace bandit::mixture
