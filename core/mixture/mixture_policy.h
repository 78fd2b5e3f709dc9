// Shared machinery of the mixture policies (Dibaei Nia & Farnia, Algorithm 1; Rezaei et al. 2025):
// arms are generators; Select says which generator to sample next; Update brings the sample's
// embedding (and optional fidelity in [0, 1]). State per arm: count, mean feature, D x D second
// moment (core/mixture/stats.h) -- constant in t.
//
// Warm start (Algorithm 1, line 2): while some arm has fewer than M samples, Select picks
// deterministically, round-robin among the arms with the fewest samples, and reports propensity
// 1 (the choice is not random). Afterwards the algorithm-specific distribution p over arms is
// computed (ComputeDistribution), the arm is drawn from p, propensity = p[arm], scores = p.
//
// The plug-in loss minimized by every algorithm is
//   H(a) = F(a) + w * sum_i a_i (1 - theta_i)       (Section 5.3; theta_i = mean fidelity)
// i.e. the paper's H = F + w G with psi = 1 - fidelity, so higher fidelity is preferred.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bandit/v1/mixture.pb.h"
#include "core/arms.h"
#include "core/mixture/features.h"
#include "core/mixture/objective.h"
#include "core/mixture/stats.h"
#include "core/policy.h"
#include "core/rng.h"

namespace bandit::mixture {

struct MixtureParams {
  bandit::v1::MixtureConfig::Algorithm algorithm = bandit::v1::MixtureConfig::MIXTURE_GREEDY;
  bandit::v1::MixtureObjective objective = bandit::v1::FD;
  int64_t dimension = 0;        // d
  int64_t random_features = 0;  // D (0 = cosine kernel)
  double bandwidth = 1.0;
  int warm_start = 10;                 // M
  int eg_steps = 10;                   // S
  std::optional<double> eg_step_size;  // eta (nullopt = objective default)
  double fidelity_weight = 0.0;        // w
  double epsilon = 0.1;
  bool epsilon_over_mixture = false;
  double ucb_beta = 2.0;
  std::optional<double> ucb_delta;  // nullopt = objective default
  double alpha_floor = 1e-12;
  Vector oracle_weights;
};

// Validates a MixtureConfig (and the arm count) into params; INVALID_ARGUMENT naming the field.
absl::StatusOr<MixtureParams> ParseParams(const bandit::v1::MixtureConfig& c, int num_arms);

class MixturePolicy : public Policy {
 public:
  absl::string_view name() const override { return "mixture"; }
  ContextKind context_kind() const override { return ContextKind::kNone; }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  absl::Status Update(const Observation& obs) override;
  std::vector<std::string> ArmIds() const override { return arms_.ids(); }
  absl::Status AddArm(const bandit::v1::ArmSpec& arm) override;
  absl::Status RemoveArm(absl::string_view arm_id) override;
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  // samples, score (natural units, of all collected samples = plug-in at a_i = n_i / N),
  // objective (loss incl. fidelity term), best_objective / best_score (plug-in minimum over the
  // simplex, EG from the current alpha), gap = objective - best_objective, fidelity (mean), ...
  std::vector<std::pair<std::string, double>> Summary() const override;
  // The current sampling distribution over arms (alpha for the mixture algorithms).
  Vector Weights() const override { return probs_; }

  // Takes the configuration of `fresh` (another mixture of the same algorithm, objective and
  // feature space): its parameters and its objective, i.e. the reference distribution (FD:
  // mean and covariance, KD: mean feature), as the factory computed them. The learned state
  // (per-generator statistics, alpha, the random engine) is kept. FAILED_PRECONDITION when the
  // algorithm, objective or feature space differ (the statistics would not mean the same).
  absl::Status Reconfigure(Policy& fresh) override;

  const MixtureParams& params() const { return params_; }
  const MixtureStats& stats() const { return stats_; }
  const Objective& objective() const { return *objective_; }
  const FeatureMap& features() const { return features_; }
  bool InWarmStart() const;
  // H(alpha) at the current statistics (base loss + fidelity term).
  double PluginLoss(const Vector& alpha) const;
  // The plug-in loss H bound to the current statistics, plus `extra_linear` (may be empty).
  std::unique_ptr<BoundLoss> BindLoss(const Vector& extra_linear = Vector()) const;
  double StepSize() const;

 protected:
  MixturePolicy(ArmSet arms, MixtureParams params, FeatureMap features,
                std::unique_ptr<Objective> objective, Rng rng);

  // The distribution over arms after the warm start; may advance the EG iterate alpha_.
  // `diag` receives diagnostics; `arm_gap` (optional, size m) the estimated gap of each arm's
  // choice in loss units (left empty: Decision::estimated_gap is NaN).
  virtual Vector ComputeDistribution(std::vector<std::pair<std::string, double>>* diag,
                                     Vector* arm_gap) = 0;
  // One greedy round: S EG steps on H from alpha_ (+ extra linear term), alpha_ advanced.
  // Returns the loss at the last evaluated iterate.
  double GreedyStep(const Vector& extra_linear = Vector());
  virtual bool SupportsArmChanges() const { return true; }
  // Vertex losses H(e_i) (one-arm baselines).
  Vector VertexLosses() const;

  ArmSet arms_;
  MixtureParams params_;
  FeatureMap features_;
  std::unique_ptr<Objective> objective_;
  MixtureStats stats_;
  Rng rng_;
  Vector alpha_;    // EG iterate (warm start for the next round, Algorithm 1 line 5)
  Vector probs_;    // last sampling distribution
  int64_t t_ = 0;   // Select calls
  int64_t rr_ = 0;  // warm-start round-robin cursor
};

}  // namespace bandit::mixture
