// Thompson sampling over a finite arm set (Thompson 1933; Agrawal & Goyal 2012 for both
// likelihoods below). Each Select draws theta_i ~ posterior_i for every arm and plays argmax_i.
//
//  * BERNOULLI: Beta(alpha_i, beta_i), prior Beta(a0, b0), rewards r in [0, 1]. Fractional
//    rewards use the deterministic fractional update alpha_i += r, beta_i += 1 - r (exact
//    conjugate update for r in {0, 1}); Update never draws randomness.
//  * GAUSSIAN: prior N(m0, v0), known noise variance s2. After n_i rewards with sum S_i:
//      v_i = 1 / (1/v0 + n_i/s2),  m_i = v_i (m0/v0 + S_i/s2).
//
// Propensity: P(arm i is the argmax of a posterior draw) = ∫ f_i(x) Π_{j≠i} F_j(x) dx.
//  * QUADRATURE (default): computed deterministically by adaptive Gauss-Kronrod quadrature
//    (core/classic/argmax_probability.h), within 1e-6 of exact references in the tests.
//  * MONTE_CARLO: one 64-bit sub-seed is drawn from the instance Rng (so replay stays exact), a
//    local Rng seeded with it draws M more joint posterior samples, and the decision's own draw
//    is counted as one more sample: p_i = (#argmax_i over the M+1 draws) / (M+1).
// Both methods take the sub-seed from the instance Rng after the decision's draw, so the random
// stream, hence every decision, is the same whichever method computes the propensity (and the
// same as before quadrature existed: journals written then replay identically). The chosen
// arm's propensity is at least kPropensityFloor (MONTE_CARLO: at least 1/(M+1)), so importance
// weights stay finite. With M = 0 nothing is computed: propensity is NaN ("unknown") and scores
// are the posterior draws (POSTERIOR_SAMPLE).
#pragma once

#include <memory>

#include "core/arms.h"
#include "core/classic/argmax_probability.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit {

class Thompson final : public Policy {
 public:
  enum class Likelihood { kBernoulli, kGaussian };

  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);

  static constexpr int kDefaultPropensitySamples = 1000;
  static constexpr int kMaxPropensitySamples = 1000000;
  // Lowest propensity reported for a chosen arm under QUADRATURE (its exact probability can
  // underflow; an importance weight is then at most 1e6).
  static constexpr double kPropensityFloor = 1e-6;
  enum class PropensityMethod { kQuadrature, kMonteCarlo };

  absl::string_view name() const override { return "thompson"; }
  ContextKind context_kind() const override { return ContextKind::kNone; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  std::optional<double> EstimatedMean(int arm) const;
  std::vector<std::string> ArmIds() const override { return arms_.ids(); }
  absl::Status AddArm(const bandit::v1::ArmSpec& arm) override;
  absl::Status RemoveArm(absl::string_view arm_id) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  Vector Weights() const override { return PosteriorMeans(); }

  Likelihood likelihood() const { return likelihood_; }
  PropensityMethod propensity_method() const { return method_; }
  // Every arm's probability of being the argmax of a posterior draw, by quadrature.
  Vector ArgmaxProbabilities() const;
  // Bernoulli: posterior Beta parameters. Gaussian: posterior mean and variance.
  double PosteriorA(int arm) const;  // alpha_i or m_i
  double PosteriorB(int arm) const;  // beta_i or v_i
  Vector PosteriorMeans() const;
  const Vector& pulls() const { return counts_; }

 private:
  struct Prior {
    double alpha = 1, beta = 1;                // Bernoulli
    double mean = 0, variance = 1, noise = 1;  // Gaussian
  };
  Thompson(ArmSet arms, Likelihood lik, Prior prior, PropensityMethod method, int samples,
           uint64_t seed);
  // The cached posteriors for the quadrature (see posteriors_), brought up to date.
  const ArgmaxProbability& Posteriors() const;
  // Arm i's parameters as ArgmaxProbability takes them (Beta shapes, or Normal mean and sd).
  std::pair<double, double> PosteriorShape(int i) const;
  // Every arm's, with the family.
  ArgmaxPosteriors PosteriorShapes() const;

  double Draw(Rng& rng, int arm) const;
  // The allowed entry of largest value, lowest index on ties (allowed empty: every entry).
  static int ArgMax(const Vector& v, std::span<const char> allowed = {});

  ArmSet arms_;
  Likelihood likelihood_;
  Prior prior_;
  PropensityMethod method_;
  int samples_;  // M
  Rng rng_;
  int64_t rounds_ = 0;  // Select calls
  Vector counts_;       // rewards received per arm
  Vector a_, b_;        // Bernoulli: alpha_i, beta_i. Gaussian: unused (empty)
  Vector sums_;         // Gaussian: S_i. Bernoulli: unused (empty)
  // Derived state, never saved: the quadrature's per-arm data (log B, quantiles, CDF curves)
  // and the sum of all arms' log F on its grid persist between Selects; Update replaces the
  // one arm it changes (its old contribution leaves the sum exactly), and anything that
  // changes the arm set or replaces the state (AddArm, RemoveArm, Restore) marks it stale, to
  // be rebuilt on next use (equal to the incrementally updated one bit for bit). Not
  // thread-safe: the service calls a policy under its instance lock.
  mutable ArgmaxProbability posteriors_{ArgmaxProbability::Family::kBeta};
  mutable bool posteriors_stale_ = true;
};

inline absl::StatusOr<std::unique_ptr<Policy>> MakeThompson(const bandit::v1::PolicyConfig& config,
                                                            uint64_t seed) {
  return Thompson::Make(config, seed);
}

}  // namespace bandit
