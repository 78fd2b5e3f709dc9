// Raker (Shen, Chen & Giannakis, "Random Feature-based Online Multi-kernel Learning in
// Environments with Unknown Dynamics", JMLR 20(22), 2019, Algorithm 1): the full-information
// random-feature baseline of the OKS paper's Section 6.2. Every round EVERY kernel p is
// evaluated and updated (no kernel is sampled):
//   z_p(x) = D^{-1/2} (cos(v_j'x), sin(v_j'x))_{j <= D}                   (Raker eq. (8))
//   f_p(x) = theta_p' z_p(x),  f(x) = sum_p wbar_p f_p(x),  wbar = w / sum w   (eq. (12)-(13))
//   theta_p <- theta_p - eta * l'(f_p(x), y) z_p(x)                           (eq. (14))
//   w_p     <- w_p exp(-eta * l(f_p(x), y))                                   (eq. (15))
// The weights are kept as log-weights (w_p = exp(-eta L_p), L_p the cumulative loss of kernel p),
// which is eq. (15) without underflow. Theorem 1 uses one step size eta = O(1/sqrt(T)) for both
// updates; the OKS paper picks it from {1, 5, 10, 25} / sqrt(T).
// Per-round cost O(K D d) (K kernels, D frequencies, d inputs); state K (D d + 2 D) numbers.
// A reproduction baseline used by bench/ (not a served policy: it is not a bandit algorithm).
#pragma once

#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "core/common/random_features.h"
#include "core/oks/hypotheses.h"
#include "core/oks/loss.h"
#include "core/rng.h"

namespace bandit::oks {

class Raker {
 public:
  // Draws one cos/sin map with D frequencies per kernel from `rng`. eta > 0.
  static absl::StatusOr<Raker> Create(const std::vector<KernelSpec>& kernels, int dim,
                                      int num_frequencies, LossKind loss, double eta, Rng& rng);
  // With given feature maps (tests: the learning rule checked against a direct computation).
  Raker(std::vector<RandomFeatures> maps, LossKind loss, double eta);

  // f(x) = sum_p wbar_p f_p(x).
  double Predict(const Eigen::VectorXd& x) const;
  // One round: returns f(x) (the prediction made before seeing y), then learns from (x, y).
  double PredictAndUpdate(const Eigen::VectorXd& x, double y);

  int num_kernels() const { return static_cast<int>(maps_.size()); }
  // wbar: normalized kernel weights.
  Eigen::VectorXd KernelWeights() const;
  const Eigen::VectorXd& theta(int p) const { return theta_[p]; }
  const Eigen::VectorXd& cumulative_loss() const { return cum_loss_; }
  int64_t StateBytes() const;

 private:
  std::vector<RandomFeatures> maps_;
  LossKind loss_;
  double eta_;
  std::vector<Eigen::VectorXd> theta_;
  Eigen::VectorXd cum_loss_;  // L_p = sum_t l(f_{t,p}(x_t), y_t); w_p = exp(-eta L_p)
  // Scratch, reused between rounds.
  std::vector<Eigen::VectorXd> z_;
  Eigen::VectorXd f_;
};

}  // namespace bandit::oks
