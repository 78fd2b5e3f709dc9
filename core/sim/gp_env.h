// The GP bandit environment of the BKB reproduction: A arms uniform in [0, 1]^d, a reward
// function f drawn from GP(0, k) on the arm set (k Gaussian by default), and rewards
// f(x_i) + N(0, noise^2). Everything is drawn from one seeded Rng.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "bandit/v1/policy.pb.h"
#include "core/kernel/kernel.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::sim {

class GpEnv {
 public:
  // f = L g with L L^T = K + jitter I (jitter 1e-8) and g ~ N(0, I).
  static absl::StatusOr<GpEnv> Make(int arms, int dim, const Kernel& kernel, double noise,
                                    uint64_t seed);

  int arms() const { return static_cast<int>(f_.size()); }
  const Matrix& features() const { return X_; }  // dim x arms
  const Vector& f() const { return f_; }
  double best() const { return best_; }
  // Arm specs with ids "0".."A-1" and the features (for PolicyConfig.arms).
  void FillArms(bandit::v1::PolicyConfig* config) const;
  double Reward(int arm, Rng& rng) const { return f_[arm] + noise_ * rng.Normal(); }
  double Regret(int arm) const { return best_ - f_[arm]; }

 private:
  Matrix X_;
  Vector f_;
  double best_ = 0, noise_ = 0;
};

}  // namespace bandit::sim
