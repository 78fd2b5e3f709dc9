// CbLearner's state: saved into and restored from the service's snapshots (the weights learning
// moved, the counters), loaded from a VW model file, and its size.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/state_io.h"
#include "core/validate.h"
#include "core/vw/cb_learner.h"
#include "core/vw/cb_learner_internal.h"

namespace bandit::vw {
namespace {

using cb_internal::kMaxFloatValue;

// The counters beside the regressor (Counters): two MTR counts per regressor, and three more.
int64_t CounterBytes(const VwOptions& o) {
  return static_cast<int64_t>(sizeof(uint64_t)) * (4 + 2 * static_cast<int64_t>(o.bag_size));
}

}  // namespace

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
