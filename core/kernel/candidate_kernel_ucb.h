// The per-request-candidates form of the kernelized UCB policies (BKB and exact GP-UCB,
// Calandriello et al. 2019). Every Select brings the candidates' feature vectors (any number, a
// common dimension d); Update learns from the chosen candidate's features (from the pending
// decision, or given directly for logged data). Paper Section 3: "embed the changing arm sets as
// they are provided, and store and re-embed previously selected arms".
//
// This class holds what both forms share: candidate checks, the radius beta_t of Theorem 4.1
// (KernelUcbRadius, with the same rule as the fixed-arm form), the argmax of
//   u_t(x) = mu_t(x) + beta_t sigma_t(x)                                          (eq. 3 / eq. 4)
// with ties to the lowest candidate index, and the uniformly random first choice (Fig. 1, first
// line). A subclass supplies the posterior of a batch of points and sum_s sigma_t^2(x_s).
//
// kappa^2 = sup_x k(x, x) is 1 for the stationary kernels; for the linear and polynomial kernels
// (no finite sup on R^d) it is the largest k(x_s, x_s) over the pulls so far.
#pragma once

#include "core/dimension_limits.h"
#include "core/kernel/kernel_ucb.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit {

class CandidateKernelUcb : public Policy {
 public:
  static constexpr int kMaxDimension = kMaxDenseDimension;

  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  std::vector<std::pair<std::string, double>> Summary() const override;

  int dimension() const { return dim_; }
  const KernelUcbParams& params() const { return params_; }
  // t = number of pulls learned.
  int64_t observations() const { return total_; }
  // Posterior of every column of X (d x n): mean and 1/lambda-scaled variance. For tests,
  // benchmarks and the reproduction.
  virtual void Posterior(const Eigen::Ref<const Matrix>& X, Vector* mean, Vector* var) const = 0;
  // sum_{s<=t} sigma_t^2(x_s) over all pulls (with repeats): d_eff of eq. (5) for GP-UCB, its
  // DTC estimate for BKB.
  virtual double SumPulledVariance() const = 0;
  double Beta() const;

 protected:
  CandidateKernelUcb(int dim, KernelUcbParams params, uint64_t seed)
      : dim_(dim), params_(params), rng_(seed) {}

  // Learn (x, y); x has dimension d and every number is finite. On error nothing changed.
  virtual absl::Status Observe(const Vector& x, double y) = 0;
  virtual void ExtraSummary(std::vector<std::pair<std::string, double>>* out) const {}
  virtual void ExtraDiagnostics(Decision* d) const {}
  // kappa^2 after a pull with k(x, x) = kxx (see the header comment).
  double NextKappa2(double kxx) const {
    return params_.kernel.stationary() ? 1.0 : (total_ == 0 ? kxx : std::max(kappa2_, kxx));
  }

  int dim_;
  KernelUcbParams params_;
  Rng rng_;
  int64_t total_ = 0;    // t
  double kappa2_ = 1.0;  // see the header comment
};

// Reads `dimension` of the candidates form: 1..kMaxDimension, and no arms in the config.
absl::Status CheckCandidatesForm(absl::string_view field, int dimension,
                                 const bandit::v1::PolicyConfig& config);

}  // namespace bandit
