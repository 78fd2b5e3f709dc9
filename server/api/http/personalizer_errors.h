// Personalizer's error shape and codes for the HTTP front door: one mapping from the service's
// absl::Status (plus the route it came from) to the HTTP status and the body
// {"error": {"code", "message", "target"?}} that Personalizer's SDKs turn into their typed
// errors. The codes and statuses are Personalizer's own (its service's PersonalizerErrorCode:
// every validation code is 400, including PayloadSizeExceeded); docs/personalizer.md lists them.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace bandit::server::http {

// The operations of Personalizer's API, as routed (also the `route` label of the metrics).
enum class Route : int {
  kRank,
  kReward,
  kActivate,
  kServiceConfiguration,
  kPolicy,
  kModel,
  kModelProperties,
  kLogs,
  kLogsProperties,
  kMultiSlot,
  kEvaluations,
  kApplyFromEvaluation,
  kFeatureImportances,
  kUnmatched,  // no such route (or a request the HTTP library refused before routing)
  kCount
};
const char* RouteName(Route route);

struct ApiError {
  int http_status = 500;
  std::string code;     // Personalizer's error code, e.g. "InvalidRankRequest"
  std::string message;  // what was wrong and what was expected (capped)
  std::string target;   // the request element at fault ("" = none)
};

// The one mapping: `status` (not OK) of the service call made for `route`. `target` names the
// request element when the caller knows it.
ApiError ErrorFor(const absl::Status& status, Route route, absl::string_view target = "");

// {"error":{"code":...,"message":...,"target":...}}
std::string ErrorBody(const ApiError& error);

// The code Personalizer uses for a malformed request to `route` (InvalidRankRequest,
// InvalidRewardRequest, InvalidEventIdToActivate, InvalidServiceConfiguration, ...).
const char* InvalidRequestCode(Route route);

}  // namespace bandit::server::http
