// Builders of named-feature requests (instances created with a feature_space): the context and
// each action's features as JSON, in the key order written (Vowpal Wabbit's self-interactions
// depend on it, so nlohmann::ordered_json).
//
//   auto req = bandit::client::NamedSelect("homepage")
//                  .Context({{"User", {{"country", "US"}, {"age", 35}}}})
//                  .Action("news", {{"Action", {{"genre", "news"}}}})
//                  .Action("sports", {{"Action", {{"genre", "sports"}}}})
//                  .Exclude("news")
//                  .Build();
//   auto decision = client.Select(req);  // decision->action_id()
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "bandit/v1/service.pb.h"

namespace bandit::client {

class NamedSelect {
 public:
  explicit NamedSelect(std::string instance);
  NamedSelect& Context(const nlohmann::ordered_json& context);
  NamedSelect& Action(std::string id, const nlohmann::ordered_json& features);
  NamedSelect& Exclude(std::string id);
  NamedSelect& Scores(bool return_scores = true);
  bandit::v1::SelectRequest Build() const { return req_; }

 private:
  bandit::v1::SelectRequest req_;
};

// A direct Update (logged data) of one named action in a context.
bandit::v1::UpdateRequest NamedDirectUpdate(std::string instance,
                                            const nlohmann::ordered_json& context,
                                            std::string action_id,
                                            const nlohmann::ordered_json& features, double reward);

// A JSON list of actions [{"id": ..., "features": {...}}, ...] (banditctl's --actions) into
// `req`; INVALID_ARGUMENT naming what is wrong.
absl::Status AddActionsFromJson(const std::string& json, bandit::v1::SelectRequest* req);

// Slots of a multi-slot decision (banditctl's --slots): a JSON list of {"id": ...,
// "features": {...}, "dense_features": [...], "excluded_actions": [...], "baseline_action": ...}
// or, for slots without options, their ids separated by commas ("hero,tile1,tile2").
absl::Status AddSlotsFromJson(const std::string& json, bandit::v1::SelectRequest* req);

}  // namespace bandit::client
