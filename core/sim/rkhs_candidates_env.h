// Fresh-candidates kernel bandit environment (the regime of BKB's Section 3 remark on changing arm
// sets): a fixed reward function from the kernel's RKHS,
//   f(x) = sum_{j=1..J} a_j k(x, c_j),  centers c_j uniform in [0,1]^d, a ~ N(0, I) rescaled so
//   that ||f||_H = sqrt(a^T K_C a) = f_norm,
// and every round n candidates drawn anew uniform in [0,1]^d. Rewards f(x) + N(0, noise^2); the
// round's optimum max_i f(x_i) is known, so the pseudo-regret is exact.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/kernel/kernel.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::sim {

class RkhsCandidatesEnv {
 public:
  static absl::StatusOr<RkhsCandidatesEnv> Make(int dim, int centers, const Kernel& kernel,
                                                double f_norm, double noise, uint64_t seed);

  int dim() const { return static_cast<int>(centers_.rows()); }
  double f(const Vector& x) const;
  // Draws n fresh candidates into `out` (resized) and returns the best f among them.
  double Draw(int n, Rng& rng, std::vector<Vector>* out) const;
  double Reward(const Vector& x, Rng& rng) const { return f(x) + noise_ * rng.Normal(); }
  double rkhs_norm() const { return norm_; }

 private:
  Kernel kernel_ = Kernel::Gaussian(1.0);
  Matrix centers_;  // d x J
  Vector a_;
  double noise_ = 0, norm_ = 0;
};

}  // namespace bandit::sim
