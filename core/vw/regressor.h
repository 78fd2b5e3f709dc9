// Vowpal Wabbit's linear regressor: its gradient-descent learner (VW 9.11.2,
// vowpalwabbit/core/src/reductions/gd.cc, with scorer.cc's label range and the squared loss of
// loss_functions.cc), in single precision as VW computes it, term for term in VW's order, so its
// predictions are VW's to the last bit on the same machine.
//
// The weights are one flat array of floats with a stride: for each hashed index the weight, and
// with the adaptive or normalized update the sum of squared gradients, the largest |x| seen (the
// normalizer) and the per-round rate, side by side (VW's layout, so a feature's update touches
// one cache line). One learn on (x, label y, importance weight h), with p = <w, x> clamped to the
// labels seen:
//   adaptive:   G_i += h * 4 (p - y)^2 * x_i^2                          (gd.cc pred_per_update_feature)
//   normalized: N_i = max(N_i, |x_i|), w_i rescaled when N_i grows; the update is scaled by
//               (sum of h / sum of h * sum_i x_i^2 / N_i^2)^(1/2)      (gd.cc average_update)
//   rate:       r_i = G_i^(-power_t) * N_i^(2 (power_t - 1))  (1 / (sqrt(G_i) N_i) at power_t 0.5)
//   invariant:  u = (y - p) (1 - exp(-2 eta h s)) / s with s = sum_i r_i x_i^2   (the importance-
//               aware update of Karampatziakis and Langford 2011; 2 (y - p) eta h when eta h s
//               is below 1e-6), otherwise u = 2 (y - p) eta h
//   w_i += u * (x_i * r_i)
// Plain SGD (--sgd) scales eta h by t^(-power_t), t the rounds learned (from --initial_t, 1 by
// default). --l1 and --l2 keep VW's lazy truncation (gravity) and contraction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/policy.h"
#include "core/vw/options.h"

namespace bandit::vw {

class Regressor {
 public:
  // `models` regressors share the array (--bag's, interleaved by the caller's indices); each
  // keeps its own normalizer sums (gd.cc gd_per_model_states), indexed by Step::model.
  Regressor(const RegressorOptions& options, int bits, int models = 1);

  // VW's partial prediction <w, x> (truncated by the l1 gravity, times the l2 contraction),
  // accumulated in single precision in the terms' order. x's indices must be below 2^bits.
  float Predict(const SparseVector& x) const;
  // Predict of each of `xs`, bit for bit: each sum takes its terms in their order, and four sums
  // run interleaved so the CPU overlaps their additions (one sum is a chain of dependent
  // additions, which VW's order forbids reassociating).
  void PredictAll(std::span<const SparseVector> xs, float* out) const;
  // PredictAll of vectors not checked yet, checked as they are read (one pass over them): false,
  // and `out` unspecified, when one has an index at or past `dimension` (<= 2^bits), a value
  // that is not a finite float, or index and value arrays of different lengths. An index past
  // the array is never read (each is masked to it before the check decides).
  bool PredictAllChecked(std::span<const SparseVector> xs, int64_t dimension, float* out) const;
  // One learn of VW's gd under its scorer: the label joins the range predictions are clamped to,
  // then the update above. weight > 0. false, with the state as it was, when the update would
  // leave a number non-finite (VW would keep the inf or NaN; a snapshot could not hold it).
  // A round counts once in t (shared_data::update), however many learns it makes.
  bool Learn(const SparseVector& x, float label, float weight) {
    const Step step{&x, weight};
    return LearnRound(std::span<const Step>(&step, 1), label);
  }
  // The learns of one round in order (--bag's regressors, each as often as its bootstrap drew
  // it; none at all is a round too), all or none: false, with the state as it was before the
  // first, when any would leave a number non-finite.
  struct Step {
    const SparseVector* x;
    float weight;
    uint32_t model = 0;  // whose normalizer sums the learn moves
  };
  bool LearnRound(std::span<const Step> steps, float label);
  // A round whose learns are made one at a time, with predictions between them (cb_adf's doubly
  // robust estimate reads its scorer after the scorer learned): BeginRound, then LearnStep for
  // each learn (false when it left a number non-finite: end the round uncommitted), then
  // EndRound. EndRound(true) counts the round in t; EndRound(false) restores the state
  // BeginRound saw. LearnRound is these three calls.
  void BeginRound();
  // One learn with its own label; `prediction` (if given) receives gd's prediction before the
  // update (clamped to the label range with `label` in it): what VW's scorer returns for it.
  bool LearnStep(const Step& step, float label, float* prediction = nullptr);
  void EndRound(bool commit);
  // gd's prediction of x as a scorer returns it: the partial prediction clamped to the labels
  // seen (NaN read as 0).
  float PredictClamped(const SparseVector& x) const;

  int bits() const { return bits_; }
  int stride_shift() const { return stride_shift_; }
  // The float array as VW lays it out: 2^bits entries of 2^stride_shift floats.
  const std::vector<float>& weights() const { return weights_; }
  float weight(uint32_t index) const {
    return weights_[static_cast<size_t>(index) << stride_shift_];
  }
  // The weight a prediction multiplies index's value by (after l1's truncation and l2's
  // contraction).
  float EffectiveWeight(uint32_t index) const;
  // What the array holds at `position` before any learning (a snapshot keeps the others).
  float InitialValue(size_t position) const;

  // The scalar state beside the weights, in VW's model file's terms (the sums: the first
  // regressor's).
  struct Scalars {
    double normalized_sum_norm_x = 0;
    double total_weight = 0;
    double t = 0;  // VW's sd->t less the unlabeled examples: initial t plus rounds learned
    float min_label = 0;
    float max_label = 0;
    double gravity = 0;
    double contraction = 1;
  };
  const Scalars& scalars() const { return s_; }
  // The other regressors' normalizer sums (VW's model file keeps only the first's).
  struct Sums {
    double normalized_sum_norm_x = 0;
    double total_weight = 0;
  };
  const std::vector<Sums>& other_sums() const { return other_sums_; }
  // Restores a saved state (a snapshot's or a model file's; `other_sums` empty: 0, as VW reads a
  // model file). INVALID_ARGUMENT when the array has the wrong length or a number is not finite.
  absl::Status Restore(std::vector<float> weights, const Scalars& scalars,
                       std::vector<Sums> other_sums = {});

  // The t learning starts from (parse_args: --initial_t sets sd->t; gd_setup starts plain SGD,
  // neither adaptive nor normalized, at 1 unless given): what a model file records as initial_t.
  static float InitialT(const RegressorOptions& options);
  // The bytes of a regressor of these options over 2^bits weights, before it is built; what
  // StateBytes reports.
  static int64_t Bytes(const RegressorOptions& options, int bits, int models = 1);
  int64_t StateBytes() const {
    return Bytes(o_, bits_, static_cast<int>(other_sums_.size()) + 1);
  }
  // log2 of the floats kept per weight: 4 (weight, adaptive sum, normalizer, rate) when the
  // update is adaptive or normalized, else 1 (gd_setup's stride).
  static int StrideShift(const RegressorOptions& options) {
    return options.adaptive || options.normalized ? 2 : 0;
  }

 private:
  template <bool kAdaptive, bool kNormalized, bool kSqrtRate>
  float PredPerUpdate(const SparseVector& x, float weight, float grad_squared, Sums& sums,
                      float* update_multiplier);
  float Sensitivity(const SparseVector& x, float weight, float grad_squared, Sums& sums,
                    float* update_multiplier);
  void SyncWeights();
  // Returns gd's clamped prediction before the update.
  float LearnUnchecked(const Step& step, float label);
  bool SumsFinite() const;
  // Each touched index's block of floats, for undoing a learn that overflowed.
  std::vector<std::pair<size_t, float>> undo_;
  Scalars round_scalars_;
  std::vector<Sums> round_other_sums_;

  RegressorOptions o_;
  int bits_;
  int stride_shift_;
  bool sqrt_rate_;
  float eta_;  // the learning rate, times initial t^power_t for plain SGD (gd_setup)
  float neg_norm_power_;
  float neg_power_t_;
  std::vector<float> weights_;
  // weights_'s weights alone (every 2^stride_shift-th float), what Predict reads; empty with a
  // stride of 1. Kept equal to them after every change.
  std::vector<float> mirror_;
  template <bool kCheck>
  bool PredictAllImpl(std::span<const SparseVector> xs, int64_t dimension, float* out) const;
  void RefreshMirror();
  Scalars s_;
  std::vector<Sums> other_sums_;
};

}  // namespace bandit::vw
