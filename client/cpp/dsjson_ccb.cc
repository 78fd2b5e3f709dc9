// DSJSON's conditional contextual bandit lines (VW's CCB form, as FormatSlots writes it) read
// back into one decision per slot: ParseDsjsonDecisions' reader for multi-slot lines.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/dsjson_reading.h"
#include "client/cpp/json_text.h"

namespace bandit::client::dsjson {
namespace {

namespace v1 = bandit::v1;

// An index into "_multi", for the field `field` of a CCB line.
absl::StatusOr<int> MultiIndex(const Json& v, int n, const std::string& field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= n)
    return Bad(field, absl::StrCat("expected an index into c._multi, 0..", n - 1));
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

absl::StatusOr<std::vector<v1::LoggedDecision>> ParseCcb(const Json& j, std::string_view line) {
  const std::string_view c_text = json_text::Value(line, "c").value_or("");
  const std::vector<std::string_view> action_texts =
      json_text::Elements(json_text::Value(c_text, "_multi").value_or(""));
  const std::vector<std::string_view> slot_texts =
      json_text::Elements(json_text::Value(c_text, "_slots").value_or(""));
  v1::LoggedDecision common;
  if (auto s = ReadEnvelope(j, &common); !s.ok()) return s;
  const Json no_slots = Json::array();
  const Json& c = j["c"];
  const Json& multi = c.contains("_multi") ? c["_multi"] : no_slots;
  const Json& slots = c["_slots"];
  if (!multi.is_array() || multi.empty())
    return Bad("c._multi", "expected a non-empty array of actions");
  if (!slots.is_array() || slots.empty()) return Bad("c._slots", "expected a non-empty array");
  const Json& outcomes = j["_outcomes"];
  if (!outcomes.is_array() || outcomes.size() != slots.size())
    return Bad("_outcomes", absl::StrCat("expected ", slots.size(), " outcomes, one per slot"));
  const int n = static_cast<int>(multi.size());
  for (int i = 0; i < n; ++i)
    if (!multi[i].is_object() || !multi[i].contains("_tag") || !multi[i]["_tag"].is_string())
      return Bad(absl::StrCat("c._multi[", i, "]._tag"), "expected the action id as a string");
  common.set_named_context(MembersBut(c_text, {"_multi", "_slots"}));
  Json ours = Json::object();
  if (j.contains("_bandit") && j["_bandit"].is_object()) ours = j["_bandit"];
  if (ours.contains("candidate_dim") && ours["candidate_dim"].is_number_integer())
    common.set_candidate_dim(static_cast<int32_t>(ours["candidate_dim"].get<int64_t>()));
  const Json& our_slots =
      ours.contains("slots") && ours["slots"].is_array() ? ours["slots"] : no_slots;
  const Json& baselines = j.contains("_ba") ? j["_ba"] : no_slots;
  if (!baselines.is_array() || (!baselines.empty() && baselines.size() != slots.size()))
    return Bad("_ba", absl::StrCat("expected ", slots.size(), " baseline actions, one per slot"));

  std::vector<v1::LoggedDecision> out;
  std::vector<bool> taken(n, false);
  for (size_t k = 0; k < slots.size(); ++k) {
    const std::string at = absl::StrCat("[", k, "]");
    const Json& slot = slots[k];
    const Json& outcome = outcomes[k];
    const Json& mine = k < our_slots.size() && our_slots[k].is_object() ? our_slots[k] : Json();
    if (!slot.is_object()) return Bad("c._slots" + at, "expected an object");
    if (!outcome.is_object()) return Bad("_outcomes" + at, "expected an object");
    v1::LoggedDecision d = common;
    d.set_slot_index(static_cast<int32_t>(k));
    if (!slot.contains("_id") || !slot["_id"].is_string() || slot["_id"].get<std::string>().empty())
      return Bad("c._slots" + at + "._id", "expected the slot's id as a non-empty string");
    d.set_slot_id(slot["_id"].get<std::string>());
    d.set_slot_features(k < slot_texts.size() ? MembersBut(slot_texts[k], {"_id", "_inc"}) : "");
    // The actions it was offered: "_inc", or (VW's default) every action no earlier slot took.
    std::vector<int> offered;
    if (slot.contains("_inc")) {
      if (!slot["_inc"].is_array() || slot["_inc"].empty())
        return Bad("c._slots" + at + "._inc", "expected a non-empty array of action indices");
      for (size_t i = 0; i < slot["_inc"].size(); ++i) {
        auto a = MultiIndex(slot["_inc"][i], n, absl::StrCat("c._slots", at, "._inc[", i, "]"));
        if (!a.ok()) return a.status();
        if (std::find(offered.begin(), offered.end(), *a) != offered.end())
          return Bad(absl::StrCat("c._slots", at, "._inc[", i, "]"), "repeats an action");
        offered.push_back(*a);
      }
    } else {
      for (int i = 0; i < n; ++i)
        if (!taken[i]) offered.push_back(i);
    }
    // Its choice first, then the rest of its ranking, with their probabilities: in "_outcomes"
    // when the slot is labeled, else in "_bandit".
    const bool labeled = outcome.contains("_a");
    const Json& a = labeled ? outcome["_a"] : mine.is_object() && mine.contains("a") ? mine["a"]
                                                                                     : no_slots;
    const std::string a_field = labeled ? "_outcomes" + at + "._a" : "_bandit.slots" + at + ".a";
    if (!a.is_array() || a.empty())
      return Bad(a_field, "expected the slot's actions, its choice first");
    std::vector<int> ranking;
    for (size_t i = 0; i < a.size(); ++i) {
      auto action = MultiIndex(a[i], n, absl::StrCat(a_field, "[", i, "]"));
      if (!action.ok()) return action.status();
      if (std::find(offered.begin(), offered.end(), *action) == offered.end())
        return Bad(absl::StrCat(a_field, "[", i, "]"), "is not among the actions the slot was offered");
      ranking.push_back(*action);
    }
    const int chosen = ranking[0];
    if (taken[chosen])
      return Bad(a_field + "[0]", "is an action an earlier slot took");
    taken[chosen] = true;
    const Json& p = labeled ? (outcome.contains("_p") ? outcome["_p"] : no_slots)
                            : (mine.is_object() && mine.contains("p") ? mine["p"] : no_slots);
    const std::string p_field = labeled ? "_outcomes" + at + "._p" : "_bandit.slots" + at + ".p";
    if (!p.is_array() || (labeled && p.empty()) || (!p.empty() && p.size() != a.size()))
      return Bad(p_field, absl::StrCat("expected ", a.size(), " probabilities, one per action"));
    std::vector<double> probability(offered.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      auto v = Probability(p[i], absl::StrCat(p_field, "[", i, "]"));
      if (!v.ok()) return v.status();
      probability[std::find(offered.begin(), offered.end(), ranking[i]) - offered.begin()] = *v;
    }
    if (p.size() == offered.size()) d.mutable_probabilities()->Assign(probability.begin(),
                                                                       probability.end());
    for (size_t i = 0; i < offered.size(); ++i) {
      auto* action = d.add_named_actions();
      action->set_id(multi[offered[i]]["_tag"].get<std::string>());
      if (offered[i] < static_cast<int>(action_texts.size()))
        action->set_features(MembersBut(action_texts[offered[i]], {"_tag"}));
      d.add_slot_actions(offered[i]);
    }
    d.set_num_actions(static_cast<int>(offered.size()));
    d.set_num_candidates(static_cast<int>(offered.size()));
    d.set_chosen_index(static_cast<int>(std::find(offered.begin(), offered.end(), chosen) -
                                        offered.begin()));
    d.set_chosen_arm_id(d.named_actions(d.chosen_index()).id());
    d.set_baseline_index(-1);
    if (!baselines.empty()) {
      auto b = MultiIndex(baselines[k], n, absl::StrCat("_ba[", k, "]"));
      if (!b.ok()) return b.status();
      d.set_baseline_index(*b);
    }
    if (labeled) {
      if (!outcome.contains("_label_cost") || !outcome["_label_cost"].is_number() ||
          !std::isfinite(outcome["_label_cost"].get<double>()))
        return Bad("_outcomes" + at + "._label_cost",
                   "expected a finite number (VW reads a slot with _a and no cost as cost FLT_MAX)");
      d.set_reward(-outcome["_label_cost"].get<double>());
      d.set_propensity(probability[d.chosen_index()]);
      d.set_outcome(v1::OUTCOME_REWARDED);
    }
    if (mine.is_object()) {
      if (mine.contains("event_seq") && mine["event_seq"].is_number_unsigned())
        d.set_event_seq(mine["event_seq"].get<uint64_t>());
      if (mine.contains("outcome") && mine["outcome"].is_string()) {
        v1::DecisionOutcome o;
        if (!v1::DecisionOutcome_Parse(mine["outcome"].get<std::string>(), &o))
          return Bad("_bandit.slots" + at + ".outcome", "expected a DecisionOutcome name");
        d.set_outcome(o);
      }
      if (mine.contains("reward") && mine["reward"].is_number())
        d.set_reward(mine["reward"].get<double>());
      if (mine.contains("propensity")) {
        auto v = Probability(mine["propensity"], "_bandit.slots" + at + ".propensity");
        if (!v.ok()) return v.status();
        d.set_propensity(*v);
      }
    }
    if (HasReward(d) && !labeled)
      return Bad("_outcomes" + at, "has no _a and _p, expected them for a slot with a reward");
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace bandit::client::dsjson
