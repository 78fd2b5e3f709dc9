// PersonalizerApi's route table and request adapter: a request's route, method, key and
// instance, then the route's handler; the event routes (rank, reward, activate) are here, the
// configuration routes in personalizer_configuration.cc and the model and log routes in
// personalizer_model.cc. Bodies are read by personalizer_requests.cc, answers rendered by
// personalizer_responses.cc (both declared in personalizer_internal.h).
#include "server/api/http/personalizer_api.h"

#include <memory>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/api/http/personalizer_defaults.h"
#include "server/api/http/personalizer_internal.h"
#include "server/cluster/routed_calls.h"

namespace bandit::server::http {

PersonalizerApi::PersonalizerApi(DecisionService* service, const Authorizer* auth,
                                 PersonalizerOptions options, cluster::Router* router)
    : service_(service), auth_(auth), options_(std::move(options)), router_(router) {}

namespace {

constexpr absl::string_view kKeyHeader = "header 'Ocp-Apim-Subscription-Key: <token>'";

struct Match {
  Route route = Route::kUnmatched;
  std::string instance;  // from /instances/NAME
  std::string event_id;
  bool v11 = false;
  // multislot/...: the single-slot route it mirrors (rank, reward, activate).
  Route multislot = Route::kUnmatched;
  std::vector<absl::string_view> methods;  // allowed on the route
};

Match MatchPath(absl::string_view path) {
  Match m;
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  // A leading '/' makes parts[0] empty; a trailing '/' is tolerated.
  if (parts.empty() || !parts[0].empty()) return m;
  parts.erase(parts.begin());
  if (!parts.empty() && parts.back().empty()) parts.pop_back();
  size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "instances") {
    if (parts[1].empty()) return m;
    m.instance = std::string(parts[1]);
    i = 2;
  }
  if (parts.size() < i + 3 || parts[i] != "personalizer") return m;
  if (parts[i + 1] == "v1.1-preview.3") {
    m.v11 = true;
  } else if (parts[i + 1] != "v1.0") {
    return m;
  }
  std::vector<absl::string_view> rest(parts.begin() + i + 2, parts.end());
  const auto is = [&](std::initializer_list<absl::string_view> want) {
    if (rest.size() != want.size()) return false;
    size_t k = 0;
    for (absl::string_view w : want)
      if (!w.empty() && rest[k++] != w)
        return false;
      else if (w.empty())
        ++k;
    return true;
  };
  if (is({"rank"})) {
    m.route = Route::kRank;
    m.methods = {"POST"};
  } else if (rest.size() == 3 && rest[0] == "events" && rest[2] == "reward") {
    m.route = Route::kReward;
    m.event_id = std::string(rest[1]);
    m.methods = {"POST"};
  } else if (rest.size() == 3 && rest[0] == "events" && rest[2] == "activate") {
    m.route = Route::kActivate;
    m.event_id = std::string(rest[1]);
    m.methods = {"POST"};
  } else if (is({"configurations", "service"})) {
    m.route = Route::kServiceConfiguration;
    m.methods = {"GET", "PUT"};
  } else if (is({"configurations", "policy"})) {
    m.route = Route::kPolicy;
    m.methods = {"GET", "PUT", "DELETE"};
  } else if (is({"configurations", "applyFromEvaluation"})) {
    m.route = Route::kApplyFromEvaluation;
    m.methods = {"POST"};
  } else if (is({"model"})) {
    m.route = Route::kModel;
    m.methods = {"GET", "PUT", "DELETE"};
  } else if (is({"model", "properties"})) {
    m.route = Route::kModelProperties;
    m.methods = {"GET"};
  } else if (is({"logs"})) {
    m.route = Route::kLogs;
    m.methods = {"DELETE"};
  } else if (is({"logs", "properties"})) {
    m.route = Route::kLogsProperties;
    m.methods = {"GET"};
  } else if (m.v11 && !rest.empty() && rest[0] == "multislot") {
    m.route = Route::kMultiSlot;
    m.methods = {"POST"};
    if (rest.size() == 2 && rest[1] == "rank") {
      m.multislot = Route::kRank;
    } else if (rest.size() == 4 && rest[1] == "events" &&
               (rest[3] == "reward" || rest[3] == "activate")) {
      m.multislot = rest[3] == "reward" ? Route::kReward : Route::kActivate;
      m.event_id = std::string(rest[2]);
    } else {
      m.route = Route::kUnmatched;
    }
  } else if (is({"evaluations"})) {
    m.route = Route::kEvaluations;
    m.methods = {"GET", "POST"};
  } else if (rest.size() == 2 && rest[0] == "evaluations") {
    m.route = Route::kEvaluations;
    m.event_id = std::string(rest[1]);  // the evaluation's id
    m.methods = {"GET", "DELETE"};
  } else if (!rest.empty() && rest[0] == "featureimportances") {
    m.route = Route::kFeatureImportances;
    m.methods = {"GET", "POST", "PUT", "DELETE"};
  }
  return m;
}

// The service operation whose role a route's method needs.
Rpc RpcFor(Route route, absl::string_view method) {
  switch (route) {
    case Route::kRank:
      return Rpc::kSelect;
    case Route::kReward:
    case Route::kActivate:
    case Route::kMultiSlot:
      return Rpc::kUpdate;
    case Route::kServiceConfiguration:
      return method == "GET" ? Rpc::kGetInstance : Rpc::kConfigureInstance;
    case Route::kPolicy:
      return method == "GET" ? Rpc::kGetInstance : Rpc::kSetLearningPolicy;
    case Route::kApplyFromEvaluation:
      return Rpc::kSetLearningPolicy;
    case Route::kModel:
      if (method == "GET") return Rpc::kExportInstance;
      return method == "PUT" ? Rpc::kImportInstance : Rpc::kResetInstance;
    case Route::kModelProperties:
    case Route::kLogsProperties:
      return Rpc::kGetInstance;
    case Route::kEvaluations:
      return method == "GET" ? Rpc::kGetEvaluation : Rpc::kCreateEvaluation;
    default:
      return Rpc::kResetInstance;  // admin
  }
}

}  // namespace

Route PersonalizerApi::RouteOf(absl::string_view path) { return MatchPath(path).route; }

bool PersonalizerApi::ServesWithoutWaiting(absl::string_view method,
                                           absl::string_view path) const {
  if (method != "POST" || router_ != nullptr || service_->WaitsForDurability()) return false;
  const Match m = MatchPath(path);
  const Route round = m.route == Route::kMultiSlot ? m.multislot : m.route;
  return round == Route::kRank || round == Route::kReward || round == Route::kActivate;
}

ApiResponse PersonalizerApi::Handle(const ApiRequest& request) {
  Match m = MatchPath(request.path);
  if (m.route == Route::kUnmatched)
    return Error(absl::NotFoundError(absl::StrCat(
                     "no Personalizer route ", request.path,
                     ": expected [/instances/NAME]/personalizer/{v1.0|v1.1-preview.3}/...")),
                 m.route);
  absl::string_view method = request.method == "HEAD" ? "GET" : request.method;
  bool allowed = false;
  for (absl::string_view a : m.methods) allowed = allowed || a == method;
  if (!allowed) {
    ApiResponse r =
        Error(ApiError{405, "BadRequest",
                       absl::StrCat(request.method, " is not allowed on ", RouteName(m.route),
                                    "; allowed: ", absl::StrJoin(m.methods, ", ")),
                       ""},
              m.route);
    r.headers.emplace_back("Allow", absl::StrJoin(m.methods, ", "));
    return r;
  }
  Target target;
  target.instance = m.instance;
  target.event_id = m.event_id;
  target.v11 = m.v11;
  target.multislot = m.route == Route::kMultiSlot;
  if (target.instance.empty() && auth_ != nullptr && request.key != nullptr)
    target.instance = auth_->BoundInstance(*request.key);
  if (target.instance.empty()) target.instance = options_.default_instance;
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->AuthorizeToken(RpcFor(m.route, method), request.key,
                                                    target.instance, kKeyHeader);
        !denied.ok())
      return Error(denied, m.route);
  }
  if (target.instance.empty())
    return Error(
        absl::NotFoundError("no instance: use /instances/NAME/personalizer/..., a key bound to an "
                            "instance, or start banditd with --personalizer_default_instance"),
        m.route);
  // In a cluster, the calls for an instance another node owns run there, with the key.
  LocalCalls local(service_);
  std::optional<cluster::RoutedCalls> routed;
  if (router_ != nullptr) routed.emplace(router_, service_, request.key ? *request.key : "");
  target.calls = routed ? static_cast<ServiceCalls*>(&*routed) : &local;
  switch (m.route) {
    case Route::kRank:
      return Rank(target, request.body);
    case Route::kReward:
      return Reward(target, request.body);
    case Route::kActivate:
      return Activate(target);
    case Route::kServiceConfiguration:
      return ServiceConfiguration(target, method, request.body);
    case Route::kPolicy:
      return Policy(target, method, request.body);
    case Route::kApplyFromEvaluation:
      return ApplyFromEvaluation(target, request.body);
    case Route::kModel:
      return Model(target, method, request.body);
    case Route::kModelProperties:
      return ModelProperties(target);
    case Route::kLogs:
    case Route::kLogsProperties:
      return Logs(target, method);
    case Route::kEvaluations:
      return Evaluations(target, method, m.event_id, request.body,
                         request.path.substr(0, request.path.find("/evaluations")));
    case Route::kMultiSlot:
      // The service's multi-slot Select, per-slot rewards and activation.
      if (m.multislot == Route::kRank) return Rank(target, request.body);
      if (m.multislot == Route::kReward) return Reward(target, request.body);
      return Activate(target);
    default:
      return Error(absl::NotFoundError(absl::StrCat(
                       RouteName(m.route),
                       " are not offered by this server (docs/personalizer.md)")),
                   m.route);
  }
}

absl::Status PersonalizerApi::AwaitDurable(uint64_t written_seq) {
  if (!service_->MustWaitForDurability(written_seq)) return absl::OkStatus();
  struct Wait {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto wait = std::make_shared<Wait>();
  service_->WhenDurable(written_seq, [wait](absl::Status s) {
    absl::MutexLock lock(&wait->mu);
    wait->done = true;
    wait->status = std::move(s);
  });
  absl::MutexLock lock(&wait->mu);
  while (!wait->mu.AwaitWithTimeout(absl::Condition(&wait->done), absl::Milliseconds(50))) {
    if (cut_.load())
      return absl::UnavailableError(
          "the server is shutting down and its grace period ended before this request was "
          "answered; the change may or may not have been applied");
  }
  return wait->status;
}

absl::Status PersonalizerApi::FindOrCreate(const Target& target) {
  const std::string& name = target.instance;
  absl::Status found = target.calls->Find(name);
  if (found.code() != absl::StatusCode::kNotFound || !options_.auto_create) return found;
  bandit::v1::CreateInstanceRequest create;
  create.set_name(name);
  *create.mutable_config() = PersonalizerDefaultConfig();
  bandit::v1::Instance created;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->CreateInstance(create, &created, &written_seq);
  if (s.code() == absl::StatusCode::kAlreadyExists) return absl::OkStatus();  // a racing request
  if (!s.ok()) return s;
  return AwaitDurable(written_seq);
}

ApiResponse PersonalizerApi::Rank(const Target& target, absl::string_view body) {
  const Route kRoute = target.multislot ? Route::kMultiSlot : Route::kRank;
  grpc::MessageHolder<bandit::v1::SelectRequest, bandit::v1::Decision>* messages =
      rank_messages_.AllocateMessages();
  absl::Cleanup release = [messages] { messages->Release(); };
  bandit::v1::SelectRequest& req = *messages->request();
  bandit::v1::Decision& decision = *messages->response();
  req.set_instance(target.instance);
  req.set_return_scores(true);
  if (auto bad = ReadRankRequest(kRoute, body, options_.max_json_depth, target.multislot, &req))
    return *bad;
  if (absl::Status s = FindOrCreate(target); !s.ok()) return Error(s, kRoute);
  uint64_t written_seq = 0;
  absl::Status s = target.calls->Select(req, &decision, &written_seq);
  if (s.ok()) s = AwaitDurable(written_seq);
  if (!s.ok()) return Error(s, kRoute);
  return RankResponse(kRoute, decision, target.multislot);
}

ApiResponse PersonalizerApi::Reward(const Target& target, absl::string_view body) {
  const Route kRoute = target.multislot ? Route::kMultiSlot : Route::kReward;
  if (auto bad = CheckEventId(kRoute, target.event_id)) return *bad;
  std::vector<std::pair<std::string, double>> rewards;
  if (auto bad = ReadRewards(kRoute, body, options_.max_json_depth, target.multislot, &rewards))
    return *bad;
  if (absl::Status s = target.calls->Find(target.instance); !s.ok())
    return Error(s, kRoute);
  absl::Status s;
  uint64_t written_seq = 0;
  if (target.multislot) {
    // The slots' rewards as one all-or-none batch: a bad one (an unknown slot, a slot named
    // twice, a non-finite value) refuses them all before any is applied.
    bandit::v1::UpdateBatchRequest batch;
    batch.set_all_or_none(true);
    for (const auto& [slot_id, reward] : rewards) {
      bandit::v1::UpdateRequest* req = batch.add_requests();
      req->set_instance(target.instance);
      req->set_event_id(target.event_id);
      req->set_slot_id(slot_id);
      req->set_reward(reward);
    }
    bandit::v1::UpdateBatchResponse resp;
    s = target.calls->UpdateBatch(batch, &resp, &written_seq);
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      // The batch's items are the body's reward list, in its order.
      return Error(absl::InvalidArgumentError(
                       absl::StrReplaceAll(s.message(), {{"requests[", "reward["}})),
                   kRoute);
    }
    for (const bandit::v1::ItemStatus& item : resp.statuses())
      if (item.code() != 0 && s.ok())  // the first refusal is reported; the others still count
        s = absl::Status(static_cast<absl::StatusCode>(item.code()), item.message());
  } else {
    bandit::v1::UpdateRequest req;
    req.set_instance(target.instance);
    req.set_event_id(target.event_id);
    req.set_reward(rewards[0].second);
    bandit::v1::UpdateResponse resp;
    s = target.calls->Update(req, &resp, &written_seq);
  }
  if (absl::Status durable = AwaitDurable(written_seq); s.ok()) s = durable;
  if (s.code() == absl::StatusCode::kNotFound ||
      s.code() == absl::StatusCode::kFailedPrecondition) {
    // Personalizer accepts every reward and joins later: one for an event that is unknown,
    // already rewarded (its default aggregation keeps the earliest) or past its wait is not
    // learned, and the call still succeeds. The service counted it (rejected_rewards); the
    // reason travels in a header.
    return NoContentBecause(kRoute, "x-bandit-reward-not-learned", s);
  }
  if (!s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

ApiResponse PersonalizerApi::Activate(const Target& target) {
  const Route kRoute = target.multislot ? Route::kMultiSlot : Route::kActivate;
  if (auto bad = CheckEventId(kRoute, target.event_id)) return *bad;
  if (absl::Status s = target.calls->Find(target.instance); !s.ok())
    return Error(s, kRoute);
  bandit::v1::ActivateRequest req;
  req.set_instance(target.instance);
  req.set_event_id(target.event_id);
  bandit::v1::ActivateResponse resp;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->Activate(req, &resp, &written_seq);
  if (s.ok()) s = AwaitDurable(written_seq);
  if (s.code() == absl::StatusCode::kInvalidArgument ||
      s.code() == absl::StatusCode::kNotFound ||
      s.code() == absl::StatusCode::kFailedPrecondition) {
    // As for rewards, Personalizer answers 204: an event already active (ranked without
    // deferActivation, or activated before), unknown or past its wait changes nothing here; the
    // reason travels in a header.
    return NoContentBecause(kRoute, "x-bandit-activation-not-applied", s);
  }
  if (!s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

}  // namespace bandit::server::http
