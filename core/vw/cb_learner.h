// Vowpal Wabbit's contextual-bandit learner (policy { vw { arguments: "..." } }): VW 9.11.2's
// cb_adf reduction over its linear regressor (core/vw/regressor.h), with cb_explore_adf's
// explorers, configured by VW's own command line (core/vw/options.h).
//
// A round as VW computes it for a multiline example (shared features merged into each action,
// as the feature space does; reductions/cb/cb_adf.cc, csoaa_ldf.cc, cb_explore_adf_*.cc):
// - predict: each action's cost c_a = <w, x_a> (csoaa_ldf's partial prediction); the actions
//   sorted by (cost, index); --cb_adf chooses the first (propensity 1), --cb_explore_adf turns
//   the sorted costs into a pmf:
//     epsilon-greedy: epsilon / K each, plus (1 - epsilon) split over the actions tied with the
//       best within relative 1e-4 (--first_only: all of it to the best);
//     --first N: uniform for the first N rounds learned, then all on the best;
//     --softmax: p_a proportional to exp(-lambda (c_a - min c));
//     --squarecb: p_a = 1 / (K + gamma (c_a - min c)) for a not the best, the rest to the best,
//       gamma = gamma_scale * t^gamma_exponent, t the rounds learned (Foster and Rakhlin 2020);
//     --bag N: each of N regressors votes for its best actions (1 / ties each), p_a the share
//       of the votes (cb_explore_adf_bag.cc, generate_bag);
//   then (--first, --softmax, --squarecb, --bag) no probability below epsilon / K
//   (explore_internal.h enforce_minimum_probability).
// - learn, --cb_type mtr (VW's default): the chosen action's features regress its cost with
//   importance weight (1 / max(p, clip_p)) * (rounds / actions offered, summed over rounds)
//   (cb_adf.cc learn_mtr); --squarecb learns without importance weights (p = 1), except, as
//   VW does, when the chosen action was the last one offered. --bag learns each regressor
//   k ~ Poisson(1) times (VW's bs weight_gen on its merand48 state, seeded by --random_seed;
//   --greedify: the first exactly once), each with its own MTR counts.
// - learn, --cb_type ips | dm | dr: every offered action regresses an estimate of its cost, in
//   the order offered, weight 1 (gen_cs_example.cc, csoaa_ldf.cc do_actual_learning_oaa):
//     ips: cost / max(p, clip_p) for the chosen action, 0 for the others;
//     dm:  the cost for the chosen action, 0 for the others;
//     dr:  a second regressor's ("scorer") prediction s_a, plus (cost - s_a) / max(p, clip_p)
//          for the chosen action; the scorer, interleaved beside the learner's weights, learns
//          the chosen action's cost with weight 1 / p when the loop reaches it, so the actions
//          after it read the scorer as it learned (gen_cs_example_dr, cb_algs.h get_cost_pred).
//   These need every offered action at the reward: a Select's memo carries them (their terms,
//   16 bytes each per action, held with the pending decision and charged to it).
// VW never samples; Select samples the pmf with the instance's seeded engine (core/rng.h), so
// the same seed replays the same choices. An Update with reward r teaches the cost -r at the
// propensity the Select gave (Personalizer's convention); a Select never changes the model.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/policy.h"
#include "core/rng.h"
#include "core/vw/options.h"
#include "core/vw/regressor.h"

namespace bandit::vw {

class CbLearner final : public Policy {
 public:
  static absl::StatusOr<std::unique_ptr<Policy>> Make(const bandit::v1::PolicyConfig& config,
                                                      uint64_t seed);
  CbLearner(VwOptions options, uint64_t seed);

  absl::string_view name() const override { return "vw"; }
  ContextKind context_kind() const override { return ContextKind::kCandidates; }
  bool TakesSparse() const override { return true; }
  // --cb_adf decides deterministically; the explorers draw from the engine.
  bool SelectReadsOnly() const override { return o_.reduction == Reduction::kCbAdf; }
  bool MemoHoldsCandidates() const override {
    return o_.cb_type != CbType::kMtr || o_.explorer == Explorer::kCover;
  }
  absl::StatusOr<Decision> Select(const SelectContext& ctx) override;
  // The prediction (every action's cost and probability) is the whole cost of a Select: it is
  // prepared under the instance's shared lock, and Select only draws.
  bool PreparesSelect() const override { return true; }
  std::unique_ptr<PreparedSelect> PrepareSelect(const SelectContext& ctx) const override;
  absl::Status Update(const Observation& obs) override;
  SlotIndex slot_index() const override;
  void SawMultiSlotDecision() override {
    if (o_.ccb && !slot_index_seen_) {
      slot_index_seen_ = true;
      ++model_version_;
    }
  }
  void Save(bandit::v1::PolicyState* out) const override;
  absl::Status Restore(const bandit::v1::PolicyState& state) override;
  int64_t StateBytes() const override;
  std::vector<std::pair<std::string, double>> Summary() const override;
  // Each hashed index's weight (explain); Weights() stays empty: 2^b of them per GetInstance
  // would be megabytes.
  // --bag: the mean of its regressors' weights.
  std::optional<double> CoordinateWeight(uint32_t index) const override;

  // VW's prediction for one round, without sampling: each action's cost and (cb_explore_adf)
  // probability, in the order offered.
  struct Prediction {
    std::vector<float> costs;
    std::vector<float> pmf;  // --cb_adf: 1 on the chosen action
    int best = -1;           // the lowest cost, ties to the lower index
  };
  void Predict(std::span<const SparseVector> actions, Prediction* out) const;
  // VW's learn of a labeled round: `chosen` (the chosen_index-th of num_actions offered) cost
  // `cost` and was chosen with `probability`.
  // false, and nothing changed, when the update would leave a weight or a sum non-finite.
  bool Learn(const SparseVector& chosen, int chosen_index, int num_actions, float cost,
             float probability);
  // VW's learn of a labeled round with every offered action in order (what --cb_type ips, dm
  // and dr learn from; mtr reads the chosen one).
  bool LearnOffered(std::span<const SparseVector> offered, int chosen_index, float cost,
                    float probability);

  // What the learner counts beside its regressor (a model file keeps them, but for --bag's
  // other regressors' counts).
  struct Counters {
    uint64_t event_sum = 0, action_sum = 0;  // cb_adf's MTR counts (--bag: the first regressor's)
    uint64_t squarecb_rounds = 0;            // --squarecb's counter
    uint64_t first_remaining = 0;            // --first's uniform rounds left
    uint64_t cover_rounds = 0;               // --cover's counter (rounds learned)
    uint64_t random_state = 0;               // --bag's merand48 state
    bool slot_index_seen = false;            // --ccb_explore_adf's has_seen_multi_slot_example
    // --bag's other regressors' MTR counts; empty: 0 (as VW starts them on reading a model).
    std::vector<uint64_t> bag_event_sums, bag_action_sums;
  };
  Counters counters() const;
  // Takes a learned state read elsewhere (a VW model file). INVALID_ARGUMENT, nothing changed,
  // for a regressor state of the wrong shape or counts that cannot be.
  // `other_sums`: --bag's other regressors' normalizer sums (empty: 0, as from a model file).
  absl::Status Load(std::vector<float> weights, const Regressor::Scalars& scalars,
                    const Counters& counters, std::vector<Regressor::Sums> other_sums = {});

  const VwOptions& options() const { return o_; }
  const Regressor& regressor() const { return regressor_; }
  // The length of dense candidates: 2^b (less --bag's bits), or the config's smaller
  // `dimension`.
  int dimension() const { return dimension_; }

 private:
  void Explore(std::vector<std::pair<float, uint32_t>>& sorted, Prediction* out) const;
  // --bag's prediction: each regressor's costs, its vote, the pmf from the votes.
  void PredictBag(std::span<const SparseVector> actions, Prediction* out) const;
  // x's terms as interleaved regressor `model` reads them (VW's offsets).
  void ModelTerms(const SparseVector& x, uint32_t model, SparseVector* out) const;
  // The interleaved index of --bag's regressor `bag` (its --cb_type dr scorer: part 1).
  uint32_t Model(uint32_t bag, uint32_t part = 0) const {
    return o_.cb_type == CbType::kDr ? 2 * bag + part : bag;
  }
  // How often regressor `m` learns this round (--bag's bootstrap draw from `random_state`).
  uint32_t LearnCount(uint32_t m, uint64_t& random_state) const;
  // ips, dm, dr: the round's learns (see the top of this file).
  bool LearnEstimates(std::span<const SparseVector> offered, int chosen_index, float cost,
                      float probability);
  // Within a regressor round: gen_cs_example_dr's estimates of each action's cost from the
  // scorer (interleaved regressor `scorer`; with `learn_scorer` it learns the chosen action's
  // cost first, weight 1/p), into labels[].
  bool DrEstimates(std::span<const SparseVector> scorer_terms, size_t chosen, float cost,
                   float probability, float clip_p, bool learn_scorer, uint32_t scorer,
                   float* labels);
  // Within a regressor round: each action regresses labels[a], in order (csoaa_ldf).
  bool RegressEach(std::span<const SparseVector> terms, const float* labels, uint32_t model);
  // --cover's round (cb_explore_adf_cover.cc): the pmf into `out`, and with a label the round
  // learned (false, nothing changed, when a number would become non-finite).
  struct CoverLabel {
    size_t chosen;
    float cost, probability;
  };
  bool CoverRound(std::span<const SparseVector> actions, const CoverLabel* label,
                  Prediction* out);
  // Predict, checking each vector (indices below the dimension, finite float values) as it goes
  // when `check`: INVALID_ARGUMENT naming candidates[i] otherwise.
  absl::Status PredictChecked(std::span<const SparseVector> actions, bool check,
                              Prediction* out) const;
  // The candidates checked, as sparse terms (dense ones converted into `scratch`).
  absl::StatusOr<std::span<const SparseVector>> Actions(const SelectContext& ctx,
                                                        std::vector<SparseVector>* scratch) const;
  class Prepared;

  VwOptions o_;
  Regressor regressor_;
  Rng rng_;
  // cb_adf's per-model MTR counts (one per --bag regressor): rounds learned and actions offered
  // in them.
  std::vector<uint64_t> event_sums_;
  std::vector<uint64_t> action_sums_;
  uint64_t bag_random_state_ = 0;  // --bag's bootstrap draws (VW's merand48 state)
  // --ccb_explore_adf: a decision had several slots or a featured first slot.
  bool slot_index_seen_ = false;
  int bag_shift_ = 0;              // ceil(log2 of the interleaved regressors)
  uint64_t squarecb_rounds_ = 0;  // SquareCB's counter (rounds learned)
  uint64_t first_remaining_ = 0;  // --first: uniform rounds left
  uint64_t cover_rounds_ = 0;     // --cover: rounds learned (its epsilon's decay)
  int dimension_ = 0;
  // Counts every change of what Predict reads (learns and restores): a prepared prediction is
  // current while it is unchanged.
  uint64_t model_version_ = 0;
};

// The bytes CbLearner's state takes for `config` (its weight array and counters), before it is
// built; 0 for a config whose arguments do not parse (CreatePolicy refuses it).
int64_t Footprint(const bandit::v1::PolicyConfig& config);

}  // namespace bandit::vw
