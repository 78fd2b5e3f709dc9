// Random Fourier features (Rahimi & Recht, 2007) for shift-invariant kernels, in two forms:
//   kCosinePhase: z(x) = sqrt(2/D) * cos(W x + b),  b ~ U[0, 2pi)           (D numbers)
//   kCosSinPairs: z(x) = D^{-1/2} (cos(w_1'x), sin(w_1'x), ..., cos(w_D'x), sin(w_D'x))
//                 (2D numbers; the map of the OKS paper's Appendix F and of Raker, Shen et al.
//                 2019 eq. (8)); ||z(x)|| = 1 exactly and z(x)'z(y) = (1/D) sum cos(w_j'(x-y)).
// Both have E[z(x)'z(y)] = k(x, y) with rows of W drawn from the kernel's spectral density;
// the pair form has lower variance per frequency and no phase to draw.
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

enum class RandomFeatureForm { kCosinePhase, kCosSinPairs };

class RandomFeatures {
 public:
  // Draws W (D x d) and, for kCosinePhase, b (D) from `rng`. sigma > 0, d > 0, D > 0.
  static absl::StatusOr<RandomFeatures> Draw(
      ShiftInvariantKernel kind, double sigma, int64_t d, int64_t D, Rng& rng,
      RandomFeatureForm form = RandomFeatureForm::kCosinePhase);
  RandomFeatures() = default;

  RandomFeatureForm form() const { return form_; }
  int64_t input_dim() const { return W_.cols(); }
  // D: the number of frequencies w_j.
  int64_t num_features() const { return W_.rows(); }
  // Length of z(x): D (cosine with phase) or 2D (cos/sin pairs).
  int64_t output_dim() const {
    return form_ == RandomFeatureForm::kCosSinPairs ? 2 * W_.rows() : W_.rows();
  }
  // z(x), length output_dim(). x must have input_dim() entries.
  Eigen::VectorXd Map(const Eigen::VectorXd& x) const;
  void MapInto(const Eigen::VectorXd& x, Eigen::VectorXd* z) const;

  // The features are a deterministic function of (W, b); save them so a restore does not depend
  // on redrawing with the same engine state. The form is configuration: Restore keeps this
  // object's form (b is absent for the pair form).
  void Save(StateWriter& w, absl::string_view prefix) const;
  absl::Status Restore(const StateReader& r, absl::string_view prefix, int64_t d, int64_t D);
  int64_t Bytes() const { return (W_.size() + b_.size()) * sizeof(double); }

 private:
  RandomFeatureForm form_ = RandomFeatureForm::kCosinePhase;
  Eigen::MatrixXd W_;  // D x d
  Eigen::VectorXd b_;  // D (kCosinePhase only)
};

}  // namespace bandit
