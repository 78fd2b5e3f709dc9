// Azure Personalizer's REST API (v1.0 and v1.1-preview.3, single slot) over the DecisionService:
// routes a request, checks its key, turns its JSON into the service's request message, calls the
// service method the gRPC adapter calls, and renders the answer (or Personalizer's error) as
// Personalizer does. It never touches sockets: http_server.h feeds it, and tests and the fuzz
// target call Handle() directly.
//
// The instance a request is for: `/instances/NAME/personalizer/...` names it; at the root
// (`/personalizer/...`) it is the instance the key is bound to (tokens file `instance=NAME`), or
// else the default instance (--personalizer_default_instance).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/api/auth.h"
#include "server/api/message_pool.h"
#include "server/api/http/personalizer_errors.h"
#include "server/service/decision_service.h"
#include "server/service/service_calls.h"

namespace bandit::server::cluster {
class Router;
}

namespace bandit::server::http {

struct PersonalizerOptions {
  // The instance of root-path requests whose key names none ("" = such requests are refused).
  std::string default_instance;
  // Create an unknown instance with Personalizer's default settings at its first request
  // (server/api/http/personalizer_defaults.h) instead of answering ResourceNotFound.
  bool auto_create = false;
  // Nesting of one request body's JSON (the feature documents inside keep their own limits).
  int max_json_depth = 16;
};

struct ApiRequest {
  absl::string_view method;          // "GET", "POST", ...
  absl::string_view path;            // decoded, without the query
  const std::string* key = nullptr;  // Ocp-Apim-Subscription-Key (nullptr if absent)
  absl::string_view body;
};

struct ApiResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json; charset=utf-8";
  Route route = Route::kUnmatched;
  std::vector<std::pair<std::string, std::string>> headers;
};

class PersonalizerApi {
 public:
  // `auth` may be null (no authentication). `router`: set in a cluster, where a request for an
  // instance another node owns is served by that node (server/cluster/routed_calls.h).
  PersonalizerApi(DecisionService* service, const Authorizer* auth, PersonalizerOptions options,
                  cluster::Router* router = nullptr);

  ApiResponse Handle(const ApiRequest& request);

  // The route `method` and `path` reach (kUnmatched if none), for requests the HTTP library
  // answered itself (too large, malformed).
  static Route RouteOf(absl::string_view path);

  // True when the request is a round's (rank, reward or activate, single- or multi-slot) and
  // this node answers it without waiting on anything but the instance's lock: no fsync before
  // the answer (--durability other than always) and no forwarding (not in a cluster). The
  // listener may then serve it on the thread that read it.
  bool ServesWithoutWaiting(absl::string_view method, absl::string_view path) const;

  // Shutdown, once the grace period is over: every request still waiting for its records to
  // become durable is answered 503 now, and every later one at once.
  void CutWaits() { cut_.store(true); }

 private:
  struct Target;
  ApiResponse Rank(const Target& target, absl::string_view body);
  ApiResponse Reward(const Target& target, absl::string_view body);
  ApiResponse Activate(const Target& target);
  ApiResponse ServiceConfiguration(const Target& target, absl::string_view method,
                                   absl::string_view body);
  // configurations/policy: GET the learning settings, PUT others (trained on the decision log),
  // DELETE back to the default's; configurations/applyFromEvaluation: an evaluation's policy.
  ApiResponse Policy(const Target& target, absl::string_view method, absl::string_view body);
  ApiResponse ApplyFromEvaluation(const Target& target, absl::string_view body);
  // Sets the learning settings `arguments` (trained on the log) and answers {name, arguments}.
  ApiResponse SetLearningSettings(const Target& target, Route route, const std::string& name,
                                  const std::string& arguments, bool no_content);
  ApiResponse Model(const Target& target, absl::string_view method, absl::string_view body);
  ApiResponse ImportModel(const Target& target, absl::string_view body);
  ApiResponse ModelProperties(const Target& target);
  ApiResponse Logs(const Target& target, absl::string_view method);
  // evaluations, evaluations/{id} (personalizer_evaluations.cc); `prefix` the request's path up
  // to "evaluations" (the Location of a new one).
  ApiResponse Evaluations(const Target& target, absl::string_view method, absl::string_view id,
                          absl::string_view body, absl::string_view prefix);
  // OK once record `written_seq` is as durable as --durability promises.
  absl::Status AwaitDurable(uint64_t written_seq);
  // OK if the instance exists (creating it when auto_create is on).
  absl::Status FindOrCreate(const Target& target);

  DecisionService* const service_;
  const Authorizer* const auth_;
  const PersonalizerOptions options_;
  cluster::Router* const router_;
  std::atomic<bool> cut_{false};
  // Each rank's request and decision, pooled as the gRPC door's are: a rank of 50 actions is
  // then parsed into and answered from buffers its holder kept from the calls before.
  ReusedMessageAllocator<bandit::v1::SelectRequest, bandit::v1::Decision> rank_messages_;
};

}  // namespace bandit::server::http
