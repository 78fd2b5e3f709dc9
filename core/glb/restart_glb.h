// RestartGLB (Zhao, Zhang, Jiang, Zhou 2020, Algorithm 1), the served restart baseline of the
// DOMD-GLB paper's Fig. 1: Filippi et al. (2010)'s GLM-UCB refitted on the rounds of the current
// block, started from scratch every H rounds. It refits on every stored round at every update
// (O(n d^2) per Newton iteration, n <= H rounds kept).
//
// The engine, `MleUcbCore`, is also the one of bandit-sim's discounted baselines (D-GLUCB,
// SC-D-GLUCB, BVD-GLM-UCB, SCB-(PW-)WeightUCB: bench/sim/baselines/discounted_glm_ucb.h) and of
// MASTER's base instances (bench/sim/baselines/master_glm_ucb.h). It holds the stored rounds,
// the discounted regularized MLE
//     theta_hat = argmin_theta  sum_{s<n} w_s l_s(theta) + lambda/2 ||theta||^2,
//     w_s = gamma^{n-1-s}  (gamma = 1: plain MLE, RestartGLB's),  l_s = (m(x_s'theta) - r_s x_s'theta)/g,
// the discounted design matrices V = lambda I + sum w_s x_s x_s' and
// V~ = lambda I + sum w_s^2 x_s x_s' (kept by the exact recursions V <- gamma V + x x' + (1-gamma)
// lambda I), and a rule (`MleUcbRule`) that turns them into the estimate, the bonus's matrix and
// the radius. GLM-UCB's rule (`GlmUcbRule`):
//   theta~ = argmin_{||theta||<=S} || g(theta) - g(theta_hat) ||_{V^{-1}},
//   g(theta) = sum_s w_s mu(x_s'theta) x_s + lambda theta
// (Filippi et al.'s projection; non-convex, approximated as the DOMD-GLB paper does (Section 5)
// by projected gradient descent, `projection_steps` iterations with backtracking, started at
// theta_hat scaled onto the ball; when ||theta_hat|| <= S, theta~ = theta_hat), and the arm
//   argmax  mu(x'theta~) + rho_t ||x||_{V^{-1}},   rho_t = (k_mu / c_mu) beta_t,
// ties to the lowest index, t = rounds in the core + 1, with the weighted self-normalized radius
// (sigma = the link's sub-Gaussian scale, ||x|| <= L = 1)
//   beta_t = sqrt(lambda) S + sigma sqrt(2 log(1/delta) + d log(1 + (1-gamma^{t-1}) / (lambda d (1-gamma))))
// (gamma = 1: the limit (t-1)/(lambda d)), multiplied by radius_multiplier.
//
// Tuning (clipped to H in [1, T]): H = ceil((d T / (1 + P_T))^{2/3})   (bound d^{2/3} P^{1/3} T^{2/3}).
// The forms are our reading of the published algorithm and the DOMD-GLB paper's description
// (Table 1, Sections 1 and 5); docs/algorithms.md lists the choices.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/glb/common.h"
#include "core/policy.h"
#include "core/rng.h"
#include "core/state_io.h"

namespace bandit::glb {

// Weighted-MLE pieces (exposed for tests and bandit-sim's baselines). X is d x n, w the
// per-round weights.
struct WeightedData {
  Eigen::Map<const Matrix> X;
  Eigen::Map<const Vector> r;
  const Vector& w;
};
double WeightedObjective(const GlmLink& link, const WeightedData& data, double lambda,
                         const Vector& theta);
// The gradient and the Hessian of WeightedObjective (either may be null).
void WeightedGradHess(const GlmLink& link, const WeightedData& data, double lambda,
                      const Vector& theta, Vector* grad, Matrix* hess);
// Damped Newton from `warm` (Armijo backtracking), stops at Newton decrement^2/2 <= 1e-14 |f|.
Vector WeightedMle(const GlmLink& link, const WeightedData& data, double lambda,
                   const Vector& warm);
// g(theta) = sum_s w_s mu(x_s'theta) x_s + lambda theta.
Vector WeightedG(const GlmLink& link, const WeightedData& data, double lambda, const Vector& theta);
// H(theta) = sum_s w_s mu'(x_s'theta)/g x_s x_s' + lambda I.
Matrix WeightedHessian(const GlmLink& link, const WeightedData& data, double lambda,
                       const Vector& theta);
// argmin_{||theta||<=S} ||g(theta) - g(theta_hat)||^2_{M^{-1}} by projected gradient descent.
Vector ProjectByGradient(const GlmLink& link, const WeightedData& data, double lambda,
                         const Vector& theta_hat, const Matrix& m_inv, double S, int steps);
// beta_t above with weights g^{age}, before the radius multiplier.
double WeightedRadius(const GlbParams& p, double t, double g);

int64_t RestartGlbPeriod(int d, int64_t T, double path_length);

// What a rule refits from: the stored rounds with their weights, V^{-1} and V~.
struct MleUcbFit {
  const GlbParams& p;
  const WeightedData& data;
  const Matrix& v_inv;
  const Matrix& v2;
  int projection_steps;
};
// How an MleUcbCore turns its rounds into the estimate the arm rule uses, the matrix of the
// bonus's norm, and the radius.
struct MleUcbRule {
  const char* name;           // the policy's name (its state, its summaries)
  bool scores_in_mean_space;  // mu(x'theta) + bonus, else x'theta + bonus
  // theta_hat (holding its previous value: a warm start), theta and bonus_inv from `fit`.
  void (*refit)(const MleUcbFit& fit, Vector* theta_hat, Vector* theta, Matrix* bonus_inv);
  // rho_t for the next round, before the radius multiplier.
  double (*radius)(const GlbParams& p, double t, double gamma);
};
// GLM-UCB's rule (above): RestartGLB's blocks and MASTER's base instances.
const MleUcbRule& GlmUcbRule();
// GLM-UCB's refit: the MLE, Filippi et al.'s projection in the V^{-1} metric, bonus V^{-1}.
void ProjectedMleRefit(const MleUcbFit& fit, Vector* theta_hat, Vector* theta, Matrix* bonus_inv);

// The state one GLM-UCB-type learner needs; shared by the policies of its rules.
class MleUcbCore {
 public:
  MleUcbCore(const MleUcbRule& rule, const GlbParams& p, double gamma, int projection_steps);

  void Clear();                         // forget every round (restart)
  void Add(const Vector& x, double r);  // store, refit, refresh the bonus matrix
  int64_t rounds() const { return static_cast<int64_t>(r_.size()); }
  double gamma() const { return gamma_; }
  double Radius() const;  // rho_t for the next round (with the multiplier)
  // Scores every candidate (ucb) and returns the argmax; `mean` gets mu(x'theta_est).
  int Argmax(std::span<const Vector> candidates, Vector* ucb, Vector* mean) const;
  const Vector& theta() const { return theta_; }          // the estimate the rule uses
  const Vector& theta_hat() const { return theta_hat_; }  // the unconstrained MLE
  const Matrix& v() const { return v_; }
  const Matrix& bonus_inverse() const { return bonus_inv_; }
  const MleUcbRule& rule() const { return *rule_; }

  void Save(StateWriter& w, absl::string_view prefix) const;
  absl::Status Restore(const StateReader& r, absl::string_view prefix);
  int64_t Bytes() const;

 private:
  WeightedData Data(Vector* w) const;
  void Refit();

  const MleUcbRule* rule_;
  GlbParams p_;
  double gamma_;
  int projection_steps_;
  std::vector<double> x_, r_;  // stored rounds, oldest first (d doubles per round)
  Vector theta_hat_, theta_;
  Matrix v_, v2_, bonus_inv_;
};

// A policy of one MleUcbCore, restarted every `restart_period` rounds (0 = never): RestartGLB
// (served) and, with their rules, bandit-sim's discounted baselines.
class NonstationaryGlmUcb final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> MakeRestartGlb(
      const bandit::v1::PolicyConfig& config, uint64_t seed);
  NonstationaryGlmUcb(const MleUcbRule& rule, const GlbParams& p, double gamma,
                      int64_t restart_period, int projection_steps);

  absl::string_view name() const override { return core_.rule().name; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  bool SelectReadsOnly() const override { return true; }  // arg max, ties to the lowest index
  absl::Status Update(const Observation& obs) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return core_.theta(); }

  const MleUcbCore& core() const { return core_; }
  int64_t restart_period() const { return restart_period_; }
  int64_t rounds() const { return t_; }

 private:
  GlbParams p_;
  int64_t restart_period_;
  MleUcbCore core_;
  int64_t t_ = 0;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeRestartGlb(
    const bandit::v1::PolicyConfig& config, uint64_t seed) {
  return NonstationaryGlmUcb::MakeRestartGlb(config, seed);
}

// The ranges horizon >= 2 and path_length in [0, 1e12] of a restart or discounted config.
template <typename C>
absl::Status CheckNonstationaryRanges(absl::string_view field, const C& c) {
  if (c.has_horizon() && c.horizon() < 2)
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".horizon is ", c.horizon(), ", expected a number >= 2"));
  if (c.has_path_length())
    if (auto s = CheckRange(absl::StrCat(field, ".path_length"), c.path_length(), 0.0, 1e12);
        !s.ok())
      return s;
  return absl::OkStatus();
}

}  // namespace bandit::glb
