// RKE objective (Appendix D, eq. 34-35): F(a) = Tr(S_a^2) = sum_ij a_i a_j <S_i, S_j>, a convex
// quadratic alpha' K alpha with K_ij = <S_i, S_j> (gradient 2 K alpha, Appendix A.2). Reported
// as the RKE mode count 1 / Tr(S_a^2); for the pooled samples with q_j = 1/N this equals
// N^2 / ||K_gram||_F^2 (Section 3.2).
#pragma once

#include "core/mixture/objective.h"

namespace bandit::mixture {

class RkeObjective final : public Objective {
 public:
  bandit::v1::MixtureObjective kind() const override { return bandit::v1::RKE; }
  absl::string_view name() const override { return "rke"; }
  bool NeedsSecondMoment() const override { return true; }
  double Score(double loss) const override { return loss > 0 ? 1.0 / loss : 0.0; }
  bool HigherIsBetter() const override { return true; }
  std::unique_ptr<BoundLoss> Bind(const MixtureStats& stats) const override;
  // 1 / (2 max |K_ij|): the L1-smoothness constant of a quadratic on the simplex.
  double DefaultStepSize(const MixtureStats& stats) const override;
  std::unique_ptr<Objective> Clone() const override {
    return std::make_unique<RkeObjective>(*this);
  }

  static Matrix Gram(const MixtureStats& stats);
};

}  // namespace bandit::mixture
