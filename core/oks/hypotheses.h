// The K per-kernel hypotheses f_{t,i} of online kernel selection, and the one operation the
// algorithms apply to them: the (projected) importance-weighted gradient step
//   f_i <- Proj( f_i - s * phi_i(x) )
// where phi_i(x) is kappa_i(x, .) (exact kernel, eq. (2): projection onto ||f||_H <= U) or the
// random-feature map z_i(x) (Section 5, eq. (8): projection onto the box |w_j| <= U / sqrt(D)).
// The gradient of l(f(x), y) w.r.t. f is l'(f(x), y) * phi(x), so every algorithm's step is
// s = lambda * l'(f(x), y) / p (Algorithm 1 line 7, eq. (2), eq. (8)).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "core/common/random_features.h"
#include "core/state_io.h"

namespace bandit::oks {

struct KernelSpec {
  ShiftInvariantKernel kind = ShiftInvariantKernel::kGaussian;
  // Gaussian exp(-||x-v||^2 / (2 sigma^2)) (the paper's Section 6), Laplacian exp(-||x-v||_1 / sigma)
  double sigma = 1.0;
};

inline constexpr double kNoProjection = std::numeric_limits<double>::infinity();

class KernelHypotheses {
 public:
  virtual ~KernelHypotheses() = default;
  virtual int num_kernels() const = 0;
  virtual int dim() const = 0;
  // f_i(x).
  virtual double Eval(int i, const Eigen::VectorXd& x) const = 0;
  // ||phi_i(x)||^2: kappa_i(x, x) = 1 (exact), ||z_i(x)||^2 (random features).
  virtual double FeatureNormSq(int i, const Eigen::VectorXd& x) const = 0;
  // f_i <- Proj_bound(f_i - step * phi_i(x)); bound = kNoProjection for the unprojected step.
  virtual void Step(int i, const Eigen::VectorXd& x, double step, double bound) = 0;
  // Bytes of learned state.
  virtual int64_t Bytes() const = 0;
  virtual void Save(StateWriter& w) const = 0;
  // All-or-nothing: on error the hypotheses are unchanged.
  virtual absl::Status Restore(const StateReader& r) = 0;
};

}  // namespace bandit::oks
