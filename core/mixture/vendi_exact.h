// Negative log-Vendi in the paper's exact Gram-matrix form (eq. 9-11), beside the
// random-feature form of vendi_objective.h:
//   pooled samples x_1..x_N, x_j from arm I_j; K_rs = k(x_r, x_s) with a normalized kernel;
//   q_j(a) = a_{I_j} / n_{I_j}                                           (eq. 9)
//   rho(a) = diag(q)^{1/2} K diag(q)^{1/2},  Tr rho = 1                   (eq. 10)
//   L(a)   = Tr(rho log rho) = sum_k lambda_k log lambda_k                (eq. 11)
// Gradient: with rho = V diag(lambda) V', dL/dq_j = [(log rho + I) rho]_jj / q_j, so
//   dL/da_i = (1 / a_i) sum_{j: I_j = i} sum_k V_jk^2 lambda_k (log lambda_k + 1),
// the same quantity as eq. (22)'s <log C + I, S_i> of the feature form (rho and C share their
// nonzero spectrum). Needs a_i > 0 for every arm with samples (the EG iterates keep alpha_floor).
// Cost: O(N^2 d) for K once, O(N^3) per evaluation; memory O(N^2). The feature form costs
// O(D^3) per evaluation and O(m D^2) memory whatever N, which is why the service uses it; this
// form is for measuring what the approximation costs (bench/) and for tests.
#pragma once

#include <vector>

#include "core/common/random_features.h"
#include "core/mixture/objective.h"

namespace bandit::mixture {

enum class VendiKernel { kGaussian, kCosine };

// K_rs = k(x_r, x_s) for the rows of `samples` (N x d): Gaussian exp(-|x-y|^2 / (2 sigma^2)) or
// cosine x'y / (|x| |y|) (rows must be nonzero for the cosine kernel).
Matrix VendiGram(const Matrix& samples, VendiKernel kernel, double sigma);

class ExactVendiLoss final : public BoundLoss {
 public:
  // gram: N x N; arm_of[j] in [0, m); every arm must have at least one sample.
  ExactVendiLoss(Matrix gram, std::vector<int> arm_of, int num_arms);
  double Eval(const Vector& alpha, Vector* grad) const override;
  const Vector& counts() const { return counts_; }

 private:
  Matrix gram_;
  std::vector<int> arm_of_;
  Vector counts_;
};

}  // namespace bandit::mixture
