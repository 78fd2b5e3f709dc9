// CbLearner (cb_learner.h: the round as VW computes it): its construction, the prediction and
// the explorers, --cover's round; its learns are in cb_learner_learn.cc, its state in
// cb_learner_state.cc.
#include "core/vw/cb_learner.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "core/common/sparse.h"
#include "core/vw/cb_learner_internal.h"
#include "core/state_io.h"
#include "core/validate.h"


namespace bandit::vw {

namespace cb_internal {

absl::Status CheckActionVector(absl::string_view field, const SparseVector& x, int64_t dim) {
  if (auto s = CheckSparse(field, x, dim); !s.ok()) return s;
  for (size_t k = 0; k < x.size(); ++k)
    if (std::fabs(x.value[k]) > kMaxFloatValue)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".value[", k, "] is ", x.value[k],
                       ", expected a finite float (VW keeps feature values as floats)"));
  return absl::OkStatus();
}

bool ActionVectorValid(const SparseVector& x, int64_t dim) {
  if (x.index.size() != x.value.size()) return false;
  // Two reductions: the largest index (the compiler vectorizes it at -O3), and whether every
  // value is a finite float (NaN fails the comparison), two doubles at a time with SSE2, which
  // GCC does not vectorize on its own.
  const size_t n = x.index.size();
  const uint32_t* index = x.index.data();
  const double* value = x.value.data();
  uint32_t largest = 0;
  for (size_t k = 0; k < n; ++k) largest = std::max(largest, index[k]);
  bool finite = true;
  size_t k = 0;
#if defined(__SSE2__)
  const __m128d sign = _mm_set1_pd(-0.0), limit = _mm_set1_pd(kMaxFloatValue);
  __m128d all = _mm_cmpeq_pd(limit, limit);
  for (; k + 2 <= n; k += 2)
    all = _mm_and_pd(all, _mm_cmple_pd(_mm_andnot_pd(sign, _mm_loadu_pd(value + k)), limit));
  finite = _mm_movemask_pd(all) == 3;
#endif
  for (; k < n; ++k) finite = finite && std::fabs(value[k]) <= kMaxFloatValue;
  return (n == 0 || static_cast<int64_t>(largest) < dim) && finite;
}

void DenseToTerms(const Vector& v, SparseVector* out) {
  out->index.clear();
  out->value.clear();
  for (int i = 0; i < v.size(); ++i)
    if (v[i] != 0) {
      out->index.push_back(static_cast<uint32_t>(i));
      out->value.push_back(v[i]);
    }
}

}  // namespace cb_internal

namespace {

using cb_internal::ActionVectorValid;
using cb_internal::CheckActionVector;
using cb_internal::DenseToTerms;
using cb_internal::kMaxFloatValue;

// VW::math::are_same_rel at VW's default tolerance: how fill_tied finds the actions tied with
// the best.
bool SameRelative(float a, float b) {
  return std::fabs(a - b) <= 1e-4f * (std::fabs(a) + std::fabs(b));
}

// explore_internal.h enforce_minimum_probability(epsilon, consider_zero_valued_elements): no
// probability below epsilon / K, the excess taken from the largest ones; with
// `consider_zero` false (--cover --nounif) the zero ones stay zero and K counts the others.
void EnforceMinimumProbability(float epsilon, std::vector<std::pair<float, uint32_t>>& pmf,
                               bool consider_zero = true) {
  if (epsilon == 0.f || pmf.empty() || epsilon < 0.f || epsilon > 1.f) return;
  size_t support = pmf.size();
  if (!consider_zero)
    for (const auto& p : pmf) support -= p.first == 0.f;
  if (epsilon > 0.999f) {
    for (auto& p : pmf)
      if (consider_zero || p.first > 0) p.first = 1.f / static_cast<float>(support);
    return;
  }
  const float minimum = epsilon / static_cast<float>(support);
  std::vector<float> sorted(pmf.size());
  for (size_t i = 0; i < pmf.size(); ++i) sorted[i] = pmf[i].first;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  size_t idx = 0, rho_idx = 0;
  float running_sum = 0.f, rho_sum = sorted[0];
  for (const float prob : sorted) {
    if (!consider_zero && prob == 0.f) break;
    running_sum += prob;
    if (prob > ((support - idx - 1) * minimum + running_sum - 1.f) / (idx + 1.f) + minimum) {
      rho_idx = idx;
      rho_sum = running_sum;
    }
    ++idx;
  }
  const float tau = ((support - rho_idx - 1.f) * minimum + rho_sum - 1.f) / (rho_idx + 1.f);
  for (auto& p : pmf)
    if (consider_zero || p.first > 0) p.first = std::max(p.first - tau, minimum);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> CbLearner::Make(const bandit::v1::PolicyConfig& config,
                                                        uint64_t seed) {
  const auto& c = config.vw();
  auto options = ParseVwArguments(c.arguments());
  if (!options.ok()) return options.status();
  const int64_t space = int64_t{1} << options->space.bits;
  if (c.dimension() < 0 || c.dimension() > space)
    return absl::InvalidArgumentError(absl::StrCat(
        "vw.dimension is ", c.dimension(), ", expected at most 2^b = ", space,
        " from the arguments' -b ", options->space.bits, " (or 0 to take it from them)"));
  auto learner = std::make_unique<CbLearner>(*std::move(options), seed);
  if (c.dimension() != 0) learner->dimension_ = c.dimension();
  return std::unique_ptr<Policy>(std::move(learner));
}

CbLearner::CbLearner(VwOptions options, uint64_t seed)
    : o_(std::move(options)),
      regressor_(o_.regressor, o_.weight_bits, static_cast<int>(o_.models)),
      rng_(seed) {
  first_remaining_ = o_.first_rounds;
  dimension_ = 1 << o_.space.bits;
  event_sums_.assign(o_.bag_size, 0);
  action_sums_.assign(o_.bag_size, 0);
  bag_random_state_ = o_.random_seed;
  bag_shift_ = o_.weight_bits - o_.space.bits;
}

CbLearner::Counters CbLearner::counters() const {
  Counters c;
  c.event_sum = event_sums_[0];
  c.action_sum = action_sums_[0];
  c.squarecb_rounds = squarecb_rounds_;
  c.first_remaining = first_remaining_;
  c.cover_rounds = cover_rounds_;
  c.random_state = bag_random_state_;
  c.slot_index_seen = slot_index_seen_;
  c.bag_event_sums.assign(event_sums_.begin() + 1, event_sums_.end());
  c.bag_action_sums.assign(action_sums_.begin() + 1, action_sums_.end());
  return c;
}

Policy::SlotIndex CbLearner::slot_index() const {
  if (!o_.ccb) return SlotIndex::kPerDecision;
  if (o_.ccb_no_slot_index) return SlotIndex::kNever;
  return slot_index_seen_ ? SlotIndex::kAlways : SlotIndex::kBeforeFirst;
}

std::optional<double> CbLearner::CoordinateWeight(uint32_t index) const {
  if (index >= (uint32_t{1} << o_.space.bits)) return 0.0;
  double sum = 0;
  for (uint32_t m = 0; m < o_.bag_size; ++m)
    sum += regressor_.EffectiveWeight((index << bag_shift_) | Model(m));
  return sum / static_cast<double>(o_.bag_size);
}

void CbLearner::ModelTerms(const SparseVector& x, uint32_t model, SparseVector* out) const {
  out->index.resize(x.size());
  for (size_t k = 0; k < x.size(); ++k) out->index[k] = (x.index[k] << bag_shift_) | model;
  out->value = x.value;
}

void CbLearner::PredictBag(std::span<const SparseVector> actions, Prediction* out) const {
  const size_t k = actions.size();
  std::vector<SparseVector> terms(k);
  std::vector<float> costs(k), scores(k, 0.f), top_actions(k, 0.f);
  std::vector<std::pair<float, uint32_t>> a_s(k);
  for (uint32_t m = 0; m < o_.bag_size; ++m) {
    for (size_t a = 0; a < k; ++a) ModelTerms(actions[a], Model(m), &terms[a]);
    for (size_t a = 0; a < k; a += 4)
      regressor_.PredictAll(
          std::span<const SparseVector>(terms).subspan(a, std::min<size_t>(4, k - a)),
          costs.data() + a);
    for (size_t a = 0; a < k; ++a) {
      a_s[a] = {costs[a], static_cast<uint32_t>(a)};
      scores[a] += costs[a];
    }
    std::sort(a_s.begin(), a_s.end());
    if (!o_.first_only) {
      size_t tied = 1;
      while (tied < k && SameRelative(a_s[tied].first, a_s[0].first)) ++tied;
      for (size_t j = 0; j < tied; ++j) top_actions[a_s[j].second] += 1.f / tied;
    } else {
      top_actions[a_s[0].second] += 1.f;
    }
  }
  // generate_bag: the votes' shares (their sum taken in double), all on the first when none.
  const float num_models =
      static_cast<float>(std::accumulate(top_actions.begin(), top_actions.end(), 0.));
  std::vector<std::pair<float, uint32_t>> pmf(k);
  for (size_t a = 0; a < k; ++a) pmf[a] = {0.f, static_cast<uint32_t>(a)};
  if (num_models <= 1e-6) {
    pmf[0].first = 1.f;
  } else {
    const float normalizer = 1.f / num_models;
    for (size_t a = 0; a < k; ++a) pmf[a].first = top_actions[a] * normalizer;
  }
  EnforceMinimumProbability(o_.epsilon, pmf);
  out->pmf.resize(k);
  for (size_t a = 0; a < k; ++a) out->pmf[a] = pmf[a].first;
  // The costs reported: the regressors' mean.
  out->costs.resize(k);
  for (size_t a = 0; a < k; ++a) out->costs[a] = scores[a] / static_cast<float>(o_.bag_size);
  out->best = static_cast<int>(std::min_element(out->costs.begin(), out->costs.end()) -
                               out->costs.begin());
}

void CbLearner::Explore(std::vector<std::pair<float, uint32_t>>& a_s, Prediction* out) const {
  const size_t k = a_s.size();
  switch (o_.explorer) {
    case Explorer::kNone:
      for (auto& a : a_s) a.first = 0.f;
      a_s[0].first = 1.f;
      break;
    case Explorer::kEpsilon: {  // cb_explore_adf_greedy.cc update_example_prediction
      size_t tied = 1;
      while (tied < k && SameRelative(a_s[tied].first, a_s[0].first)) ++tied;
      const float prob = o_.epsilon / static_cast<float>(k);
      for (auto& a : a_s) a.first = prob;
      if (!o_.first_only) {
        for (size_t i = 0; i < tied; ++i) a_s[i].first += (1.f - o_.epsilon) / tied;
      } else {
        a_s[0].first += 1.f - o_.epsilon;
      }
      break;
    }
    case Explorer::kFirst:  // cb_explore_adf_first.cc
      if (first_remaining_ > 0) {
        const float prob = 1.f / static_cast<float>(k);
        for (auto& a : a_s) a.first = prob;
      } else {
        for (auto& a : a_s) a.first = 0.f;
        a_s[0].first = 1.f;
      }
      EnforceMinimumProbability(o_.epsilon, a_s);
      break;
    case Explorer::kSoftmax: {  // explore_internal.h generate_softmax(-lambda, ...)
      const float lambda = -o_.lambda;
      float extreme = a_s[0].first;
      for (const auto& a : a_s)
        extreme = lambda > 0 ? std::max(extreme, a.first) : std::min(extreme, a.first);
      float norm = 0.f;
      for (auto& a : a_s) {
        a.first = std::exp(lambda * (a.first - extreme));
        norm += a.first;
      }
      for (auto& a : a_s) a.first /= norm;
      EnforceMinimumProbability(o_.epsilon, a_s);
      break;
    }
    case Explorer::kSquareCb: {  // cb_explore_adf_squarecb.cc predict (not --elim)
      const float gamma =
          o_.gamma_scale * static_cast<float>(std::pow(static_cast<double>(squarecb_rounds_),
                                                       static_cast<double>(o_.gamma_exponent)));
      size_t a_min = 0;
      float min_cost = a_s[0].first;
      for (size_t a = 0; a < k; ++a)
        if (a_s[a].first < min_cost) {
          a_min = a;
          min_cost = a_s[a].first;
        }
      float total = 0.f;
      for (size_t a = 0; a < k; ++a) {
        if (a == a_min) continue;
        const float pa = 1.f / (static_cast<float>(k) + gamma * (a_s[a].first - min_cost));
        a_s[a].first = pa;
        total += pa;
      }
      a_s[a_min].first = 1.f - total;
      EnforceMinimumProbability(o_.epsilon, a_s);
      break;
    }
    case Explorer::kBag:    // PredictBag
    case Explorer::kCover:  // CoverRound
      break;
  }
  out->pmf.assign(k, 0.f);
  for (const auto& a : a_s) out->pmf[a.second] = a.first;
}

void CbLearner::Predict(std::span<const SparseVector> actions, Prediction* out) const {
  PredictChecked(actions, /*check=*/false, out).IgnoreError();
}

absl::Status CbLearner::PredictChecked(std::span<const SparseVector> actions, bool check,
                                       Prediction* out) const {
  const size_t k = actions.size();
  if (o_.explorer == Explorer::kBag || o_.explorer == Explorer::kCover) {
    if (check)
      for (size_t i = 0; i < k; ++i)
        if (!ActionVectorValid(actions[i], dimension()))
          return CheckActionVector(absl::StrCat("candidates[", i, "]"), actions[i], dimension());
    if (o_.explorer == Explorer::kBag) {
      PredictBag(actions, out);
    } else {
      // Predicting only reads: the const_cast is for the round's learning, which it skips.
      const_cast<CbLearner*>(this)->CoverRound(actions, nullptr, out);
    }
    return absl::OkStatus();
  }
  out->costs.resize(k);
  // csoaa_ldf's rank prediction: each action's partial prediction, four actions at a time,
  // checked as they are read (one pass over the vectors); the failing one named afterwards.
  const int64_t d = dimension();
  if (bag_shift_ > 0) {
    // --cb_type dr: the learner's regressor is the first of two interleaved ones.
    std::vector<SparseVector> terms(k);
    for (size_t i = 0; i < k; ++i) {
      if (check && !ActionVectorValid(actions[i], d))
        return CheckActionVector(absl::StrCat("candidates[", i, "]"), actions[i], d);
      ModelTerms(actions[i], Model(0), &terms[i]);
    }
    regressor_.PredictAll(terms, out->costs.data());
  } else if (!check) {
    regressor_.PredictAll(actions, out->costs.data());
  } else if (!regressor_.PredictAllChecked(actions, d, out->costs.data())) {
    for (size_t i = 0; i < k; ++i)
      if (!ActionVectorValid(actions[i], d))
        return CheckActionVector(absl::StrCat("candidates[", i, "]"), actions[i], d);
    return absl::InternalError("a candidate failed the check and passed it again");
  }
  // Sorted by (cost, index), the best first.
  std::vector<std::pair<float, uint32_t>> a_s(k);
  for (size_t i = 0; i < k; ++i) a_s[i] = {out->costs[i], static_cast<uint32_t>(i)};
  std::sort(a_s.begin(), a_s.end());
  out->best = static_cast<int>(a_s[0].second);
  Explore(a_s, out);
  return absl::OkStatus();
}

class CbLearner::Prepared final : public PreparedSelect {
 public:
  const CbLearner* owner = nullptr;
  uint64_t model_version = 0;
  // The vectors it was computed from (a Select over the same ones, unchanged since: the
  // server's, skips their check and prediction).
  const SparseVector* vectors = nullptr;
  size_t actions = 0;
  Prediction prediction;
};

absl::StatusOr<std::span<const SparseVector>> CbLearner::Actions(
    const SelectContext& ctx, std::vector<SparseVector>* scratch) const {
  const bool sparse = !ctx.sparse_candidates.empty();
  const int n = static_cast<int>(sparse ? ctx.sparse_candidates.size() : ctx.candidates.size());
  if (n == 0)
    return absl::InvalidArgumentError("candidates is empty, expected at least one action");
  if (sparse) return ctx.sparse_candidates;  // checked as they are predicted
  const int d = dimension();
  scratch->resize(n);
  for (int i = 0; i < n; ++i) {
    if (auto s = CheckVector(absl::StrCat("candidates[", i, "]"), ctx.candidates[i], d); !s.ok())
      return s;
    DenseToTerms(ctx.candidates[i], &(*scratch)[i]);
  }
  return std::span<const SparseVector>(scratch->data(), n);
}

std::unique_ptr<PreparedSelect> CbLearner::PrepareSelect(const SelectContext& ctx) const {
  if (ctx.sparse_candidates.empty()) return nullptr;  // dense candidates: Select predicts
  auto prepared = std::make_unique<Prepared>();
  prepared->owner = this;
  prepared->model_version = model_version_;
  prepared->vectors = ctx.sparse_candidates.data();
  prepared->actions = ctx.sparse_candidates.size();
  if (!PredictChecked(ctx.sparse_candidates, /*check=*/true, &prepared->prediction).ok())
    return nullptr;
  return prepared;
}

absl::StatusOr<Decision> CbLearner::Select(const SelectContext& ctx) {
  std::vector<SparseVector> scratch;
  auto actions = Actions(ctx, &scratch);
  if (!actions.ok()) return actions.status();
  const int n = static_cast<int>(actions->size());
  // A prediction prepared from these very vectors on the model as it is now stands; otherwise
  // (an Update in between, another request) it is computed afresh.
  const auto* prepared = dynamic_cast<const Prepared*>(ctx.prepared);
  const bool current = prepared != nullptr && prepared->owner == this &&
                       prepared->model_version == model_version_ &&
                       prepared->vectors == actions->data() && prepared->actions == actions->size();
  Prediction fresh;
  if (!current)
    if (auto s = PredictChecked(*actions, /*check=*/true, &fresh); !s.ok()) return s;
  const Prediction& p = current ? prepared->prediction : fresh;
  Decision out;
  if (o_.reduction == Reduction::kCbAdf) {
    out.arm = p.best;
    out.propensity = 1.0;
  } else {
    out.arm = rng_.Categorical(p.pmf);
    out.propensity = p.pmf[out.arm];
  }
  const float min_cost = p.costs[p.best];
  out.estimated_gap = static_cast<double>(p.costs[out.arm]) - min_cost;
  if (ctx.want_scores) {
    out.scores.resize(n);
    if (o_.reduction == Reduction::kCbAdf) {
      for (int i = 0; i < n; ++i) out.scores[i] = p.costs[i];
      out.score_kind = bandit::v1::PREDICTED_COST;
    } else {
      for (int i = 0; i < n; ++i) out.scores[i] = p.pmf[i];
      out.score_kind = bandit::v1::PROBABILITY;
    }
  }
  // What the Update needs back: the propensity VW's label carries, the number of actions
  // offered (MTR's importance weight) and the chosen action's position (SquareCB's); ips, dm
  // and dr learn every action offered: each one's terms follow (count, indices, values).
  int64_t size = 3;
  if (MemoHoldsCandidates())
    for (const SparseVector& a : *actions) size += 1 + 2 * static_cast<int64_t>(a.size());
  out.memo = Vector(size);
  out.memo[0] = out.propensity;
  out.memo[1] = n;
  out.memo[2] = out.arm;
  if (MemoHoldsCandidates()) {
    int64_t at = 3;
    for (const SparseVector& a : *actions) {
      out.memo[at++] = static_cast<double>(a.size());
      for (const uint32_t i : a.index) out.memo[at++] = static_cast<double>(i);
      for (const double v : a.value) out.memo[at++] = v;
    }
  }
  return out;
}

bool CbLearner::CoverRound(std::span<const SparseVector> actions, const CoverLabel* label,
                           Prediction* out) {
  // cb_explore_adf_cover.cc predict_or_learn_impl. Regressors (interleaved): 0 the first
  // policy (cb_adf's, learned with the cb_type), 1 the scorer of dr estimates (mtr, dr), and
  // i + 1 the policy i of 1..N-1, each learned on its cost estimates plus a penalty on the
  // actions the policies before it already cover.
  const size_t k = actions.size();
  std::vector<SparseVector> terms(k);
  const auto at = [&](uint32_t model) {
    for (size_t a = 0; a < k; ++a) ModelTerms(actions[a], model, &terms[a]);
    return std::span<const SparseVector>(terms);
  };
  std::vector<float> estimates(k, 0.f), base_labels(k, 0.f), costs(k, 0.f);
  uint64_t events = event_sums_[0], offered_sum = action_sums_[0];
  bool finite = true;
  if (label != nullptr) {
    regressor_.BeginRound();
    const size_t chosen = label->chosen;
    const float cost = label->cost, p = label->probability;
    // The cover's own estimates (VW passes no clip_p here): dr's for mtr (learning the
    // scorer, "mtr is only used for the first policy") and dr (reading it), ips's for ips.
    if (o_.cb_type == CbType::kIps) {
      estimates[chosen] = cost / p;
    } else {
      finite = DrEstimates(at(1), chosen, cost, p, 0.f, o_.cb_type == CbType::kMtr, 1,
                           estimates.data());
    }
    // The first policy: cb_adf's learn with its cb_type (and --clip_p), its prediction first.
    if (finite) {
      switch (o_.cb_type) {
        case CbType::kMtr: {
          regressor_.PredictAll(at(0), costs.data());
          events += 1;
          offered_sum += k;
          const float weight = 1.f / std::max(p, o_.clip_p) *
                               (static_cast<float>(events) / static_cast<float>(offered_sum));
          finite = regressor_.LearnStep({&terms[chosen], weight, 0}, cost);
          break;
        }
        case CbType::kDr:
          finite = DrEstimates(at(1), chosen, cost, p, o_.clip_p, true, 1, base_labels.data());
          if (finite) {
            regressor_.PredictAll(at(0), costs.data());
            finite = RegressEach(terms, base_labels.data(), 0);
          }
          break;
        default:  // ips
          regressor_.PredictAll(at(0), costs.data());
          base_labels[chosen] = cost / std::max(p, o_.clip_p);
          finite = RegressEach(terms, base_labels.data(), 0);
          break;
      }
    }
  } else {
    regressor_.PredictAll(at(0), costs.data());
  }
  std::vector<std::pair<float, uint32_t>> preds(k);
  const auto rank = [&] {
    for (size_t a = 0; a < k; ++a) preds[a] = {costs[a], static_cast<uint32_t>(a)};
    std::sort(preds.begin(), preds.end());
    size_t tied = 1;
    while (tied < k && SameRelative(preds[tied].first, preds[0].first)) ++tied;
    return tied;
  };
  out->costs = costs;
  size_t tied = rank();
  out->best = static_cast<int>(preds[0].second);
  const float additive = 1.f / static_cast<float>(o_.cover_size);
  const uint32_t num_actions = static_cast<uint32_t>(k);
  const float min_prob =
      o_.epsilon_decay
          ? std::min(o_.epsilon / static_cast<float>(num_actions),
                     o_.epsilon / static_cast<float>(std::sqrt(cover_rounds_ * num_actions)))
          : o_.epsilon / static_cast<float>(num_actions);
  std::vector<std::pair<float, uint32_t>> probs(k);
  for (size_t a = 0; a < k; ++a) probs[a] = {0.f, static_cast<uint32_t>(a)};
  if (!o_.first_only) {
    for (size_t j = 0; j < tied; ++j)
      probs[preds[j].second].first += additive / static_cast<float>(tied);
  } else {
    probs[preds[0].second].first += additive;
  }
  float norm = min_prob * static_cast<float>(num_actions) + (additive - min_prob);
  std::vector<float> pseudo(k);
  for (uint32_t i = 1; i < o_.cover_size && finite; ++i) {
    const auto x = at(i + 1);
    regressor_.PredictAll(x, costs.data());
    if (label != nullptr) {
      for (size_t j = 0; j < k; ++j)
        pseudo[j] = estimates[j] - o_.psi * min_prob / (std::max(probs[j].first, min_prob) / norm);
      finite = RegressEach(x, pseudo.data(), i + 1);
    }
    tied = rank();
    const size_t shared = o_.first_only ? 1 : tied;
    const float add = o_.first_only ? additive : additive / static_cast<float>(tied);
    for (size_t j = 0; j < shared; ++j) {
      float& prob = probs[preds[j].second].first;
      if (prob < min_prob)
        norm += std::max(0.f, add - (min_prob - prob));
      else
        norm += add;
      prob += add;
    }
  }
  EnforceMinimumProbability(min_prob * static_cast<float>(num_actions), probs, !o_.nounif);
  out->pmf.assign(k, 0.f);
  for (const auto& [prob, a] : probs) out->pmf[a] = prob;
  if (label == nullptr) return true;
  regressor_.EndRound(finite);
  if (!finite) return false;
  event_sums_[0] = events;
  action_sums_[0] = offered_sum;
  ++cover_rounds_;
  ++model_version_;
  return true;
}

}  // namespace bandit::vw
