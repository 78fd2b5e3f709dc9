// LKMBooks (Li & Liao, "Worst-case regret analysis of computationally budgeted online kernel
// selection", Machine Learning 111(3):937-976, 2022): the budgeted full-information baseline of
// the OKS paper's Section 6.2, written from that paper and its authors' public R code
// (JunfLi-TJU; "LKMBooks-r" / "LKMBooks-c" scripts).
//
// Memory sharing: ONE support set S (at most B points) and ONE coefficient vector a are shared
// by all K kernels, f_i(x) = sum_{j in S} a_j kappa_i(s_j, x), so the per-round cost is
// O(B (d + K)) whatever K is. Every round:
//   f(x)   = sum_i p_i f_i(x)                                   (prediction with expert advice)
//   g      = l'(f(x), y)                                         (gradient at the prediction)
//   c_i    = g (f_i(x) - min_j f_j(x)) / G   if g > 0,
//            g (f_i(x) - max_j f_j(x)) / G   if g < 0            (linearized losses, in [0, 1])
//   p_i   <- p_i exp(-eta c_i) / Z,   eta = sqrt(8 ln K / T)
//   G     <- max(G, max_j f_j(x) - min_j f_j(x))                 (G starts at 1)
// and, on a round with g != 0, with probability
//   rho    = min(1, B / ((1 - nu) T^{1 - nu} (E + 1)^nu)),  nu = 1/3, E = earlier rounds with g != 0
// the point joins S with coefficient -lambda g / rho (an unbiased gradient step) while |S| < B.
// lambda = sqrt((1 + nu) B) / (sqrt(1 - nu) T) for regression and 5 / sqrt(T) for classification
// (the authors' scripts). E counts all rounds for a smooth loss (the regression script's tau) and
// the margin-error rounds for the hinge loss (the classification script's ET).
// Gaussian kernels only (the experiments' kernels).
// A reproduction baseline used by bench/ (not a served policy: it is not a bandit algorithm).
#pragma once

#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"
#include "core/oks/hypotheses.h"
#include "core/oks/loss.h"
#include "core/rng.h"

namespace bandit::oks {

struct LkmBooksParams {
  int64_t budget = 250;    // B
  int64_t horizon = 1000;  // T
  double nu = 1.0 / 3.0;
  double lambda = 0;  // 0 = the scripts' default for the task
  bool classification = true;
};

class LkmBooks {
 public:
  static absl::StatusOr<LkmBooks> Create(const std::vector<KernelSpec>& kernels, int dim,
                                         LossKind loss, const LkmBooksParams& params,
                                         uint64_t seed);

  // f_i(x) for every kernel.
  Eigen::VectorXd KernelPredictions(const Eigen::VectorXd& x) const;
  double Predict(const Eigen::VectorXd& x) const;
  // One round: returns f(x) (before seeing y), then learns from (x, y).
  double PredictAndUpdate(const Eigen::VectorXd& x, double y);

  const Eigen::VectorXd& p() const { return p_; }
  int64_t support_size() const { return static_cast<int64_t>(coef_.size()); }
  double lambda() const { return lambda_; }
  double eta() const { return eta_; }
  double g_max() const { return g_max_; }
  // rho for the next round with a nonzero gradient.
  double InclusionProbability() const;
  int64_t StateBytes() const;

 private:
  std::vector<double> inv_two_sigma2_;  // 1 / (2 sigma_i^2)
  int dim_ = 0;
  LossKind loss_ = LossKind::kSquare;
  LkmBooksParams params_;
  double lambda_ = 0, eta_ = 0;
  Rng rng_;
  Eigen::VectorXd p_;
  double g_max_ = 1.0;
  int64_t gradient_rounds_ = 0;  // E
  std::vector<double> sv_;       // |S| * dim values
  std::vector<double> coef_;     // a_j
};

}  // namespace bandit::oks
