// What the files implementing PersonalizerApi (personalizer_api.h) share, and nothing else
// includes but their tests: the request's target, the reading of JSON request bodies into the
// service's request messages (personalizer_requests.cc) and the rendering of answers and errors
// (personalizer_responses.cc). The routes live in personalizer_api.cc (the route table, the
// adapter and the event routes), personalizer_configuration.cc and personalizer_model.cc.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "bandit/v1/service.pb.h"
#include "server/api/http/personalizer_api.h"
#include "server/api/http/personalizer_errors.h"
#include "server/service/service_calls.h"

namespace bandit::server::http {

struct PersonalizerApi::Target {
  std::string instance;
  std::string event_id;    // events/{eventId}/...
  bool v11 = false;        // v1.1-preview.3
  bool multislot = false;  // multislot/rank, multislot/events/{eventId}/...
  ServiceCalls* calls = nullptr;  // where the instance is served (this node or its owner)
};

using Json = rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// ---- reading requests (personalizer_requests.cc) ----

// Parses a request body; INVALID_ARGUMENT naming the byte where it stops being JSON.
absl::Status ParseBody(absl::string_view body, int max_depth, rapidjson::Document* doc);

std::string AsString(const Json& value);

// `object`'s member `name`, nullptr if absent or null.
const Json* Member(const Json& object, const char* name);

// The 400 of `route` if `id` (from the path) is not one of Personalizer's event ids.
std::optional<ApiResponse> CheckEventId(Route route, absl::string_view id);

// A rank request's body (single- or multi-slot) into `req`; the 400 naming the element at fault
// otherwise.
std::optional<ApiResponse> ReadRankRequest(Route route, absl::string_view body, int max_depth,
                                           bool multislot, bandit::v1::SelectRequest* req);

// A reward request's body: one reward ({"value"}, slot id ""), or one per slot
// ({"reward": [{"slotId", "value"}]}, multi-slot), into `rewards`; the 400 otherwise.
std::optional<ApiResponse> ReadRewards(Route route, absl::string_view body, int max_depth,
                                       bool multislot,
                                       std::vector<std::pair<std::string, double>>* rewards);

// ---- rendering answers (personalizer_responses.cc) ----

ApiResponse Error(const ApiError& e, Route route);
ApiResponse Error(const absl::Status& s, Route route, absl::string_view target = "");

// A malformed request to `route`: Personalizer's 400 with the route's code.
ApiResponse Invalid(Route route, absl::string_view target, absl::string_view message);

ApiResponse NoContent(Route route);

// Personalizer's 204 for a call it accepts but that changes nothing here (a reward or
// activation for an event that is unknown, finished or already active): the service's reason in
// `header`, on one line.
ApiResponse NoContentBecause(Route route, absl::string_view header, const absl::Status& why);

// A rank's 201: RankResponse, or MultiSlotRankResponse when `multislot`.
ApiResponse RankResponse(Route route, const bandit::v1::Decision& decision, bool multislot);

std::string ToJson(const Json& value);
void ToJson(const Json& value, std::string* out);  // into `out`, reusing its buffer

void WriteString(Writer& w, absl::string_view s);

}  // namespace bandit::server::http
