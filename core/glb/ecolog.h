// ECOLog (Faury, Abeille, Jun, Calauzenes 2022, "Jointly Efficient and Optimal Algorithms for
// Logistic Bandits"), OFU-ECOLog without warm-up, logistic link only. One pass per round:
//   theta_{t+1} = argmin_{||theta|| <= S}  l(x_t'theta, r_t) + 1/2 ||theta - theta_t||^2_{W_t}
//   W_{t+1} = W_t + mu'(x_t'theta_{t+1}) x_t x_t',  W_1 = lambda I
// (their online update, solved here exactly by projected Newton with the exact H-norm ball
// projection; the authors' code runs a fixed number of projected gradient steps instead).
// Radius: the data-dependent form of their no-warm-up confidence set (their Theorem 3, in the
// refined form of the authors' public implementation):
//   beta_t^2 = 2 lambda S^2 + (1 + S)^2 g_t + sum_s [2 (1 + S)(l_s(theta_bar_{s+1}) - l_s(theta_{s+1}))
//              - 1/2 ||theta_{s+1} - theta_bar_{s+1}||_{W_s}],
//   g_t = sqrt(lambda)/2 + 2/sqrt(lambda) log(2 sqrt(1 + t/(4 lambda)) / delta),
// where theta_bar_{s+1} solves the same step with the label-averaged loss l(.,0) + l(.,1).
// Arm (as in the authors' implementation): argmax_x mu(x'theta_t) + beta_t ||x||_{W_t^{-1}}.
// Choice: we do not copy the code's abort when mu'(x'theta_bar)/mu'(x'theta) > 2 (a condition
// of the analysis); the round is counted in `condition_violations` instead.
// State: theta, W, W^{-1}, the running sum and t -- O(d^2): served.
#pragma once

#include <memory>

#include "core/glb/common.h"
#include "core/policy.h"

namespace bandit::glb {

class Ecolog final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  explicit Ecolog(const GlbParams& p);

  absl::string_view name() const override { return "ecolog"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return theta_; }

  const Vector& theta() const { return theta_; }
  const Matrix& w() const { return w_; }
  const Matrix& w_inverse() const { return w_inv_; }
  double Beta() const;  // beta_t times radius_multiplier

  // argmin_{||theta|| <= S} phi(x'theta) + 1/2 ||theta - center||_W^2 for phi = l(., r), or the
  // label-averaged l(., 0) + l(., 1) when `averaged` (exposed for the tests).
  static Vector Step(const Matrix& w, const Vector& center, const Vector& x, double r,
                     bool averaged, double S);

 private:
  GlbParams p_;
  Vector theta_;
  Matrix w_, w_inv_;
  double cum_ = 0.0;  // data-dependent sum in beta_t^2
  int64_t violations_ = 0;
  int64_t t_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeEcolog(const bandit::v1::PolicyConfig& config,
                                                          uint64_t seed) {
  return Ecolog::Make(config, seed);
}

}  // namespace bandit::glb
