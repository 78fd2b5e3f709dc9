#include "server/api/http/personalizer_api.h"

#include <cmath>
#include <memory>
#include <optional>

#include <google/protobuf/text_format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/features/personalizer_defaults.h"
#include "server/cluster/routed_calls.h"

namespace bandit::server::http {
namespace {

constexpr absl::string_view kKeyHeader = "header 'Ocp-Apim-Subscription-Key: <token>'";

using Json = rapidjson::Value;
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

ApiResponse Error(const ApiError& e, Route route) {
  ApiResponse r;
  r.status = e.http_status;
  r.body = ErrorBody(e);
  r.route = route;
  return r;
}

ApiResponse Error(const absl::Status& s, Route route, absl::string_view target = "") {
  return Error(ErrorFor(s, route, target), route);
}

// A malformed request to `route`: Personalizer's 400 with the route's code.
ApiResponse Invalid(Route route, absl::string_view target, absl::string_view message) {
  return Error(ErrorFor(absl::InvalidArgumentError(message), route, target), route);
}

ApiResponse NoContent(Route route) {
  ApiResponse r;
  r.status = 204;
  r.content_type.clear();
  r.route = route;
  return r;
}

// Personalizer's 204 for a call it accepts but that changes nothing here (a reward or
// activation for an event that is unknown, finished or already active): the service's reason in
// `header`, on one line.
ApiResponse NoContentBecause(Route route, absl::string_view header, const absl::Status& why) {
  ApiResponse r = NoContent(route);
  std::string reason(why.message().substr(0, 256));
  for (char& c : reason)
    if (c == '\r' || c == '\n') c = ' ';
  r.headers.emplace_back(std::string(header), reason);
  return r;
}


// Forwards RapidJSON's SAX events to a Document, refusing nesting deeper than `max_depth`
// before the parser recurses into it (a body of a million '[' must not exhaust the stack).
class DepthLimitedHandler {
 public:
  DepthLimitedHandler(rapidjson::Document* doc, int max_depth) : doc_(doc), max_depth_(max_depth) {}
  bool Null() { return doc_->Null(); }
  bool Bool(bool b) { return doc_->Bool(b); }
  bool Int(int i) { return doc_->Int(i); }
  bool Uint(unsigned u) { return doc_->Uint(u); }
  bool Int64(int64_t i) { return doc_->Int64(i); }
  bool Uint64(uint64_t u) { return doc_->Uint64(u); }
  bool Double(double d) { return doc_->Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return doc_->RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_->String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_->Key(s, n, copy); }
  bool StartObject() { return Enter() && doc_->StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return doc_->EndObject(n);
  }
  bool StartArray() { return Enter() && doc_->StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth_;
    return doc_->EndArray(n);
  }
  bool too_deep() const { return too_deep_; }

 private:
  bool Enter() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  rapidjson::Document* doc_;
  const int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// Parses a request body; INVALID_ARGUMENT naming the byte where it stops being JSON.
absl::Status ParseBody(absl::string_view body, int max_depth, rapidjson::Document* doc) {
  if (body.find('\0') != absl::string_view::npos)
    return absl::InvalidArgumentError("the request body holds a NUL byte; expected JSON text");
  const std::string text(body);
  rapidjson::ParseResult result;
  bool too_deep = false;
  struct Generator {
    const std::string* text;
    int max_depth;
    rapidjson::ParseResult* result;
    bool* too_deep;
    bool operator()(rapidjson::Document& d) {
      DepthLimitedHandler handler(&d, max_depth);
      rapidjson::StringStream stream(text->c_str());
      rapidjson::Reader reader;
      *result = reader.Parse<rapidjson::kParseFullPrecisionFlag>(stream, handler);
      *too_deep = handler.too_deep();
      return !result->IsError();
    }
  } generator{&text, max_depth, &result, &too_deep};
  doc->Populate(generator);
  if (too_deep)
    return absl::InvalidArgumentError(
        absl::StrCat("the request body nests objects and arrays deeper than ", max_depth,
                     " (--max_json_depth)"));
  if (result.IsError())
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body is not valid JSON: ", rapidjson::GetParseError_En(result.Code()),
        " at byte ", result.Offset()));
  return absl::OkStatus();
}

std::string ToJson(const Json& value) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  value.Accept(w);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string AsString(const Json& value) {
  return std::string(value.GetString(), value.GetStringLength());
}

void WriteString(Writer& w, absl::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

const Json* Member(const Json& object, const char* name) {
  auto it = object.FindMember(name);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

// `field` of a rank request holding features (Personalizer's list of objects, or one object),
// as JSON text into `out`; the 400 naming the field otherwise.
std::optional<ApiResponse> ReadFeatures(Route route, const Json& value, const std::string& field,
                                        std::string* out) {
  if (!value.IsArray() && !value.IsObject())
    return Invalid(route, field, absl::StrCat(field, ": expected a list of objects"));
  *out = ToJson(value);
  return std::nullopt;
}

// `field` of a rank request holding action ids, each added by `add`; the 400 naming the field
// (or the element) otherwise.
template <typename Add>
std::optional<ApiResponse> ReadIds(Route route, const Json& value, const std::string& field,
                                   Add&& add) {
  if (!value.IsArray())
    return Invalid(route, field, absl::StrCat(field, ": expected a list of action ids"));
  for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
    if (!value[i].IsString())
      return Invalid(route, field, absl::StrCat(field, "[", i, "]: expected a string"));
    add(AsString(value[i]));
  }
  return std::nullopt;
}

// Personalizer's event ids: at most 256 characters (its API), and those the service takes
// for a caller-chosen id (SelectRequest.event_id), which every id it makes also satisfies.
bool ValidEventId(absl::string_view id) {
  if (id.empty() || id.size() > 256) return false;
  for (unsigned char c : id)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == ':' || c == '-')) return false;
  return true;
}

// ISO 8601 duration (PnDTnHnMnS, as Personalizer writes rewardWaitTime) <-> milliseconds.
std::string IsoDuration(int64_t ms) {
  if (ms % 1000 != 0) return absl::StrCat("PT", ms / 1000.0, "S");
  int64_t s = ms / 1000;
  const int64_t d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60;
  s %= 60;
  std::string out = "P";
  if (d) absl::StrAppend(&out, d, "D");
  if (h || m || s || !d) out += "T";
  if (h) absl::StrAppend(&out, h, "H");
  if (m) absl::StrAppend(&out, m, "M");
  if (s || (!d && !h && !m)) absl::StrAppend(&out, s, "S");
  return out;
}

bool ParseIsoDuration(absl::string_view text, int64_t* ms) {
  if (text.empty() || text[0] != 'P') return false;
  double total = 0;
  bool time = false, any = false;
  size_t i = 1;
  while (i < text.size()) {
    if (text[i] == 'T') {
      if (time) return false;
      time = true;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.'))
      ++j;
    if (j == i || j == text.size()) return false;
    double value = 0;
    if (!absl::SimpleAtod(text.substr(i, j - i), &value)) return false;
    const char unit = text[j];
    double seconds;
    if (!time && unit == 'D')
      seconds = 86400;
    else if (time && unit == 'H')
      seconds = 3600;
    else if (time && unit == 'M')
      seconds = 60;
    else if (time && unit == 'S')
      seconds = 1;
    else
      return false;
    total += value * seconds;
    any = true;
    i = j + 1;
  }
  if (!any || total > 1e12) return false;
  *ms = static_cast<int64_t>(std::llround(total * 1000));
  return true;
}

}  // namespace

struct PersonalizerApi::Target {
  std::string instance;
  std::string event_id;    // events/{eventId}/...
  bool v11 = false;        // v1.1-preview.3
  bool multislot = false;  // multislot/rank, multislot/events/{eventId}/...
  ServiceCalls* calls = nullptr;  // where the instance is served (this node or its owner)
};

PersonalizerApi::PersonalizerApi(DecisionService* service, const Authorizer* auth,
                                 PersonalizerOptions options, cluster::Router* router)
    : service_(service), auth_(auth), options_(std::move(options)), router_(router) {}

namespace {

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
  } else if (!rest.empty() && rest[0] == "evaluations") {
    m.route = Route::kEvaluations;
    m.methods = {"GET", "POST", "PUT", "DELETE"};
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
      return method == "GET" ? Rpc::kGetInstance : Rpc::kCreateInstance;
    case Route::kModel:
      if (method == "GET") return Rpc::kExportInstance;
      return method == "PUT" ? Rpc::kImportInstance : Rpc::kResetInstance;
    case Route::kModelProperties:
    case Route::kLogsProperties:
      return Rpc::kGetInstance;
    default:
      return Rpc::kResetInstance;  // admin
  }
}

}  // namespace

Route PersonalizerApi::RouteOf(absl::string_view path) { return MatchPath(path).route; }

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
      return Policy(target, method);
    case Route::kModel:
      return Model(target, method, request.body);
    case Route::kModelProperties:
      return ModelProperties(target);
    case Route::kLogs:
    case Route::kLogsProperties:
      return Logs(target, method);
    case Route::kMultiSlot:
      // The service's multi-slot Select, per-slot rewards and activation.
      if (m.multislot == Route::kRank) return Rank(target, request.body);
      if (m.multislot == Route::kReward) return Reward(target, request.body);
      return Activate(target);
    default:
      return Error(absl::NotFoundError(absl::StrCat(
                       RouteName(m.route),
                       " are not offered by this server; off-policy evaluation of logged "
                       "decisions is bandit-ope's (docs/personalizer.md)")),
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
  *create.mutable_config() = features::PersonalizerDefaultConfig();
  bandit::v1::Instance created;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->CreateInstance(create, &created, &written_seq);
  if (s.code() == absl::StatusCode::kAlreadyExists) return absl::OkStatus();  // a racing request
  if (!s.ok()) return s;
  return AwaitDurable(written_seq);
}

ApiResponse PersonalizerApi::Rank(const Target& target, absl::string_view body) {
  const Route kRoute = target.multislot ? Route::kMultiSlot : Route::kRank;
  rapidjson::Document doc;
  if (absl::Status s = ParseBody(body, options_.max_json_depth, &doc); !s.ok())
    return Error(s, kRoute);
  if (!doc.IsObject()) return Invalid(kRoute, "", "the rank request must be a JSON object");
  bandit::v1::SelectRequest req;
  req.set_instance(target.instance);
  req.set_return_scores(true);
  if (const Json* context = Member(doc, "contextFeatures"))
    if (auto bad = ReadFeatures(kRoute, *context, "contextFeatures", req.mutable_context()))
      return *bad;
  const Json* actions = Member(doc, "actions");
  if (actions == nullptr || !actions->IsArray())
    return Invalid(kRoute, "actions", "actions: expected a list of {\"id\", \"features\"}");
  for (rapidjson::SizeType i = 0; i < actions->Size(); ++i) {
    const Json& a = (*actions)[i];
    const std::string where = absl::StrCat("actions[", i, "]");
    if (!a.IsObject()) return Invalid(kRoute, where, absl::StrCat(where, ": expected an object"));
    const Json* id = Member(a, "id");
    if (id == nullptr || !id->IsString())
      return Invalid(kRoute, where + ".id", absl::StrCat(where, ".id: expected a string"));
    bandit::v1::NamedAction* action = req.add_actions();
    action->set_id(AsString(*id));
    if (const Json* features = Member(a, "features"))
      if (auto bad = ReadFeatures(kRoute, *features, where + ".features",
                                  action->mutable_features()))
        return *bad;
  }
  if (const Json* excluded = Member(doc, "excludedActions"))
    if (auto bad = ReadIds(kRoute, *excluded, "excludedActions",
                           [&](std::string id) { req.add_excluded_actions(std::move(id)); }))
      return *bad;
  if (const Json* event_id = Member(doc, "eventId")) {
    if (!event_id->IsString()) return Invalid(kRoute, "eventId", "eventId: expected a string");
    req.set_event_id(AsString(*event_id));
  }
  if (const Json* defer = Member(doc, "deferActivation")) {
    if (!defer->IsBool())
      return Invalid(kRoute, "deferActivation", "deferActivation: expected true or false");
    req.set_defer_activation(defer->GetBool());
  }
  if (target.multislot) {
    // MultiSlotRankRequest.slots: [{id, features, excludedActions, baselineAction}].
    const Json* slots = Member(doc, "slots");
    if (slots == nullptr || !slots->IsArray() || slots->Empty())
      return Invalid(kRoute, "slots",
                     "slots: expected a list of {\"id\", \"features\", \"excludedActions\", "
                     "\"baselineAction\"}");
    for (rapidjson::SizeType i = 0; i < slots->Size(); ++i) {
      const Json& s = (*slots)[i];
      const std::string where = absl::StrCat("slots[", i, "]");
      if (!s.IsObject()) return Invalid(kRoute, where, absl::StrCat(where, ": expected an object"));
      const Json* id = Member(s, "id");
      if (id == nullptr || !id->IsString())
        return Invalid(kRoute, where + ".id", absl::StrCat(where, ".id: expected a string"));
      bandit::v1::Slot* slot = req.add_slots();
      slot->set_id(AsString(*id));
      if (const Json* features = Member(s, "features"))
        if (auto bad = ReadFeatures(kRoute, *features, where + ".features",
                                    slot->mutable_features()))
          return *bad;
      if (const Json* excluded = Member(s, "excludedActions"))
        if (auto bad = ReadIds(kRoute, *excluded, where + ".excludedActions",
                               [&](std::string id) { slot->add_excluded_actions(std::move(id)); }))
          return *bad;
      if (const Json* baseline = Member(s, "baselineAction")) {
        if (!baseline->IsString())
          return Invalid(kRoute, where + ".baselineAction",
                         absl::StrCat(where, ".baselineAction: expected an action id"));
        slot->set_baseline_action(AsString(*baseline));
      }
    }
  }
  if (absl::Status s = FindOrCreate(target); !s.ok()) return Error(s, kRoute);
  bandit::v1::Decision decision;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->Select(req, &decision, &written_seq);
  if (s.ok()) s = AwaitDurable(written_seq);
  if (!s.ok()) return Error(s, kRoute);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  if (target.multislot) {
    // MultiSlotRankResponse: {slots: [{id, rewardActionId}], eventId}.
    w.StartObject();
    w.Key("slots");
    w.StartArray();
    for (const auto& slot : decision.slots()) {
      w.StartObject();
      w.Key("id");
      WriteString(w, slot.slot_id());
      w.Key("rewardActionId");
      WriteString(w, slot.action_id());
      w.EndObject();
    }
    w.EndArray();
    w.Key("eventId");
    WriteString(w, decision.event_id());
    w.EndObject();
    ApiResponse r;
    r.status = 201;
    r.body.assign(buffer.GetString(), buffer.GetSize());
    r.route = kRoute;
    return r;
  }
  w.StartObject();
  w.Key("ranking");
  w.StartArray();
  for (const auto& ranked : decision.ranking()) {
    w.StartObject();
    w.Key("id");
    WriteString(w, ranked.id());
    w.Key("probability");
    w.Double(ranked.probability());
    w.EndObject();
  }
  w.EndArray();
  w.Key("eventId");
  WriteString(w, decision.event_id());
  w.Key("rewardActionId");
  WriteString(w, decision.action_id());
  w.EndObject();
  ApiResponse r;
  r.status = 201;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::Reward(const Target& target, absl::string_view body) {
  const Route kRoute = target.multislot ? Route::kMultiSlot : Route::kReward;
  if (!ValidEventId(target.event_id))
    return Invalid(kRoute, "eventId", "eventId: expected 1 to 256 characters from [A-Za-z0-9._:-]");
  rapidjson::Document doc;
  if (absl::Status s = ParseBody(body, options_.max_json_depth, &doc); !s.ok())
    return Error(s, kRoute);
  // One reward ({"value"}), or one per slot ({"reward": [{"slotId", "value"}]}, multi-slot).
  std::vector<std::pair<std::string, double>> rewards;
  if (target.multislot) {
    const Json* list = doc.IsObject() ? Member(doc, "reward") : nullptr;
    if (list == nullptr || !list->IsArray() || list->Empty())
      return Invalid(kRoute, "reward", "expected {\"reward\": [{\"slotId\", \"value\"}, ...]}");
    for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
      const Json& r = (*list)[i];
      const Json* slot = r.IsObject() ? Member(r, "slotId") : nullptr;
      const Json* v = r.IsObject() ? Member(r, "value") : nullptr;
      if (slot == nullptr || !slot->IsString() || v == nullptr || !v->IsNumber())
        return Invalid(kRoute, absl::StrCat("reward[", i, "]"),
                       absl::StrCat("reward[", i, "]: expected {\"slotId\": a string, "
                                    "\"value\": a number}"));
      rewards.emplace_back(AsString(*slot), v->GetDouble());
    }
  } else {
    const Json* value = doc.IsObject() ? Member(doc, "value") : nullptr;
    if (value == nullptr || !value->IsNumber())
      return Invalid(kRoute, "value", "expected {\"value\": a number}");
    rewards.emplace_back("", value->GetDouble());
  }
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
  if (!ValidEventId(target.event_id))
    return Invalid(kRoute, "eventId", "eventId: expected 1 to 256 characters from [A-Za-z0-9._:-]");
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

namespace {
// Personalizer's learningMode strings.
const char* LearningModeString(bandit::v1::LearningMode mode) {
  switch (mode) {
    case bandit::v1::APPRENTICE:
      return "Apprentice";
    case bandit::v1::LOGGING_ONLY:
      return "LoggingOnly";
    default:
      return "Online";
  }
}

// The instance's epsilon where its policy has one (explorationPercentage).
std::optional<double> EpsilonOf(const bandit::v1::PolicyConfig& policy) {
  if (policy.has_epsilon_greedy()) return policy.epsilon_greedy().epsilon();
  if (policy.has_glm_epsilon_greedy())
    return policy.glm_epsilon_greedy().has_epsilon() ? policy.glm_epsilon_greedy().epsilon() : 0.1;
  return std::nullopt;
}

// What an instance does, in Personalizer's terms. Fields it has no counterpart for are reported
// at the value that describes the behaviour (no log retention limit, no auto-optimization).
rapidjson::Document ServiceConfigurationOf(const bandit::v1::Instance& instance) {
  const bandit::v1::PendingConfig& pending = instance.config().pending();
  const int64_t wait_ms = pending.reward_wait_ms() > 0 ? pending.reward_wait_ms() : 600'000;
  rapidjson::Document current(rapidjson::kObjectType);
  auto& alloc = current.GetAllocator();
  const std::string wait = IsoDuration(wait_ms);
  current.AddMember("rewardWaitTime", Json(wait.c_str(), alloc), alloc);
  current.AddMember("defaultReward", pending.default_reward(), alloc);
  current.AddMember("rewardAggregation",
                    rapidjson::StringRef(pending.reward_aggregation() == bandit::v1::SUM
                                             ? "sum"
                                             : "earliest"),
                    alloc);
  current.AddMember("explorationPercentage", EpsilonOf(instance.config().policy()).value_or(0.0),
                    alloc);
  current.AddMember("modelExportFrequency", "PT0S", alloc);  // every change is journaled
  current.AddMember("logRetentionDays", -1, alloc);
  current.AddMember("learningMode",
                    rapidjson::StringRef(LearningModeString(instance.config().learning_mode())),
                    alloc);
  current.AddMember("isAutoOptimizationEnabled", false, alloc);
  if (instance.has_apprentice()) {
    // Personalizer's apprentice metrics: events of decisions served as the baseline, their
    // rewards, and the rewards of those where the policy would have chosen the baseline.
    const bandit::v1::ApprenticeStatus& a = instance.apprentice();
    Json metrics(rapidjson::kObjectType);
    metrics.AddMember("numberOfEvents", a.events(), alloc);
    metrics.AddMember("sumOfRewards", a.reward_sum(), alloc);
    metrics.AddMember("sumOfImitatedRewards", a.imitated_reward_sum(), alloc);
    current.AddMember("latestApprenticeModeMetrics", metrics, alloc);
  }
  return current;
}
}  // namespace

ApiResponse PersonalizerApi::ServiceConfiguration(const Target& target, absl::string_view method,
                                                  absl::string_view body) {
  constexpr Route kRoute = Route::kServiceConfiguration;
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = FindOrCreate(target); !s.ok()) return Error(s, kRoute);
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, kRoute);
  rapidjson::Document current = ServiceConfigurationOf(instance);
  if (method == "PUT") {
    const bandit::v1::PendingConfig& pending = instance.config().pending();
    const bool drops = pending.on_expiry() == bandit::v1::DROP;
    rapidjson::Document put;
    if (absl::Status s = ParseBody(body, options_.max_json_depth, &put); !s.ok())
      return Error(s, kRoute);
    if (!put.IsObject())
      return Invalid(kRoute, "", "the service configuration must be a JSON object");
    // Each field is honoured (a change becomes a field of one ConfigureInstance, applied with
    // the others or not at all) or refused before anything changes; restating a value is fine.
    // (Members by index: RapidJSON's iterator comparisons are ambiguous under C++20.)
    bandit::v1::ConfigureInstanceRequest change;
    change.set_name(target.instance);
    for (rapidjson::SizeType i = 0; i < put.MemberCount(); ++i) {
      const auto& member = *(put.MemberBegin() + i);
      const std::string key = AsString(member.name);
      const Json& v = member.value;
      if (key == "lastConfigurationEditDate" || key == "latestApprenticeModeMetrics" ||
          key == "autoOptimizationFrequency" || key == "autoOptimizationStartDate" ||
          key == "logMirrorEnabled" || key == "logMirrorSasUri" || v.IsNull())
        continue;  // read-only reports, or settings that apply only with one refused below
      const Json* have = current.HasMember(key.c_str()) ? &current[key.c_str()] : nullptr;
      if (have == nullptr)
        return Invalid(kRoute, key, absl::StrCat(key, " is not a setting this server knows"));
      if (key == "rewardWaitTime") {
        int64_t ms = 0;
        if (!v.IsString() || !ParseIsoDuration(AsString(v), &ms))
          return Invalid(kRoute, key,
                         "rewardWaitTime: expected an ISO 8601 duration such as PT10M");
        if (ms != pending.reward_wait_ms()) change.set_reward_wait_ms(ms);
      } else if (key == "defaultReward") {
        if (!v.IsNumber()) return Invalid(kRoute, key, "defaultReward: expected a number");
        if (v.GetDouble() != pending.default_reward()) change.set_default_reward(v.GetDouble());
      } else if (key == "rewardAggregation") {
        const std::string a = v.IsString() ? AsString(v) : "";
        if (a != "earliest" && a != "sum")
          return Invalid(kRoute, key, "rewardAggregation: expected \"earliest\" or \"sum\"");
        const auto wanted = a == "sum" ? bandit::v1::SUM : bandit::v1::EARLIEST;
        if (wanted != pending.reward_aggregation()) change.set_reward_aggregation(wanted);
      } else if (key == "explorationPercentage") {
        if (!v.IsNumber() || !(v.GetDouble() >= 0.0 && v.GetDouble() <= 1.0))
          return Invalid(kRoute, key, "explorationPercentage: expected a number in [0, 1]");
        const std::optional<double> epsilon = EpsilonOf(instance.config().policy());
        if (epsilon.has_value() && std::abs(v.GetDouble() - *epsilon) >= 1e-9) {
          change.set_epsilon(v.GetDouble());
        } else if (!epsilon.has_value() && v.GetDouble() != 0.0) {
          return Invalid(kRoute, key,
                         "changing explorationPercentage is not offered: this instance's policy "
                         "explores without an epsilon (its value is 0; docs/personalizer.md)");
        }
      } else if (key == "learningMode") {
        const std::string m = v.IsString() ? AsString(v) : "";
        bandit::v1::LearningMode wanted;
        if (m == "Online") {
          wanted = bandit::v1::ONLINE;
        } else if (m == "Apprentice") {
          wanted = bandit::v1::APPRENTICE;
        } else if (m == "LoggingOnly") {
          wanted = bandit::v1::LOGGING_ONLY;
        } else {
          return Invalid(kRoute, key,
                         "learningMode: expected \"Online\", \"Apprentice\" or \"LoggingOnly\"");
        }
        const auto have_mode = instance.config().learning_mode() ==
                                       bandit::v1::LEARNING_MODE_UNSPECIFIED
                                   ? bandit::v1::ONLINE
                                   : instance.config().learning_mode();
        if (wanted != have_mode) change.set_learning_mode(wanted);
      } else {
        // The settings this server has no live counterpart for: a restatement only.
        bool same;
        if ((*have).IsNumber()) {
          same = v.IsNumber() && std::abs(v.GetDouble() - (*have).GetDouble()) < 1e-9;
        } else {
          same = v == (*have);
        }
        if (key == "logRetentionDays" && v.IsNumber() && !drops) same = true;  // nothing is deleted
        if (!same)
          return Invalid(kRoute, key,
                         absl::StrCat("changing ", key, " is not offered (its value is ",
                                      ToJson((*have)), "; docs/personalizer.md)"));
      }
    }
    if (change.has_reward_wait_ms() || change.has_default_reward() ||
        change.has_reward_aggregation() || change.has_epsilon() || change.has_learning_mode()) {
      uint64_t written_seq = 0;
      absl::Status s = target.calls->ConfigureInstance(change, &instance, &written_seq);
      if (s.ok()) s = AwaitDurable(written_seq);
      if (!s.ok()) return Error(s, kRoute);
      current = ServiceConfigurationOf(instance);
    }
  }
  ApiResponse r;
  r.body = ToJson(current);
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::Policy(const Target& target, absl::string_view method) {
  constexpr Route kRoute = Route::kPolicy;
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, kRoute);
  if (method != "GET")
    return Invalid(kRoute, "arguments",
                   "changing the learning settings is not offered: an instance's policy is "
                   "fixed when it is created (create another instance with the policy you want)");
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  bandit::v1::InstanceConfig learning;
  *learning.mutable_policy() = instance.config().policy();
  *learning.mutable_feature_space() = instance.config().feature_space();
  std::string arguments;
  printer.PrintToString(learning, &arguments);
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(w, target.instance);
  w.Key("arguments");
  WriteString(w, absl::StripTrailingAsciiWhitespace(arguments));
  w.EndObject();
  ApiResponse r;
  r.body.assign(buffer.GetString(), buffer.GetSize());
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::ImportModel(const Target& target, absl::string_view body) {
  constexpr Route kRoute = Route::kModel;
  // The instance becomes the one exported: its own state is kept aside (exported) first and
  // imported back if the new one is refused, so a bad file leaves the instance as it was.
  bandit::v1::ExportInstanceRequest keep;
  keep.set_name(target.instance);
  bandit::v1::ExportInstanceResponse kept;
  absl::Status exported = target.calls->ExportInstance(keep, &kept);
  const bool existed = exported.ok();
  if (!existed && exported.code() != absl::StatusCode::kNotFound) return Error(exported, kRoute);
  uint64_t written_seq = 0;
  if (existed) {
    bandit::v1::DeleteInstanceRequest del;
    del.set_name(target.instance);
    if (absl::Status s = target.calls->DeleteInstance(del, nullptr, &written_seq); !s.ok())
      return Error(s, kRoute);
  }
  bandit::v1::ImportInstanceRequest import;
  import.set_name(target.instance);
  import.set_snapshot(std::string(body));
  bandit::v1::Instance imported;
  absl::Status s = target.calls->ImportInstance(import, &imported, &written_seq);
  if (!s.ok() && !existed)
    return Error(s.code() == absl::StatusCode::kInvalidArgument
                     ? s
                     : absl::InvalidArgumentError(s.message()),
                 kRoute);
  if (!s.ok()) {
    import.set_snapshot(std::move(*kept.mutable_snapshot()));
    if (absl::Status back = target.calls->ImportInstance(import, &imported, &written_seq); !back.ok())
      return Error(absl::InternalError(
                       absl::StrCat("the model was refused (", s.message(),
                                    ") and restoring the instance's own failed: ", back.message())),
                   kRoute);
    if (absl::Status d = AwaitDurable(written_seq); !d.ok()) return Error(d, kRoute);
    return Error(s.code() == absl::StatusCode::kInvalidArgument
                     ? s
                     : absl::InvalidArgumentError(s.message()),
                 kRoute);
  }
  if (s = AwaitDurable(written_seq); !s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

ApiResponse PersonalizerApi::Model(const Target& target, absl::string_view method,
                                   absl::string_view body) {
  constexpr Route kRoute = Route::kModel;
  if (method == "GET") {
    bandit::v1::ExportInstanceRequest req;
    req.set_name(target.instance);
    bandit::v1::ExportInstanceResponse resp;
    if (absl::Status s = target.calls->ExportInstance(req, &resp); !s.ok()) return Error(s, kRoute);
    ApiResponse r;
    r.body = std::move(*resp.mutable_snapshot());
    r.content_type = "application/octet-stream";
    r.route = kRoute;
    return r;
  }
  if (method == "PUT") return ImportModel(target, body);
  bandit::v1::ResetInstanceRequest req;
  req.set_name(target.instance);
  bandit::v1::Instance instance;
  uint64_t written_seq = 0;
  absl::Status s = target.calls->ResetInstance(req, &instance, &written_seq);
  if (s.ok()) s = AwaitDurable(written_seq);
  if (!s.ok()) return Error(s, kRoute);
  return NoContent(kRoute);
}

ApiResponse PersonalizerApi::ModelProperties(const Target& target) {
  constexpr Route kRoute = Route::kModelProperties;
  if (absl::Status s = target.calls->Find(target.instance); !s.ok())
    return Error(s, kRoute);
  ApiResponse r;
  r.body = "{}";  // creation and modification times are not kept per instance
  r.route = kRoute;
  return r;
}

ApiResponse PersonalizerApi::Logs(const Target& target, absl::string_view method) {
  const Route route = method == "GET" ? Route::kLogsProperties : Route::kLogs;
  bandit::v1::GetInstanceRequest get;
  get.set_name(target.instance);
  bandit::v1::Instance instance;
  if (absl::Status s = target.calls->GetInstance(get, &instance); !s.ok()) return Error(s, route);
  const bool logs = instance.config().decision_log().ByteSizeLong() > 0;
  if (method == "GET") {
    // LogsProperties: {dateRange: {from, to}}, the times of the oldest and the newest decision
    // the log holds (RFC 3339, UTC, milliseconds); an empty range while it holds none.
    ApiResponse r;
    const bandit::v1::InstanceStats& stats = instance.stats();
    if (stats.decision_log_events() > 0) {
      auto when = [](int64_t ms) {
        return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(ms),
                                absl::UTCTimeZone());
      };
      r.body = absl::StrCat("{\"dateRange\":{\"from\":\"", when(stats.decision_log_first_ms()),
                            "\",\"to\":\"", when(stats.decision_log_last_ms()), "\"}}");
    } else {
      r.body = "{\"dateRange\":{}}";
    }
    r.route = route;
    return r;
  }
  if (logs)
    return Invalid(route, "",
                   "deleting an instance's decision log is not offered; it keeps what its "
                   "decision_log retention says");
  return NoContent(route);  // no decision log kept: nothing to delete
}

}  // namespace bandit::server::http
