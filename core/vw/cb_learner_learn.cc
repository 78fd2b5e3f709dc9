// CbLearner's learns (cb_learner.h has the round as VW computes it): the chosen action's MTR
// regression, the ips, dm and dr estimates over every offered action, --bag's bootstrap, and
// Update, which reads an observation into them.
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/sparse.h"
#include "core/validate.h"
#include "core/vw/cb_learner.h"
#include "core/vw/cb_learner_internal.h"

namespace bandit::vw {
namespace {

using cb_internal::ActionVectorValid;
using cb_internal::CheckActionVector;
using cb_internal::DenseToTerms;
using cb_internal::kMaxFloatValue;

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

}  // namespace bandit::vw
