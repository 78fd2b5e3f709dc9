#include "client/cpp/decision_log_format.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cpp/dsjson_reading.h"
#include "client/cpp/json_text.h"

namespace bandit::client {

namespace v1 = bandit::v1;

// Shared with the CCB reader (dsjson_ccb.cc).
namespace dsjson {

bool HasReward(const v1::LoggedDecision& d) {
  return d.outcome() == v1::OUTCOME_REWARDED || d.outcome() == v1::OUTCOME_EXPIRED_DEFAULT;
}

std::string MembersBut(std::string_view object, std::initializer_list<std::string_view> drop) {
  std::string out;
  for (const json_text::Member& m : json_text::Members(object)) {
    if (std::find(drop.begin(), drop.end(), m.key) != drop.end()) continue;
    absl::StrAppend(&out, out.empty() ? "{" : ",", json_text::MemberText(m));
  }
  return out.empty() ? out : out + "}";
}

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field, ": ", why));
}

absl::StatusOr<double> Probability(const Json& v, const std::string& field) {
  if (!v.is_number()) return Bad(field, "expected a number");
  const double p = v.get<double>();
  if (!std::isfinite(p) || p < 0.0 || p > 1.0)
    return Bad(field, absl::StrCat("is ", p, ", expected a probability in [0, 1]"));
  return p;
}

// What every DSJSON line has around its decision: EventId (required), Timestamp and the logging
// model in VWState.m ("<instance>/<policy>").
absl::Status ReadEnvelope(const Json& j, v1::LoggedDecision* d) {
  if (!j.contains("EventId") || !j["EventId"].is_string())
    return Bad("EventId", "expected a string");
  d->set_event_id(j["EventId"].get<std::string>());
  if (j.contains("Timestamp")) {
    if (!j["Timestamp"].is_string()) return Bad("Timestamp", "expected a string");
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, j["Timestamp"].get<std::string>(), &t, &err))
      return Bad("Timestamp", absl::StrCat("expected an RFC 3339 time: ", err));
    d->set_decided_at_ms(absl::ToUnixMillis(t));
  }
  if (j.contains("VWState") && j["VWState"].is_object() && j["VWState"].contains("m") &&
      j["VWState"]["m"].is_string()) {
    const std::string m = j["VWState"]["m"].get<std::string>();
    const size_t slash = m.rfind('/');
    d->set_policy(slash == std::string::npos ? m : m.substr(slash + 1));
  }
  return absl::OkStatus();
}

}  // namespace dsjson

namespace {

using dsjson::Bad;
using dsjson::HasReward;
using dsjson::Json;
using dsjson::Probability;
using dsjson::ReadEnvelope;

// Action order of "a": the chosen action first, then the others in index order (the Decision
// Service convention: "a" is the ranking, p follows it).
std::vector<int> ActionOrder(const v1::LoggedDecision& d) {
  std::vector<int> order;
  order.reserve(d.num_actions());
  if (d.chosen_index() >= 0 && d.chosen_index() < d.num_actions())
    order.push_back(d.chosen_index());
  for (int i = 0; i < d.num_actions(); ++i)
    if (i != d.chosen_index()) order.push_back(i);
  return order;
}

// The members of a named JSON document (an object, or a list of objects: their union) as
// `"key":value` texts in order, which is how VW reads them inside "c" or a "_multi" entry.
// Each member of a JSON document (an object, or a list of objects meaning their union) as
// `"key":value` text, in order, a key given twice included (json_text.h: the featurizer hashed
// every occurrence, as VW does, and VW reads every occurrence back).
std::vector<std::string> MemberTexts(const std::string& json) {
  std::vector<std::string> members;
  for (const json_text::Member& m : json_text::Members(json))
    members.push_back(json_text::MemberText(m));
  return members;
}

// A named decision's "c": the context's members, then "_multi" with each offered action's
// members and its id as "_tag" (VW's example tag; no feature). Written as text: a context given
// as a list of objects may repeat a key, which VW's parser (and ours) read in order.
std::string NamedDsjsonContext(const v1::LoggedDecision& d) {
  std::vector<std::string> members = MemberTexts(d.named_context());
  std::vector<std::string> actions;
  for (const auto& a : d.named_actions()) {
    std::vector<std::string> m = {"\"_tag\":" + Json(a.id()).dump()};
    for (auto& t : MemberTexts(a.features())) m.push_back(std::move(t));
    actions.push_back("{" + absl::StrJoin(m, ",") + "}");
  }
  members.push_back("\"_multi\":[" + absl::StrJoin(actions, ",") + "]");
  return "{" + absl::StrJoin(members, ",") + "}";
}

// Stands in for "c" in the JSON object until the named context's text replaces it.
constexpr char kNamedContextPlaceholder[] = "\x01named-context\x01";

std::string Dsjson(const v1::LoggedDecision& d, const std::string& instance) {
  Json j;
  const bool labeled = HasReward(d) && d.has_propensity();
  if (labeled) {
    // The label comes first: VW attaches it to the action _labelIndex while reading "c".
    j["_label_cost"] = -d.reward();
    j["_label_probability"] = d.propensity();
    j["_label_Action"] = d.chosen_index() + 1;
    j["_labelIndex"] = d.chosen_index();
    j["o"] =
        Json::array({Json{{"v", d.reward()}, {"EventId", d.event_id()}, {"ActionTaken", false}}});
  }
  j["Timestamp"] = DsjsonTimestamp(d.decided_at_ms());
  j["Version"] = "1";
  j["EventId"] = d.event_id();
  const std::vector<int> order = ActionOrder(d);
  Json a = Json::array();
  for (int i : order) a.push_back(i + 1);
  j["a"] = std::move(a);
  Json c = Json::object();
  Json multi = Json::array();
  const bool named = d.named_actions_size() > 0;
  if (named) {
    // Replaced by NamedDsjsonContext below.
  } else if (d.num_candidates() > 0) {
    for (int i = 0; i < d.num_candidates(); ++i) {
      Json x = Json::array();
      for (int k = 0; k < d.candidate_dim(); ++k)
        x.push_back(d.candidates(i * d.candidate_dim() + k));
      multi.push_back(Json{{"x", std::move(x)}});
    }
  } else if (d.arm_ids_size() > 0) {
    for (const auto& id : d.arm_ids()) multi.push_back(Json{{"arm", id}});
  } else {
    c["x"] = Json(std::vector<double>(d.x().begin(), d.x().end()));
    for (int i = 0; i < d.num_actions(); ++i)
      multi.push_back(Json{{"hypothesis", std::to_string(i)}});
  }
  c["_multi"] = std::move(multi);
  j["c"] = named ? Json(kNamedContextPlaceholder) : std::move(c);
  if (d.probabilities_size() == d.num_actions() && d.num_actions() > 0) {
    Json p = Json::array();
    for (int i : order) p.push_back(d.probabilities(i));
    j["p"] = std::move(p);
  }
  j["VWState"] = Json{{"m", absl::StrCat(instance, "/", d.policy())}};
  if (labeled) j["_original_label_cost"] = -d.reward();
  // Ours, ignored by VW (an unknown key starting with '_'): what the DS fields cannot say.
  Json ours{{"event_seq", d.event_seq()},
            {"outcome", v1::DecisionOutcome_Name(d.outcome())},
            {"chosen_arm_id", d.chosen_arm_id()}};
  if (HasReward(d)) ours["reward"] = d.reward();
  if (d.outcome_at_ms() != 0) ours["outcome_at_ms"] = d.outcome_at_ms();
  if (d.has_propensity() && !labeled) ours["propensity"] = d.propensity();
  if (named) ours["candidate_dim"] = d.candidate_dim();  // 2^bits, the hashed vectors' length
  if (!d.slot_id().empty()) {  // one slot of a multi-slot decision, a line of its own
    ours["slot_id"] = d.slot_id();
    ours["slot_index"] = d.slot_index();
  }
  j["_bandit"] = std::move(ours);
  std::string line = j.dump();
  if (named) {
    const std::string placeholder = Json(kNamedContextPlaceholder).dump();
    line.replace(line.find(placeholder), placeholder.size(), NamedDsjsonContext(d));
  }
  return line;
}

// 17 significant digits: reads back as the same double.
void AppendNumber(std::string* out, double v) { absl::StrAppend(out, absl::StrFormat("%.17g", v)); }
template <typename It>
std::string Numbers(It begin, It end) {
  return absl::StrJoin(begin, end, " ", AppendNumber);
}

std::string Csv(const v1::LoggedDecision& d, const std::string& instance) {
  auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::string context;
  if (d.named_actions_size() > 0) {
    // Named: the context and the offered actions' ids, as JSON.
    Json ids = Json::array();
    for (const auto& a : d.named_actions()) ids.push_back(a.id());
    context = Json{{"context", d.named_context()}, {"actions", std::move(ids)}}.dump();
  } else if (d.num_candidates() > 0) {
    std::vector<std::string> rows;
    for (int i = 0; i < d.num_candidates(); ++i)
      rows.push_back(Numbers(d.candidates().begin() + i * d.candidate_dim(),
                             d.candidates().begin() + (i + 1) * d.candidate_dim()));
    context = absl::StrJoin(rows, "|");
  } else if (d.arm_ids_size() > 0) {
    context = absl::StrJoin(d.arm_ids(), "|");
  } else {
    context = Numbers(d.x().begin(), d.x().end());
  }
  return absl::StrCat(cell(instance), ",", cell(d.event_id()), ",", d.event_seq(), ",",
                      d.decided_at_ms(), ",", cell(d.policy()), ",", d.num_actions(), ",",
                      d.chosen_index(), ",", cell(d.chosen_arm_id()), ",",
                      d.has_propensity() ? absl::StrFormat("%.17g", d.propensity()) : "", ",",
                      Numbers(d.probabilities().begin(), d.probabilities().end()), ",",
                      v1::DecisionOutcome_Name(d.outcome()), ",",
                      HasReward(d) ? absl::StrFormat("%.17g", d.reward()) : "", ",",
                      d.outcome_at_ms(), ",", cell(context));
}

absl::StatusOr<std::vector<double>> JsonNumbers(const Json& v, const std::string& field) {
  if (!v.is_array()) return Bad(field, "expected an array of numbers");
  std::vector<double> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number()) return Bad(absl::StrCat(field, "[", i, "]"), "expected a number");
    const double x = v[i].get<double>();
    if (!std::isfinite(x)) return Bad(absl::StrCat(field, "[", i, "]"), "expected a finite number");
    out.push_back(x);
  }
  return out;
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name) {
  if (name == "dsjson") return LogFormat::kDsjson;
  if (name == "jsonl") return LogFormat::kJsonl;
  if (name == "csv") return LogFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log format '", name, "', expected dsjson, jsonl or csv"));
}

std::string LogHeader(LogFormat format) {
  if (format != LogFormat::kCsv) return "";
  return "instance,event_id,event_seq,decided_at_ms,policy,num_actions,chosen_index,"
         "chosen_arm_id,propensity,probabilities,outcome,reward,outcome_at_ms,context";
}

std::string DsjsonTimestamp(int64_t ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

std::string FormatSlots(LogFormat format, std::span<const v1::LoggedDecision> slots,
                        const std::string& instance) {
  const bool ccb = format == LogFormat::kDsjson && !slots.empty() &&
                   !slots[0].slot_id().empty() && slots[0].named_actions_size() > 0;
  if (!ccb) {
    std::vector<std::string> lines;
    for (const auto& d : slots) lines.push_back(FormatDecision(format, d, instance));
    return absl::StrJoin(lines, "\n");
  }
  // The actions any slot was offered, by their position in the request: "_multi" in that order.
  std::map<int, const v1::LoggedAction*> offered;
  for (const auto& d : slots)
    for (int j = 0; j < d.slot_actions_size() && j < d.named_actions_size(); ++j)
      offered.emplace(d.slot_actions(j), &d.named_actions(j));
  std::map<int, int> multi_index;
  std::vector<std::string> actions;
  for (const auto& [position, action] : offered) {
    multi_index[position] = static_cast<int>(actions.size());
    std::vector<std::string> m = {"\"_tag\":" + Json(action->id()).dump()};
    for (auto& t : MemberTexts(action->features())) m.push_back(std::move(t));
    actions.push_back("{" + absl::StrJoin(m, ",") + "}");
  }
  std::vector<std::string> slot_texts, outcomes;
  Json baselines = Json::array();
  Json ours = Json::array();
  for (const auto& d : slots) {
    Json inc = Json::array();
    for (int position : d.slot_actions()) inc.push_back(multi_index[position]);
    std::vector<std::string> m = {"\"_id\":" + Json(d.slot_id()).dump(), "\"_inc\":" + inc.dump()};
    for (auto& t : MemberTexts(d.slot_features())) m.push_back(std::move(t));
    slot_texts.push_back("{" + absl::StrJoin(m, ",") + "}");
    Json outcome;
    outcome["_id"] = d.slot_id();
    if (HasReward(d)) outcome["_label_cost"] = -d.reward();
    Json a = Json::array(), p = Json::array();
    const bool probabilities = d.probabilities_size() == d.slot_actions_size();
    for (int i : ActionOrder(d)) {
      if (i >= d.slot_actions_size()) continue;
      a.push_back(multi_index[d.slot_actions(i)]);
      if (probabilities) p.push_back(d.probabilities(i));
    }
    // VW's parser makes a slot labeled exactly when its outcome has "_a" and "_p", with the cost
    // "_label_cost" or, without one, FLT_MAX: a slot without a reward must carry neither, so VW
    // reads it as unlabeled. Its choice and probabilities then go in "_bandit". A labeled slot
    // without a probability vector gives its choice and propensity alone (VW reads the first).
    const bool labeled = HasReward(d) && (probabilities || d.has_propensity());
    if (labeled && !probabilities && d.chosen_index() >= 0 &&
        d.chosen_index() < d.slot_actions_size()) {
      a = Json::array({multi_index[d.slot_actions(d.chosen_index())]});
      p = Json::array({d.propensity()});
    }
    Json mine{{"slot_id", d.slot_id()},
              {"event_seq", d.event_seq()},
              {"outcome", v1::DecisionOutcome_Name(d.outcome())}};
    if (labeled) {
      outcome["_a"] = std::move(a);
      outcome["_p"] = std::move(p);
    } else {
      outcome.erase("_label_cost");
      mine["a"] = std::move(a);
      if (probabilities) mine["p"] = std::move(p);
    }
    outcome["_o"] = Json::array();
    outcomes.push_back(outcome.dump());
    if (d.baseline_index() >= 0 && multi_index.count(d.baseline_index()))
      baselines.push_back(multi_index[d.baseline_index()]);
    if (HasReward(d)) mine["reward"] = d.reward();
    if (d.has_propensity()) mine["propensity"] = d.propensity();
    ours.push_back(std::move(mine));
  }
  std::vector<std::string> c = MemberTexts(slots[0].named_context());
  c.push_back("\"_multi\":[" + absl::StrJoin(actions, ",") + "]");
  c.push_back("\"_slots\":[" + absl::StrJoin(slot_texts, ",") + "]");
  std::string line = absl::StrCat(
      "{\"Timestamp\":", Json(DsjsonTimestamp(slots[0].decided_at_ms())).dump(),
      ",\"Version\":\"1\",\"EventId\":", Json(slots[0].event_id()).dump(), ",\"c\":{",
      absl::StrJoin(c, ","), "},\"_outcomes\":[", absl::StrJoin(outcomes, ","), "]");
  if (static_cast<size_t>(baselines.size()) == slots.size())
    absl::StrAppend(&line, ",\"_ba\":", baselines.dump());
  absl::StrAppend(&line, ",\"VWState\":",
                  Json{{"m", absl::StrCat(instance, "/", slots[0].policy())}}.dump(),
                  ",\"_bandit\":",
                  Json{{"slots", std::move(ours)}, {"candidate_dim", slots[0].candidate_dim()}}.dump(),
                  "}");
  return line;
}

void DecisionGrouper::Add(v1::LoggedDecision d, int64_t line) {
  if (!held_.empty() && (d.slot_id().empty() || d.event_id() != held_[0].event_id() ||
                         d.slot_index() != static_cast<int>(held_.size())))
    Flush();
  if (d.slot_id().empty()) {
    each_(std::span<const v1::LoggedDecision>(&d, 1), line);
    return;
  }
  if (held_.empty()) held_line_ = line;
  held_.push_back(std::move(d));
}

void DecisionGrouper::Flush() {
  if (held_.empty()) return;
  each_(held_, held_line_);
  held_.clear();
}

std::string FormatDecision(LogFormat format, const v1::LoggedDecision& d,
                           const std::string& instance) {
  switch (format) {
    case LogFormat::kDsjson:
      return Dsjson(d, instance);
    case LogFormat::kJsonl: {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(d, &out, o);
      return out;
    }
    case LogFormat::kCsv:
      return Csv(d, instance);
  }
  return "";
}

absl::StatusOr<v1::LoggedDecision> ParseDsjson(const std::string& line) {
  Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  v1::LoggedDecision d;
  if (auto s = ReadEnvelope(j, &d); !s.ok()) return s;
  if (!j.contains("a") || !j["a"].is_array() || j["a"].empty())
    return Bad("a", "expected a non-empty array of 1-based actions");
  const Json& a = j["a"];
  const int n = static_cast<int>(a.size());
  std::vector<int> order;
  std::vector<bool> seen(n, false);
  for (int i = 0; i < n; ++i) {
    if (!a[i].is_number_integer() || a[i].get<int64_t>() < 1 || a[i].get<int64_t>() > n)
      return Bad(absl::StrCat("a[", i, "]"), absl::StrCat("expected an action 1..", n));
    const int action = static_cast<int>(a[i].get<int64_t>()) - 1;
    if (seen[action]) return Bad(absl::StrCat("a[", i, "]"), "repeats an action");
    seen[action] = true;
    order.push_back(action);
  }
  d.set_num_actions(n);
  int chosen = order[0];
  if (j.contains("_labelIndex")) {
    if (!j["_labelIndex"].is_number_integer() || j["_labelIndex"].get<int64_t>() < 0 ||
        j["_labelIndex"].get<int64_t>() >= n)
      return Bad("_labelIndex", absl::StrCat("expected an index 0..", n - 1));
    chosen = static_cast<int>(j["_labelIndex"].get<int64_t>());
  }
  if (j.contains("_label_Action") &&
      (!j["_label_Action"].is_number_integer() || j["_label_Action"].get<int64_t>() != chosen + 1))
    return Bad("_label_Action", absl::StrCat("expected ", chosen + 1, " (_labelIndex + 1)"));
  d.set_chosen_index(chosen);
  if (j.contains("p")) {
    const Json& p = j["p"];
    if (!p.is_array() || static_cast<int>(p.size()) != n)
      return Bad("p", absl::StrCat("expected ", n, " probabilities, one per action of a"));
    std::vector<double> probs(n);
    for (int i = 0; i < n; ++i) {
      auto v = Probability(p[i], absl::StrCat("p[", i, "]"));
      if (!v.ok()) return v.status();
      probs[order[i]] = *v;
    }
    d.mutable_probabilities()->Assign(probs.begin(), probs.end());
  }
  const bool labeled = j.contains("_label_cost");
  if (labeled) {
    if (!j["_label_cost"].is_number() || !std::isfinite(j["_label_cost"].get<double>()))
      return Bad("_label_cost", "expected a finite number");
    if (!j.contains("_label_probability"))
      return Bad("_label_probability", "missing, expected the chosen action's probability");
    auto p = Probability(j["_label_probability"], "_label_probability");
    if (!p.ok()) return p.status();
    d.set_propensity(*p);
    d.set_reward(-j["_label_cost"].get<double>());
    d.set_outcome(v1::OUTCOME_REWARDED);
  }
  if (!j.contains("c") || !j["c"].is_object()) return Bad("c", "expected the context object");
  const Json& c = j["c"];
  if (!c.contains("_multi") || !c["_multi"].is_array() || static_cast<int>(c["_multi"].size()) != n)
    return Bad("c._multi", absl::StrCat("expected ", n, " actions, one per entry of a"));
  const Json& multi = c["_multi"];
  const Json& first = multi[0];
  if (first.is_object() && first.contains("_tag")) {
    // Named: the context's members and each action's (its id in "_tag"), back to JSON text as
    // written, a key given twice included (json_text.h).
    const std::string_view c_text = json_text::Value(line, "c").value_or("");
    d.set_named_context(dsjson::MembersBut(c_text, {"_multi"}));
    const std::vector<std::string_view> actions =
        json_text::Elements(json_text::Value(c_text, "_multi").value_or(""));
    for (int i = 0; i < n; ++i) {
      if (!multi[i].is_object() || !multi[i].contains("_tag") || !multi[i]["_tag"].is_string())
        return Bad(absl::StrCat("c._multi[", i, "]._tag"), "expected the action id as a string");
      auto* a = d.add_named_actions();
      a->set_id(multi[i]["_tag"].get<std::string>());
      if (i < static_cast<int>(actions.size()))
        a->set_features(dsjson::MembersBut(actions[i], {"_tag"}));
    }
    d.set_num_candidates(n);
    d.set_chosen_arm_id(d.named_actions(chosen).id());
  } else if (first.is_object() && first.contains("x")) {
    int dim = -1;
    for (int i = 0; i < n; ++i) {
      if (!multi[i].is_object() || !multi[i].contains("x"))
        return Bad(absl::StrCat("c._multi[", i, "].x"),
                   "missing, expected the candidate's features");
      auto x = JsonNumbers(multi[i]["x"], absl::StrCat("c._multi[", i, "].x"));
      if (!x.ok()) return x.status();
      if (dim >= 0 && static_cast<int>(x->size()) != dim)
        return Bad(
            absl::StrCat("c._multi[", i, "].x"),
            absl::StrCat("has ", x->size(), " values, expected ", dim, " like c._multi[0].x"));
      dim = static_cast<int>(x->size());
      d.mutable_candidates()->Add(x->begin(), x->end());
    }
    d.set_num_candidates(n);
    d.set_candidate_dim(dim);
  } else if (first.is_object() && first.contains("arm")) {
    for (int i = 0; i < n; ++i) {
      if (!multi[i].is_object() || !multi[i].contains("arm") || !multi[i]["arm"].is_string())
        return Bad(absl::StrCat("c._multi[", i, "].arm"), "expected the arm id as a string");
      d.add_arm_ids(multi[i]["arm"].get<std::string>());
    }
    d.set_chosen_arm_id(d.arm_ids(chosen));
  } else if (c.contains("x")) {
    auto x = JsonNumbers(c["x"], "c.x");
    if (!x.ok()) return x.status();
    d.mutable_x()->Assign(x->begin(), x->end());
  } else {
    return Bad("c",
               "expected candidate vectors (_multi[].x), arm ids (_multi[].arm) or a shared x");
  }
  if (j.contains("_bandit") && j["_bandit"].is_object()) {
    const Json& ours = j["_bandit"];
    if (ours.contains("event_seq") && ours["event_seq"].is_number_unsigned())
      d.set_event_seq(ours["event_seq"].get<uint64_t>());
    if (ours.contains("outcome") && ours["outcome"].is_string()) {
      v1::DecisionOutcome o;
      if (!v1::DecisionOutcome_Parse(ours["outcome"].get<std::string>(), &o))
        return Bad("_bandit.outcome", "expected a DecisionOutcome name");
      d.set_outcome(o);
    }
    if (ours.contains("chosen_arm_id") && ours["chosen_arm_id"].is_string())
      d.set_chosen_arm_id(ours["chosen_arm_id"].get<std::string>());
    if (ours.contains("reward") && ours["reward"].is_number())
      d.set_reward(ours["reward"].get<double>());
    if (ours.contains("outcome_at_ms") && ours["outcome_at_ms"].is_number_integer())
      d.set_outcome_at_ms(ours["outcome_at_ms"].get<int64_t>());
    if (ours.contains("candidate_dim") && ours["candidate_dim"].is_number_integer())
      d.set_candidate_dim(static_cast<int32_t>(ours["candidate_dim"].get<int64_t>()));
    if (ours.contains("slot_id")) {
      if (!ours["slot_id"].is_string() || ours["slot_id"].get<std::string>().empty())
        return Bad("_bandit.slot_id", "expected the slot's id as a non-empty string");
      if (!ours.contains("slot_index") || !ours["slot_index"].is_number_integer() ||
          ours["slot_index"].get<int64_t>() < 0 || ours["slot_index"].get<int64_t>() > 1'000'000)
        return Bad("_bandit.slot_index", "expected the slot's position, an integer >= 0");
      d.set_slot_id(ours["slot_id"].get<std::string>());
      d.set_slot_index(static_cast<int32_t>(ours["slot_index"].get<int64_t>()));
    }
    if (ours.contains("propensity")) {
      auto p = Probability(ours["propensity"], "_bandit.propensity");
      if (!p.ok()) return p.status();
      d.set_propensity(*p);
    }
  }
  return d;
}

absl::StatusOr<std::vector<v1::LoggedDecision>> ParseDsjsonDecisions(const std::string& line) {
  Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (j.is_object() && j.contains("_outcomes") && j.contains("c") && j["c"].is_object() &&
      j["c"].contains("_slots"))
    return dsjson::ParseCcb(j, line);
  auto d = ParseDsjson(line);
  if (!d.ok()) return d.status();
  return std::vector<v1::LoggedDecision>{*std::move(d)};
}

}  // namespace bandit::client
