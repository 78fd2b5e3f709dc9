// Random Fourier features (Rahimi & Recht, 2007) for shift-invariant kernels:
//   z(x) = sqrt(2/D) * cos(W x + b),  E[z(x)'z(y)] = k(x, y),
// with rows of W drawn from the kernel's spectral density and b ~ U[0, 2pi).
// Shared by online kernel selection (core/oks) and the mixture objectives (core/mixture).
#pragma once

#include <cstdint>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "core/rng.h"
#include "core/state_io.h"

namespace bandit {

enum class ShiftInvariantKernel {
  kGaussian,   // k(x, y) = exp(-||x - y||^2 / (2 sigma^2)); W_ij ~ N(0, 1/sigma^2)
  kLaplacian,  // k(x, y) = exp(-||x - y||_1 / sigma);      W_ij ~ Cauchy(0, 1/sigma)
};

// Exact kernel value (for tests and exact-kernel methods).
double KernelValue(ShiftInvariantKernel kind, double sigma, const Eigen::VectorXd& x,
                   const Eigen::VectorXd& y);

class RandomFeatures {
 public:
  // Draws W (D x d) and b (D) from `rng`. sigma > 0, d > 0, D > 0.
  static absl::StatusOr<RandomFeatures> Draw(ShiftInvariantKernel kind, double sigma, int64_t d,
                                             int64_t D, Rng& rng);
  RandomFeatures() = default;

  int64_t input_dim() const { return W_.cols(); }
  int64_t num_features() const { return W_.rows(); }
  // z(x), length D. x must have input_dim() entries.
  Eigen::VectorXd Map(const Eigen::VectorXd& x) const;
  void MapInto(const Eigen::VectorXd& x, Eigen::VectorXd* z) const;

  // The features are a deterministic function of (W, b); save them so a restore does not depend
  // on redrawing with the same engine state.
  void Save(StateWriter& w, absl::string_view prefix) const;
  absl::Status Restore(const StateReader& r, absl::string_view prefix, int64_t d, int64_t D);
  int64_t Bytes() const { return (W_.size() + b_.size()) * sizeof(double); }

 private:
  Eigen::MatrixXd W_;  // D x d
  Eigen::VectorXd b_;  // D
};

}  // namespace bandit
