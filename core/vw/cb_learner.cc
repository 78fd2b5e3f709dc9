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
#include "core/state_io.h"
#include "core/validate.h"

namespace bandit::vw {
namespace {

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

// The counters beside the regressor (Counters): two MTR counts per regressor, and three more.
int64_t CounterBytes(const VwOptions& o) {
  return static_cast<int64_t>(sizeof(uint64_t)) * (4 + 2 * static_cast<int64_t>(o.bag_size));
}

// bs.h weight_gen: a Poisson(1) draw from VW's merand48 (common/random_details.h), by its
// cumulative probabilities.
uint32_t PoissonWeight(uint64_t& state) {
  state = 0xeece66d5deece66dULL * state + 2147483647;
  uint32_t bits = static_cast<uint32_t>((state >> 25) & 0x7FFFFF) | (127u << 23);
  float u;
  std::memcpy(&u, &bits, sizeof(u));
  u -= 1;
  static constexpr double kCumulative[] = {
      0.3678794411714423215955,  0.735758882342884643191,   0.919698602928605803989,
      0.9810118431238461909214,  0.9963401531726562876545,  0.9994058151824183070012,
      0.9999167588507119768923,  0.9999897508033253583053,  0.9999988747974020309819,
      0.9999998885745216612793,  0.9999999899522336243091,  0.9999999991683892573118,
      0.9999999999364022267287,  0.999999999995480147453,   0.9999999999996999989333,
      0.9999999999999813223654,  0.9999999999999989050799,  0.9999999999999999393572,
      0.999999999999999996817,   0.9999999999999999998412};
  for (uint32_t k = 0; k < std::size(kCumulative); ++k)
    if (u <= kCumulative[k]) return k;
  return 20;
}

// The largest feature value VW holds (a float).
constexpr double kMaxFloatValue = FLT_MAX;

absl::Status CheckActionVector(absl::string_view field, const SparseVector& x, int64_t dim) {
  if (auto s = CheckSparse(field, x, dim); !s.ok()) return s;
  for (size_t k = 0; k < x.size(); ++k)
    if (std::fabs(x.value[k]) > kMaxFloatValue)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".value[", k, "] is ", x.value[k],
                       ", expected a finite float (VW keeps feature values as floats)"));
  return absl::OkStatus();
}

// Whether CheckActionVector passes, in one branch-free pass (what a Select pays per term); the
// message is built only when it fails.
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
    case Explorer::kBag:  // PredictBag
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

uint32_t CbLearner::LearnCount(uint32_t m, uint64_t& random_state) const {
  // cb_explore_adf_bag.cc get_bag_learner_update_count: --greedify's first once, each other
  // regressor a Poisson(1) draw; without --bag the one regressor once.
  if (o_.explorer != Explorer::kBag || (o_.greedify && m == 0)) return 1;
  return PoissonWeight(random_state);
}

bool CbLearner::Learn(const SparseVector& chosen, int chosen_index, int num_actions, float cost,
                      float probability) {
  float p = probability;
  // cb_explore_adf_squarecb.cc learn: probability 1 (no importance weighting) on every action
  // but the last offered.
  if (o_.explorer == Explorer::kSquareCb && chosen_index != num_actions - 1) p = 1.f;
  const float clipped = std::max(p, o_.clip_p);
  // Each regressor's learns (--bag: as many as its bootstrap draw, cb_explore_adf_bag.cc learn),
  // each counted first in its MTR counts (gen_cs_example_mtr), then weighted by them
  // (learn_mtr). Inline storage: without --bag a learn allocates nothing.
  absl::InlinedVector<uint64_t, 1> event_sums(event_sums_.begin(), event_sums_.end());
  absl::InlinedVector<uint64_t, 1> action_sums(action_sums_.begin(), action_sums_.end());
  uint64_t random_state = bag_random_state_;
  std::vector<SparseVector> terms(bag_shift_ > 0 ? o_.bag_size : 0);
  absl::InlinedVector<Regressor::Step, 1> steps;
  for (uint32_t m = 0; m < o_.bag_size; ++m) {
    const uint32_t count = LearnCount(m, random_state);
    if (count == 0) continue;
    const SparseVector* x = &chosen;
    if (bag_shift_ > 0) {
      ModelTerms(chosen, Model(m), &terms[m]);
      x = &terms[m];
    }
    for (uint32_t j = 0; j < count; ++j) {
      event_sums[m] += 1;
      action_sums[m] += static_cast<uint64_t>(num_actions);
      const float weight = 1.f * (1.f / clipped * (static_cast<float>(event_sums[m]) /
                                                   static_cast<float>(action_sums[m])));
      steps.push_back({x, weight, Model(m)});
    }
  }
  if (!regressor_.LearnRound(std::span<const Regressor::Step>(steps.data(), steps.size()), cost))
    return false;
  ++model_version_;
  event_sums_.assign(event_sums.begin(), event_sums.end());
  action_sums_.assign(action_sums.begin(), action_sums.end());
  bag_random_state_ = random_state;
  if (o_.explorer == Explorer::kSquareCb) ++squarecb_rounds_;
  if (o_.explorer == Explorer::kFirst && first_remaining_ > 0) --first_remaining_;
  return true;
}

bool CbLearner::DrEstimates(std::span<const SparseVector> scorer_terms, size_t chosen, float cost,
                            float probability, float clip_p, bool learn_scorer, uint32_t scorer,
                            float* labels) {
  // gen_cs_example_dr: the scorer's prediction of each action (cb_algs.h get_cost_pred), the
  // chosen one's corrected by (cost - prediction) / p.
  for (size_t a = 0; a < scorer_terms.size(); ++a) {
    float estimate = 0.f;
    if (a == chosen && learn_scorer) {
      if (!regressor_.LearnStep({&scorer_terms[a], 1.f / probability, scorer}, cost, &estimate))
        return false;
    } else {
      estimate = regressor_.PredictClamped(scorer_terms[a]);
    }
    if (a == chosen) estimate += (cost - estimate) / std::max(probability, clip_p);
    labels[a] = estimate;
  }
  return true;
}

bool CbLearner::RegressEach(std::span<const SparseVector> terms, const float* labels,
                            uint32_t model) {
  // csoaa_ldf do_actual_learning_oaa: each action regresses its label, in order, weight 1.
  for (size_t a = 0; a < terms.size(); ++a)
    if (!regressor_.LearnStep({&terms[a], 1.f, model}, labels[a])) return false;
  return true;
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

bool CbLearner::LearnOffered(std::span<const SparseVector> offered, int chosen_index, float cost,
                             float probability) {
  if (o_.explorer == Explorer::kCover) {
    const CoverLabel label{static_cast<size_t>(chosen_index), cost, probability};
    Prediction ignored;
    return CoverRound(offered, &label, &ignored);
  }
  if (o_.cb_type != CbType::kMtr)
    return LearnEstimates(offered, chosen_index, cost, probability);
  return Learn(offered[chosen_index], chosen_index, static_cast<int>(offered.size()), cost,
               probability);
}

bool CbLearner::LearnEstimates(std::span<const SparseVector> offered, int chosen_index,
                               float cost, float probability) {
  const size_t k = offered.size();
  const size_t chosen = static_cast<size_t>(chosen_index);
  const float clipped = std::max(probability, o_.clip_p);
  std::vector<SparseVector> learner_terms(bag_shift_ > 0 ? k : 0), scorer_terms;
  if (o_.cb_type == CbType::kDr) scorer_terms.resize(k);
  std::vector<float> labels(k, 0.f);
  uint64_t random_state = bag_random_state_;
  bool finite = true;
  regressor_.BeginRound();
  // cb_explore_adf_bag.cc learn: each regressor learns the whole round as often as its
  // bootstrap drew it.
  for (uint32_t m = 0; m < o_.bag_size && finite; ++m) {
    const uint32_t count = LearnCount(m, random_state);
    if (count == 0) continue;
    for (size_t a = 0; bag_shift_ > 0 && a < k; ++a) {
      ModelTerms(offered[a], Model(m), &learner_terms[a]);
      if (o_.cb_type == CbType::kDr) ModelTerms(offered[a], Model(m, 1), &scorer_terms[a]);
    }
    for (uint32_t j = 0; j < count && finite; ++j) {
      if (o_.cb_type == CbType::kDr) {
        finite = DrEstimates(scorer_terms, chosen, cost, probability, o_.clip_p,
                             /*learn_scorer=*/true, Model(m, 1), labels.data());
      } else {
        // gen_cs_example_ips, gen_cs_example_dm (multiline)
        std::fill(labels.begin(), labels.end(), 0.f);
        labels[chosen] = o_.cb_type == CbType::kIps ? cost / clipped : cost;
      }
      if (finite)
        finite = RegressEach(bag_shift_ > 0 ? std::span<const SparseVector>(learner_terms) : offered,
                             labels.data(), Model(m));
    }
  }
  regressor_.EndRound(finite);
  if (!finite) return false;
  ++model_version_;
  bag_random_state_ = random_state;
  if (o_.explorer == Explorer::kFirst && first_remaining_ > 0) --first_remaining_;
  return true;
}

namespace {

// The offered actions a Select's memo carries after its first three numbers: each one's term
// count, indices and values. INVALID_ARGUMENT for a memo not of that shape, an index at or past
// `dimension` or a value that is not a finite float.
absl::Status OfferedFromMemo(const Vector& memo, int num_actions, int dimension,
                             std::vector<SparseVector>* out) {
  const auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memo is not a vw decision's: ", what,
        " (expected each offered action's term count, indices and values after the first three)"));
  };
  out->assign(static_cast<size_t>(num_actions), SparseVector());
  int64_t at = 3;
  for (SparseVector& a : *out) {
    if (at >= memo.size()) return bad("it ends before its last action");
    const double count = memo[at++];
    if (!(count >= 0 && count == std::floor(count) &&
          count <= static_cast<double>(memo.size() - at) / 2))
      return bad(absl::StrCat("a term count is ", count));
    const int64_t n = static_cast<int64_t>(count);
    a.index.resize(static_cast<size_t>(n));
    a.value.resize(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const double i = memo[at + t];
      if (!(i >= 0 && i < dimension && i == std::floor(i)))
        return bad(absl::StrCat("an index is ", i, ", expected below ", dimension));
      a.index[static_cast<size_t>(t)] = static_cast<uint32_t>(i);
      const double v = memo[at + n + t];
      if (!(std::fabs(v) <= kMaxFloatValue))
        return bad(absl::StrCat("a value is ", v, ", expected a finite float"));
      a.value[static_cast<size_t>(t)] = v;
    }
    at += 2 * n;
  }
  if (at != memo.size()) return bad("numbers follow its last action");
  return absl::OkStatus();
}

}  // namespace

absl::Status CbLearner::Update(const Observation& obs) {
  const int d = dimension();
  SparseVector dense;
  const SparseVector* x = nullptr;
  if (obs.sparse_features) {
    if (!ActionVectorValid(*obs.sparse_features, d))
      return CheckActionVector("features", *obs.sparse_features, d);
    x = &*obs.sparse_features;
  } else {
    if (auto s = CheckVector("features", obs.features, d); !s.ok()) return s;
    DenseToTerms(obs.features, &dense);
    if (auto s = CheckActionVector("features", dense, d); !s.ok()) return s;
    x = &dense;
  }
  if (auto s = CheckFinite("reward", obs.reward); !s.ok()) return s;
  if (std::fabs(obs.reward) > kMaxFloatValue)
    return absl::InvalidArgumentError(
        absl::StrCat("reward is ", obs.reward, ", expected a finite float (VW's cost is a float)"));
  if (o_.ccb && obs.memo.size() == 0)
    return absl::InvalidArgumentError(
        "a --ccb_explore_adf learner learns a slot of its own multi-slot decision, expected an "
        "update of a decision it made (logged data without its slots is not taken)");
  // A logged observation (no Select of this policy) is learned as chosen for sure among one, or
  // among the actions it was offered with where the service recorded them.
  float probability = 1.f;
  int num_actions = 1, chosen_index = 0;
  if (obs.memo.size() != 0) {
    if ((obs.memo.size() != 3) != MemoHoldsCandidates() || !(obs.memo[0] > 0 && obs.memo[0] <= 1) || !(obs.memo[1] >= 1) ||
        !(obs.memo[2] >= 0 && obs.memo[2] < obs.memo[1]) || obs.memo[1] > 1e9)
      return absl::InvalidArgumentError(
          "memo is not a vw decision's (expected propensity in (0, 1], the number of actions "
          "and the chosen position)");
    probability = static_cast<float>(obs.memo[0]);
    num_actions = static_cast<int>(obs.memo[1]);
    chosen_index = static_cast<int>(obs.memo[2]);
  } else if (obs.offered > 0) {
    // Logged data of a decision among `offered` actions (an apprentice's baseline, a decision
    // of the policy served before): VW's example has them all, and MTR counts them.
    num_actions = obs.offered;
  }
  if (obs.memo.size() == 0 && obs.logged_propensity > 0 && obs.logged_propensity <= 1)
    probability = static_cast<float>(obs.logged_propensity);
  // --squarecb learns at the propensity only when the chosen action was the last offered.
  if (obs.memo.size() == 0 && obs.logged_position >= 0 && obs.logged_position < num_actions)
    chosen_index = obs.logged_position;
  bool learned = false;
  if (!MemoHoldsCandidates()) {
    learned = Learn(*x, chosen_index, num_actions, -static_cast<float>(obs.reward), probability);
  } else {
    // Every action offered, from the memo (logged data: the chosen one alone, a round of one).
    std::vector<SparseVector> offered;
    if (obs.memo.size() == 0) {
      offered.push_back(*x);
      chosen_index = 0;
    } else if (auto s = OfferedFromMemo(obs.memo, num_actions, d, &offered); !s.ok()) {
      return s;
    }
    learned = LearnOffered(offered, chosen_index, -static_cast<float>(obs.reward), probability);
  }
  if (!learned)
    return absl::InvalidArgumentError(absl::StrCat(
        "the update with reward ", obs.reward,
        " and these feature values would overflow VW's "
        "float weights (nothing was learned); expected smaller feature values or rewards"));
  return absl::OkStatus();
}

void CbLearner::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  // The floats of the weight array that learning moved (a float is exact in a double), by
  // position.
  const auto& weights = regressor_.weights();
  int64_t moved = 0;
  for (size_t i = 0; i < weights.size(); ++i) moved += weights[i] != regressor_.InitialValue(i);
  Vector at(moved), value(moved);
  int64_t j = 0;
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i] != regressor_.InitialValue(i)) {
      at[j] = static_cast<double>(i);
      value[j++] = weights[i];
    }
  w.Put("weight_position", at);
  w.Put("weight_value", value);
  const auto& s = regressor_.scalars();
  w.PutScalar("normalized_sum_norm_x", s.normalized_sum_norm_x);
  w.PutScalar("total_weight", s.total_weight);
  w.PutScalar("t", s.t);
  w.PutScalar("min_label", s.min_label);
  w.PutScalar("max_label", s.max_label);
  w.PutScalar("gravity", s.gravity);
  w.PutScalar("contraction", s.contraction);
  w.PutInt("event_sum", static_cast<int64_t>(event_sums_[0]));
  w.PutInt("action_sum", static_cast<int64_t>(action_sums_[0]));
  w.PutInt("squarecb_rounds", static_cast<int64_t>(squarecb_rounds_));
  w.PutInt("first_remaining", static_cast<int64_t>(first_remaining_));
  if (o_.explorer == Explorer::kCover) w.PutInt("cover_rounds", static_cast<int64_t>(cover_rounds_));
  if (o_.explorer == Explorer::kBag) {
    // The other regressors' counts (exact in a double below 2^53) and the bootstrap's state.
    const auto rest = [](const std::vector<uint64_t>& v) {
      Vector out(static_cast<int64_t>(v.size()) - 1);
      for (size_t i = 1; i < v.size(); ++i)
        out[static_cast<int64_t>(i) - 1] = static_cast<double>(v[i]);
      return out;
    };
    w.Put("bag_event_sums", rest(event_sums_));
    w.Put("bag_action_sums", rest(action_sums_));
    w.PutInt("bag_random_state", static_cast<int64_t>(bag_random_state_));
  }
  if (o_.models > 1) {
    // The other regressors' normalizer sums (--bag's, --cb_type dr's scorers).
    const auto& sums = regressor_.other_sums();
    Vector norm(static_cast<int64_t>(sums.size())), total(static_cast<int64_t>(sums.size()));
    for (size_t i = 0; i < sums.size(); ++i) {
      norm[static_cast<int64_t>(i)] = sums[i].normalized_sum_norm_x;
      total[static_cast<int64_t>(i)] = sums[i].total_weight;
    }
    w.Put("bag_normalized_sum_norm_x", norm);
    w.Put("bag_total_weight", total);
  }
  if (o_.ccb) w.PutInt("slot_index_seen", slot_index_seen_ ? 1 : 0);
  w.PutRng(rng_);
}

absl::Status CbLearner::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  Vector at, value;
  if (auto s = r.Get("weight_position", &at); !s.ok()) return s;
  if (auto s = r.Get("weight_value", &value, at.size()); !s.ok()) return s;
  std::vector<float> weights(regressor_.weights().size());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = regressor_.InitialValue(i);
  for (int64_t j = 0; j < at.size(); ++j) {
    const double i = at[j];
    if (!(i >= 0 && i < static_cast<double>(weights.size()) && i == std::floor(i)) ||
        !(std::fabs(value[j]) <= kMaxFloatValue))
      return absl::InvalidArgumentError(absl::StrCat(
          "vw state weight_position[", j, "] = ", i, " with value ", value[j],
          ", expected an integer position below ", weights.size(), " and a finite float"));
    weights[static_cast<size_t>(i)] = static_cast<float>(value[j]);
  }
  Regressor::Scalars s;
  double min_label = 0, max_label = 0;
  int64_t event_sum = 0, action_sum = 0, squarecb_rounds = 0, first_remaining = 0;
  for (auto [field, out] : {std::pair{"normalized_sum_norm_x", &s.normalized_sum_norm_x},
                            {"total_weight", &s.total_weight},
                            {"t", &s.t},
                            {"min_label", &min_label},
                            {"max_label", &max_label},
                            {"gravity", &s.gravity},
                            {"contraction", &s.contraction}})
    if (auto st = r.GetScalar(field, out); !st.ok()) return st;
  for (auto [field, out] : {std::pair{"event_sum", &event_sum},
                            {"action_sum", &action_sum},
                            {"squarecb_rounds", &squarecb_rounds},
                            {"first_remaining", &first_remaining}})
    if (auto st = r.GetInt(field, out); !st.ok()) return st;
  if (event_sum < 0 || action_sum < 0 || squarecb_rounds < 0 || first_remaining < 0)
    return absl::InvalidArgumentError("vw state counts are negative, expected counts >= 0");
  std::vector<Regressor::Sums> other_sums;
  Counters counters;
  counters.event_sum = static_cast<uint64_t>(event_sum);
  counters.action_sum = static_cast<uint64_t>(action_sum);
  counters.squarecb_rounds = static_cast<uint64_t>(squarecb_rounds);
  counters.first_remaining = static_cast<uint64_t>(first_remaining);
  if (o_.explorer == Explorer::kBag) {
    const int64_t others = static_cast<int64_t>(o_.bag_size) - 1;
    Vector events, actions;
    if (auto st = r.Get("bag_event_sums", &events, others); !st.ok()) return st;
    if (auto st = r.Get("bag_action_sums", &actions, others); !st.ok()) return st;
    for (int64_t i = 0; i < others; ++i) {
      if (!(events[i] >= 0 && events[i] <= 0x1p53 && events[i] == std::floor(events[i]) &&
            actions[i] >= 0 && actions[i] <= 0x1p53 && actions[i] == std::floor(actions[i])))
        return absl::InvalidArgumentError(absl::StrCat(
            "vw state bag counts [", i, "] are ", events[i], " and ", actions[i],
            ", expected whole counts in [0, 2^53]"));
      counters.bag_event_sums.push_back(static_cast<uint64_t>(events[i]));
      counters.bag_action_sums.push_back(static_cast<uint64_t>(actions[i]));
    }
    int64_t state = 0;
    if (auto st = r.GetInt("bag_random_state", &state); !st.ok()) return st;
    counters.random_state = static_cast<uint64_t>(state);
  }
  if (o_.models > 1) {
    const int64_t others = static_cast<int64_t>(o_.models) - 1;
    Vector norm, total;
    if (auto st = r.Get("bag_normalized_sum_norm_x", &norm, others); !st.ok()) return st;
    if (auto st = r.Get("bag_total_weight", &total, others); !st.ok()) return st;
    for (int64_t i = 0; i < others; ++i) other_sums.push_back({norm[i], total[i]});
  }
  if (o_.explorer == Explorer::kCover) {
    int64_t rounds = 0;
    if (auto st = r.GetInt("cover_rounds", &rounds); !st.ok()) return st;
    if (rounds < 0)
      return absl::InvalidArgumentError("vw state cover_rounds is negative, expected >= 0");
    counters.cover_rounds = static_cast<uint64_t>(rounds);
  }
  if (o_.ccb) {
    int64_t seen = 0;
    if (auto st = r.GetInt("slot_index_seen", &seen); !st.ok()) return st;
    if (seen != 0 && seen != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("vw state slot_index_seen is ", seen, ", expected 0 or 1"));
    counters.slot_index_seen = seen == 1;
  }
  Rng rng;
  if (auto st = r.GetRng(&rng); !st.ok()) return st;
  s.min_label = static_cast<float>(min_label);
  s.max_label = static_cast<float>(max_label);
  if (auto st = Load(std::move(weights), s, counters, std::move(other_sums)); !st.ok()) return st;
  rng_ = rng;
  return absl::OkStatus();
}

absl::Status CbLearner::Load(std::vector<float> weights, const Regressor::Scalars& scalars,
                             const Counters& counters, std::vector<Regressor::Sums> other_sums) {
  // The regressors' MTR counts: the first's, then the others' (none given: 0, as VW's model
  // file leaves them).
  std::vector<uint64_t> events(o_.bag_size, 0), actions(o_.bag_size, 0);
  events[0] = counters.event_sum;
  actions[0] = counters.action_sum;
  if (!counters.bag_event_sums.empty() || !counters.bag_action_sums.empty()) {
    if (counters.bag_event_sums.size() != o_.bag_size - 1 ||
        counters.bag_action_sums.size() != o_.bag_size - 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "vw counts are for ", counters.bag_event_sums.size() + 1, " and ",
          counters.bag_action_sums.size() + 1, " regressors, expected --bag ", o_.bag_size));
    std::copy(counters.bag_event_sums.begin(), counters.bag_event_sums.end(), events.begin() + 1);
    std::copy(counters.bag_action_sums.begin(), counters.bag_action_sums.end(),
              actions.begin() + 1);
  }
  for (size_t m = 0; m < events.size(); ++m)
    if (actions[m] < events[m])
      return absl::InvalidArgumentError(
          absl::StrCat("vw counts are inconsistent: regressor ", m, " has event_sum ", events[m],
                       " > action_sum ", actions[m], ", expected event_sum <= action_sum"));
  if (counters.first_remaining > o_.first_rounds)
    return absl::InvalidArgumentError(
        "vw counts are inconsistent, expected first_remaining <= --first");
  if (auto s = regressor_.Restore(std::move(weights), scalars, std::move(other_sums)); !s.ok())
    return s;
  event_sums_ = std::move(events);
  action_sums_ = std::move(actions);
  bag_random_state_ = counters.random_state;
  slot_index_seen_ = o_.ccb && counters.slot_index_seen;
  squarecb_rounds_ = counters.squarecb_rounds;
  first_remaining_ = counters.first_remaining;
  cover_rounds_ = o_.explorer == Explorer::kCover ? counters.cover_rounds : 0;
  ++model_version_;
  return absl::OkStatus();
}

int64_t CbLearner::StateBytes() const { return regressor_.StateBytes() + CounterBytes(o_); }

std::vector<std::pair<std::string, double>> CbLearner::Summary() const {
  // The rounds learned: t less where it started (--bag's first regressor may skip rounds).
  const double rounds = regressor_.scalars().t - Regressor::InitialT(o_.regressor);
  return {{"rounds_learned", rounds},
          {"actions_per_round", event_sums_[0] == 0 ? 0.0
                                                    : static_cast<double>(action_sums_[0]) /
                                                          static_cast<double>(event_sums_[0])},
          {"total_weight", regressor_.scalars().total_weight}};
}

int64_t Footprint(const bandit::v1::PolicyConfig& config) {
  auto o = ParseVwArguments(config.vw().arguments());
  if (!o.ok()) return 0;
  return Regressor::Bytes(o->regressor, o->weight_bits, static_cast<int>(o->models)) +
         CounterBytes(*o);
}

}  // namespace bandit::vw
