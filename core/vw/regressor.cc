#include "core/vw/regressor.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"

namespace bandit::vw {
namespace {

// gd.cc's X_MIN: a feature value smaller in magnitude is treated as +-X_MIN.
constexpr float kXMin = 1.084202e-19f;
constexpr float kX2Min = kXMin * kXMin;

// gd.cc's inv_sqrt: 1/std::sqrt (VW's STD_INV_SQRT build) or the SSE reciprocal square-root
// estimate of its default x86-64 build (about 12 bits; RegressorOptions::simd_inv_sqrt).
inline float InvSqrt(float x, bool simd) {
#if defined(__SSE2__)
  if (simd) {
    __m128 v = _mm_load_ss(&x);
    v = _mm_rsqrt_ss(v);
    _mm_store_ss(&x, v);
    return x;
  }
#endif
  return 1.f / std::sqrt(x);
}

// VW::trunc_weight: the weight less the accumulated l1 gravity, 0 once it would cross zero.
inline float TruncWeight(float w, float gravity) {
  return gravity < std::fabs(w) ? w - (w > 0 ? 1.f : -1.f) * gravity : 0.f;
}

// squared_loss_impl_get_loss (loss_functions.cc): the loss with the prediction clamped to the
// label range.
float SquaredLoss(float min_label, float max_label, float prediction, float label) {
  if (prediction <= max_label && prediction >= min_label)
    return (prediction - label) * (prediction - label);
  if (prediction < min_label) {
    if (label == min_label) return 0.f;
    return static_cast<float>((label - min_label) * (label - min_label) +
                              2. * (label - min_label) * (min_label - prediction));
  }
  if (label == max_label) return 0.f;
  return static_cast<float>((max_label - label) * (max_label - label) +
                            2. * (max_label - label) * (prediction - max_label));
}

}  // namespace

Regressor::Regressor(const RegressorOptions& options, int bits, int models)
    : o_(options), bits_(bits), other_sums_(static_cast<size_t>(std::max(models, 1) - 1)) {
  stride_shift_ = StrideShift(o_);
  sqrt_rate_ = o_.power_t == 0.5f;
  neg_norm_power_ = o_.adaptive ? o_.power_t - 1.f : -1.f;
  neg_power_t_ = -o_.power_t;
  eta_ = o_.learning_rate;
  // gd_setup seeds the (first regressor's) normalizer sums as if a given initial_t rounds of
  // norm 1 had been seen.
  if (o_.initial_t_given && o_.initial_t > 0) {
    s_.normalized_sum_norm_x = o_.initial_t;
    s_.total_weight = o_.initial_t;
  }
  s_.t = InitialT(o_);
  if (!o_.adaptive && !o_.normalized) eta_ *= std::pow(static_cast<float>(s_.t), o_.power_t);
  weights_.resize(size_t{1} << (bits_ + stride_shift_));
  for (size_t i = 0; i < weights_.size(); ++i) weights_[i] = InitialValue(i);
  if (stride_shift_ > 0) mirror_.assign(size_t{1} << bits_, 0.f);
}

float Regressor::InitialT(const RegressorOptions& options) {
  if (options.initial_t_given) return options.initial_t;
  return !options.adaptive && !options.normalized ? 1.f : 0.f;
}

int64_t Regressor::Bytes(const RegressorOptions& options, int bits, int models) {
  const int shift = StrideShift(options);
  // The strided array, and beside it the weights alone when strided (the mirror).
  return (int64_t{4} << (bits + shift)) + (shift > 0 ? int64_t{4} << bits : 0) +
         static_cast<int64_t>(sizeof(Scalars)) +
         static_cast<int64_t>(sizeof(Sums)) * (std::max(models, 1) - 1);
}

void Regressor::RefreshMirror() {
  if (stride_shift_ == 0) return;
  for (size_t i = 0; i < mirror_.size(); ++i) mirror_[i] = weights_[i << stride_shift_];
}

float Regressor::InitialValue(size_t position) const {
  // gd.cc save_load: with the adaptive update, initial_t > 0 counts as that many earlier squared
  // gradients in every weight's adaptive sum.
  const bool adaptive_seeded = o_.adaptive && o_.initial_t_given && o_.initial_t > 0;
  return adaptive_seeded && (position & ((size_t{1} << stride_shift_) - 1)) == 1 ? o_.initial_t
                                                                                 : 0.f;
}

float Regressor::Predict(const SparseVector& x) const {
  const size_t n = x.size();
  // The weights alone, one float per index (a quarter of the strided array: more of it stays
  // in cache across a round's actions).
  const float* w = stride_shift_ > 0 ? mirror_.data() : weights_.data();
  float p = 0.f;
  if (o_.l1 > 0) {
    const float gravity = static_cast<float>(s_.gravity);
    for (size_t k = 0; k < n; ++k)
      p += TruncWeight(w[x.index[k]], gravity) * static_cast<float>(x.value[k]);
  } else {
    for (size_t k = 0; k < n; ++k) p += w[x.index[k]] * static_cast<float>(x.value[k]);
  }
  return p * static_cast<float>(s_.contraction);
}

float Regressor::EffectiveWeight(uint32_t index) const {
  const float w = weight(index);
  return (o_.l1 > 0 ? TruncWeight(w, static_cast<float>(s_.gravity)) : w) *
         static_cast<float>(s_.contraction);
}

void Regressor::PredictAll(std::span<const SparseVector> xs, float* out) const {
  PredictAllImpl<false>(xs, 0, out);
}

bool Regressor::PredictAllChecked(std::span<const SparseVector> xs, int64_t dimension,
                                  float* out) const {
  return PredictAllImpl<true>(xs, dimension, out);
}

template <bool kCheck>
bool Regressor::PredictAllImpl(std::span<const SparseVector> xs, int64_t dimension,
                               float* out) const {
  const float* w = stride_shift_ > 0 ? mirror_.data() : weights_.data();
  // kCheck: the checks ride along the sums (the sums wait on their gathers; a compare and a max
  // per term are free beside them), with every index masked to the array so that a bad one is
  // read harmlessly before the check refuses the vector.
  const uint32_t mask = static_cast<uint32_t>((size_t{1} << bits_) - 1);
  constexpr float kLimit = FLT_MAX;
  uint32_t largest = 0;
  bool finite = true;
  // The term's index, checked and masked (kCheck), or as it is.
  auto index_of = [&](const SparseVector& x, size_t k) {
    uint32_t i = x.index[k];
    if constexpr (kCheck) {
      largest = std::max(largest, i);
      finite &= std::fabs(x.value[k]) <= kLimit;
      i &= mask;
    }
    return i;
  };
  auto term = [&](const SparseVector& x, size_t k) {
    return w[index_of(x, k)] * static_cast<float>(x.value[k]);
  };
  if constexpr (kCheck)
    for (const SparseVector& x : xs)
      if (x.index.size() != x.value.size()) return false;
  if (o_.l1 > 0) {
    const float gravity = static_cast<float>(s_.gravity);
    for (size_t a = 0; a < xs.size(); ++a) {
      float p = 0.f;
      for (size_t k = 0; k < xs[a].size(); ++k)
        p += TruncWeight(w[index_of(xs[a], k)], gravity) * static_cast<float>(xs[a].value[k]);
      out[a] = p * static_cast<float>(s_.contraction);
    }
  } else {
    const float contraction = static_cast<float>(s_.contraction);
    size_t a = 0;
    for (; a + 4 <= xs.size(); a += 4) {
      const SparseVector* x[4] = {&xs[a], &xs[a + 1], &xs[a + 2], &xs[a + 3]};
      size_t common = x[0]->size();
      for (int j = 1; j < 4; ++j) common = std::min(common, x[j]->size());
      float p[4] = {0.f, 0.f, 0.f, 0.f};
      // The weights a few terms ahead are asked for early: the four sums wait on their gathers,
      // which in the server mostly miss the cache.
      constexpr size_t kAhead = 24;
      for (size_t k = 0; k < common; ++k) {
        if (k + kAhead < common)
          for (int j = 0; j < 4; ++j)
            __builtin_prefetch(&w[x[j]->index[k + kAhead] & (kCheck ? mask : ~0u)]);
        for (int j = 0; j < 4; ++j) p[j] += term(*x[j], k);
      }
      for (int j = 0; j < 4; ++j) {
        for (size_t k = common; k < x[j]->size(); ++k) p[j] += term(*x[j], k);
        out[a + j] = p[j] * contraction;
      }
    }
    for (; a < xs.size(); ++a) {
      float p = 0.f;
      for (size_t k = 0; k < xs[a].size(); ++k) p += term(xs[a], k);
      out[a] = p * contraction;
    }
  }
  if constexpr (kCheck) return finite && static_cast<int64_t>(largest) < dimension;
  return true;
}

// gd.cc get_pred_per_update with pred_per_update_feature (stateful): moves each term's adaptive
// sum and normalizer, sets its rate, and returns sum_i r_i x_i^2 times the normalized update's
// multiplier (also returned in update_multiplier).
template <bool kAdaptive, bool kNormalized, bool kSqrtRate>
float Regressor::PredPerUpdate(const SparseVector& x, float weight, float grad_squared,
                               Sums& sums, float* update_multiplier) {
  constexpr int a = 1;                                     // adaptive slot
  constexpr int nz = kAdaptive ? 2 : 1;                    // normalizer slot
  constexpr int spare = kAdaptive && kNormalized ? 3 : 2;  // the rate
  float pred_per_update = 0.f;
  float norm_x = 0.f;
  const size_t n = x.size();
  for (size_t k = 0; k < n; ++k) {
    float* w = &weights_[static_cast<size_t>(x.index[k]) << stride_shift_];
    float v = static_cast<float>(x.value[k]);
    float x2 = v * v;
    if (x2 < kX2Min) {
      v = v > 0 ? kXMin : -kXMin;
      x2 = kX2Min;
    }
    if constexpr (kAdaptive) w[a] += grad_squared * x2;
    if constexpr (kNormalized) {
      const float x_abs = std::fabs(v);
      if (x_abs > w[nz]) {  // a new scale: rescale the weight as if it had been the old one
        if (w[nz] > 0.f) {
          if constexpr (kSqrtRate) {
            const float rescale = w[nz] / x_abs;
            w[0] *= kAdaptive ? rescale : rescale * rescale;
          } else {
            const float rescale = x_abs / w[nz];
            w[0] *= std::pow(rescale * rescale, neg_norm_power_);
          }
        }
        w[nz] = x_abs;
      }
      float norm_x2 = x2 / (w[nz] * w[nz]);
      if (x2 > FLT_MAX) norm_x2 = 1;
      norm_x += norm_x2;
    }
    // compute_rate_decay
    float rate = 1.f;
    if constexpr (kAdaptive) {
      // G^-power_t; G^-0 is 1 exactly (IEEE pow), so power_t 0 (Personalizer's) skips the call.
      rate = kSqrtRate             ? InvSqrt(w[a], o_.simd_inv_sqrt)
             : neg_power_t_ == 0.f ? 1.f
                                   : std::pow(w[a], neg_power_t_);
    }
    if constexpr (kNormalized) {
      if constexpr (kSqrtRate) {
        const float inv_norm = 1.f / w[nz];
        rate *= kAdaptive ? inv_norm : inv_norm * inv_norm;
      } else {
        rate *= std::pow(w[nz] * w[nz], neg_norm_power_);
      }
    }
    w[spare] = rate;
    pred_per_update += x2 * rate;
  }
  if constexpr (kNormalized) {
    // VW's h is the example's importance weight; gd keeps these sums in double.
    sums.normalized_sum_norm_x += static_cast<double>(weight) * norm_x;
    sums.total_weight += weight;
    // average_update
    const float total = static_cast<float>(sums.total_weight);
    const float sum_norm = static_cast<float>(sums.normalized_sum_norm_x);
    float multiplier;
    if constexpr (kSqrtRate) {
      const float avg_norm = total / sum_norm;
      multiplier = kAdaptive ? std::sqrt(avg_norm) : avg_norm;
    } else {
      multiplier = std::pow(sum_norm / total, neg_norm_power_);
    }
    *update_multiplier = multiplier;
    pred_per_update *= multiplier;
  }
  return pred_per_update;
}

float Regressor::Sensitivity(const SparseVector& x, float weight, float grad_squared, Sums& sums,
                             float* update_multiplier) {
  const bool a = o_.adaptive, nz = o_.normalized;
  float* m = update_multiplier;
  if (a && nz)
    return sqrt_rate_ ? PredPerUpdate<true, true, true>(x, weight, grad_squared, sums, m)
                      : PredPerUpdate<true, true, false>(x, weight, grad_squared, sums, m);
  if (a)
    return sqrt_rate_ ? PredPerUpdate<true, false, true>(x, weight, grad_squared, sums, m)
                      : PredPerUpdate<true, false, false>(x, weight, grad_squared, sums, m);
  if (nz)
    return sqrt_rate_ ? PredPerUpdate<false, true, true>(x, weight, grad_squared, sums, m)
                      : PredPerUpdate<false, true, false>(x, weight, grad_squared, sums, m);
  // Plain: the example's sum of squared feature values.
  float sum = 0.f;
  for (size_t k = 0; k < x.size(); ++k) {
    const float v = static_cast<float>(x.value[k]);
    sum += v * v;
  }
  return sum;
}

bool Regressor::SumsFinite() const {
  bool finite = std::isfinite(s_.normalized_sum_norm_x) && std::isfinite(s_.total_weight) &&
                std::isfinite(s_.contraction) && std::isfinite(s_.gravity) &&
                std::isfinite(s_.min_label) && std::isfinite(s_.max_label);
  for (const Sums& m : other_sums_)
    finite = finite && std::isfinite(m.normalized_sum_norm_x) && std::isfinite(m.total_weight);
  return finite;
}

bool Regressor::LearnRound(std::span<const Step> steps, float label) {
  BeginRound();
  for (const Step& step : steps)
    if (!LearnStep(step, label)) {
      EndRound(false);
      return false;
    }
  EndRound(true);
  return true;
}

void Regressor::BeginRound() {
  round_scalars_ = s_;
  round_other_sums_ = other_sums_;
  undo_.clear();
}

bool Regressor::LearnStep(const Step& step, float label, float* prediction) {
  const SparseVector& x = *step.x;
  const size_t stride = size_t{1} << stride_shift_;
  // The blocks this learn touches, scattered over the array: asked for all at once, so their
  // cache misses overlap instead of stalling the loops below one by one (in the server the
  // array is rarely in cache between a Select and its reward).
  for (size_t k = 0; k < x.size(); ++k) {
    __builtin_prefetch(&weights_[static_cast<size_t>(x.index[k]) << stride_shift_], 1);
    if (stride_shift_ > 0) __builtin_prefetch(&mirror_[x.index[k]], 1);
  }
  for (size_t k = 0; k < x.size(); ++k) {
    const size_t at = static_cast<size_t>(x.index[k]) << stride_shift_;
    for (size_t j = 0; j < stride; ++j) undo_.emplace_back(at + j, weights_[at + j]);
  }
  const size_t touched = undo_.size();
  const float predicted = LearnUnchecked(step, label);
  if (prediction != nullptr) *prediction = predicted;
  // The next step's prediction reads the mirror.
  if (stride_shift_ > 0)
    for (const uint32_t i : x.index) mirror_[i] = weights_[static_cast<size_t>(i) << stride_shift_];
  bool finite = SumsFinite();
  for (size_t u = touched - x.size() * stride; u < touched && finite; ++u)
    finite = std::isfinite(weights_[undo_[u].first]);
  return finite;
}

void Regressor::EndRound(bool commit) {
  if (commit) {
    // shared_data::update: the round counts once learned (unlabeled rounds cancel out in VW).
    s_.t += 1.0;
    return;
  }
  // Undo, last write first (an index may repeat). (With --l1/--l2 a learn may also fold the
  // gravity and contraction into every weight; an overflow in that same learn is not undone
  // outside the touched weights.)
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) weights_[it->first] = it->second;
  if (stride_shift_ > 0)
    for (const auto& [at, old] : undo_)
      if ((at & ((size_t{1} << stride_shift_) - 1)) == 0)
        mirror_[at >> stride_shift_] = weights_[at];
  s_ = round_scalars_;
  other_sums_ = round_other_sums_;
}

float Regressor::PredictClamped(const SparseVector& x) const {
  float prediction = Predict(x);
  if (std::isnan(prediction)) prediction = 0.f;
  return std::clamp(prediction, s_.min_label, s_.max_label);
}

float Regressor::LearnUnchecked(const Step& step, float label) {
  const SparseVector& x = *step.x;
  const float weight = step.weight;
  // The first regressor's sums are the scalars'; the others' beside them.
  Sums first{s_.normalized_sum_norm_x, s_.total_weight};
  Sums& sums = step.model == 0 ? first : other_sums_[step.model - 1];
  // scorer.cc: the label joins the range before the base learns.
  s_.min_label = std::min(s_.min_label, label);
  s_.max_label = std::max(s_.max_label, label);
  // gd predict: the partial prediction, clamped to the label range (finalize_prediction).
  float prediction = Predict(x);
  if (std::isnan(prediction)) prediction = 0.f;
  prediction = std::clamp(prediction, s_.min_label, s_.max_label);

  float update = 0.f;
  float update_multiplier = 1.f;
  if (SquaredLoss(s_.min_label, s_.max_label, prediction, label) > 0.f) {
    const float grad_squared = weight * (4.f * (prediction - label) * (prediction - label));
    const float pred_per_update = Sensitivity(x, weight, grad_squared, sums, &update_multiplier);
    if (step.model == 0) {
      s_.normalized_sum_norm_x = first.normalized_sum_norm_x;
      s_.total_weight = first.total_weight;
    }
    // get_scale: eta h, and t^(-power_t) when not adaptive (t counts the rounds learned).
    float update_scale = eta_ * weight;
    if (!o_.adaptive) update_scale *= std::pow(static_cast<float>(s_.t + weight), neg_power_t_);
    if (o_.invariant) {
      if (update_scale * pred_per_update < 1e-6f)
        update = 2.f * (label - prediction) * update_scale;
      else
        update = (label - prediction) * (1.f - std::exp(-2.f * update_scale * pred_per_update)) /
                 pred_per_update;
    } else {
      update = 2.f * (label - prediction) * update_scale;
    }
    if ((o_.l1 > 0 || o_.l2 > 0) && std::fabs(update) > 1e-8) {
      const float clamped = std::clamp(prediction, s_.min_label, s_.max_label);
      const double dev1 = 2.f * (clamped - label);
      const double eta_bar = std::fabs(dev1) > 1e-8 ? -update / dev1 : 0.0;
      if (std::fabs(dev1) > 1e-8) s_.contraction *= 1. - o_.l2 * eta_bar;
      update /= static_cast<float>(s_.contraction);
      s_.gravity += eta_bar * o_.l1;
    }
  }
  if (std::isnan(update)) update = 0.f;
  if (update != 0.f) {
    // train: w_i += u * (x_i * r_i), u scaled by the normalized update's multiplier.
    if (o_.normalized) update *= update_multiplier;
    const bool stateful = o_.adaptive || o_.normalized;
    const int spare = o_.adaptive && o_.normalized ? 3 : 2;
    for (size_t k = 0; k < x.size(); ++k) {
      float* w = &weights_[static_cast<size_t>(x.index[k]) << stride_shift_];
      float v = static_cast<float>(x.value[k]);
      if (!(v < FLT_MAX && v > -FLT_MAX)) continue;
      if (stateful) v *= w[spare];
      w[0] += update * v;
    }
  }
  if (s_.contraction < 1e-9 || s_.gravity > 1e3) SyncWeights();
  return prediction;
}

void Regressor::SyncWeights() {
  if (s_.gravity == 0. && s_.contraction == 1.) return;
  const float gravity = static_cast<float>(s_.gravity);
  const float contraction = static_cast<float>(s_.contraction);
  const size_t stride = size_t{1} << stride_shift_;
  for (size_t i = 0; i < weights_.size(); i += stride)
    weights_[i] = TruncWeight(weights_[i], gravity) * contraction;
  RefreshMirror();
  s_.gravity = 0.;
  s_.contraction = 1.;
}

absl::Status Regressor::Restore(std::vector<float> weights, const Scalars& scalars,
                                std::vector<Sums> other_sums) {
  if (other_sums.empty()) other_sums.resize(other_sums_.size());
  if (other_sums.size() != other_sums_.size())
    return absl::InvalidArgumentError(absl::StrCat("vw normalizer sums for ",
                                                   other_sums.size() + 1, " regressors, expected ",
                                                   other_sums_.size() + 1));
  for (const Sums& m : other_sums)
    if (!std::isfinite(m.normalized_sum_norm_x) || !std::isfinite(m.total_weight))
      return absl::InvalidArgumentError("vw regressor state holds a non-finite number");
  if (weights.size() != weights_.size())
    return absl::InvalidArgumentError(
        absl::StrCat("vw weights have ", weights.size(), " floats, expected ", weights_.size()));
  for (float w : weights)
    if (!std::isfinite(w))
      return absl::InvalidArgumentError("vw weights hold a non-finite number, expected finite");
  for (double v : {scalars.normalized_sum_norm_x, scalars.total_weight, scalars.t, scalars.gravity,
                   scalars.contraction, static_cast<double>(scalars.min_label),
                   static_cast<double>(scalars.max_label)})
    if (!std::isfinite(v))
      return absl::InvalidArgumentError("vw regressor state holds a non-finite number");
  weights_ = std::move(weights);
  RefreshMirror();
  s_ = scalars;
  other_sums_ = std::move(other_sums);
  return absl::OkStatus();
}

}  // namespace bandit::vw
