// Kernel distance (squared MMD, eq. 3) to the reference distribution in random-feature form:
//   KD(a) = ||sum_i a_i mu_i - mu_ref||^2 = a' K a + b' a + c,
//   K_ij = mu_i' mu_j, b = -2 M' mu_ref, c = ||mu_ref||^2,
// where mu_i is arm i's mean feature and mu_ref the reference samples' mean feature (plug-in /
// V-statistic estimator). Gradient 2 K a + b (Appendix A.2).
#pragma once

#include "core/mixture/objective.h"

namespace bandit::mixture {

class KdObjective final : public Objective {
 public:
  // mu_ref: mean feature vector of the reference samples (length D).
  explicit KdObjective(Vector mu_ref) : mu_ref_(std::move(mu_ref)) {}

  bandit::v1::MixtureObjective kind() const override { return bandit::v1::KD; }
  absl::string_view name() const override { return "kd"; }
  bool NeedsSecondMoment() const override { return false; }
  double Score(double loss) const override { return loss; }
  bool HigherIsBetter() const override { return false; }
  std::unique_ptr<BoundLoss> Bind(const MixtureStats& stats) const override;
  // 1 / (2 max |K_ij|).
  double DefaultStepSize(const MixtureStats& stats) const override;
  const Vector& mu_ref() const { return mu_ref_; }

  void Save(StateWriter& w) const override { w.Put("kd_mu_ref", mu_ref_); }
  absl::Status Restore(const StateReader& r) override;
  int64_t Bytes() const override { return mu_ref_.size() * static_cast<int64_t>(sizeof(double)); }
  std::unique_ptr<Objective> Clone() const override { return std::make_unique<KdObjective>(*this); }

 private:
  Vector mu_ref_;
};

}  // namespace bandit::mixture
