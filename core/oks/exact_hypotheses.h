// Exact-kernel hypotheses: f_i = sum_j a_j kappa_i(x_j, .) over the support vectors of kernel i.
// Every step adds the round's x as a support vector of the chosen kernel, so the state grows with
// t (inherent to the paper's OKS / OKS++ / IOKS). ||f_i||^2 is tracked exactly with
//   ||f - s k(x,.)||^2 = ||f||^2 - 2 s f(x) + s^2 k(x,x)
// and the projection of eq. (2) onto {||f|| <= U} is the rescaling f <- f * U / ||f||.
//
// Optional support budget B > 0 per kernel (what the service requires): when kernel i already
// holds B support vectors, the OLDEST one is removed before the new one is added (its
// contribution is subtracted from the tracked norm exactly: ||f - a k(x0,.)||^2 =
// ||f||^2 - 2 a f(x0) + a^2 k(x0,x0)). This is a simple forgetting budget, not part of the paper.
#pragma once

#include "core/oks/hypotheses.h"

namespace bandit::oks {

class ExactHypotheses final : public KernelHypotheses {
 public:
  // budget = 0: unbounded (paper reproduction).
  ExactHypotheses(std::vector<KernelSpec> kernels, int dim, int64_t budget);

  int num_kernels() const override { return static_cast<int>(kernels_.size()); }
  int dim() const override { return dim_; }
  double Eval(int i, const Eigen::VectorXd& x) const override;
  double FeatureNormSq(int i, const Eigen::VectorXd& x) const override { return 1.0; }
  void Step(int i, const Eigen::VectorXd& x, double step, double bound) override;
  int64_t Bytes() const override;
  void Save(StateWriter& w) const override;
  absl::Status Restore(const StateReader& r) override;

  int64_t num_support(int i) const { return static_cast<int64_t>(coef_[i].size()); }
  int64_t total_support() const;
  double TrackedNormSq(int i) const { return norm2_[i]; }
  // sum_jk a_j a_k kappa(x_j, x_k), O(n^2): for tests.
  double DirectNormSq(int i) const;
  Eigen::VectorXd SupportVector(int i, int64_t j) const;

 private:
  double Kernel(int i, const double* a, const Eigen::VectorXd& x) const;
  double EvalRaw(int i, const Eigen::VectorXd& x) const;

  std::vector<KernelSpec> kernels_;
  int dim_;
  int64_t budget_;
  std::vector<std::vector<double>> sv_;    // per kernel: n_i * dim values, column j = x_j
  std::vector<std::vector<double>> coef_;  // per kernel: n_i coefficients
  std::vector<double> norm2_;              // per kernel: ||f_i||^2
};

}  // namespace bandit::oks
