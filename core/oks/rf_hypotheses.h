// Random-feature hypotheses (Section 5): f_i(x) = w_i' z_i(x) with z_i the random Fourier map
// of kernel i (D features, core/common/random_features.h; for the Gaussian kernel this is the
// paper's z(x) = D^{-1/2} (phi(x, w_1), ..., phi(x, w_D)), phi = sqrt(2) cos(w'x + b)).
// The step is eq. (8): w <- w - s z(x), then the projection onto
// W_i = {w : ||w||_inf <= U / sqrt(D)}, i.e. w_j <- min{1, U / (|w_j| sqrt(D))} w_j.
// With RandomFeatureForm::kCosSinPairs (the paper's Appendix F map) w_i has 2D entries and the
// box stays |w_j| <= U / sqrt(D), D the number of frequencies, as eq. (8) is written.
// State: K * (D * d + 2 D) numbers (pairs: K * (D * d + 2 D) as well: no phases, 2D weights),
// constant in t.
#pragma once

#include "core/oks/hypotheses.h"
#include "core/rng.h"

namespace bandit::oks {

class RfHypotheses final : public KernelHypotheses {
 public:
  // Draws the K feature maps from `rng`. Fails on invalid bandwidths or sizes.
  static absl::StatusOr<RfHypotheses> Draw(
      const std::vector<KernelSpec>& kernels, int dim, int num_features, Rng& rng,
      RandomFeatureForm form = RandomFeatureForm::kCosinePhase);

  int num_kernels() const override { return static_cast<int>(maps_.size()); }
  int dim() const override { return dim_; }
  double Eval(int i, const Eigen::VectorXd& x) const override;
  double FeatureNormSq(int i, const Eigen::VectorXd& x) const override;
  void Step(int i, const Eigen::VectorXd& x, double step, double bound) override;
  int64_t Bytes() const override;
  void Save(StateWriter& w) const override;
  absl::Status Restore(const StateReader& r) override;

  const Eigen::VectorXd& weights(int i) const { return w_[i]; }
  int num_features() const { return num_features_; }

 private:
  RfHypotheses() = default;
  int dim_ = 0;
  int num_features_ = 0;
  std::vector<RandomFeatures> maps_;
  std::vector<Eigen::VectorXd> w_;
};

}  // namespace bandit::oks
