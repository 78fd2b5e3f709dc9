// Shared machinery of the two kernelized UCB policies over a finite arm set (BKB and exact
// GP-UCB, Calandriello et al. 2019, "Gaussian process optimization with adaptive sketching").
//
// Both keep, per arm slot, the pull count n_i and the reward sum s_i (Section 3.2: "it is
// sufficient to use counters to record the arms pulled so far"), so the learned state is
// O(A) numbers plus the arm features and never grows with the number of rounds t.
// A subclass supplies the posterior mean mu_t(x_i) and the (1/lambda-scaled) variance
// sigma_t^2(x_i) of every arm; this class turns them into
//   u_t(x_i) = mu_t(x_i) + beta_t sigma_t(x_i)                                  (eq. 3 / eq. 4)
//   beta_t   = m * [2 xi sqrt(alpha log(kappa^2 t) sum_s sigma_t^2(x_s) + log(1/delta))
//                   + (1 + 1/sqrt(1-eps)) sqrt(lambda) F]                        (Theorem 4.1)
// with m = radius_multiplier, and picks argmax u_t (ties: lowest slot). Exact GP-UCB is the
// eps -> 0 (alpha = 1) limit, as the paper notes after Theorem 4.1.
//
// Variance convention: sigma_t^2(x) = (k(x,x) - k_t(x)^T (K_t + lambda I)^{-1} k_t(x)) / lambda,
// i.e. eq. (2) divided by lambda, which is the scale of BKB's sigma~^2 in eq. (4), of the ridge
// leverage scores, of d_eff = sum_s sigma_t^2(x_s) (eq. 5) and of Theorem 3.1.
//
// The posterior of all arms is computed lazily (on Select and Update) and cached
// until the state changes; the cache is a pure function of the state, so a restored policy
// recomputes bit-identical numbers.
#pragma once

#include <memory>

#include "core/arms.h"
#include "core/kernel/kernel.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit {

struct KernelUcbParams {
  Kernel kernel = Kernel::Gaussian(1.0);
  double lambda = 0.01;            // regularization; the GP view has lambda = xi^2 (Section 2)
  double noise = 0.1;              // xi, sub-Gaussian noise level
  double f_bound = 1.0;            // F >= ||f||_H
  double delta = 0.1;              // confidence
  double epsilon = 0.0;            // accuracy eps of the sketch (0 for exact GP-UCB)
  double radius_multiplier = 1.0;  // multiplies beta_t (1 = Theorem 4.1)
};

// beta_t of Theorem 4.1 (the block comment above) for t observations with
// sum_var = sum_{s<=t} sigma_t^2(x_s); eps = 0 gives exact GP-UCB's radius.
double KernelUcbRadius(const KernelUcbParams& params, double kappa2, double t, double sum_var);

class KernelUcbPolicy : public Policy {
 public:
  ContextKind context_kind() const override { return ContextKind::kNone; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  std::vector<std::string> ArmIds() const override { return arms_.ids(); }
  absl::Status AddArm(const bandit::v1::ArmSpec& arm) override;
  absl::Status RemoveArm(absl::string_view arm_id) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  // Posterior mean of every arm.
  Vector Weights() const override;

  // Posterior of every arm slot at the current state (mean, 1/lambda-scaled variance) and the
  // radius beta_t. For tests, benchmarks and the reproduction.
  const Vector& PosteriorMean() const;
  const Vector& PosteriorVariance() const;
  double Beta() const;
  // u_t of every arm.
  Vector Ucb() const;

  const ArmSet& arms() const { return arms_; }
  const Vector& counts() const { return counts_; }
  const Vector& sums() const { return sums_; }
  const KernelUcbParams& params() const { return params_; }
  double kappa2() const { return kappa2_; }
  // t = number of observations the model holds (sum of the counts).
  int64_t observations() const { return static_cast<int64_t>(total_); }

 protected:
  KernelUcbPolicy(ArmSet arms, KernelUcbParams params, uint64_t seed);

  // Fill mean/var (size = arms) from the current state.
  virtual void ComputePosterior(Vector* mean, Vector* var) const = 0;
  // Called by Update after counts_/sums_ of `slot` were incremented; `var` is the posterior
  // variance of every arm BEFORE this observation (sigma_t^2 in Fig. 1). `first` is true when
  // the model held no observation before.
  virtual void AfterObserve(int slot, const Vector& var, bool first) {}
  // Per-arm extras kept in slot order by subclasses.
  virtual void OnAddArm() {}
  virtual void OnRemoveArm(int slot) {}
  virtual void SaveExtra(StateWriter& w) const {}
  // Read and validate extras into staging (do not mutate); CommitExtra applies them.
  virtual absl::Status RestoreExtra(const StateReader& r, const ArmSet& arms,
                                    const Vector& counts) {
    return absl::OkStatus();
  }
  virtual void CommitExtra() {}
  virtual int64_t ExtraBytes() const { return 0; }
  virtual void ExtraSummary(std::vector<std::pair<std::string, double>>* out) const {}
  virtual void ExtraDiagnostics(Decision* d) const {}

  void Invalidate() { valid_ = false; }
  void EnsurePosterior() const;
  void RecomputeKappa();

  ArmSet arms_;
  KernelUcbParams params_;
  Rng rng_;
  Vector counts_;  // n_i: pulls of arm i
  Vector sums_;    // s_i: sum of rewards of arm i
  double total_ = 0;
  double kappa2_ = 1.0;  // max_i k(x_i, x_i)
  Vector kdiag_;         // k(x_i, x_i)

 private:
  mutable bool valid_ = false;
  mutable Vector mean_, var_;
  mutable double beta_ = 0;
};

// Validates and reads the parameters shared by BKB and GP-UCB. `field` is "bkb" or "gp_ucb".
absl::Status ReadKernelUcbParams(absl::string_view field, const bandit::v1::KernelSpec& kernel,
                                 bool has_lambda, double lambda, bool has_noise, double noise,
                                 bool has_f, double f, bool has_delta, double delta, bool has_mult,
                                 double mult, KernelUcbParams* out);

}  // namespace bandit
