#include "client/cpp/named_request.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace bandit::client {
namespace {

std::string Dump(const nlohmann::ordered_json& j) { return j.is_null() ? "" : j.dump(); }

}  // namespace

NamedSelect::NamedSelect(std::string instance) { req_.set_instance(std::move(instance)); }

NamedSelect& NamedSelect::Context(const nlohmann::ordered_json& context) {
  req_.set_context(Dump(context));
  return *this;
}

NamedSelect& NamedSelect::Action(std::string id, const nlohmann::ordered_json& features) {
  auto* a = req_.add_actions();
  a->set_id(std::move(id));
  a->set_features(Dump(features));
  return *this;
}

NamedSelect& NamedSelect::Exclude(std::string id) {
  req_.add_excluded_actions(std::move(id));
  return *this;
}

NamedSelect& NamedSelect::Scores(bool return_scores) {
  req_.set_return_scores(return_scores);
  return *this;
}

bandit::v1::UpdateRequest NamedDirectUpdate(std::string instance,
                                            const nlohmann::ordered_json& context,
                                            std::string action_id,
                                            const nlohmann::ordered_json& features,
                                            double reward) {
  bandit::v1::UpdateRequest req;
  req.set_instance(std::move(instance));
  req.set_reward(reward);
  req.mutable_direct()->set_context(Dump(context));
  req.mutable_direct()->mutable_action()->set_id(std::move(action_id));
  req.mutable_direct()->mutable_action()->set_features(Dump(features));
  return req;
}

absl::Status AddActionsFromJson(const std::string& json, bandit::v1::SelectRequest* req) {
  auto actions = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (actions.is_discarded() || !actions.is_array())
    return absl::InvalidArgumentError(
        "actions: expected a JSON list of {\"id\": ..., \"features\": {...}}");
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    if (!a.is_object() || !a.contains("id") || !a["id"].is_string())
      return absl::InvalidArgumentError(
          absl::StrCat("actions[", i, "]: expected an object with a string \"id\""));
    auto* out = req->add_actions();
    out->set_id(a["id"].get<std::string>());
    if (a.contains("features")) out->set_features(Dump(a["features"]));
  }
  return absl::OkStatus();
}

absl::Status AddSlotsFromJson(const std::string& json, bandit::v1::SelectRequest* req) {
  if (!json.empty() && json.front() != '[') {
    for (absl::string_view id : absl::StrSplit(json, ',', absl::SkipWhitespace()))
      req->add_slots()->set_id(std::string(id));
    return absl::OkStatus();
  }
  auto slots = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (slots.is_discarded() || !slots.is_array())
    return absl::InvalidArgumentError(
        "slots: expected a JSON list of {\"id\": ..., \"features\": {...}, ...} or ids "
        "separated by commas");
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (!s.is_object() || !s.contains("id") || !s["id"].is_string())
      return absl::InvalidArgumentError(
          absl::StrCat("slots[", i, "]: expected an object with a string \"id\""));
    auto* out = req->add_slots();
    out->set_id(s["id"].get<std::string>());
    if (s.contains("features")) out->set_features(Dump(s["features"]));
    if (s.contains("dense_features")) {
      if (!s["dense_features"].is_array())
        return absl::InvalidArgumentError(
            absl::StrCat("slots[", i, "].dense_features: expected a list of numbers"));
      for (const auto& v : s["dense_features"]) {
        if (!v.is_number())
          return absl::InvalidArgumentError(
              absl::StrCat("slots[", i, "].dense_features: expected a list of numbers"));
        out->add_dense_features(v.get<double>());
      }
    }
    if (s.contains("excluded_actions")) {
      if (!s["excluded_actions"].is_array())
        return absl::InvalidArgumentError(
            absl::StrCat("slots[", i, "].excluded_actions: expected a list of ids"));
      for (const auto& id : s["excluded_actions"])
        out->add_excluded_actions(id.is_string() ? id.get<std::string>() : id.dump());
    }
    if (s.contains("baseline_action"))
      out->set_baseline_action(s["baseline_action"].is_string()
                                   ? s["baseline_action"].get<std::string>()
                                   : s["baseline_action"].dump());
  }
  return absl::OkStatus();
}

}  // namespace bandit::client
