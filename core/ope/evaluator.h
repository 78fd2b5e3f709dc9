// Progressive off-policy evaluation of candidate policies on a decision log, as Vowpal Wabbit's
// --cb_adf does with a learning policy: for each logged event in order, each candidate gives
// its action distribution for the logged context, the estimators (estimators.h) accumulate,
// and the candidate then learns from the logged (context, action, reward).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bandit/v1/decision_log.pb.h"
#include "bandit/v1/service.pb.h"
#include "core/dimension_limits.h"
#include "core/features/feature_space.h"
#include "core/ope/estimators.h"
#include "core/ope/sparse_direct_model.h"
#include "core/policy.h"

namespace bandit::ope {

struct Candidate {
  std::string name;
  bandit::v1::InstanceConfig config;
};

struct EvaluateOptions {
  double max_weight = 0;      // clip importance weights at this value (0 = no clipping)
  double ridge_lambda = 1.0;  // the direct model's regularization
  int64_t trace_every = 0;    // record running estimates every this many events (0 = never)
  // Named logs hashed into a weight space of more coordinates than this are evaluated on sparse
  // vectors (candidates must take sparse input: covariance COVARIANCE_DIAGONAL) with a diagonal
  // direct model (SparseDirectModel); up to it, on dense vectors with DirectModel's ridge, whose
  // d x d matrix is banditd's full-matrix bound (--max_feature_dim's default). banditd's shadows
  // make the same choice at the same bound.
  int64_t max_dense_dimension = kMaxDenseDimension;
  // Also accumulate per window of this many milliseconds of decision time (0 = no windows):
  // CandidateResult::windows.
  int64_t window_ms = 0;
  // When set: also accumulate the decisions it picks (by event id) and the others apart,
  // CandidateResult::held_out and ::searched (a search chooses on one part and reports the
  // winner on the other).
  std::function<bool(const std::string& event_id)> held_out;
  // The candidate whose feature importance to accumulate (-1: none): CandidateResult::features.
  // Its policy must report its coordinate weights (Policy::CoordinateWeight).
  int importance_of = -1;
};

// One feature's (or namespace's) weight in a candidate's predictions: the sum over decisions
// of |w_i x_i| over the chosen action's terms that hold it (an interaction's term shared
// equally among its features), and the decisions whose chosen action held it.
struct FeatureWeight {
  double abs_contribution = 0;
  int64_t occurrences = 0;
};

struct TracePoint {
  int64_t events;
  double ips, snips, dr, logged;
};

struct CandidateResult {
  std::string name;
  std::string policy;
  Estimators estimators;
  // Events where the candidate reported its whole action distribution, and where it did not
  // (then the indicator of its sampled action stands in for pi(.|x): unbiased, noisier).
  int64_t exact_distribution = 0;
  int64_t sampled_distribution = 0;
  // A log of multi-slot decisions (one entry per slot): the estimators per slot position. The
  // whole page's value is the sum of the slots' values.
  std::vector<Estimators> slots;
  std::vector<TracePoint> trace;
  // With EvaluateOptions::window_ms: the estimators per window, by the window's start
  // (decided_at_ms rounded down to a multiple of window_ms).
  std::map<int64_t, Estimators> windows;
  // With EvaluateOptions::held_out.
  Estimators held_out, searched;
  // With EvaluateOptions::importance_of: by VW's audit name ("namespace^feature"; a feature of
  // the default namespace has no prefix), over the single decisions of named logs, the weights
  // read before the candidate learns each decision.
  std::map<std::string, FeatureWeight> features;
  std::map<std::string, FeatureWeight> namespaces;  // by namespace name (" ": the default)
  int64_t importance_events = 0;
};

// A log's entries regrouped into decisions: a multi-slot decision's entries (one per slot,
// consecutive, one event id) together, a single decision alone. Add each entry in log order;
// `ready` gets each whole decision (and how many slots it had) once the next begins, the last
// one at Finish. The first error `ready` returns is Add's or Finish's.
class DecisionGroups {
 public:
  using Ready =
      std::function<absl::Status(std::span<const bandit::v1::LoggedDecision> slots, int count)>;
  explicit DecisionGroups(Ready ready) : ready_(std::move(ready)) {}
  absl::Status Add(bandit::v1::LoggedDecision d);
  absl::Status Finish();

 private:
  Ready ready_;
  std::vector<bandit::v1::LoggedDecision> group_;
};

class Evaluator {
 public:
  // Builds every candidate's policy (INVALID_ARGUMENT naming the candidate). A log of named
  // decisions needs the instance's feature space in the candidates' configs (`feature_space`,
  // the same in each; a policy dimension left 0 is 2^bits): each event's context and actions
  // are hashed again into the vectors the served policy saw.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(std::vector<Candidate> candidates,
                                                           EvaluateOptions options);

  // One logged decision; `where` (e.g. "log.dsjson:12") prefixes any error. Decisions without
  // a reward (pending, dropped, discarded) are counted and skipped. Errors: a labeled decision
  // with a missing or zero propensity, a context of another kind or size than a candidate
  // takes, a candidate that cannot learn the logged action.
  // `slots_in_decision`: for a slot of a named multi-slot decision, how many slots the decision
  // had (its featurization depends on it, as VW's CCB).
  absl::Status Add(const bandit::v1::LoggedDecision& d, const std::string& where,
                   int slots_in_decision = 1);
  // A multi-slot decision, its slots in order (one entry each): every slot is scored from the
  // candidates' state before any slot is learned, as the logging policy filled them all
  // before any reward.
  absl::Status AddDecision(std::span<const bandit::v1::LoggedDecision> slots,
                           const std::string& where, int slots_in_decision);

  const std::vector<CandidateResult>& results() const { return results_; }
  // Candidate `c`'s policy as it learned along the log so far (its state, to serve it).
  void SavePolicy(size_t c, bandit::v1::PolicyState* out) const { policies_[c]->Save(out); }
  const Policy& policy(size_t c) const { return *policies_[c]; }
  int64_t skipped() const { return skipped_; }

 private:
  Evaluator(std::vector<Candidate> candidates, std::vector<std::unique_ptr<Policy>> policies,
            EvaluateOptions options);
  // One rewarded entry scored by every candidate, waiting to be learned.
  struct Scored {
    std::vector<Vector> actions;
    std::vector<SparseVector> sparse_actions;  // instead of actions, beyond max_dense_dimension
    Vector x;
    std::vector<std::string> arm_ids;
    int chosen = 0;
    int slot_index = -1;  // a single decision
    int64_t decided_at_ms = 0;
    bool held_out = false;
    ScoredEvent event;    // target filled per candidate
    std::vector<Vector> targets;
    std::vector<Observation> learns;
  };
  absl::StatusOr<Scored> Score(const bandit::v1::LoggedDecision& d, const std::string& where,
                               int slots_in_decision);
  absl::Status Learn(Scored& one, const std::string& where);
  // Adds the chosen action's terms to CandidateResult::features (EvaluateOptions::importance_of).
  void AddImportance(const std::string& context_json, const std::string& chosen_json);
  absl::StatusOr<Vector> TargetFor(size_t c, const bandit::v1::LoggedDecision& d,
                                   const Scored& scored, Observation* learn);

  std::vector<Candidate> candidates_;
  std::vector<std::unique_ptr<Policy>> policies_;
  // The candidates' feature space (their configs' feature_space, all alike), for named logs.
  std::shared_ptr<const features::FeatureSpace> space_;
  std::unique_ptr<features::FeatureSpace> slot_space_;  // space_->ForSlots(), once needed
  EvaluateOptions options_;
  DirectModel model_;
  std::unique_ptr<SparseDirectModel> sparse_model_;  // set when the space is evaluated sparse
  std::vector<CandidateResult> results_;
  int64_t skipped_ = 0;
};

}  // namespace bandit::ope
